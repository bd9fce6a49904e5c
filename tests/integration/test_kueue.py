"""sparkop under the real Kueue (issue 26): `python -m devcluster up --schedulers kueue` runs Kueue's
controller manager (v0.17, built from its Go module) with its CRDs and webhooks, and sparkop is the job
controller Kueue's contract asks for (driver_controller.kueue, docs/kueue-contract.md).

* Quota for one app: a ClusterQueue of 3 CPUs, two apps of 3 CPUs (driver + 2 executors) applied
  together. One Workload is admitted and its app runs on the flavor's nodes (node selector and
  toleration from the ResourceFlavor); the other waits whole (no pod at all, its Workload's
  QuotaReserved False with Kueue's reason, the app's Queued condition saying it) and runs once the first
  has ended and marked its Workload Finished. Both COMPLETED, one attempt each.
* Preemption: a higher WorkloadPriorityClass's app evicts a running lower one: the lower's driver pod
  and executors are stopped, its quota handed back (Requeued True, reason Preempted), the higher runs
  and completes, then the lower is admitted again and completes in a second incarnation of the same
  run (executionAttempts 1, queueEvictions 1).

The cluster is this module's own (a kwok node of 8 CPUs, the simulated drivers); the Workloads' conditions,
as Kueue and sparkop wrote them, are the evidence.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from devcluster.components import FAKE_NODE_LABEL
from devcluster.testing import ClusterHandle, wait_for
from sparkop.domain import labels, naming
from tests.support import gangs
from tests.support.cluster_apps import app_manifest, get, status, wait_state
from tests.support.operator import OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.needs_build("kueue")]

Obj = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
WORKLOADS = "workloads.v1beta2.kueue.x-k8s.io"
QUEUE = "spark"
TOLERATION = {"key": "sparkop.io/batch", "operator": "Exists", "effect": "NoSchedule"}
KUEUE_FINALIZER = "kueue.x-k8s.io/resource-in-use"


gang_cluster, namespace, operator = gangs.fixtures("kueue", node_cpu=8)


@dataclass(frozen=True)
class Queue:
    flavor: str
    cluster_queue: str


@pytest.fixture
def queue(gang_cluster: ClusterHandle, namespace: str) -> Iterator[Queue]:
    """A ResourceFlavor of the kwok nodes (with a toleration, to see it put on the pods), a ClusterQueue
    of 3 CPUs that preempts lower priorities within itself, a LocalQueue in the namespace, and two
    WorkloadPriorityClasses."""
    names = Queue(f"flavor-{namespace}", f"cq-{namespace}")
    key, value = FAKE_NODE_LABEL
    objects: list[Obj] = [
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": names.flavor},
            "spec": {"nodeLabels": {key: value}, "tolerations": [TOLERATION]},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": names.cluster_queue},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": names.flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "3"},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": f"low-{namespace}"}, "value": 100},
        {
            "apiVersion": KUEUE,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": f"high-{namespace}"},
            "value": 1000,
        },
    ]
    for obj in objects:
        gang_cluster.apply(obj)
    local = {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": QUEUE},
        "spec": {"clusterQueue": names.cluster_queue},
    }
    gang_cluster.apply(local, namespace)

    def active() -> bool:
        found = get(gang_cluster, namespace, "localqueues.v1beta2.kueue.x-k8s.io", QUEUE) or {}
        return any(
            c["type"] == "Active" and c["status"] == "True" for c in found.get("status", {}).get("conditions") or ()
        )

    wait_for(active, timeout=60, interval=0.2, message=f"LocalQueue {QUEUE} Active")
    yield names


def queued_app(name: str, run_seconds: float, priority_class: str | None = None) -> Obj:
    """A simulated app of 3 CPUs (driver and 2 executors of 1 each) in the LocalQueue."""
    manifest = app_manifest(name, run_seconds=run_seconds, executor={"instances": 2, "cores": 1, "memory": "512m"})
    manifest["metadata"]["labels"] = {labels.KUEUE_QUEUE_NAME: QUEUE}
    if priority_class:
        manifest["metadata"]["labels"][labels.KUEUE_PRIORITY_CLASS] = priority_class
    return manifest


def workload_of(cluster: ClusterHandle, namespace: str, app: str) -> Obj:
    found = get(cluster, namespace, WORKLOADS, naming.workload_name(naming.driver_name(app, 1)))
    assert found is not None, f"no Workload for {app}"
    return found


def condition(obj: Obj, kind: str) -> Obj:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == kind), {})


def summary(wl: Obj) -> list[tuple[str, str, str, str]]:
    """A Workload's conditions, for the log: type, status, reason, since."""
    return [(c["type"], c["status"], c["reason"], c["lastTransitionTime"]) for c in wl["status"]["conditions"]]


