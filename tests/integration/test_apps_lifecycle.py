"""The apps controller on a real control plane, with the real operator (`sparkop run`, both
controllers) and the devcluster's simulated Spark drivers: outcomes come from the simulator's
annotations passed down through spec.driver.annotations.

Independent apps run concurrently within a test; retry intervals are 1-2 s, runs 1-4 s.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from tests.support.cluster_apps import DriverWatch, app_manifest, assert_no_duplicates, get, status, wait_state
from tests.support.faults import FAULT_EXIT_CODE, FAULT_EXIT_ENV
from tests.support.faults import MODULE as FAULT_MODULE
from tests.support.gap import wait_until_cluster_clients_recovered
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
Obj = dict[str, Any]
TERMINAL = ("COMPLETED", "FAILED")
MISSING_SA = "sparkop-test-missing"  # the API server refuses a pod with an unknown service account


# -- fixtures ------------------------------------------------------------------------------------


# `crds` and `operator` (both controllers, watching the test's namespace) come from conftest.


@pytest.fixture
def drivers_watch(crds: ClusterHandle, namespace: str) -> Iterator[DriverWatch]:
    watch = DriverWatch(crds, namespace)
    yield watch
    watch.stop()


# -- helpers -------------------------------------------------------------------------------------


def state(cluster: ClusterHandle, namespace: str, name: str) -> str | None:
    return status(cluster, namespace, name).get("applicationState", {}).get("state")


def all_states(cluster: ClusterHandle, namespace: str) -> dict[str, Obj]:
    items = cluster.kubectl_json("get", "sparkapplications", "-n", namespace)["items"]
    return {a["metadata"]["name"]: a.get("status") or {} for a in items}


def unfinished_drivers(cluster: ClusterHandle, namespace: str, app: str) -> list[str]:
    items = cluster.kubectl_json("get", "sparkdrivers", "-n", namespace, "-l", f"sparkop.io/app={app}")
    done = ("Succeeded", "Failed", "SubmissionFailed")
    return [d["metadata"]["name"] for d in items["items"] if (d.get("status") or {}).get("phase") not in done]


def pods(cluster: ClusterHandle, namespace: str, selector: str) -> list[str]:
    items = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", selector)["items"]
    return [p["metadata"]["name"] for p in items]


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# -- tests ---------------------------------------------------------------------------------------

POLICIES: dict[str, Obj] = {
    "never": {"type": "Never"},
    "onfailure": {
        "type": "OnFailure",
        "onFailureRetries": 1,
        "onFailureRetryInterval": 1,
        "onSubmissionFailureRetries": 1,
        "onSubmissionFailureRetryInterval": 1,
    },
    "always": {"type": "Always", "onFailureRetryInterval": 1, "onSubmissionFailureRetryInterval": 1},
}
# (policy, outcome) -> final state, runs, executionAttempts, submissionAttempts; Always is watched
# for 3 runs, then deleted
EXPECTED: dict[tuple[str, str], tuple[str, int, int, int]] = {
    ("never", "succeeded"): ("COMPLETED", 1, 1, 1),
    ("never", "failed"): ("FAILED", 1, 1, 1),
    ("never", "subfail"): ("FAILED", 1, 0, 1),
    ("never", "lost"): ("FAILED", 1, 1, 1),
    ("onfailure", "succeeded"): ("COMPLETED", 1, 1, 1),
    ("onfailure", "failed"): ("FAILED", 2, 2, 1),
    ("onfailure", "subfail"): ("FAILED", 2, 0, 2),
    ("onfailure", "lost"): ("FAILED", 2, 2, 1),
    ("always", "succeeded"): ("", 3, 0, 0),
    ("always", "failed"): ("", 3, 0, 0),
    ("always", "subfail"): ("", 3, 0, 0),
    ("always", "lost"): ("", 3, 0, 0),
}


def outcome_manifest(name: str, policy: str, outcome: str) -> Obj:
    if outcome == "succeeded":
        return app_manifest(name, POLICIES[policy], outcome="Succeeded", run_seconds=1)
    if outcome == "failed":
        return app_manifest(name, POLICIES[policy], outcome="Failed", run_seconds=1)
    if outcome == "subfail":
        return app_manifest(name, POLICIES[policy], service_account=MISSING_SA)
    # lost: no replacement allowed, the test deletes the running driver pod
    policy_obj = {**POLICIES[policy], "maxDriverPodReplacements": 0}
    return app_manifest(name, policy_obj, outcome="Succeeded", run_seconds=30)


def delete_running_driver_pods(cluster: ClusterHandle, namespace: str, app: str) -> None:
    pods = cluster.kubectl_json(
        "get", "pods", "-n", namespace, "-l", f"sparkop.io/app={app},spark-role=driver", "-o", "json"
    )["items"]
    for pod in pods:
        if pod.get("status", {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp"):
            cluster.kubectl("delete", "pod", pod["metadata"]["name"], "-n", namespace, "--wait=false", check=False)


def test_each_restart_policy_with_each_outcome(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess, drivers_watch: DriverWatch
) -> None:
    started = time.monotonic()
    for policy, outcome in EXPECTED:
        crds.apply(outcome_manifest(f"{policy}-{outcome}", policy, outcome), namespace=namespace)

    def settled() -> bool:
        states = all_states(crds, namespace)
        for (policy, outcome), (final, runs, _, _) in EXPECTED.items():
            name = f"{policy}-{outcome}"
            s = states.get(name, {})
            if outcome == "lost":
                delete_running_driver_pods(crds, namespace, name)
            if final:
                if s.get("applicationState", {}).get("state") != final:
                    return False
            elif int(s.get("lastRun", 0)) < runs:
                return False
        return True

    wait_for(settled, timeout=150, interval=0.5, message="every app settled")
    elapsed = time.monotonic() - started
    states = all_states(crds, namespace)
    for (policy, outcome), (final, runs, executions, submissions) in EXPECTED.items():
        name = f"{policy}-{outcome}"
        s = states[name]
        if final:
            assert s["lastRun"] == runs, (name, s)
            attempts = s["attempts"]
            assert len(attempts) == runs
            assert (s["executionAttempts"], s["submissionAttempts"]) == (executions, submissions), (name, s)
            conditions = {c["type"]: c for c in s["conditions"]}
            assert conditions["Completed" if final == "COMPLETED" else "Failed"]["status"] == "True", (name, s)
            if final == "FAILED":
                assert s["lastError"]["reason"] and s["lastError"]["message"], (name, s)
            if outcome == "lost":
                assert "DriverPodLost" in json.dumps(attempts[-1]), (name, attempts[-1])
            assert_no_duplicates(drivers_watch, name, runs)
        else:
            crds.kubectl("delete", "sparkapplication", name, "-n", namespace, "--wait=false")
    print(f"\n12 apps (3 policies x 4 outcomes) settled in {elapsed:.1f}s")


def test_retry_intervals_are_honoured(crds: ClusterHandle, namespace: str, operator: OperatorProcess) -> None:
    policy = {"type": "OnFailure", "onFailureRetries": 2, "onFailureRetryInterval": 2}
    sub_policy = {"type": "OnFailure", "onSubmissionFailureRetries": 2, "onSubmissionFailureRetryInterval": 1}
    crds.apply(app_manifest("retry-fail", policy, outcome="Failed", run_seconds=1), namespace=namespace)
    crds.apply(app_manifest("retry-sub", sub_policy, service_account=MISSING_SA), namespace=namespace)
    gaps: dict[str, list[float]] = {}
    for name, interval in (("retry-fail", 2), ("retry-sub", 1)):
        s = wait_state(crds, namespace, name, "FAILED", timeout=60)
        attempts = s["attempts"]
        assert [a["run"] for a in attempts] == [1, 2, 3]
        gaps[name] = [
            (ts(b["startTime"]) - ts(a["finishTime"])).total_seconds() for a, b in itertools.pairwise(attempts)
        ]
        for gap in gaps[name]:
            assert interval <= gap < interval + 1.0, (name, gaps[name])
    print(f"\nretry gaps (s): {gaps}")


def test_spec_update_mid_run_reruns_exactly_once(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess, drivers_watch: DriverWatch
) -> None:
    crds.apply(app_manifest("update", run_seconds=4), namespace=namespace)
    wait_state(crds, namespace, "update", "RUNNING", timeout=30)
    crds.kubectl(
        "patch", "sparkapplication", "update", "-n", namespace, "--type=merge", "-p", '{"spec":{"arguments":["7"]}}'
    )
    s = wait_state(crds, namespace, "update", "COMPLETED", timeout=40)
    assert s["lastRun"] == 2
    assert [a["outcome"] for a in s["attempts"]] == ["Invalidated", "Succeeded"]
    assert s["executionAttempts"] == 1
    driver = get(crds, namespace, "sparkdriver", "update-2")
    assert driver is not None and driver["spec"]["arguments"] == ["7"]
    assert_no_duplicates(drivers_watch, "update", 2)


def test_ttl_and_suspend_only_edits_do_not_rerun(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    # Long enough for its executor to start (a moment after the driver runs, as with real Spark).
    crds.apply(app_manifest("noop-edit", run_seconds=6), namespace=namespace)
    wait_state(crds, namespace, "noop-edit", "RUNNING", timeout=30)
    wait_for(lambda: pods(crds, namespace, "sparkop.io/app=noop-edit,spark-role=executor"), timeout=30,
             message="its executor")  # fmt: skip
    crds.kubectl(
        "patch", "sparkapplication", "noop-edit", "-n", namespace, "--type=merge",
        "-p", '{"spec":{"timeToLiveSeconds":300,"suspend":false}}',
    )  # fmt: skip
    s = wait_state(crds, namespace, "noop-edit", "COMPLETED", timeout=30)
    assert s["lastRun"] == 1 and s["observedGeneration"] == 2
    # a finished app is quiet: no status write without a change, also while and after its
    # executors are deleted (their going is recounted by the SparkDriver, never mirrored)
    version = get(crds, namespace, "sparkapplication", "noop-edit")["metadata"]["resourceVersion"]  # type: ignore[index]
    wait_for(
        lambda: not pods(crds, namespace, "sparkop.io/app=noop-edit,spark-role=executor"),
        timeout=30,
        message="the executors of the finished app are gone",
    )
    assert get(crds, namespace, "sparkapplication", "noop-edit")["metadata"]["resourceVersion"] == version  # type: ignore[index]
    time.sleep(2)
    assert get(crds, namespace, "sparkapplication", "noop-edit")["metadata"]["resourceVersion"] == version  # type: ignore[index]


def test_suspend_and_resume(crds: ClusterHandle, namespace: str, operator: OperatorProcess) -> None:
    crds.apply(app_manifest("pause", run_seconds=4), namespace=namespace)
    wait_state(crds, namespace, "pause", "RUNNING", timeout=30)
    crds.kubectl(
        "patch", "sparkapplication", "pause", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":true}}'
    )
    wait_state(crds, namespace, "pause", "SUSPENDED", timeout=30)
    assert unfinished_drivers(crds, namespace, "pause") == []
    wait_for(
        lambda: not crds.kubectl_json("get", "pods", "-n", namespace, "-l", "sparkop.io/app=pause")["items"],
        timeout=30,
        message="no pods while suspended",
    )
    time.sleep(1)
    assert state(crds, namespace, "pause") == "SUSPENDED"
    crds.kubectl(
        "patch", "sparkapplication", "pause", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":false}}'
    )
    s = wait_state(crds, namespace, "pause", "COMPLETED", timeout=40)
    assert s["lastRun"] == 2 and [a["outcome"] for a in s["attempts"]] == ["Invalidated", "Succeeded"]
    events = crds.kubectl_json("get", "events", "-n", namespace, "--field-selector", "involvedObject.name=pause")
    reasons = [e["reason"] for e in events["items"]]
    for reason in ("SparkApplicationSuspending", "SparkApplicationSuspended", "SparkApplicationResuming"):
        assert reason in reasons


def test_ttl_deletes_a_finished_app(crds: ClusterHandle, namespace: str, operator: OperatorProcess) -> None:
    crds.apply(app_manifest("ttl", run_seconds=1, timeToLiveSeconds=2), namespace=namespace)
    s = wait_state(crds, namespace, "ttl", "COMPLETED", timeout=30)
    finished = ts(s["terminationTime"])
    wait_for(lambda: get(crds, namespace, "sparkapplication", "ttl") is None, timeout=20, message="ttl app deleted")
    lived = (datetime.now(finished.tzinfo) - finished).total_seconds()
    assert 2 <= lived < 5, lived


def test_deleting_an_app_removes_everything_it_owns(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    # sparkUIOptions asks for a Spark UI Service of its own.
    ui_options = {"serviceType": "ClusterIP"}
    crds.apply(app_manifest("cascade", run_seconds=30, sparkUIOptions=ui_options), namespace=namespace)
    s = wait_state(crds, namespace, "cascade", "RUNNING", timeout=30)
    wait_for(lambda: get(crds, namespace, "service", "cascade-ui-svc"), timeout=10, message="UI service")
    assert status(crds, namespace, "cascade")["driverInfo"]["webUIServiceName"] == "cascade-ui-svc"
    assert s["currentDriver"] == "cascade-1"
    crds.kubectl("delete", "sparkapplication", "cascade", "-n", namespace, "--wait=false")

    def gone() -> bool:
        left = crds.kubectl("get", "sparkdrivers,pods,services,configmaps", "-n", namespace,
                            "-l", "sparkop.io/app=cascade", "-o", "name").stdout.split()  # fmt: skip
        return not left and get(crds, namespace, "service", "cascade-ui-svc") is None

    wait_for(gone, timeout=60, interval=0.5, message="everything the app owned is gone")


def test_operator_restart_at_every_state_converges_to_the_same_result(
    crds: ClusterHandle, namespace: str, tmp_path: Path, drivers_watch: DriverWatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reference app without restarts; then the same app under an operator that dies right after
    every status write that changes the app's state (before the pass's events and creates) and is
    started again: same final state and attempts, no duplicate SparkDriver."""
    policy = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    with OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path):
        crds.apply(app_manifest("reference", policy, outcome="Failed", run_seconds=1), namespace=namespace)
        reference = wait_state(crds, namespace, "reference", *TERMINAL, timeout=60)

    monkeypatch.setenv(FAULT_EXIT_ENV, "1")
    proc = OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, module=FAULT_MODULE)
    crds.apply(app_manifest("restarted", policy, outcome="Failed", run_seconds=1), namespace=namespace)
    seen: list[str] = []
    crashes = 0
    try:
        proc.start()
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            current = state(crds, namespace, "restarted")
            if current and (not seen or seen[-1] != current):
                seen.append(current)
            if current in TERMINAL:
                break
            if not proc.alive():
                assert proc.proc is not None and proc.proc.returncode == FAULT_EXIT_CODE, proc.logs()[-3000:]
                crashes += 1
                proc.start()
            time.sleep(0.05)
        final = wait_state(crds, namespace, "restarted", *TERMINAL, timeout=30)
    finally:
        proc.stop()

    def outcome(s: Obj) -> tuple[Any, ...]:
        return (
            s["applicationState"]["state"],
            s["lastRun"],
            s["executionAttempts"],
            [a["outcome"] for a in s["attempts"]],
        )

    assert outcome(final) == outcome(reference)
    # NEW (the first write: run 1 planned, the create lost) SUBMITTED RUNNING FAILING PENDING_RERUN
    # SUBMITTED RUNNING (run 2 is planned from PENDING_RERUN, which it keeps until its pod is accepted;
    # FAILED: the last run's FAILING, with no retry left, is entered and left in the one write that fails
    # the app)
    assert crashes >= 6
    assert_no_duplicates(drivers_watch, "restarted", final["lastRun"])
    print(f"\nstates seen: {seen}; the operator died after each of {crashes} transitions")


