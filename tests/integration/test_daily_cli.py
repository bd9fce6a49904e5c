"""`sparkop list`, `logs`, `events`, `suspend` and `resume` as a user runs them (the real command, in a
child process), against the devcluster with the real operator and simulated Spark drivers.

KWOK nodes have no kubelet, so the API server cannot fetch a log on them: there the tests check which
pod `sparkop logs` picks (it names it on stderr) and that the API server's pods/log endpoint was asked
for that pod's log (its answer names the missing kubelet). A real node serves the log itself: one
test streams a real container's output with `-f`, when the machine's real-node cluster is free.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devcluster import images
from devcluster.realnodes import RealNodeError
from devcluster.testing import ClusterHandle, temporary_namespace, wait_for
from sparkop import demo
from tests.support.cluster_apps import app_manifest
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
Obj = dict[str, Any]


def sparkop(kubeconfig: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "sparkop", *args, "--kubeconfig", str(kubeconfig)],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def get(cluster: ClusterHandle, namespace: str, kind: str, name: str) -> Obj:
    found: Obj = cluster.kubectl_json("get", kind, name, "-n", namespace)
    return found


def pods(cluster: ClusterHandle, namespace: str, selector: str) -> list[Obj]:
    items: list[Obj] = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", selector)["items"]
    return items


def state(cluster: ClusterHandle, namespace: str, name: str) -> str:
    status = get(cluster, namespace, "sparkapplication", name).get("status") or {}
    return str((status.get("applicationState") or {}).get("state", ""))


def table(stdout: str) -> list[list[str]]:
    """The rows of a table whose last column may hold spaces: cut at the header's column starts."""
    lines = stdout.splitlines()
    header = lines[0]
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 3 : i] == "   ")]
    return [[line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)] for line in lines]


def long_app(name: str, executors: int = 2) -> Obj:
    manifest = app_manifest(name, run_seconds=600)
    manifest["spec"]["executor"]["instances"] = executors
    return manifest


def running_pods(cluster: ClusterHandle, namespace: str, selector: str, count: int) -> list[Obj]:
    def ready() -> list[Obj] | None:
        found = [p for p in pods(cluster, namespace, selector) if p.get("status", {}).get("phase") == "Running"]
        return found if len(found) == count else None

    return wait_for(ready, timeout=60, message=f"{count} running pods {selector}")


