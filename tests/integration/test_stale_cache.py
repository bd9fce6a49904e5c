"""The operator never acts on a cache older than the server: a SparkDriver deleted while the operator's
watches were cut off long enough for a 410 Gone (etcd compacted, API server restarted) leaves the cache
with the re-list, nothing is created for it afterwards, and its app goes on by its state machine."""

from __future__ import annotations

import json
import os
import re
import signal
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from tests.support.cluster_apps import app_manifest, get, wait_state
from tests.support.gap import compact_etcd_and_restart_apiserver
from tests.support.operator import OperatorProcess
from tests.support.watches import KubectlWatch

pytestmark = pytest.mark.cluster

MARKER = "watch-established"


class PodWatch(KubectlWatch):
    """Every pod of a namespace the API server announces while it runs (a ``kubectl get --watch``):
    name, uid and the uids of its owners, so a pod created and collected at once is still counted."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        self.seen: list[tuple[str, str, str, tuple[str, ...]]] = []
        template = (
            '{.type} {.object.metadata.name} {.object.metadata.uid} {.object.metadata.ownerReferences[*].uid}{"\\n"}'
        )
        super().__init__(cluster, namespace, ["pods"], template)

    def on_line(self, parts: list[str]) -> None:
        if len(parts) >= 3:
            self.seen.append((parts[0], parts[1], parts[2], tuple(parts[3:])))

    def names(self) -> set[str]:
        return {name for _, name, _, _ in self.seen}

    def owned_by(self, owner_uid: str) -> set[str]:
        """The uids of the pods seen with ``owner_uid`` among their owners."""
        return {uid for _, _, uid, owners in self.seen if owner_uid in owners}


def marker_pod(namespace: str) -> dict[str, Any]:
    """A pod that is not sparkop's (no sparkop.io/driver label): the operator never receives it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": MARKER, "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "example.com/none:1"}]},
    }


def created(cluster: ClusterHandle, manifest: dict[str, Any]) -> bool:
    result = cluster.kubectl("create", "-f", "-", input=json.dumps(manifest), check=False)
    return result.returncode == 0 or "AlreadyExists" in result.stderr


def pods_of(cluster: ClusterHandle, namespace: str, driver: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.kubectl_json(
        "get", "pods", "-n", namespace, "-l", f"sparkop.io/driver={driver}"
    )["items"]
    return items


def test_a_spark_driver_deleted_during_a_watch_gap_leaves_the_cache_and_gets_no_pod(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    if not crds.can_restart:
        pytest.skip("needs a devcluster it can restart (etcd compaction and a fresh watch cache)")
    retry = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    crds.apply(app_manifest("gap", retry, run_seconds=20), namespace=namespace)
    wait_state(crds, namespace, "gap", "RUNNING", timeout=60)
    driver = get(crds, namespace, "sparkdriver", "gap-1")
    assert driver is not None
    driver_uid = driver["metadata"]["uid"]
    wait_for(lambda: pods_of(crds, namespace, "gap-1"), timeout=30, message="gap-1's driver pod")
    existing = {p["metadata"]["uid"] for p in pods_of(crds, namespace, "gap-1")}

    assert operator.proc is not None
    os.kill(operator.proc.pid, signal.SIGSTOP)
    try:
        crds.kubectl("delete", "sparkdriver", "gap-1", "-n", namespace, "--wait=false")
        wait_for(lambda: get(crds, namespace, "sparkdriver", "gap-1") is None, timeout=30, message="gap-1 gone")
        # The garbage collector acts on its pods (the driver pod waits for the operator's finalizer).
        wait_for(
            lambda: all(p["metadata"].get("deletionTimestamp") for p in pods_of(crds, namespace, "gap-1")),
            timeout=60,
            message="gap-1's pods being deleted",
        )
        for n in range(20):  # more history the operator misses
            patch = {"metadata": {"annotations": {"test.sparkop.io/gap": str(n)}}}
            crds.kubectl("patch", "sparkapplication", "gap", "-n", namespace, "--type=merge", "-p", json.dumps(patch))
        compact_etcd_and_restart_apiserver(crds)
        watch = PodWatch(crds, namespace)
        wait_for(lambda: created(crds, marker_pod(namespace)), timeout=60, message="the API server to serve again")
        wait_for(lambda: MARKER in watch.names(), timeout=30, message="the pod watch to run")
    finally:
        os.kill(operator.proc.pid, signal.SIGCONT)
    try:
        # The watches could not resume (410): every cache re-listed, and the SparkDriver left them.
        gap = re.compile(r"watch lost continuity \(.*410.*\); re-listing")
        wait_for(lambda: gap.search(operator.logs()), timeout=60, message="a watch to find the gap")
        wait_for(lambda: "re-listing every cache" in operator.logs(), timeout=60, message="every cache to re-list")
        # The app goes on as for any vanished SparkDriver: run 1 recorded lost, run 2 runs to the end.
        final = wait_state(crds, namespace, "gap", "COMPLETED", "FAILED", timeout=120)
        assert final["applicationState"]["state"] == "COMPLETED" and final["lastRun"] == 2, final
        assert [a["run"] for a in final["attempts"]] == [1, 2], final
        wait_for(lambda: not pods_of(crds, namespace, "gap-1"), timeout=30, message="gap-1's pods to go")
    finally:
        watch.stop()
    created_after_the_delete = watch.owned_by(driver_uid) - existing
    assert created_after_the_delete == set(), watch.seen
    assert operator.alive()
    assert "Traceback" not in operator.logs()