def pods_of(cluster: ClusterHandle, namespace: str, app: str) -> list[Obj]:
    return list(cluster.kubectl_json("get", "pods", "-n", namespace, "-l", f"{labels.APP}={app}")["items"])


def role(pod: Obj) -> str:
    return str(pod["metadata"]["labels"].get(labels.SPARK_ROLE, ""))


def running_with_executors(cluster: ClusterHandle, namespace: str, app: str, executors: int) -> bool:
    state = status(cluster, namespace, app).get("applicationState", {}).get("state")
    executors_running = [
        p for p in pods_of(cluster, namespace, app)
        if role(p) == labels.ROLE_EXECUTOR and p["status"].get("phase") == "Running"
    ]  # fmt: skip
    return state == "RUNNING" and len(executors_running) == executors


def test_two_apps_that_do_not_fit_the_quota_run_one_after_the_other(
    gang_cluster: ClusterHandle, namespace: str, queue: Queue, operator: OperatorProcess
) -> None:
    started = time.monotonic()
    for name in ("batch-a", "batch-b"):
        gang_cluster.apply(queued_app(name, run_seconds=8), namespace)

    def one_running() -> str | None:
        running = [n for n in ("batch-a", "batch-b") if running_with_executors(gang_cluster, namespace, n, 2)]
        return running[0] if len(running) == 1 else None

    first = wait_for(one_running, timeout=120, interval=0.2, message="one app running with its 2 executors")
    second = "batch-b" if first == "batch-a" else "batch-a"
    print(f"\n{first} running {time.monotonic() - started:.1f}s after the apply")
    # The first runs where its flavor says.
    driver_pod = next(p for p in pods_of(gang_cluster, namespace, first) if role(p) == labels.ROLE_DRIVER)
    assert driver_pod["spec"]["nodeSelector"][FAKE_NODE_LABEL[0]] == FAKE_NODE_LABEL[1], driver_pod["spec"]
    assert TOLERATION in driver_pod["spec"]["tolerations"], driver_pod["spec"]["tolerations"]
    # The second waits whole: not a pod, its Workload not admitted (Kueue says why), and the app says it.
    assert pods_of(gang_cluster, namespace, second) == []
    waiting = workload_of(gang_cluster, namespace, second)
    reserved = condition(waiting, "QuotaReserved")
    assert (reserved.get("status"), reserved.get("reason")) == ("False", "Pending"), waiting["status"]
    assert "insufficient unused quota for cpu" in reserved["message"], reserved

    def says_queued() -> Obj | None:
        found = condition({"status": status(gang_cluster, namespace, second)}, "Queued")
        return found if found.get("status") == "True" else None

    queued = wait_for(says_queued, timeout=30, interval=0.2, message=f"{second}'s Queued condition")
    assert queued["reason"] == "Pending" and "insufficient unused quota" in queued["message"], queued
    print(f"{second} waits: {queued['message']!r}")
    # Its run is planned (SparkDriver created, one submission) but no driver pod exists: still NEW, as
    # kubeflow's SUBMITTED says the pod exists, and written as kubeflow's NEW, no state: Airflow's
    # SparkKubernetesOperator waits while there is none, and would read the absent pod on a "NEW".
    waiting_status = status(gang_cluster, namespace, second)
    assert "applicationState" not in waiting_status, waiting_status
    assert (waiting_status["lastRun"], waiting_status["submissionAttempts"]) == (1, 1), waiting_status
    assert waiting_status.get("executionAttempts", 0) == 0, waiting_status

    finals = {n: wait_state(gang_cluster, namespace, n, "COMPLETED", "FAILED", timeout=180) for n in (first, second)}
    print(f"both ended {time.monotonic() - started:.1f}s after the apply")
    assert {n: s["applicationState"]["state"] for n, s in finals.items()} == {first: "COMPLETED", second: "COMPLETED"}
    assert all(s["executionAttempts"] == 1 for s in finals.values()), finals
    workloads = {n: workload_of(gang_cluster, namespace, n) for n in (first, second)}
    for name, wl in workloads.items():
        finished = condition(wl, "Finished")
        assert (finished.get("status"), finished.get("reason")) == ("True", "Succeeded"), wl["status"]
        assert KUEUE_FINALIZER not in (wl["metadata"].get("finalizers") or ()), wl["metadata"]
        print(f"{name}: {summary(wl)}")
    # The second was admitted only once the first's Workload was Finished, which freed the quota.
    admitted = condition(workloads[second], "Admitted")["lastTransitionTime"]
    assert admitted >= condition(workloads[first], "Finished")["lastTransitionTime"], workloads


