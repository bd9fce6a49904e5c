"""SparkDrivers on the devcluster with the real operator: their manifests (outcomes set by the
simulator's annotations), reading them back, waiting for a phase, their adopted executors, and the
driver-controller-only operator fixture (tests/integration/test_driver_lifecycle.py and its neighbours)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from sparkop.domain import labels, naming
from tests.support.operator import OperatorProcess

Obj = dict[str, Any]
__all__ = ["driver_manifest", "executors_owned", "get", "operator", "pods", "status", "wait_phase"]


def driver_manifest(name: str, *, run_seconds: int | None = 3, outcome: str | None = "Succeeded",
                    instances: int = 2, **spec: Any) -> Obj:  # fmt: skip
    annotations: dict[str, str] = {}
    if run_seconds is not None:
        annotations["sim.sparkop.io/run-seconds"] = str(run_seconds)
    if outcome:
        annotations["sim.sparkop.io/outcome"] = outcome
    driver = {"annotations": annotations, **spec.pop("driver", {})}
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {"name": name},
        "spec": {
            "type": "Scala",
            "sparkVersion": "3.5.7",
            "image": "apache/spark:3.5.7",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            "driver": driver,
            "executor": {"instances": instances},
            **spec,
        },
    }


def get(cluster: ClusterHandle, namespace: str, kind: str, name: str) -> Obj | None:
    result = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def status(cluster: ClusterHandle, namespace: str, name: str) -> Obj:
    obj = get(cluster, namespace, "sparkdriver", name)
    return (obj or {}).get("status") or {}


def pods(cluster: ClusterHandle, namespace: str, name: str) -> list[Obj]:
    items = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", f"{labels.DRIVER}={name}")["items"]
    return list(items)


def wait_phase(cluster: ClusterHandle, namespace: str, name: str, *phases: str, timeout: float = 30) -> Obj:
    def reached() -> Obj | None:
        st = status(cluster, namespace, name)
        return st if st.get("phase") in phases else None

    result: Obj = wait_for(reached, timeout=timeout, interval=0.1, message=f"{name} in {phases}")
    return result


def executors_owned(cluster: ClusterHandle, namespace: str, name: str, incarnation: int, count: int) -> list[Obj]:
    """The incarnation's ``count`` executors, once there: each controlled by its driver pod (Spark's
    reference) and owned by the SparkDriver (the executor template's), which keeps it through the
    driver pod's loss."""

    def owned() -> list[Obj] | None:
        execs = [
            p for p in pods(cluster, namespace, name)
            if p["metadata"]["labels"].get("spark-role") == "executor"
            and p["metadata"]["labels"].get(labels.INCARNATION) == str(incarnation)
        ]  # fmt: skip
        return execs if len(execs) == count else None

    result: list[Obj] = wait_for(owned, timeout=20, interval=0.1, message=f"{count} executors")
    for pod in result:
        refs = {(r["kind"], r["name"], bool(r.get("controller"))) for r in pod["metadata"]["ownerReferences"]}
        assert refs == {("SparkDriver", name, False), ("Pod", naming.driver_pod_name(name), True)}, refs
    return result


@pytest.fixture
def operator(crds: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    """The real operator with only the driver controller (``crds`` is the shared fixture of conftest)."""
    proc = OperatorProcess(crds.kubeconfig, controllers=["driver"], namespaces=[namespace], log_dir=tmp_path)
    with proc:
        yield proc
    print(proc.logs()[-3000:])
