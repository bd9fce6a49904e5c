"""SparkApplications on the devcluster with the real operator: their manifests (outcomes set by the
simulator's annotations), reading them back, waiting for a state, and a watch of every SparkDriver
created, to tell a run created twice (tests/integration/test_apps_lifecycle.py and its neighbours)."""

from __future__ import annotations

import copy
import json
from typing import Any

from devcluster.testing import ClusterHandle, wait_for
from tests.support.watches import CreationWatch

Obj = dict[str, Any]


class DriverWatch(CreationWatch):
    """Every SparkDriver ever created in the namespace."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        super().__init__(cluster, namespace, "sparkdrivers")


def app_manifest(
    name: str,
    policy: Obj | None = None,
    *,
    outcome: str = "Succeeded",
    run_seconds: float = 1,
    service_account: str | None = None,
    **spec: Any,
) -> Obj:
    driver: Obj = {
        "cores": 1,
        "memory": "512m",
        "annotations": {
            "sim.sparkop.io/outcome": outcome,
            "sim.sparkop.io/run-seconds": str(run_seconds),
            **({"sim.sparkop.io/exit-code": "1"} if outcome == "Failed" else {}),
        },
    }
    if service_account:
        driver["serviceAccount"] = service_account
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Scala",
            "image": "apache/spark:3.5.7",
            "sparkVersion": "3.5.7",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples_2.12-3.5.7.jar",
            "restartPolicy": policy or {"type": "Never"},
            "driver": driver,
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
            **spec,
        },
    }


def get(cluster: ClusterHandle, namespace: str, kind: str, name: str) -> Obj | None:
    out = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found").stdout
    return json.loads(out) if out.strip() else None


# kubeflow's SparkApplications, as kubectl names them beside sparkop's (`sparkop run --kubeflow-api`).
KUBEFLOW_APPS = "sparkapplications.sparkoperator.k8s.io"
KUBEFLOW_API = "sparkoperator.k8s.io/v1beta2"


def kubeflow(app: dict[str, Any]) -> dict[str, Any]:
    """The same manifest in kubeflow's group, as a kubeflow user has it."""
    out = copy.deepcopy(app)
    out["apiVersion"] = KUBEFLOW_API
    return out


def status(cluster: ClusterHandle, namespace: str, name: str, resource: str = "sparkapplication") -> Obj:
    app = get(cluster, namespace, resource, name)
    return (app or {}).get("status") or {}


def wait_state(
    cluster: ClusterHandle,
    namespace: str,
    name: str,
    *wanted: str,
    timeout: float = 60,
    resource: str = "sparkapplication",
) -> Obj:
    def reached() -> Obj | None:
        s = status(cluster, namespace, name, resource)
        return s if s.get("applicationState", {}).get("state") in wanted else None

    result: Obj = wait_for(reached, timeout=timeout, interval=0.2, message=f"{name} in {wanted}")
    return result


def assert_no_duplicates(watch: DriverWatch, app: str, runs: int) -> None:
    created = watch.created(app)
    assert sorted(created) == sorted(f"{app}-{n}" for n in range(1, runs + 1)), created
    assert all(len(uids) == 1 for uids in created.values()), created