def wait_ui_info(cluster: ClusterHandle, namespace: str, name: str) -> Obj:
    """status.driverInfo once it names the UI Ingress."""

    def ready() -> Obj | None:
        info = status(cluster, namespace, name).get("driverInfo") or {}
        return info if info.get("webUIIngressName") else None

    found: Obj = wait_for(ready, timeout=10, message=f"UI of {name} in driverInfo")
    return found


def test_spark_ui_service_and_ingress(crds: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    url_format = "{{$appName}}.{{$appNamespace}}.spark.example.com"
    args = ["--ingress-url-format", url_format]
    with OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, extra_args=args):
        crds.apply(app_manifest("webui", run_seconds=6), namespace=namespace)
        wait_state(crds, namespace, "webui", "RUNNING", timeout=30)
        info = wait_ui_info(crds, namespace, "webui")
        assert info["webUIServiceName"] == "webui-ui-svc" and info["webUIPort"] == 4040
        assert info["webUIIngressAddress"] == f"http://webui.{namespace}.spark.example.com"
        svc = get(crds, namespace, "service", "webui-ui-svc")
        assert svc is not None
        selector = ",".join(f"{k}={v}" for k, v in svc["spec"]["selector"].items())
        pods = crds.kubectl_json("get", "pods", "-n", namespace, "-l", selector)["items"]
        assert [p["metadata"]["name"] for p in pods] == [info["podName"]]
        ingress = get(crds, namespace, "ingress", "webui-ui-ingress")
        assert ingress is not None
        assert ingress["spec"]["rules"][0]["host"] == f"webui.{namespace}.spark.example.com"
        wait_state(crds, namespace, "webui", "COMPLETED", timeout=30)
        wait_for(
            lambda: (
                get(crds, namespace, "service", "webui-ui-svc") is None
                and get(crds, namespace, "ingress", "webui-ui-ingress") is None
            ),
            timeout=10,
            message="UI objects removed after the app finished",
        )


