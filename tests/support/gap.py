"""A watch gap a client cannot resume from: etcd forgets the history (compaction) and the API server's
watch cache starts over (restart), so every watch from before is answered 410 Gone."""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from typing import Any

from devcluster.testing import ClusterHandle, temporary_namespace, wait_for

# client-go's reflector backs off before re-listing after a 410: 800ms doubling per failure, capped at
# 30s, jittered up to x2, and reset only after 2 minutes without a failure. Each gap costs every
# reflector at least two steps (connection refused during the restart, then 410), so a few gaps in a
# row leave them a minute or more away from their re-list.
RECOVERY_TIMEOUT_S = 180.0


def compact_etcd_and_restart_apiserver(cluster: ClusterHandle) -> int:
    """Compact etcd up to its current revision, restart the API server, wait until the cluster's own
    clients serve again (`wait_until_cluster_clients_recovered`); returns the compacted revision.

    Call it from the thread that lives as long as the cluster: the processes a devcluster starts die
    with the thread that started them."""
    assert cluster.cluster is not None
    url = f"http://127.0.0.1:{cluster.cluster.ports.etcd_client}"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            result: dict[str, Any] = json.load(response)
            return result

    revision = int(post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    post("/v3/kv/compaction", {"revision": revision, "physical": True})
    cluster.restart_apiserver()
    wait_until_cluster_clients_recovered(cluster)
    return revision


def wait_until_cluster_clients_recovered(cluster: ClusterHandle, timeout: float = RECOVERY_TIMEOUT_S) -> float:
    """Wait until the controllers, the scheduler, kwok and the Spark-driver simulator act on new objects
    again after a watch gap; returns the seconds it took.

    Why: after the gap every watch of kube-controller-manager, kube-scheduler and kwok ends in 410 Gone,
    and client-go's reflector waits out its exponential backoff (see RECOVERY_TIMEOUT_S) before it
    re-lists. Until then that informer is blind: measured after the third gap in a row, a new namespace
    got its `default` ServiceAccount only after 50-64s (kube-controller-manager -v=4: `Watch closed ...
    too old resource version`, then `Listing and watching` *v1.Namespace 40-52s later). Every later test
    on the session's cluster would wait on that (the `namespace` fixture gives up after 30s), so a test
    that makes a gap leaves the cluster serving before it goes on. Each step proves live informers:

    * a new namespace gets its `default` ServiceAccount: the namespace and serviceaccount controllers;
    * a Spark driver pod owned by a ConfigMap runs and gets an executor that runs: the scheduler, kwok,
      the simulator;
    * deleting the ConfigMap collects the driver pod and its executor: the garbage collector's
      ConfigMap and Pod monitors, kwok's deletion.
    """
    started = time.monotonic()

    def remaining() -> float:
        return max(1.0, timeout - (time.monotonic() - started))

    with temporary_namespace(cluster, prefix="recovered", timeout=remaining()) as namespace:
        owner = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": namespace}}
        cluster.apply(owner)
        owner_uid = cluster.kubectl_json("get", "configmap", "owner", "-n", namespace)["metadata"]["uid"]
        driver = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "probe-driver",
                "namespace": namespace,
                "labels": {"spark-role": "driver"},
                "annotations": {"sim.sparkop.io/executors": "1"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}],
            },
            "spec": {"containers": [{"name": "spark-kubernetes-driver", "image": "example.com/none:1"}]},
        }
        cluster.apply(driver)

        def running(role: str) -> bool:
            pods = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", f"spark-role={role}")["items"]
            return any(pod.get("status", {}).get("phase") == "Running" for pod in pods)

        wait_for(lambda: running("driver"), timeout=remaining(), message="a new pod to run after the watch gap")
        wait_for(lambda: running("executor"), timeout=remaining(), message="the simulator to start an executor")
        cluster.kubectl("delete", "configmap", "owner", "-n", namespace, "--wait=false")
        wait_for(
            lambda: not cluster.kubectl_json("get", "pods", "-n", namespace)["items"],
            timeout=remaining(),
            message="the garbage collector to collect the pods of a deleted owner",
        )
    return time.monotonic() - started
