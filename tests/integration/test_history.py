"""SparkHistoryServer on the test cluster (KWOK nodes, the Spark-driver simulator): Ready once its pod is,
and an app that names it before it exists waits for it, then runs with Spark's event-log properties and
links its run to the page. That Spark's own HistoryServer reads the logs real Spark writes is
tests/e2e/test_history.py's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
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
