"""kubeflow's API served beside sparkop's (`sparkop run --kubeflow-api`, the CRDs of crds/kubeflow/), on
the devcluster with the real operator and simulated drivers: an app of each group with the same name
in one namespace, each run to its own end and never taken for the other; and the status fields and
pod labels kubeflow's clients read, with kubeflow's values in each state."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from sparkop.domain import labels
from tests.support.cluster_apps import KUBEFLOW_APPS, app_manifest, get, kubeflow, status, wait_state
from tests.support.operator import OperatorProcess
from tests.support.watches import CreationWatch, KubectlWatch

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
SPARKOP_APPS = "sparkapplications.sparkop.io"


@pytest.fixture
def operator(kubeflow_crds: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    """The real operator serving both groups, watching the test's namespace."""
    with OperatorProcess(
        kubeflow_crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, extra_args=["--kubeflow-api"]
    ) as proc:
        yield proc


def apply(cluster: ClusterHandle, namespace: str, manifest: Obj) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def pod(cluster: ClusterHandle, namespace: str, name: str) -> Obj:
    found = get(cluster, namespace, "pod", name)
    assert found is not None, f"pod {name} is gone"
    return found


def pods_of(cluster: ClusterHandle, namespace: str, driver: str, role: str) -> list[Obj]:
    selector = f"{labels.DRIVER}={driver},{labels.SPARK_ROLE}={role}"
    return list(cluster.kubectl_json("get", "pods", "-n", namespace, "-l", selector)["items"])


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_an_app_of_the_same_name_in_each_group_runs_side_by_side(
    kubeflow_crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    cluster, ns = kubeflow_crds, namespace
    # Different outcomes, so that one taken for the other would show. The two want one driver pod name
    # (kubeflow's <app>-driver, the same for both groups): the second names its own.
    ours = app_manifest("pi", outcome="Succeeded", run_seconds=2)
    theirs = kubeflow(app_manifest("pi", outcome="Failed", run_seconds=2))
    theirs["spec"]["driver"]["podName"] = "pi-kubeflow-driver"
    apply(cluster, ns, ours)
    apply(cluster, ns, theirs)
    done_ours = wait_state(cluster, ns, "pi", "COMPLETED", "FAILED", resource=SPARKOP_APPS)
    done_theirs = wait_state(cluster, ns, "pi", "COMPLETED", "FAILED", resource=KUBEFLOW_APPS)
    assert done_ours["applicationState"]["state"] == "COMPLETED", done_ours
    assert done_theirs["applicationState"]["state"] == "FAILED", done_theirs

    app_ours = get(cluster, ns, SPARKOP_APPS, "pi")
    app_theirs = get(cluster, ns, KUBEFLOW_APPS, "pi")
    assert app_ours is not None and app_theirs is not None
    drivers = {d["metadata"]["name"]: d for d in cluster.kubectl_json("get", "sparkdrivers", "-n", ns)["items"]}
    assert sorted(drivers) == ["pi-1", "pi-1-kf"]
    for app, driver in ((app_ours, "pi-1"), (app_theirs, "pi-1-kf")):
        st, body = app["status"], drivers[driver]
        (ref,) = body["metadata"]["ownerReferences"]
        assert (ref["apiVersion"], ref["uid"], ref["controller"]) == (app["apiVersion"], app["metadata"]["uid"], True)
        assert st["currentDriver"] == driver and st["submissionID"] == body["metadata"]["uid"]
        assert [a["driver"] for a in st["attempts"]] == [driver]
        (driver_pod,) = pods_of(cluster, ns, driver, "driver")
        assert st["driverInfo"]["podName"] == driver_pod["metadata"]["name"]
        assert driver_pod["metadata"]["name"] == ("pi-driver" if driver == "pi-1" else "pi-kubeflow-driver")
        assert driver_pod["metadata"]["labels"][labels.KUBEFLOW_SUBMISSION_ID] == st["submissionID"]

    # `sparkop list` shows both, `sparkop status` asks which one is meant, GROUP/NAME says it.
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "sparkop", *args, "-n", ns, "--kubeconfig", str(cluster.kubeconfig)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    listed = [line.split()[:3] for line in cli("list").stdout.splitlines()[1:]]
    assert listed == [["pi", "sparkop.io", "COMPLETED"], ["pi", "sparkoperator.k8s.io", "FAILED"]]
    ambiguous = cli("status", "pi")
    assert ambiguous.returncode == 1 and "sparkoperator.k8s.io/pi" in ambiguous.stderr
    named = cli("status", "sparkoperator.k8s.io/pi")
    assert named.returncode == 0 and "pi-1-kf" in named.stdout, named.stdout + named.stderr

    # Deleting kubeflow's pi takes its run with it, and nothing of sparkop's pi.
    cluster.kubectl("delete", KUBEFLOW_APPS, "pi", "-n", ns, "--wait=true", timeout=120)
    wait_for(lambda: get(cluster, ns, "sparkdriver", "pi-1-kf") is None, timeout=60, message="pi-1-kf collected")
    after = get(cluster, ns, SPARKOP_APPS, "pi")
    assert after is not None and after["metadata"]["uid"] == app_ours["metadata"]["uid"]
    assert after["status"] == app_ours["status"]
    kept = get(cluster, ns, "sparkdriver", "pi-1")
    assert kept is not None and kept["metadata"]["uid"] == drivers["pi-1"]["metadata"]["uid"]


def test_kubeflows_status_fields_and_pod_labels_in_each_state(
    kubeflow_crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    cluster, ns = kubeflow_crds, namespace
    # Running long enough to be read as RUNNING with its pod alive and its two executors up (they start
    # 3 s after the driver, as Spark's do), on a loaded machine too: 4 s ended before the read at load 8.
    manifest = kubeflow(app_manifest("etl", outcome="Succeeded", run_seconds=15))
    manifest["spec"]["executor"]["instances"] = 2
    apply(cluster, ns, manifest)

    running = wait_state(cluster, ns, "etl", "RUNNING", resource=KUBEFLOW_APPS)
    driver = get(cluster, ns, "sparkdriver", "etl-1-kf")
    assert driver is not None
    live = pod(cluster, ns, running["driverInfo"]["podName"])  # names the live driver pod
    assert live["status"]["phase"] == "Running"
    assert running["submissionID"] == driver["metadata"]["uid"]
    assert running["sparkApplicationId"] == live["metadata"]["labels"][labels.SPARK_APP_SELECTOR]
    assert (running["executionAttempts"], running["submissionAttempts"]) == (1, 1)
    assert running.get("lastSubmissionAttemptTime") and not running.get("terminationTime")
    assert "errorMessage" not in running["applicationState"]
    executors = wait_for(
        lambda: (found := pods_of(cluster, ns, "etl-1-kf", "executor")) and len(found) == 2 and found,
        timeout=30,
        message="etl's two executors",
    )
    for each in [live, *executors]:
        got = each["metadata"]["labels"]
        assert got[labels.KUBEFLOW_APP_NAME] == "etl"
        assert got[labels.KUBEFLOW_LAUNCHED] == "true"
        assert got[labels.KUBEFLOW_SUBMISSION_ID] == running["submissionID"]

    done = wait_state(cluster, ns, "etl", "COMPLETED", "FAILED", resource=KUBEFLOW_APPS)
    assert done["applicationState"] == {"state": "COMPLETED"}
    assert ts(done["terminationTime"]) >= ts(done["lastSubmissionAttemptTime"])
    assert done["submissionID"] == running["submissionID"]
    assert (done["executionAttempts"], done["submissionAttempts"]) == (1, 1)
    # Every executor ended as the driver did, each by its pod's name.
    assert done["executorState"] == {e["metadata"]["name"]: "COMPLETED" for e in executors}


def test_a_failing_kubeflow_app_says_why_and_counts_its_retry(
    kubeflow_crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    cluster, ns = kubeflow_crds, namespace
    policy = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    # Long enough for its executors to be seen: they start 3 s after the driver and the simulator deletes
    # them when it ends, as Spark's driver does; at 4 s the second run's lived 1 s and no pass saw it (load 5).
    apply(cluster, ns, kubeflow(app_manifest("etl", policy, outcome="Failed", run_seconds=10)))
    failed = wait_state(cluster, ns, "etl", "FAILED", timeout=90, resource=KUBEFLOW_APPS)
    assert failed["applicationState"]["errorMessage"]
    assert (failed["executionAttempts"], failed["currentDriver"]) == (2, "etl-2-kf")
    second = get(cluster, ns, "sparkdriver", "etl-2-kf")
    assert second is not None and failed["submissionID"] == second["metadata"]["uid"]
    assert set(failed["executorState"].values()) == {"FAILED"}
    assert status(cluster, ns, "etl", KUBEFLOW_APPS) == failed  # frozen


def test_a_driver_pod_name_held_by_the_other_groups_app_refuses_the_submission_not_the_holder(
    kubeflow_crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    cluster, ns = kubeflow_crds, namespace
    apply(cluster, ns, app_manifest("clash", run_seconds=20))
    wait_state(cluster, ns, "clash", "RUNNING", resource=SPARKOP_APPS)
    holder = get(cluster, ns, "pod", "clash-driver")
    assert holder is not None
    states = StateWatch(cluster, ns, KUBEFLOW_APPS)
    try:
        wait_for(lambda: states.watches >= 1, timeout=10, message="the watch of kubeflow's apps runs")
        apply(cluster, ns, kubeflow(app_manifest("clash", run_seconds=1)))
        refused = wait_state(cluster, ns, "clash", "FAILED", resource=KUBEFLOW_APPS)
    finally:
        states.stop()
    # As kubeflow's e2e spec fail-submission asks: before FAILED only kubeflow's NEW ("": no state written)
    # and SUBMISSION_FAILED; SUBMITTED would say a driver pod was made.
    seen = states.seen.get("clash", [])
    assert seen and seen[-1] == "FAILED" and "SUBMISSION_FAILED" in seen, seen
    assert set(seen[:-1]) <= {"", "SUBMISSION_FAILED"}, seen
    message = refused["applicationState"]["errorMessage"]
    assert "driver pod name clash-driver is held by the driver pod of SparkDriver clash-1" in message, message
    assert "spec.driver.podName" in message
    # The holder never noticed: the same pod, and its app goes on to its end.
    after = get(cluster, ns, "pod", "clash-driver")
    assert after is not None and after["metadata"]["uid"] == holder["metadata"]["uid"]
    assert after["metadata"]["labels"][labels.DRIVER] == "clash-1"
    assert (
        wait_state(cluster, ns, "clash", "COMPLETED", "FAILED", resource=SPARKOP_APPS, timeout=90)["applicationState"][
            "state"
        ]
        == "COMPLETED"
    )


def test_a_retried_app_reuses_its_driver_pod_name_once_the_last_pod_is_gone(
    kubeflow_crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    """kubeflow's naming across runs: every run's driver pod is <app>-driver; the next is created only
    once the last one's outcome and log tail are recorded (in its SparkDriver's status) and it is gone,
    so there are never two at once, and no outcome is lost."""
    cluster, ns = kubeflow_crds, namespace
    watch = CreationWatch(cluster, ns, "pods")
    try:
        policy = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
        apply(cluster, ns, kubeflow(app_manifest("retried", policy, outcome="Failed", run_seconds=1)))
        done = wait_state(cluster, ns, "retried", "FAILED", timeout=90, resource=KUBEFLOW_APPS)
        wait_for(lambda: len(watch.uids.get("retried-driver", ())) == 2, timeout=30, message="both runs' pods seen")
    finally:
        watch.stop()
    assert done["executionAttempts"] == 2 and done["driverInfo"]["podName"] == "retried-driver"
    first, second = (get(cluster, ns, "sparkdriver", f"retried-{run}-kf") for run in (1, 2))
    assert first is not None and second is not None
    # Each run's outcome, with the end of its pod's log, in its own SparkDriver's status.
    for driver in (first, second):
        (record,) = driver["status"]["incarnations"]
        assert (record["podName"], record["outcome"]) == ("retried-driver", "Failed")
        assert record["logTail"]
    # One pod of the name per run, each seen deleted before the next was created.
    uids = watch.uids["retried-driver"]
    assert len(uids) == 2, watch.uids
    ordered = sorted(uids, key=lambda uid: watch.first_seen[uid])
    gone_at = watch.deleted.get(ordered[0], float("inf"))
    assert gone_at <= watch.first_seen[ordered[1]], (watch.deleted, watch.first_seen)
    live = get(cluster, ns, "pod", "retried-driver")
    assert live is not None and live["metadata"]["uid"] == ordered[1]
    submission = live["metadata"]["labels"][labels.KUBEFLOW_SUBMISSION_ID]
    assert submission == second["metadata"]["uid"] == done["submissionID"]


class StateWatch(KubectlWatch):
    """Every applicationState.state each app of ``plural`` was announced with, in order ("" for none)."""

    def __init__(self, cluster: ClusterHandle, namespace: str, plural: str) -> None:
        self.seen: dict[str, list[str]] = {}
        template = '{.type} {.object.metadata.name} {.object.status.applicationState.state}{"\\n"}'
        super().__init__(cluster, namespace, [plural], template)

    def on_line(self, parts: list[str]) -> None:
        if len(parts) in (2, 3) and parts[0] in ("ADDED", "MODIFIED"):
            states = self.seen.setdefault(parts[1], [])
            state = parts[2] if len(parts) == 3 else ""
            if not states or states[-1] != state:
                states.append(state)


def test_list_watch_follows_the_apps_of_both_groups(kubeflow_crds: ClusterHandle, namespace: str) -> None:
    """`sparkop list -w` prints a row for each change of an app of either group, with its GROUP, as
    the apps come (no operator runs: a created app is a change)."""
    cluster, ns = kubeflow_crds, namespace
    command = [sys.executable, "-m", "sparkop", "list", "-w", "-n", ns, "--kubeconfig", str(cluster.kubeconfig)]
    watch = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(watch.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        # The empty listing says so on stderr; the watches are open once the first app's row comes.
        apply(cluster, ns, app_manifest("ours", outcome="Succeeded"))
        wait_for(lambda: any(line.split()[:2] == ["ours", "sparkop.io"] for line in lines), timeout=60,
                 message=f"a row for sparkop.io's app; printed so far: {lines}")  # fmt: skip
        apply(cluster, ns, kubeflow(app_manifest("theirs", outcome="Succeeded")))
        wait_for(lambda: any(line.split()[:2] == ["theirs", "sparkoperator.k8s.io"] for line in lines), timeout=60,
                 message=f"a row for kubeflow's app; printed so far: {lines}")  # fmt: skip
        assert lines[0].split()[:2] == ["NAME", "GROUP"], lines
        assert watch.poll() is None, watch.stderr.read() if watch.stderr else ""
    finally:
        watch.terminate()
        watch.wait(timeout=30)