def test_spark_ui_objects_are_restored_while_the_app_runs(crds: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    """The UI Service and Ingress are watched like everything sparkop owns: deleted, a new one is
    created; edited in a field sparkop sets, it is patched back; as wanted, it is never written."""
    args = ["--ingress-url-format", "{{$appName}}.{{$appNamespace}}.spark.example.com"]
    host = f"restore.{namespace}.spark.example.com"
    svc_name, ingress_name = "restore-ui-svc", "restore-ui-ingress"

    def edit(kind: str, name: str, op: str, path: str, value: Any) -> None:
        patch = json.dumps([{"op": op, "path": path, "value": value}])
        crds.kubectl("patch", kind, name, "-n", namespace, "--type=json", "-p", patch)

    def restored(kind: str, name: str, check: Any, what: str) -> Obj:
        found: Obj = wait_for(
            lambda: (o := get(crds, namespace, kind, name)) is not None and check(o) and o,
            timeout=15,
            interval=0.2,
            message=what,
        )
        return found

    with OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, extra_args=args):
        crds.apply(app_manifest("restore", run_seconds=300), namespace=namespace)
        wait_state(crds, namespace, "restore", "RUNNING", timeout=30)
        wait_ui_info(crds, namespace, "restore")
        first = get(crds, namespace, "service", svc_name)
        assert first is not None and get(crds, namespace, "ingress", ingress_name) is not None
        selector, ports = first["spec"]["selector"], first["spec"]["ports"]

        crds.kubectl("delete", "service", svc_name, "-n", namespace)
        svc = restored(
            "service", svc_name, lambda o: o["metadata"]["uid"] != first["metadata"]["uid"], "a new UI Service"
        )
        assert svc["spec"]["selector"] == selector and svc["spec"]["ports"] == ports

        edit("service", svc_name, "add", "/spec/selector/spark-role", "executor")
        edit("service", svc_name, "add", "/spec/selector/extra", "key")
        restored("service", svc_name, lambda o: o["spec"]["selector"] == selector, "the selector put back")
        edit("service", svc_name, "replace", "/spec/ports/0/targetPort", 8080)
        svc = restored("service", svc_name, lambda o: o["spec"]["ports"] == ports, "the port put back")

        # Reconciles triggered by the Ingress (edited, then restored) never write the Service.
        for n in range(3):
            edit("ingress", ingress_name, "replace", "/spec/rules/0/host", f"elsewhere-{n}.example.com")
            restored("ingress", ingress_name, lambda o: o["spec"]["rules"][0]["host"] == host, "the host put back")
        now = get(crds, namespace, "service", svc_name)
        assert now is not None and now["metadata"]["resourceVersion"] == svc["metadata"]["resourceVersion"]
        assert state(crds, namespace, "restore") == "RUNNING"
        crds.kubectl("delete", "sparkapplication", "restore", "-n", namespace, "--wait=false")


