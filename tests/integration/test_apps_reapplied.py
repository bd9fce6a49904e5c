"""Apps deleted and applied again at once, on a real control plane with the real operator (both
controllers, the shared ``operator`` fixture): the new SparkDriver of the same name keeps its first driver
pod. The old driver pod's removal must not take the new one with it (the devcluster's kubelet stand-in once
did: tests/integration/test_devcluster_successor.py), nor be read as the new one's loss."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from tests.support.cluster_apps import app_manifest
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
HOLD = "test.sparkop.io/hold"
APPS = [f"again{n}" for n in range(8)]


def get(cluster: ClusterHandle, namespace: str, kind: str, name: str) -> Obj | None:
    out = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found").stdout
    return json.loads(out) if out.strip() else None


def app_state(cluster: ClusterHandle, namespace: str, app: str, *states: str) -> Obj | None:
    status = (get(cluster, namespace, "sparkapplication", app) or {}).get("status") or {}
    return status if status.get("applicationState", {}).get("state") in states else None


def test_apps_deleted_and_applied_again_keep_their_first_driver_pod(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    """Each old driver pod is held Terminating by a foreign finalizer while the new SparkDriver of the same
    name waits for its names, then let go: each new SparkDriver creates its first driver pod the moment the
    old one is gone, and that pod runs to the end: no DriverPodLost, one incarnation, driverIncarnations 1.
    (Before the devcluster fix about half of such runs lost at least one of the eight first driver pods.)"""
    for app in APPS:
        crds.apply(app_manifest(app, run_seconds=60), namespace=namespace)
    old_uids = {}
    for app in APPS:
        wait_for(partial(app_state, crds, namespace, app, "RUNNING"), timeout=30, message=f"{app} RUNNING")
        driver = get(crds, namespace, "sparkdriver", f"{app}-1")
        assert driver is not None
        old_uids[app] = driver["metadata"]["uid"]
        hold = [{"op": "add", "path": "/metadata/finalizers/-", "value": HOLD}]
        crds.kubectl("patch", "pod", f"{app}-driver", "-n", namespace, "--type=json", "-p", json.dumps(hold))
    crds.kubectl("delete", "sparkapplication", *APPS, "-n", namespace, "--wait=false")
    for app in APPS:
        crds.apply(app_manifest(app, run_seconds=2), namespace=namespace)

    def replaced_and_held(app: str) -> bool:
        driver = get(crds, namespace, "sparkdriver", f"{app}-1")
        pod = get(crds, namespace, "pod", f"{app}-driver")
        held = pod is not None and pod["metadata"].get("deletionTimestamp") and pod["metadata"]["finalizers"] == [HOLD]
        return driver is not None and driver["metadata"]["uid"] != old_uids[app] and bool(held)

    wait_for(lambda: all(replaced_and_held(app) for app in APPS), timeout=60, interval=0.2,
             message="every SparkDriver replaced, every old driver pod held")  # fmt: skip
    for app in APPS:
        crds.kubectl("patch", "pod", f"{app}-driver", "-n", namespace, "--type=json",
                     "-p", json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]))  # fmt: skip
    for app in APPS:
        finished = partial(app_state, crds, namespace, app, "COMPLETED", "FAILED")
        status = wait_for(finished, timeout=60, message=f"{app} finished")
        driver = get(crds, namespace, "sparkdriver", f"{app}-1")
        assert driver is not None and driver["metadata"]["uid"] != old_uids[app]
        assert status["applicationState"]["state"] == "COMPLETED" and status["driverIncarnations"] == 1, (app, status)
        assert driver["status"]["incarnation"] == 1, (app, driver["status"])
        assert [i["outcome"] for i in driver["status"]["incarnations"]] == ["Succeeded"], (app, driver["status"])
    assert "DriverPodLost" not in operator.logs()
