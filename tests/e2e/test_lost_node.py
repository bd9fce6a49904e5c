"""A real node lost under a running real driver (issue 29): its kubelet, containerd and every container
SIGKILLed at once, as when a machine dies. Kubernetes turns the node NotReady, taints it unreachable and,
once the driver pod's toleration of that taint (spec.nodeLossTolerationSeconds) runs out, deletes the
pod; only then does sparkop start the driver's next incarnation, which runs on the other node and
completes the run (attempts 1, incarnations 2). When the node comes back its kubelet finishes the old
pods' deletion: nothing of the first incarnation is left.

The timeline is printed (pytest -s, or the report of a failure) and written to SPARKOP_E2E_RESULTS.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.testing import RealNodeClusters, wait_for
from sparkop.domain import labels
from tests.support.spark_e2e import OLDEST_VERSION, STAGES_JOB, SparkNamespace, long_job, spark_versions

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

TOLERATION_S = 10
# Kubernetes' --node-monitor-grace-period (50 s since 1.32): a kubelet silent this long turns its Node
# NotReady. Then the taint, then the toleration; the controller manager's passes add a few seconds.
NODE_MONITOR_GRACE_S = 50
EVICTION_BOUND_S = NODE_MONITOR_GRACE_S + TOLERATION_S + 60
RUN_S = 300.0
UNREACHABLE = "node.kubernetes.io/unreachable"


def _node(spark: SparkNamespace, name: str) -> dict[str, Any]:
    node: dict[str, Any] = spark.cluster.kubectl_json("get", "node", name)
    return node


def _not_ready(node: dict[str, Any]) -> bool:
    ready = [c for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
    return bool(ready) and ready[0]["status"] != "True"


def _tainted(node: dict[str, Any]) -> bool:
    return any(t["key"] == UNREACHABLE and t["effect"] == "NoExecute" for t in node["spec"].get("taints") or [])


def _server_time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _disrupted_at(pod: dict[str, Any]) -> tuple[str, datetime] | None:
    for condition in pod["status"].get("conditions", []):
        if condition["type"] == "DisruptionTarget" and condition["status"] == "True":
            return condition.get("reason", ""), _server_time(condition["lastTransitionTime"])
    return None


@pytest.fixture
def node_restorer(real_node_clusters: RealNodeClusters) -> Iterator[list[str]]:
    """Names appended here are started again after the test, before its namespace goes (the kubelet must
    confirm the old pods' deletion); if one cannot come back the shared cluster is stopped, so the next
    test gets a whole one."""
    killed: list[str] = []
    yield killed
    handle = real_node_clusters.get()
    assert isinstance(handle.cluster, Cluster)
    for name in killed:
        try:
            handle.cluster.start_node(name)
        except Exception:
            real_node_clusters.stop()
            raise


@pytest.mark.parametrize("version", spark_versions(ci=(OLDEST_VERSION,)))
def test_a_driver_on_a_lost_node_is_replaced_on_the_other_once_kubernetes_evicts_it(
    spark: SparkNamespace, node_restorer: list[str], version: str
) -> None:
    cluster = spark.cluster.cluster
    assert isinstance(cluster, Cluster) and len(cluster.real_nodes) >= 2, "two real nodes"
    spark.jobs({"stages.py": STAGES_JOB})
    executors = spark.watch(f"{labels.SPARK_ROLE}={labels.ROLE_EXECUTOR}")
    drivers = spark.watch(f"{labels.SPARK_ROLE}={labels.ROLE_DRIVER}")
    spark.apply(long_job("node-lost", version, nodeLossTolerationSeconds=TOLERATION_S))
    app = spark.wait_app("node-lost", ["RUNNING"], timeout=RUN_S)
    driver_name = app["status"]["currentDriver"]
    spark.wait_pod(lambda: spark.executors_of(executors, driver_name, 2), RUN_S, "two running executors")
    first = spark.get("sparkdriver", driver_name)["status"]["driverPod"]
    first_pod = spark.get("pod", first["name"])
    lost_node = first_pod["spec"]["nodeName"]
    tolerated = {t["key"]: t.get("tolerationSeconds") for t in first_pod["spec"]["tolerations"]}
    assert tolerated[UNREACHABLE] == TOLERATION_S, first_pod["spec"]["tolerations"]
    assert "stages result" not in spark.logs(first["name"]), "the job ended before its node could be lost"

    killed_at = time.monotonic()
    node_restorer.append(lost_node)
    cluster.kill_node(lost_node)
    timeline: dict[str, float] = {}

    def mark(event: str, reached: Any) -> Any:
        timeline[event] = round(time.monotonic() - killed_at, 1)
        return reached

    wait_for(lambda: _not_ready(_node(spark, lost_node)), timeout=EVICTION_BOUND_S, interval=1.0, message="NotReady")
    mark("node NotReady", True)
    wait_for(lambda: _tainted(_node(spark, lost_node)), timeout=EVICTION_BOUND_S, interval=1.0, message="the taint")
    mark("unreachable taint", True)

    def evicted() -> dict[str, Any] | None:
        # Followed by uid through the watch: its successor takes the same name (<app>-driver) as soon as
        # sparkop has recorded the loss and removed it, which can fall between two reads by name.
        for _, _, pod in drivers.events():
            if pod["metadata"]["uid"] == first["uid"] and pod["metadata"].get("deletionTimestamp"):
                return pod
        return None

    old = mark("driver pod evicted", wait_for(evicted, timeout=EVICTION_BOUND_S, interval=1.0, message="eviction"))
    disrupted = _disrupted_at(old)
    assert disrupted is not None and disrupted[0] == "DeletionByTaintManager", old["status"]

    def replacement() -> dict[str, Any] | None:
        # The same name (kubeflow's <app>-driver), a new pod: created once the lost one was removed.
        pod = (spark.get("sparkdriver", driver_name)["status"] or {}).get("driverPod") or {}
        return pod if pod.get("uid") != first["uid"] and pod.get("phase") == "Running" else None

    second = mark("replacement Running", spark.wait_pod(replacement, RUN_S, "the replacement driver running"))
    app = mark("COMPLETED", spark.wait_app("node-lost", ["COMPLETED"], timeout=RUN_S))

    status = app["status"]
    assert status["executionAttempts"] == 1 and len(status["attempts"]) == 1
    assert status["driverIncarnations"] == 2
    driver = spark.get("sparkdriver", driver_name)
    incarnations = driver["status"]["incarnations"]
    assert [i["outcome"] for i in incarnations] == ["Lost", "Succeeded"]
    assert incarnations[0]["reason"] == "DeletionByTaintManager", incarnations[0]
    # Its log went with its node: said so, not waited for.
    assert incarnations[0]["logTail"] == f"(unavailable: its node {lost_node} is lost)", incarnations[0]
    assert second["name"] == first["name"]
    assert second["nodeName"] != lost_node
    assert "stages result" in spark.driver_log("node-lost")
    # Never a second driver before Kubernetes gave the first up: created after the eviction.
    second_pod = spark.get("pod", second["name"])
    assert _server_time(second_pod["metadata"]["creationTimestamp"]) >= disrupted[1].replace(microsecond=0)

    node_restorer.remove(lost_node)
    cluster.start_node(lost_node)
    mark("node Ready again", True)

    def first_incarnation_gone() -> bool:
        left = spark.pods(f"{labels.DRIVER}={driver_name},{labels.INCARNATION}=1")
        return not left

    wait_for(first_incarnation_gone, timeout=RUN_S, interval=1.0, message="the first incarnation's pods gone")
    mark("first incarnation's pods gone", True)
    lost_executors = [p.name for p in executors.snapshot().values() if p.pod["spec"].get("nodeName") == lost_node]
    print(f"\nlost node {lost_node} (toleration {TOLERATION_S} s), seconds after the kill: {json.dumps(timeline)}")
    print(f"executors that were on it: {lost_executors}")
    results = os.environ.get("SPARKOP_E2E_RESULTS")
    if results:
        with Path(results).open("a") as out:
            out.write(json.dumps({"test": "lost-node timeline", "timeline": timeline}) + "\n")