# -- attempts, refusals, conditions ----------------------------------------------------------------


def get_columns(cluster: ClusterHandle, namespace: str, name: str) -> list[str] | None:
    """`kubectl get sparkapp NAME`'s row: NAME STATE ATTEMPTS DRIVER INCARNATIONS EXECUTORS SPARK AGE."""
    out = cluster.kubectl("get", "sparkapp", name, "-n", namespace, "--no-headers", check=False).stdout.split()
    return out if len(out) == 8 else None


def test_attempts_are_visible_while_running(crds: ClusterHandle, namespace: str, operator: OperatorProcess) -> None:
    """ATTEMPTS (executionAttempts) counts the run that is running: 1 while the first runs, 2 while
    the retry runs, as kubeflow's does."""
    policy = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    crds.apply(app_manifest("visible", policy, outcome="Failed", run_seconds=3), namespace=namespace)
    rows: list[list[str]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        row = get_columns(crds, namespace, "visible")
        if row and (not rows or rows[-1][1:6] != row[1:6]):
            rows.append(row)
        if row and row[1] == "FAILED":
            break
        time.sleep(0.2)
    header = ["NAME", "STATE", "ATTEMPTS", "DRIVER", "INCARNATIONS", "EXECUTORS"]
    table = "\n".join(" ".join(f"{c:<13}" for c in r[:6]).rstrip() for r in [header, *rows])
    print(f"\nkubectl get sparkapp (each change):\n{table}")
    running = [(r[2], r[3]) for r in rows if r[1] == "RUNNING"]
    assert ("1", "visible-1") in running and ("2", "visible-2") in running, table
    assert all(attempts == driver.rsplit("-", 1)[1] for attempts, driver in running), table
    assert rows[-1][1:3] == ["FAILED", "2"], table


def quota_on_spark_drivers(cluster: ClusterHandle, namespace: str) -> None:
    """A ResourceQuota allowing no SparkDriver. The devcluster runs no quota controller, so its
    status is set here; the API server's quota admission then refuses with "exceeded quota"."""
    resource = "count/sparkdrivers.sparkop.io"
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-spark-drivers"},
        "spec": {"hard": {resource: "0"}},
    }
    cluster.apply(quota, namespace=namespace)
    status = json.dumps({"status": {"hard": {resource: "0"}, "used": {resource: "0"}}})
    cluster.kubectl("patch", "resourcequota", "no-spark-drivers", "-n", namespace, "--subresource=status",
                    "--type=merge", "-p", status)  # fmt: skip


