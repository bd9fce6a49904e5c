"""SparkHistoryServer on the test cluster (KWOK nodes, the Spark-driver simulator): Ready once its pod is,
and an app that names it before it exists waits for it, then runs with Spark's event-log properties and
links its run to the page. That Spark's own HistoryServer reads the logs real Spark writes is
tests/e2e/test_history.py's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.testing import ClusterHandle, wait_for
from sparkop.api.history import CONTAINER
from tests.support.cluster_apps import app_manifest, get, status, wait_state
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
CONTROLLERS = ("apps", "driver", "history")


def history_manifest(name: str = "hist", **spec: Any) -> Obj:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkHistoryServer",
        "metadata": {"name": name},
        "spec": {"image": "apache/spark:3.5.7", "logDirectory": {"url": "s3a://bucket/events"}, **spec},
    }


@pytest.fixture
def history_operator(crds: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    with OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, controllers=CONTROLLERS) as proc:
        yield proc


def test_an_app_waits_for_its_history_server_then_logs_there_and_links_its_run(
    crds: ClusterHandle, namespace: str, history_operator: OperatorProcess
) -> None:
    crds.apply(app_manifest("pi", historyServer={"name": "hist"}), namespace=namespace)
    waiting = wait_for(
        lambda: (
            (s := status(crds, namespace, "pi")).get("lastError", {}).get("reason") == "HistoryServerNotFound" and s
        ),
        timeout=30,
        message="pi waits for its history server",
    )
    assert waiting["lastRun"] == 0 and not get(crds, namespace, "sparkdriver", "pi-1")

    crds.apply(history_manifest(), namespace=namespace)
    server = wait_for(
        lambda: (
            ((get(crds, namespace, "sparkhistoryserver", "hist") or {}).get("status") or {}).get("state") == "Ready"
            and get(crds, namespace, "sparkhistoryserver", "hist")
        ),
        timeout=60,
        message="hist Ready",
    )
    url = f"http://hist-history.{namespace}.svc:18080"
    assert server["status"]["url"] == url and server["status"]["eventLogDirectory"] == "s3a://bucket/events"
    deployment = get(crds, namespace, "deployment", "hist-history")
    assert deployment is not None and deployment["status"].get("readyReplicas") == 1
    assert get(crds, namespace, "service", "hist-history") is not None

    done = wait_state(crds, namespace, "pi", "COMPLETED", timeout=60)
    driver = get(crds, namespace, "sparkdriver", "pi-1")
    assert driver is not None
    conf = driver["spec"]["sparkConf"]
    assert conf["spark.eventLog.enabled"] == "true" and conf["spark.eventLog.dir"] == "s3a://bucket/events"
    (record,) = done["attempts"]
    app_id = driver["status"]["sparkApplicationId"]
    assert record["sparkApplicationId"] == app_id
    assert record["historyURL"] == f"{url}/history/{app_id}/"


def test_an_app_applied_with_its_claim_and_a_server_not_ready_runs_at_once_mounting_its_log_directory(
    crds: ClusterHandle, namespace: str, history_operator: OperatorProcess
) -> None:
    """examples/history-server.yaml's shape in one apply: a claim, a server over a directory in it, an app
    logging there. The server's pod is never scheduled (a node selector no node has), so it stays
    Provisioning; the app runs to its end all the same, its driver pod mounting the directory as a
    subPath at the path spark.eventLog.dir names. On real nodes the kubelet makes that directory before
    the driver starts (tests/e2e/test_history.py, test_examples_on_chart.py); kwok has no kubelet."""
    volume = f"{namespace}-events"  # a static volume pre-bound to the claim: kwok nodes provision none
    crds.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "hostPath": {"path": f"/tmp/{volume}"},
                "claimRef": {"namespace": namespace, "name": "events"},
            },
        }
    )
    try:
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "events"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        unplaceable = {"nodeSelector": {"sparkop.io/no-such-node": "true"}, "containers": [{"name": CONTAINER}]}
        server = history_manifest(
            logDirectory={"persistentVolumeClaim": {"claimName": "events", "path": "spark-events"}},
            template={"spec": unplaceable},
        )
        app = app_manifest("pi", historyServer={"name": "hist"})
        crds.apply(yaml.safe_dump_all([claim, server, app]), namespace=namespace)

        done = wait_state(crds, namespace, "pi", "COMPLETED", timeout=90)
        assert done["executionAttempts"] == 1, done
        held = ((get(crds, namespace, "sparkhistoryserver", "hist") or {}).get("status") or {}).get("state")
        assert held == "Provisioning", held
        driver = get(crds, namespace, "sparkdriver", "pi-1")
        assert driver is not None
        assert driver["spec"]["sparkConf"]["spark.eventLog.dir"] == "file:///mnt/spark-history/spark-events"
        pod = get(crds, namespace, "pod", driver["status"]["driverPod"]["name"])
        assert pod is not None
        mounts = [m for c in pod["spec"]["containers"] for m in c.get("volumeMounts") or []]
        mount = {"name": "spark-history", "mountPath": "/mnt/spark-history/spark-events", "subPath": "spark-events"}
        assert mount in mounts, mounts
    finally:
        crds.kubectl("delete", "persistentvolume", volume, "--wait=false", check=False)