def test_list_shows_state_attempts_duration_and_last_error_in_the_contexts_namespace(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    crds.apply(app_manifest("fine", run_seconds=1), namespace=namespace)
    crds.apply(app_manifest("broken", outcome="Failed", run_seconds=1), namespace=namespace)
    wait_for(
        lambda: (state(crds, namespace, "fine"), state(crds, namespace, "broken")) == ("COMPLETED", "FAILED"),
        timeout=60,
        message="fine COMPLETED and broken FAILED",
    )
    error = get(crds, namespace, "sparkapplication", "broken")["status"]["lastError"]

    # No -n: the namespace of the kubeconfig's current context, as kubectl.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(Path(crds.kubeconfig).read_text())
    crds.kubectl("config", "set-context", "--current", f"--namespace={namespace}", f"--kubeconfig={kubeconfig}")
    listed = sparkop(kubeconfig, "list")
    assert listed.returncode == 0, listed.stderr
    rows = table(listed.stdout)
    assert rows[0] == ["NAME", "STATE", "ATTEMPTS", "EXECUTORS", "DURATION", "AGE", "LAST ERROR"]
    by_name = {row[0]: row for row in rows[1:]}
    assert sorted(by_name) == ["broken", "fine"]
    assert by_name["fine"][1:4] == ["COMPLETED", "1", "0"] and by_name["fine"][6] == "-"
    assert by_name["broken"][1:4] == ["FAILED", "1", "0"]
    assert by_name["broken"][6].startswith(f"{error['reason']}: "), (by_name["broken"], error)
    assert all(row[4].endswith("s") for row in by_name.values()), rows  # a run of seconds, not "-"

    everywhere = sparkop(Path(crds.kubeconfig), "list", "-A")
    assert everywhere.returncode == 0, everywhere.stderr
    all_rows = table(everywhere.stdout)
    assert all_rows[0][:2] == ["NAMESPACE", "NAME"]
    assert {(row[0], row[1]) for row in all_rows[1:]} >= {(namespace, "fine"), (namespace, "broken")}

    elsewhere = sparkop(Path(crds.kubeconfig), "list", "-n", "kube-public")
    assert (elsewhere.returncode, elsewhere.stdout) == (0, "")
    assert elsewhere.stderr == "No SparkApplications in namespace 'kube-public'.\n"

    # kubectl's habits: -o json is the API server's objects in a v1 List, -o name, -l.
    as_json = sparkop(kubeconfig, "list", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    listed = json.loads(as_json.stdout)
    assert listed["kind"] == "List" and sorted(a["metadata"]["name"] for a in listed["items"]) == ["broken", "fine"]
    assert {a["status"]["applicationState"]["state"] for a in listed["items"]} == {"COMPLETED", "FAILED"}
    crds.kubectl("label", "sparkapplication", "fine", "team=a", "-n", namespace)
    named = sparkop(kubeconfig, "list", "-o", "name", "-l", "team=a")
    assert (named.returncode, named.stdout) == (0, "sparkapplication.sparkop.io/fine\n"), named.stderr
    wide = table(sparkop(kubeconfig, "list", "-o", "wide").stdout)
    assert wide[0][6:] == ["SPARK", "DRIVER POD", "SPARK APP ID", "LAST ERROR"]

    # sparkop status without -n: the context's namespace too (it used to be `default`).
    status = sparkop(kubeconfig, "status", "fine")
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"SparkApplication {namespace}/fine: COMPLETED\n"), status.stdout


def test_kubectl_runs_sparkop_as_a_plugin(crds: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    """`kubectl sparkop list -o json`: kubectl finds the kubectl-sparkop entry point on PATH."""
    plugin = Path(sys.executable).parent / "kubectl-sparkop"
    assert plugin.is_file(), "pip install puts kubectl-sparkop beside sparkop (pyproject's scripts)"
    crds.apply(app_manifest("plugged", run_seconds=1), namespace=namespace)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["PATH"] = f"{plugin.parent}{os.pathsep}{env.get('PATH', '')}"
    kubectl = [str(crds.kubectl_binary)]  # kubectl passes every flag after the plugin's name to it
    plugins = subprocess.run([*kubectl, "plugin", "list"], env=env, capture_output=True, text=True, check=False)
    assert str(plugin) in plugins.stdout, plugins.stdout + plugins.stderr
    listed = subprocess.run(
        [*kubectl, "sparkop", "list", "-o", "json", "-n", namespace, "--kubeconfig", str(crds.kubeconfig)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert [a["metadata"]["name"] for a in json.loads(listed.stdout)["items"]] == ["plugged"]
    helped = subprocess.run([*kubectl, "sparkop", "--help"], env=env, capture_output=True, text=True, check=False)
    assert helped.stdout.startswith("usage: kubectl sparkop "), helped.stdout


def test_logs_reads_the_current_driver_pod_or_an_executor_by_its_labels(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    crds.apply(long_app("pi"), namespace=namespace)
    wait_for(lambda: state(crds, namespace, "pi") == "RUNNING", timeout=60, message="pi RUNNING")
    (driver_pod,) = running_pods(crds, namespace, "sparkop.io/driver=pi-1,spark-role=driver", 1)
    running_pods(crds, namespace, "sparkop.io/driver=pi-1,spark-role=executor", 2)
    second = pods(crds, namespace, "sparkop.io/driver=pi-1,spark-exec-id=2")[0]["metadata"]["name"]
    kube = Path(crds.kubeconfig)

    def picks(*args: str) -> str:
        """The pod `sparkop logs` read: it names it, then streams the API server's pods/log answer
        (on kwok an error from the API server, which has no kubelet to ask)."""
        result = sparkop(kube, "logs", "pi", "-n", namespace, *args)
        first, *rest = result.stderr.splitlines()
        assert first.startswith(f"sparkop logs: pod {namespace}/"), result.stderr
        pod = first.removeprefix(f"sparkop logs: pod {namespace}/").split(",")[0]
        if result.returncode != 0:
            assert len(rest) == 1, result.stderr
            # The API server's pods/log answer for that very pod: it looked for the node's kubelet.
            assert rest[0].startswith(f"sparkop logs: cannot read the log of pod {namespace}/{pod}: 500"), rest
            assert "addresses" in rest[0], rest
        return pod

    assert picks() == driver_pod["metadata"]["name"] == "pi-driver"  # kubeflow's <app>-driver
    assert picks("--executor", "2") == second
    missing = sparkop(kube, "logs", "pi", "-n", namespace, "--executor", "9")
    assert (missing.returncode, missing.stderr) == (
        1,
        "sparkop logs: SparkDriver 'pi-1' incarnation 1 has no executor 9 (executor ids: 1, 2)\n",
    )

    # A drained driver pod: the default follows the new incarnation; the old one is gone.
    crds.kubectl("delete", "pod", driver_pod["metadata"]["name"], "-n", namespace, "--wait=true")
    (replacement,) = running_pods(crds, namespace, "sparkop.io/driver=pi-1,spark-role=driver", 1)
    assert replacement["metadata"]["labels"]["sparkop.io/incarnation"] == "2"
    wait_for(
        lambda: get(crds, namespace, "sparkdriver", "pi-1").get("status", {}).get("incarnation") == 2,
        timeout=30,
        message="SparkDriver pi-1 at incarnation 2",
    )
    assert picks() == replacement["metadata"]["name"] == "pi-driver"  # the same name, the next incarnation's
    assert picks("--incarnation", "2", "--attempt", "1") == "pi-driver"
    gone = sparkop(kube, "logs", "pi", "-n", namespace, "--incarnation", "1")
    assert gone.returncode == 1
    assert gone.stderr == (
        "sparkop logs: SparkDriver 'pi-1' has no driver pod of incarnation 1 (current: 2; pods kept: 2)\n"
    )
    no_run = sparkop(kube, "logs", "pi", "-n", namespace, "--attempt", "3")
    assert no_run.stderr == (
        f"sparkop logs: SparkApplication 'pi' has no run 3 (runs kept: 1); sparkop status pi -n {namespace} "
        "lists them\n"
    )
    no_app = sparkop(kube, "logs", "nope", "-n", namespace)
    assert (
        no_app.stderr
        == f"sparkop logs: no SparkApplication 'nope' in namespace '{namespace}'; sparkop list -n {namespace}\n"
    )


def _age_seconds(cell: str) -> int:
    """A LAST SEEN cell of a short test: "42s" or "2m5s"."""
    age = cell.split(" ")[0]
    minutes, _, seconds = age.rpartition("m")
    return int(minutes or 0) * 60 + int(seconds.rstrip("s") or 0)


def test_events_are_the_apps_and_its_drivers_oldest_first(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    retried = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    # A Spark line sparkop does not know: each SparkDriver says so in an event of its own (the facts the
    # app's events state are posted on the app only).
    flaky = app_manifest("flaky", retried, outcome="Failed", run_seconds=1, sparkVersion="3.4.4")
    crds.apply(flaky, namespace=namespace)
    crds.apply(app_manifest("flaky-other", run_seconds=1), namespace=namespace)
    wait_for(lambda: state(crds, namespace, "flaky") == "FAILED", timeout=90, message="flaky FAILED after a retry")
    wait_for(lambda: state(crds, namespace, "flaky-other") == "COMPLETED", timeout=60, message="flaky-other done")

    result = sparkop(Path(crds.kubeconfig), "events", "flaky", "-n", namespace)
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    assert rows[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    shown = [(row[3], row[2]) for row in rows[1:]]
    mine = {"sparkapplication/flaky", "sparkdriver/flaky-1", "sparkdriver/flaky-2"}
    assert {obj for obj, _ in shown} == mine, shown

    # Everything the API server holds about those three objects, and nothing about flaky-other's.
    listed = crds.kubectl_json("get", "events", "-n", namespace)["items"]
    expected = {
        (f"{e['involvedObject']['kind'].lower()}/{e['involvedObject']['name']}", e["reason"])
        for e in listed
        if f"{e['involvedObject']['kind'].lower()}/{e['involvedObject']['name']}" in mine
    }
    assert set(shown) == expected

    # Oldest first: the first run's events all come before the second run's.
    ages = [_age_seconds(row[0]) for row in rows[1:]]
    assert ages == sorted(ages, reverse=True), rows
    first_run = [i for i, (obj, _) in enumerate(shown) if obj == "sparkdriver/flaky-1"]
    second_run = [i for i, (obj, _) in enumerate(shown) if obj == "sparkdriver/flaky-2"]
    assert max(first_run) < min(second_run), shown


def test_suspend_and_resume_set_spec_suspend_and_say_what_happened(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    crds.apply(long_app("pause", executors=1), namespace=namespace)
    wait_for(lambda: state(crds, namespace, "pause") == "RUNNING", timeout=60, message="pause RUNNING")
    kube = Path(crds.kubeconfig)
    who = f"sparkapplication {namespace}/pause"

    suspended = sparkop(kube, "suspend", "pause", "-n", namespace)
    assert (suspended.returncode, suspended.stdout) == (
        0,
        f"{who} suspended (was RUNNING): its run pause-1 is stopped and no new run starts until "
        f"sparkop resume pause -n {namespace}\n",
    )
    assert get(crds, namespace, "sparkapplication", "pause")["spec"]["suspend"] is True
    wait_for(lambda: state(crds, namespace, "pause") == "SUSPENDED", timeout=60, message="pause SUSPENDED")
    wait_for(lambda: not pods(crds, namespace, "sparkop.io/app=pause"), timeout=60, message="pause's pods gone")
    again = sparkop(kube, "suspend", "pause", "-n", namespace)
    assert (
        again.stdout
        == f"{who} is already suspended (state SUSPENDED); sparkop resume pause -n {namespace} starts a new run\n"
    )

    resumed = sparkop(kube, "resume", "pause", "-n", namespace)
    assert (resumed.returncode, resumed.stdout) == (0, f"{who} resumed (was SUSPENDED): sparkop starts a new run\n")
    assert get(crds, namespace, "sparkapplication", "pause")["spec"]["suspend"] is False
    wait_for(
        lambda: (
            state(crds, namespace, "pause") == "RUNNING"
            and get(crds, namespace, "sparkapplication", "pause")["status"].get("currentDriver") == "pause-2"
        ),
        timeout=60,
        message="pause running again as run 2",
    )
    idle = sparkop(kube, "resume", "pause", "-n", namespace)
    assert idle.stdout == f"{who} is not suspended (state RUNNING); nothing to do\n"

    missing = sparkop(kube, "suspend", "nope", "-n", namespace)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert (
        missing.stderr
        == f"sparkop suspend: no SparkApplication 'nope' in namespace '{namespace}'; sparkop list -n {namespace}\n"
    )


@pytest.mark.realnode
def test_logs_follow_streams_a_real_driver_containers_output(request: pytest.FixtureRequest) -> None:
    """On a real node: `logs -f` prints what the container writes after the command started, and
    ends when the container does. No operator: the SparkDriver and its pod are written by hand with
    the labels the driver controller gives them."""
    try:
        cluster: ClusterHandle = request.getfixturevalue("real_cluster")
    except RealNodeError as exc:
        pytest.skip(f"the machine's real-node cluster is taken: {exc}")
    demo.install_crds(cluster.kubectl_binary, cluster.kubeconfig)
    demo.wait_for_crds(cluster.kubectl_binary, cluster.kubeconfig)
    with temporary_namespace(cluster) as ns:
        app = app_manifest("echo")
        cluster.apply(app, namespace=ns)
        driver_spec = {k: v for k, v in app["spec"].items() if k not in ("restartPolicy", "mode")}
        # The app's SparkDrivers are those it controls (issue 44: not another group's app's of the name).
        app_uid = cluster.kubectl_json("get", "sparkapplications.sparkop.io", "echo", "-n", ns)["metadata"]["uid"]
        controller = {"apiVersion": app["apiVersion"], "kind": "SparkApplication", "name": "echo", "uid": app_uid,
                      "controller": True}  # fmt: skip
        cluster.apply(
            {
                "apiVersion": "sparkop.io/v1alpha1",
                "kind": "SparkDriver",
                "metadata": {
                    "name": "echo-1",
                    "labels": {"sparkop.io/app": "echo", "sparkop.io/run": "1"},
                    "ownerReferences": [controller],
                },
                "spec": {**driver_spec, "attempt": 1},
            },
            namespace=ns,
        )
        script = "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done"
        pod_labels = {"sparkop.io/driver": "echo-1", "sparkop.io/incarnation": "1", "spark-role": "driver"}
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "echo-1-1-driver", "labels": pod_labels},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "spark-kubernetes-driver",
                            "image": f"{images.BASE_REPO}:latest",
                            "imagePullPolicy": "Never",
                            "command": ["/bin/sh", "-c", script],
                        }
                    ],
                },
            },
            namespace=ns,
        )
        wait_for(
            lambda: "tick 1" in cluster.kubectl("logs", "echo-1-1-driver", "-n", ns, check=False).stdout,
            timeout=90,
            message="the echo pod's first line",
        )
        before = cluster.kubectl("logs", "echo-1-1-driver", "-n", ns).stdout
        followed = sparkop(Path(cluster.kubeconfig), "logs", "echo", "-n", ns, "-f", timeout=60)
        assert followed.returncode == 0, followed.stderr
        assert followed.stderr == f"sparkop logs: pod {ns}/echo-1-1-driver\n"
        # Started while the container was still writing, it printed every line up to the end.
        assert "tick 6" not in before, before
        assert followed.stdout == "".join(f"tick {i}\n" for i in range(1, 7))
        wait_for(
            lambda: cluster.kubectl_json("get", "pod", "echo-1-1-driver", "-n", ns)["status"]["phase"] == "Succeeded",
            timeout=30,
            message="the echo pod Succeeded",
        )