def test_a_spark_driver_refused_by_the_api_server_is_a_failed_submission(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    quota_on_spark_drivers(crds, namespace)
    refused = {"type": "OnFailure", "onSubmissionFailureRetries": 1, "onSubmissionFailureRetryInterval": 1}
    lifted = {"type": "OnFailure", "onSubmissionFailureRetries": 3, "onSubmissionFailureRetryInterval": 4}
    crds.apply(app_manifest("refused", refused, run_seconds=1), namespace=namespace)
    crds.apply(app_manifest("lifted", lifted, run_seconds=1), namespace=namespace)
    s = refused_status = wait_state(crds, namespace, "refused", "FAILED", timeout=30)
    assert (s["submissionAttempts"], s["executionAttempts"], s["lastRun"]) == (2, 0, 2), s
    assert "exceeded quota" in s["applicationState"]["errorMessage"], s
    assert s["lastError"]["reason"] == "SparkDriverRefused" and "exceeded quota" in s["lastError"]["message"]
    assert [a["outcome"] for a in s["attempts"]] == ["SubmissionFailed", "SubmissionFailed"]
    conditions = {c["type"]: c for c in s["conditions"]}
    assert conditions["Submitted"]["reason"] == "SubmissionFailed"
    assert conditions["Failed"]["reason"] == "SparkDriverRefused"
    assert get(crds, namespace, "sparkdriver", "refused-1") is None
    wait_state(crds, namespace, "lifted", "SUBMISSION_FAILED", timeout=30)
    crds.kubectl("delete", "resourcequota", "no-spark-drivers", "-n", namespace)  # the quota is raised
    s = wait_state(crds, namespace, "lifted", "COMPLETED", timeout=40)
    outcomes = [a["outcome"] for a in s["attempts"]]
    assert outcomes[-1] == "Succeeded" and set(outcomes[:-1]) == {"SubmissionFailed"}, s
    assert (s["executionAttempts"], s["submissionAttempts"]) == (1, len(outcomes)), s
    events = crds.kubectl_json("get", "events", "-n", namespace, "--field-selector", "involvedObject.name=refused")
    assert "SparkApplicationSubmissionFailed" in [e["reason"] for e in events["items"]]
    print(f"\nrefused: lastError {refused_status['lastError']}")


def test_a_stuck_driver_shows_in_the_apps_conditions(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    manifest = app_manifest("stuck", run_seconds=1)
    manifest["spec"]["driver"]["annotations"]["sim.sparkop.io/waiting-reason"] = "ImagePullBackOff"

    def stuck() -> Obj | None:
        s = status(crds, namespace, "stuck")
        conditions = {c["type"]: c for c in s.get("conditions") or ()}
        cond = conditions.get("Stuck")
        return s if cond and cond["status"] == "True" and cond["reason"] == "ImagePullBackOff" else None

    crds.apply(manifest, namespace=namespace)
    s = wait_for(stuck, timeout=30, interval=0.3, message="Stuck mirrored on the app")
    conditions = {c["type"]: c for c in s["conditions"]}
    assert s["applicationState"]["state"] == "SUBMITTED" and s["executionAttempts"] == 1
    assert conditions["Submitted"]["status"] == "True" and conditions["Running"]["status"] == "False"
    assert "stuck-driver" in conditions["Stuck"]["message"]
    described = crds.kubectl("describe", "sparkapp", "stuck", "-n", namespace).stdout
    assert "ImagePullBackOff" in described
    section = described[described.index("Conditions:") :][:1500]
    print(f"\nkubectl describe sparkapp stuck (from status.conditions on):\n{section}")
    version = get(crds, namespace, "sparkapplication", "stuck")["metadata"]["resourceVersion"]  # type: ignore[index]
    time.sleep(2)  # a stuck app is quiet too
    assert get(crds, namespace, "sparkapplication", "stuck")["metadata"]["resourceVersion"] == version  # type: ignore[index]


def test_spark_ui_options_and_a_path_based_ingress(crds: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    args = ["--ingress-url-format", "spark.example.com/{{$appNamespace}}/{{ $appName }}"]
    options = {
        "servicePort": 80,
        "servicePortName": "http",
        "serviceType": "NodePort",
        "serviceAnnotations": {"example.com/scrape": "false"},
        "serviceLabels": {"team": "data"},
        "ingressAnnotations": {"example.com/auth": "sso"},
        "ingressTLS": [{"hosts": ["spark.example.com"], "secretName": "spark-tls"}],
    }
    with OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, extra_args=args):
        crds.apply(app_manifest("pathui", run_seconds=6, sparkUIOptions=options), namespace=namespace)
        wait_state(crds, namespace, "pathui", "RUNNING", timeout=30)
        info = wait_ui_info(crds, namespace, "pathui")
        assert info["webUIPort"] == 80 and info["webUIAddress"] == f"pathui-ui-svc.{namespace}.svc:80"
        assert info["webUIIngressAddress"] == f"https://spark.example.com/{namespace}/pathui"
        svc = get(crds, namespace, "service", "pathui-ui-svc")
        assert svc is not None and svc["spec"]["type"] == "NodePort"
        (port,) = svc["spec"]["ports"]
        assert (port["name"], port["port"], port["targetPort"]) == ("http", 80, 4040) and port["nodePort"] > 0
        assert svc["metadata"]["annotations"]["example.com/scrape"] == "false"
        assert svc["metadata"]["labels"]["team"] == "data"
        ingress = get(crds, namespace, "ingress", "pathui-ui-ingress")
        assert ingress is not None
        rule = ingress["spec"]["rules"][0]
        assert rule["host"] == "spark.example.com"
        path = rule["http"]["paths"][0]
        assert path["path"] == f"/{namespace}/pathui(/|$)(.*)" and path["pathType"] == "ImplementationSpecific"
        assert path["backend"]["service"] == {"name": "pathui-ui-svc", "port": {"number": 80}}
        assert ingress["spec"]["tls"] == options["ingressTLS"]
        assert ingress["metadata"]["annotations"] == {
            "example.com/auth": "sso",
            "nginx.ingress.kubernetes.io/rewrite-target": "/$2",
        }
        driver = get(crds, namespace, "sparkdriver", "pathui-1")
        assert driver is not None and driver["spec"]["sparkConf"]["spark.ui.proxyBase"] == f"/{namespace}/pathui"
        wait_state(crds, namespace, "pathui", "COMPLETED", timeout=30)
        wait_for(
            lambda: (
                get(crds, namespace, "service", "pathui-ui-svc") is None
                and get(crds, namespace, "ingress", "pathui-ui-ingress") is None
            ),
            timeout=10,
            message="UI objects removed after the app finished",
        )


# -- resilience --------------------------------------------------------------------------------------


def test_apiserver_and_etcd_restart_mid_run(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess, drivers_watch: DriverWatch
) -> None:
    """The control plane (etcd and kube-apiserver) is restarted while apps run and the operator keeps
    running: every app reaches its final state with the attempt counts it would have had, and no
    SparkDriver is created twice."""
    if not crds.can_restart:
        pytest.skip("external cluster: not ours to restart")
    on_failure = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    sub_retry = {"type": "OnFailure", "onSubmissionFailureRetries": 1, "onSubmissionFailureRetryInterval": 3}
    # name -> (manifest, final state, runs, executionAttempts, submissionAttempts)
    apps: dict[str, tuple[Obj, str, int, int, int]] = {
        "res-ok": (app_manifest("res-ok", run_seconds=8), "COMPLETED", 1, 1, 1),
        "res-fail": (app_manifest("res-fail", on_failure, outcome="Failed", run_seconds=4), "FAILED", 2, 2, 1),
        "res-sub": (app_manifest("res-sub", sub_retry, service_account=MISSING_SA), "FAILED", 2, 0, 2),
        "res-late": (app_manifest("res-late", on_failure, outcome="Failed", run_seconds=2), "FAILED", 2, 2, 1),
    }
    started = time.monotonic()
    for name, (manifest, *_) in apps.items():
        if name != "res-late":
            crds.apply(manifest, namespace=namespace)
    wait_state(crds, namespace, "res-ok", "RUNNING", timeout=30)
    wait_state(crds, namespace, "res-fail", "RUNNING", timeout=30)
    before = {name: status(crds, namespace, name).get("applicationState", {}).get("state") for name in apps}
    outage = time.monotonic()
    crds.restart("all")
    outage = time.monotonic() - outage
    crds.apply(apps["res-late"][0], namespace=namespace)  # one more app, right after the restart
    finals = {name: wait_state(crds, namespace, name, *TERMINAL, timeout=120) for name in apps}
    elapsed = time.monotonic() - started
    assert operator.alive(), "the operator must survive a control-plane restart"
    for name, (_, final, runs, executions, submissions) in apps.items():
        s = finals[name]
        got = (s["applicationState"]["state"], s["lastRun"], s["executionAttempts"], s["submissionAttempts"])
        assert got == (final, runs, executions, submissions), (name, s)
        assert [a["run"] for a in s["attempts"]] == list(range(1, runs + 1)), (name, s)
        assert_no_duplicates(drivers_watch, name, runs)
    print(f"\nstates when etcd and kube-apiserver were restarted: {before}; restart took {outage:.1f}s; "
          f"all {len(apps)} apps final {elapsed:.1f}s after the first was applied; "
          f"the SparkDriver watch was (re)started {drivers_watch.watches} time(s)")  # fmt: skip
    # client-go's re-list backoff grows with each gap: leave the cluster whole for the tests after this.
    wait_until_cluster_clients_recovered(crds)


# -- ownership, not names, labels or status --------------------------------------------------------


def test_a_foreign_spark_driver_holding_the_driver_name_is_never_taken_for_the_apps(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    """A SparkDriver of the app's deterministic name that the app does not control: the create's 409
    is no success and the object is never adopted; the app says which object is in the way."""
    foreign = {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {"name": "taken-1"},
        "spec": {
            key: app_manifest("x")["spec"][key]
            for key in ("type", "image", "sparkVersion", "mainClass", "mainApplicationFile", "driver", "executor")
        },
    }
    crds.apply(foreign, namespace=namespace)
    crds.apply(app_manifest("taken"), namespace=namespace)
    s = wait_state(crds, namespace, "taken", "FAILED", timeout=30)
    assert s["lastError"]["reason"] == "SparkDriverRefused", s
    assert "SparkDriver taken-1 already exists and is not ours" in s["lastError"]["message"], s
    assert "SparkDriver taken-1" in s["applicationState"]["errorMessage"], s
    assert "currentDriver" not in s and s["executionAttempts"] == 0, s
    driver = get(crds, namespace, "sparkdriver", "taken-1")
    assert driver is not None and not driver["metadata"].get("ownerReferences"), driver
    events = crds.kubectl_json("get", "events", "-n", namespace, "--field-selector", "involvedObject.name=taken")
    warnings = [e["message"] for e in events["items"] if e["type"] == "Warning"]
    assert any("SparkDriver taken-1" in m for m in warnings), warnings


def test_apps_whose_names_differ_only_by_a_dot_both_run(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    for name in ("dot.app", "dot-app"):
        crds.apply(app_manifest(name, run_seconds=1), namespace=namespace)
    finals = {name: wait_state(crds, namespace, name, *TERMINAL, timeout=30) for name in ("dot.app", "dot-app")}
    assert {n: s["applicationState"]["state"] for n, s in finals.items()} == {n: "COMPLETED" for n in finals}
    drivers = {name: finals[name]["currentDriver"] for name in finals}
    assert drivers["dot-app"] == "dot-app-1" and drivers["dot.app"] != "dot-app-1", drivers
    for app, driver_name in drivers.items():
        driver = get(crds, namespace, "sparkdriver", driver_name)
        assert driver is not None and driver["metadata"]["ownerReferences"][0]["name"] == app, driver


def test_an_app_follows_its_spark_driver_by_ownership_not_by_label(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    crds.apply(app_manifest("unlabelled", run_seconds=4), namespace=namespace)
    wait_state(crds, namespace, "unlabelled", "RUNNING", timeout=30)
    crds.kubectl("label", "sparkdriver", "unlabelled-1", "-n", namespace, "sparkop.io/app-")
    s = wait_state(crds, namespace, "unlabelled", *TERMINAL, timeout=30)
    assert s["applicationState"]["state"] == "COMPLETED", s
    assert [(a["run"], a["outcome"]) for a in s["attempts"]] == [(1, "Succeeded")], s


def test_without_ui_options_the_spark_ui_is_the_driver_services(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    """Nothing asks for a Spark UI Service of its own (no sparkUIOptions, no Ingress URL format): none
    is written, and status.driverInfo names the driver's own Service, which serves the UI port."""
    crds.apply(app_manifest("plainui", run_seconds=4), namespace=namespace)
    wait_state(crds, namespace, "plainui", "RUNNING", timeout=30)

    def named() -> Obj | None:
        info = status(crds, namespace, "plainui").get("driverInfo") or {}
        return info if info.get("webUIServiceName") else None

    info = wait_for(named, timeout=10, message="the UI in driverInfo")
    svc = get(crds, namespace, "service", info["webUIServiceName"])
    assert svc is not None and info["webUIServiceName"] == "plainui-1-1-driver-svc"
    assert {"name": "spark-ui", "port": 4040, "targetPort": 4040} in [
        {k: p[k] for k in ("name", "port", "targetPort")} for p in svc["spec"]["ports"]
    ]
    assert info["webUIPort"] == 4040 and info["webUIAddress"] == f"plainui-1-1-driver-svc.{namespace}.svc:4040"
    assert get(crds, namespace, "service", "plainui-ui-svc") is None
    wait_state(crds, namespace, "plainui", "COMPLETED", timeout=30)


def test_a_ui_service_the_status_never_named_is_deleted(crds: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    """The apps operator dies between creating the Spark UI Service and the status write naming it
    (simulated: the name is removed from status while it is down), and the run ends meanwhile: the
    Service is found by its owner and deleted all the same."""
    driver_op = OperatorProcess(crds.kubeconfig, controllers=["driver"], namespaces=[namespace], log_dir=tmp_path)
    apps_op = OperatorProcess(crds.kubeconfig, controllers=["apps"], namespaces=[namespace], log_dir=tmp_path)
    with driver_op, apps_op:
        crds.apply(app_manifest("leaky", run_seconds=5, sparkUIOptions={"servicePort": 4040}), namespace=namespace)
        wait_state(crds, namespace, "leaky", "RUNNING", timeout=30)
        wait_for(lambda: get(crds, namespace, "service", "leaky-ui-svc"), timeout=10, message="UI service")
        apps_op.kill()
        forget = {"status": {"driverInfo": {"webUIServiceName": None, "webUIAddress": None, "webUIPort": None}}}
        crds.kubectl("patch", "sparkapplication", "leaky", "-n", namespace, "--subresource=status",
                     "--type=merge", "-p", json.dumps(forget))  # fmt: skip
        wait_for(
            lambda: (
                ((get(crds, namespace, "sparkdriver", "leaky-1") or {}).get("status") or {}).get("phase") == "Succeeded"
            ),
            timeout=30,
            message="leaky-1 Succeeded while the apps controller is down",
        )
        assert "webUIServiceName" not in status(crds, namespace, "leaky").get("driverInfo", {})
        apps_op.start()
        wait_state(crds, namespace, "leaky", "COMPLETED", timeout=30)
        wait_for(
            lambda: get(crds, namespace, "service", "leaky-ui-svc") is None,
            timeout=10,
            message="the UI Service status never named is deleted",
        )


class Watch:
    """Every line of a ``kubectl get --watch`` while it runs (its first lines list what exists)."""

    def __init__(self, cluster: ClusterHandle, *args: str) -> None:
        argv = [str(cluster.kubectl_binary), "--kubeconfig", str(cluster.kubeconfig), "get", *args, "--watch"]
        self.lines: list[str] = []
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.lines.append(line.strip())

    def stop(self) -> list[str]:
        self.proc.terminate()
        self.proc.wait(5)
        self.thread.join(5)
        return self.lines


def test_deleting_the_namespace_of_a_running_app_is_not_a_failure(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    """The namespace goes with everything in it. Its driver pod vanishing is no lost driver: no
    replacement, no new run, no FAILING/FAILED, and no warning (an Event that cannot be posted in a
    terminating namespace is no news)."""
    crds.apply(app_manifest("doomed", run_seconds=120), namespace=namespace)
    wait_state(crds, namespace, "doomed", "RUNNING", timeout=30)
    wait_for(lambda: pods(crds, namespace, "sparkop.io/app=doomed,spark-role=executor"), timeout=20, message="executor")
    line = '{.type} {.object.metadata.name} {.object.status.applicationState.state}{"\\n"}'
    states = Watch(crds, "sparkapplications", "-n", namespace, "--output-watch-events", "-o", f"jsonpath={line}")
    created = [
        Watch(crds, kind, "-n", namespace, "--output-watch-events", "-o", f"jsonpath={line}")
        for kind in ("pods", "sparkdrivers")
    ]
    wait_for(lambda: len(states.lines) >= 1, timeout=10, message="the watches list what exists")
    before = set(pods(crds, namespace, "sparkop.io/app=doomed")) | {"doomed-1"}
    log_start = len(operator.logs())
    crds.kubectl("delete", "namespace", namespace, "--wait=false")
    wait_for(
        lambda: crds.kubectl("get", "namespace", namespace, check=False).returncode != 0,
        timeout=120,
        interval=0.5,
        message=f"namespace {namespace} deleted",
    )
    seen_states = {tuple(row.split()[1:]) for row in states.stop() if row.split()[0] in ("ADDED", "MODIFIED")}
    names = {row.split()[1] for watch in created for row in watch.stop() if row.split()[0] == "ADDED"}
    log = operator.logs()[log_start:]
    assert seen_states == {("doomed", "RUNNING")}, seen_states
    assert names <= before, f"created while the namespace was going: {sorted(names - before)}"
    noisy = [line for line in log.splitlines() if re.match(r"\S+ [WE] ", line) or "Forbidden" in line]
    assert not noisy, "\n".join(noisy)
    assert f"namespace {namespace} is being deleted" in log
    assert operator.alive()


def test_an_app_deleted_and_applied_again_at_once_runs_again(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    """The old app's SparkDriver of the same name may still be there, its owner gone: its name is
    free again once the garbage collector is done (kube.Occupied, retried), never a refusal."""
    crds.apply(app_manifest("again", run_seconds=60), namespace=namespace)
    wait_state(crds, namespace, "again", "RUNNING", timeout=30)
    old = get(crds, namespace, "sparkapplication", "again")
    assert old is not None
    crds.kubectl("delete", "sparkapplication", "again", "-n", namespace, "--wait=false")
    crds.apply(app_manifest("again", run_seconds=1), namespace=namespace)
    s = wait_state(crds, namespace, "again", *TERMINAL, timeout=60)
    assert s["applicationState"]["state"] == "COMPLETED" and s["lastRun"] == 1, s
    new = get(crds, namespace, "sparkapplication", "again")
    driver = get(crds, namespace, "sparkdriver", "again-1")
    assert new is not None and driver is not None and new["metadata"]["uid"] != old["metadata"]["uid"]
    assert driver["metadata"]["ownerReferences"][0]["uid"] == new["metadata"]["uid"]