def test_a_higher_priority_app_preempts_a_lower_one_which_completes_after_it(
    gang_cluster: ClusterHandle, namespace: str, queue: Queue, operator: OperatorProcess
) -> None:
    gang_cluster.apply(queued_app("low", run_seconds=20, priority_class=f"low-{namespace}"), namespace)
    wait_for(lambda: running_with_executors(gang_cluster, namespace, "low", 2), timeout=120, interval=0.2,
             message="low running with its executors")  # fmt: skip
    low_pod = naming.driver_pod_name("low")
    applied = time.monotonic()
    # 8 s: its executors start a moment after its driver runs (as real Spark's), and are seen running.
    gang_cluster.apply(queued_app("high", run_seconds=8, priority_class=f"high-{namespace}"), namespace)
    wait_for(lambda: running_with_executors(gang_cluster, namespace, "high", 2), timeout=120, interval=0.2,
             message="high running with its executors")  # fmt: skip
    print(f"\nhigh running {time.monotonic() - applied:.1f}s after its apply (low preempted)")
    # The low one was stopped whole (none of its first incarnation's pods is left) and its quota handed back.
    assert not [p for p in pods_of(gang_cluster, namespace, "low") if p["metadata"]["name"] == low_pod]
    low_wl = workload_of(gang_cluster, namespace, "low")
    for kind in ("Evicted", "Requeued"):
        found = condition(low_wl, kind)
        assert (found.get("status"), found.get("reason")) == ("True", "Preempted"), low_wl["status"]
    assert not low_wl["status"].get("admission"), low_wl["status"]
    low_queued = condition({"status": status(gang_cluster, namespace, "low")}, "Queued")
    assert (low_queued.get("status"), low_queued.get("reason")) == ("True", "KueuePreempted"), low_queued

    finals = {n: wait_state(gang_cluster, namespace, n, "COMPLETED", "FAILED", timeout=180) for n in ("high", "low")}
    print(f"both ended {time.monotonic() - applied:.1f}s after high's apply")
    assert {n: s["applicationState"]["state"] for n, s in finals.items()} == {"high": "COMPLETED", "low": "COMPLETED"}
    assert finals["low"]["executionAttempts"] == 1 and finals["high"]["executionAttempts"] == 1, finals
    low_driver = get(gang_cluster, namespace, "sparkdriver", naming.driver_name("low", 1)) or {}
    driver_status = low_driver.get("status") or {}
    assert driver_status.get("queueEvictions") == 1 and driver_status.get("incarnation") == 2, driver_status
    stopped = driver_status["incarnations"][0]
    assert (stopped["incarnation"], stopped["outcome"], stopped["reason"]) == (1, "Lost", "KueuePreempted"), stopped
    # Admitted again once the high one finished: Kueue turned its eviction False.
    low_wl = workload_of(gang_cluster, namespace, "low")
    assert condition(low_wl, "Evicted")["status"] == "False" and condition(low_wl, "Finished")["status"] == "True"
    high_finished = condition(workload_of(gang_cluster, namespace, "high"), "Finished")["lastTransitionTime"]
    assert condition(low_wl, "Admitted")["lastTransitionTime"] >= high_finished, low_wl["status"]
    print(f"low: {summary(low_wl)}")
