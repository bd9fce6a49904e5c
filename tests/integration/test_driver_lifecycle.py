"""The driver controller on a real control plane with the real operator (``sparkop run
--controllers driver``) and the devcluster's Spark-driver simulator, which starts executors for
running driver pods from their ConfigMap and executor pod template.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from sparkop.domain import labels
from tests.support.cluster_drivers import driver_manifest, executors_owned, get, operator, pods, status, wait_phase
from tests.support.executor_counts import COUNTED_WITHIN_S, wait_running
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

# The driver runs long enough for its executors to start (the simulator's delay, as real Spark's) and run.
RUN_SECONDS = 12

Obj = dict[str, Any]
__all__ = ["operator"]  # a fixture (tests/support/cluster_drivers.py): used by name


class PodWatch:
    """Every pod ever seen in a namespace (name -> uids), so a duplicate is caught even if it was
    deleted again; and when each pod (by uid) was first seen and seen deleted, so that two pods of one
    name alive at once are caught too (kubeflow's naming gives every incarnation's driver pod one name)."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        jsonpath = '{.type} {.object.metadata.name} {.object.metadata.uid}{"\\n"}'
        self.proc = subprocess.Popen(
            [str(cluster.kubectl_binary), "--kubeconfig", str(cluster.kubeconfig), "get", "pods", "-n", namespace,
             "--watch", "--output-watch-events", "-o", f"jsonpath={jsonpath}"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.uids: dict[str, set[str]] = {}
        self.first_seen: dict[str, float] = {}
        self.added: dict[str, float] = {}  # uid -> when first seen
        self.deleted: dict[str, float] = {}  # uid -> when seen deleted
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) == 3 and parts[0] in ("ADDED", "MODIFIED"):
                self.uids.setdefault(parts[1], set()).add(parts[2])
                self.first_seen.setdefault(parts[1], time.monotonic())
                self.added.setdefault(parts[2], time.monotonic())
            elif len(parts) == 3 and parts[0] == "DELETED":
                self.deleted.setdefault(parts[2], time.monotonic())

    def in_order(self, name: str) -> list[str]:
        """The uids the pods named ``name`` had, oldest first; asserts each was seen gone before the
        next was seen at all (never two of the name at once)."""
        uids = sorted(self.uids.get(name, ()), key=lambda uid: self.added[uid])
        for earlier, later in itertools.pairwise(uids):
            assert earlier in self.deleted and self.deleted[earlier] <= self.added[later], (name, earlier, later)
        return uids

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


@pytest.fixture
def pods_watch(crds: ClusterHandle, namespace: str) -> Iterator[PodWatch]:
    watch = PodWatch(crds, namespace)
    time.sleep(0.3)
    yield watch
    watch.stop()


MONITORING = {
    "exposeDriverMetrics": True,
    "exposeExecutorMetrics": True,
    "prometheus": {"jmxExporterJar": "/prometheus/jmx_prometheus_javaagent.jar"},
}


def mounts_metrics_config(pod: Obj, config_map: str) -> bool:
    """The pod mounts ``config_map`` at /etc/metrics/conf in its Spark container and exposes the exporter port."""
    volumes = {
        v["name"] for v in pod["spec"].get("volumes", []) if (v.get("configMap") or {}).get("name") == config_map
    }
    spark = next(c for c in pod["spec"]["containers"] if c["name"].startswith("spark-kubernetes-"))
    mounted = any(m["name"] in volumes and m["mountPath"] == "/etc/metrics/conf" for m in spark.get("volumeMounts", []))
    return mounted and any(p.get("name") == "jmx-exporter" for p in spark.get("ports", []))


def test_runs_to_success_and_is_never_recreated(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess, pods_watch: PodWatch
) -> None:
    # Long enough for its executors to start (a moment after the driver runs) and be counted.
    crds.apply(driver_manifest("pi", run_seconds=RUN_SECONDS, monitoring=MONITORING), namespace)
    running = wait_phase(crds, namespace, "pi", "Running")
    assert running["incarnation"] == 1 and running["driverPod"]["name"] == "pi-driver"
    execs = executors_owned(crds, namespace, "pi", 1, 2)
    # The metrics ConfigMap of the incarnation exists and is mounted into the driver and the executors.
    metrics = get(crds, namespace, "configmap", "pi-1-prom-conf")
    assert metrics is not None and set(metrics["data"]) == {"metrics.properties", "prometheus.yaml"}
    assert metrics["metadata"]["labels"][labels.INCARNATION] == "1"
    assert [r["kind"] for r in metrics["metadata"]["ownerReferences"]] == ["SparkDriver"]
    driver_pod = get(crds, namespace, "pod", "pi-driver")
    assert driver_pod is not None and mounts_metrics_config(driver_pod, "pi-1-prom-conf")
    assert driver_pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert all(mounts_metrics_config(e, "pi-1-prom-conf") for e in execs)
    # Counted within seconds of their Running (domain.status_waits).
    wait_running(crds, namespace, f"{labels.DRIVER}=pi,spark-role=executor", 2)
    wait_for(lambda: status(crds, namespace, "pi").get("executors", {}).get("running") == 2,
             timeout=COUNTED_WITHIN_S, message="executor counts")  # fmt: skip
    done = wait_phase(crds, namespace, "pi", "Succeeded", timeout=RUN_SECONDS + 15)
    assert done["termination"]["exitCode"] == 0
    assert done["termination"]["finishedAt"]
    assert done["completionTime"] and done["startTime"]
    assert done["driverPod"]["phase"] == "Succeeded"
    assert done["sparkApplicationId"].startswith("spark-")
    assert [r["outcome"] for r in done["incarnations"]] == ["Succeeded"]
    assert done["incarnations"][0]["logTail"]  # the end of its log (here why the simulator's has none)
    # The finalizer is released once the outcome is recorded.
    wait_for(lambda: not (get(crds, namespace, "pod", "pi-driver") or {}).get("metadata", {}).get("finalizers"),
             timeout=10, message="finalizer released")  # fmt: skip
    time.sleep(3)
    drivers = [n for n in pods_watch.uids if n.endswith("-driver")]
    assert drivers == ["pi-driver"], drivers
    assert all(len(uids) == 1 for uids in pods_watch.uids.values())
    assert status(crds, namespace, "pi")["phase"] == "Succeeded"
    events = crds.kubectl_json("get", "events", "-n", namespace, "--field-selector", "involvedObject.name=pi")
    reasons = {e["reason"] for e in events["items"]}
    assert {"DriverPodCreated", "DriverSucceeded"} <= reasons


def test_an_operator_that_keeps_no_log_tails_records_the_outcome_without_reading_a_log(
    crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    """``--driver-log-tail-lines 0`` (a platform that grants no pods/log): the outcome is recorded, with no
    log tail, and the operator's own log shows no read; the pod is let go as with a tail."""
    proc = OperatorProcess(
        crds.kubeconfig,
        controllers=["driver"],
        namespaces=[namespace],
        log_dir=tmp_path,
        extra_args=["--driver-log-tail-lines", "0"],
    )
    with proc:
        crds.apply(driver_manifest("quiet", run_seconds=1, outcome="Failed", instances=1), namespace)
        done = wait_phase(crds, namespace, "quiet", "Failed", timeout=30)
        (record,) = done["incarnations"]
        assert record["outcome"] == "Failed" and "logTail" not in record, record
        wait_for(lambda: not (get(crds, namespace, "pod", "quiet-driver") or {}).get("metadata", {}).get("finalizers"),
                 timeout=10, message="finalizer released")  # fmt: skip
        assert "quiet-driver" in proc.logs() and "read the log tail" not in proc.logs()


def test_a_deleted_driver_pod_is_replaced_by_the_next_incarnation_under_its_name_once_it_is_gone(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess, pods_watch: PodWatch
) -> None:
    crds.apply(driver_manifest("long", run_seconds=None, outcome=None, monitoring=MONITORING), namespace)
    wait_phase(crds, namespace, "long", "Running")
    old_execs = executors_owned(crds, namespace, "long", 1, 2)
    started = time.monotonic()
    crds.kubectl("delete", "pod", "long-driver", "-n", namespace, "--wait=false")
    # As soon as its outcome is recorded and it is gone: from its deletion event, with no requeue delay
    # (how fast is bench/bench_driver_latency.py --replace's figure).
    wait_for(lambda: len(pods_watch.uids.get("long-driver", ())) == 2, timeout=30, interval=0.02,
             message="incarnation 2")  # fmt: skip
    _first, second = pods_watch.in_order("long-driver")  # never two of the name at once
    print(f"driver pod deleted -> new incarnation's pod: {(pods_watch.added[second] - started) * 1000:.0f} ms")

    # The new pod can be seen before the status write that records it (the pod is created first): wait
    # for the status of incarnation 2, not for any Running.
    def second_running() -> Obj | None:
        current = status(crds, namespace, "long")
        return current if current.get("incarnation") == 2 and current.get("phase") == "Running" else None

    st: Obj = wait_for(second_running, timeout=30, interval=0.1, message="incarnation 2 Running")
    assert st["incarnation"] == 2 and st["driverPod"]["uid"] == second
    assert [(r["incarnation"], r["outcome"], r["reason"]) for r in st["incarnations"]] == [(1, "Lost", "Deleted")]
    assert st["incarnations"][0]["podName"] == "long-driver" and st["incarnations"][0]["logTail"]
    executors_owned(crds, namespace, "long", 2, 2)
    old = {p["metadata"]["name"] for p in old_execs}
    wait_for(lambda: not old & {p["metadata"]["name"] for p in pods(crds, namespace, "long")}, timeout=10,
             message="old executors gone")  # fmt: skip
    assert get(crds, namespace, "configmap", "long-2-prom-conf") is not None
    # Stale incarnation's ConfigMaps and Service are removed.
    wait_for(lambda: get(crds, namespace, "configmap", "long-1-conf-map") is None
             and get(crds, namespace, "configmap", "long-1-prom-conf") is None
             and get(crds, namespace, "service", "long-1-driver-svc") is None, timeout=10,
             message="stale objects gone")  # fmt: skip


def test_lost_beyond_replacements_fails(crds: ClusterHandle, namespace: str, operator: OperatorProcess) -> None:
    crds.apply(driver_manifest("fragile", run_seconds=None, outcome=None, maxDriverPodReplacements=0), namespace)
    wait_phase(crds, namespace, "fragile", "Running")
    lost = (get(crds, namespace, "pod", "fragile-driver") or {})["metadata"]["uid"]
    crds.kubectl("delete", "pod", "fragile-driver", "-n", namespace, "--wait=false")
    st = wait_phase(crds, namespace, "fragile", "Failed", timeout=10)
    assert st["termination"]["reason"] == "DriverPodLost"
    time.sleep(1)
    assert (get(crds, namespace, "pod", "fragile-driver") or {}).get("metadata", {}).get("uid", lost) == lost


def test_refused_driver_pod_is_submission_failed(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    crds.apply(driver_manifest("nosa", driver={"serviceAccount": "does-not-exist"}), namespace)
    st = wait_phase(crds, namespace, "nosa", "SubmissionFailed", timeout=15)
    assert st["lastError"]["message"]
    assert st["incarnations"][-1]["outcome"] == "SubmissionFailed"


def test_stuck_image_pull_is_a_condition(crds: ClusterHandle, namespace: str, operator: OperatorProcess) -> None:
    manifest = driver_manifest("stuck", run_seconds=None, outcome=None)
    manifest["spec"]["driver"]["annotations"]["sim.sparkop.io/waiting-reason"] = "ImagePullBackOff"

    crds.apply(manifest, namespace)

    def stuck() -> Obj | None:
        st = status(crds, namespace, "stuck")
        cond = [c for c in st.get("conditions") or () if c["type"] == "Stuck" and c["status"] == "True"]
        return st if cond and cond[0]["reason"] == "ImagePullBackOff" else None

    st = wait_for(stuck, timeout=15, message="Stuck condition")
    assert st["phase"] == "Pending"


def test_operator_killed_at_each_step(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess, pods_watch: PodWatch
) -> None:
    crds.apply(driver_manifest("tough", run_seconds=None, outcome=None), namespace)
    operator.kill()  # maybe before, maybe after the first create
    operator.start()
    wait_phase(crds, namespace, "tough", "Running")
    executors_owned(crds, namespace, "tough", 1, 2)
    operator.kill()
    crds.kubectl("delete", "pod", "tough-driver", "-n", namespace, "--wait=false")
    time.sleep(1)
    operator.start()
    st = wait_phase(crds, namespace, "tough", "Running", timeout=30)
    wait_for(lambda: status(crds, namespace, "tough").get("incarnation") == 2, timeout=15, message="incarnation 2")
    operator.kill()
    operator.start()
    executors_owned(crds, namespace, "tough", 2, 2)
    # The pod may have turned Running while no operator ran: the restarted one writes it once its caches
    # have listed (a start that takes seconds on a busy machine).
    st = wait_for(lambda: (s := status(crds, namespace, "tough")).get("phase") == "Running" and s,
                  timeout=30, message="incarnation 2 Running")  # fmt: skip
    assert st["incarnation"] == 2 and st["phase"] == "Running"
    assert [(r["incarnation"], r["outcome"]) for r in st["incarnations"]] == [(1, "Lost")]
    drivers = sorted(n for n in pods_watch.uids if n.endswith("-driver"))
    assert drivers == ["tough-driver"], drivers
    assert len(pods_watch.in_order("tough-driver")) == 2, pods_watch.uids  # one after the other
    assert all(len(uids) == 1 for name, uids in pods_watch.uids.items() if name != "tough-driver"), pods_watch.uids
    # Finish it: the outcome is recorded after one more operator kill.
    crds.kubectl("annotate", "pod", "tough-driver", "-n", namespace, "sim.sparkop.io/outcome=Succeeded")
    operator.kill()
    time.sleep(1)
    operator.start()
    done = wait_phase(crds, namespace, "tough", "Succeeded", timeout=30)
    assert done["incarnation"] == 2


def test_deleting_the_sparkdriver_removes_everything(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    crds.apply(driver_manifest("gone", run_seconds=None, outcome=None), namespace)
    wait_phase(crds, namespace, "gone", "Running")
    executors_owned(crds, namespace, "gone", 1, 2)
    crds.kubectl("delete", "sparkdriver", "gone", "-n", namespace, "--wait=false")

    def empty() -> bool:
        selector = f"{labels.DRIVER}=gone"
        left = crds.kubectl_json("get", "pods,configmaps,services", "-n", namespace, "-l", selector)["items"]
        return not left

    wait_for(empty, timeout=30, interval=0.2, message="everything garbage-collected")


def stays(read: Any, seconds: float, message: str) -> None:
    """``read()`` keeps its first value for ``seconds``: the check that nothing happens (fails at the first change)."""
    first = read()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = read()
        assert now == first, f"{message}: {first!r} became {now!r}"
        time.sleep(0.1)


def test_executors_of_the_last_incarnation_go_when_its_loss_fails_the_driver(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    """issue 9 items 6 and 2: with maxDriverPodReplacements 0, a deleted driver pod fails the SparkDriver;
    its executors, whose only owner left is the SparkDriver, are deleted by the controller (the garbage
    collector never would), the final status counts none, and the ended SparkDriver is frozen."""
    crds.apply(driver_manifest("last", run_seconds=None, outcome=None, instances=1, maxDriverPodReplacements=0),
               namespace)  # fmt: skip
    wait_phase(crds, namespace, "last", "Running")
    (executor,) = executors_owned(crds, namespace, "last", 1, 1)
    name = executor["metadata"]["name"]
    # A driver that dies without Spark's own clean-up: the simulator, standing in for Spark's stop(), finds
    # a driver's executors by their driver-pod reference; drop it, as the GC does once that pod is gone.
    only_ours = [r for r in executor["metadata"]["ownerReferences"] if r["kind"] == "SparkDriver"]
    crds.kubectl("patch", "pod", name, "-n", namespace, "--type=merge",
                 "-p", json.dumps({"metadata": {"ownerReferences": only_ours}}))  # fmt: skip
    wait_running(crds, namespace, f"{labels.DRIVER}=last,spark-role=executor", 1)
    wait_for(lambda: status(crds, namespace, "last").get("executors", {}).get("running") == 1,
             timeout=COUNTED_WITHIN_S, message="the executor counted")  # fmt: skip
    lost = (get(crds, namespace, "pod", "last-driver") or {})["metadata"]["uid"]
    crds.kubectl("delete", "pod", "last-driver", "-n", namespace, "--wait=false")
    st = wait_phase(crds, namespace, "last", "Failed", timeout=15)
    assert st["termination"]["reason"] == "DriverPodLost"
    assert st["executors"] == {"pending": 0, "running": 0, "succeeded": 0, "failed": 0, "unknown": 0}
    wait_for(lambda: get(crds, namespace, "pod", name) is None, timeout=15, interval=0.1,
             message="the last incarnation's executor deleted")  # fmt: skip
    assert f"delete Pod {name}" in operator.logs() and "DriverEnded" in operator.logs()
    # Frozen: executors deleted, finalizers released, an owned ConfigMap removed: no status write.
    crds.kubectl("delete", "configmap", "last-1-conf-map", "-n", namespace)

    def resource_version() -> str:
        return str((get(crds, namespace, "sparkdriver", "last") or {})["metadata"]["resourceVersion"])

    stays(resource_version, 3, "the ended SparkDriver's status was written again")
    assert (get(crds, namespace, "pod", "last-driver") or {}).get("metadata", {}).get("uid", lost) == lost


def test_a_foreign_object_with_a_deterministic_name_is_never_taken_for_ours(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    """issue 9 item 5: a 409 on create counts as ours only when the existing object's controller is this
    SparkDriver. A ConfigMap of the same name made by someone else: SubmissionFailed naming it, a Warning
    Event, and the ConfigMap untouched (never adopted, never overwritten)."""
    foreign = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "clash-1-conf-map"},
               "data": {"owner": "someone else"}}  # fmt: skip
    crds.apply(foreign, namespace)
    before = get(crds, namespace, "configmap", "clash-1-conf-map")
    assert before is not None
    crds.apply(driver_manifest("clash"), namespace)
    st = wait_phase(crds, namespace, "clash", "SubmissionFailed", timeout=15)
    assert "ConfigMap clash-1-conf-map already exists" in st["lastError"]["message"], st["lastError"]
    assert st["lastError"]["reason"] == "AlreadyExists"
    assert get(crds, namespace, "pod", "clash-driver") is None
    after = get(crds, namespace, "configmap", "clash-1-conf-map")
    assert after is not None and after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert not after["metadata"].get("ownerReferences")

    def warning() -> list[Obj] | None:
        events = crds.kubectl_json("get", "events", "-n", namespace, "--field-selector", "involvedObject.name=clash")
        found = [e for e in events["items"] if e["type"] == "Warning" and "clash-1-conf-map" in e["message"]]
        return found or None

    wait_for(warning, timeout=10, message="a Warning Event naming the conflicting ConfigMap")
