"""The driver controller in a namespace being deleted: a driver pod going with its namespace is not a
lost pod. Nothing is created, no status is written, no event posted; only our finalizers are released,
or they would hold the namespace's deletion up."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sparkop.domain import labels
from sparkop.driver_controller.decide import decide
from sparkop.driver_controller.observed import Observed
from sparkop.driver_controller.render import parse, render
from sparkop.driver_controller.summaries import summarize_pod
from tests.support.patches import patched

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
UID = "0b4c3d9e-0000-4000-8000-000000000002"


def driver(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {"name": "pi", "namespace": "ns", "uid": UID, "generation": 1, "resourceVersion": "10"},
        "spec": {
            "type": "Scala",
            "image": "apache/spark:3.5.7",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///x.jar",
        },
        "status": status,
    }


def driver_pod(deleting: bool) -> dict[str, Any]:
    pod = render(parse(driver({})), 1).pod
    meta = {**pod["metadata"], "uid": "pod-1", "resourceVersion": "5"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:59:30Z"
    return {**pod, "metadata": meta, "status": {"phase": "Running"}}


RUNNING = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}


def test_a_driver_pod_going_with_its_namespace_is_not_replaced() -> None:
    for pods in ([], [driver_pod(deleting=True)]):
        plan = decide(Observed.of(driver(RUNNING), [summarize_pod(p) for p in pods], namespace_terminating=True), NOW)
        assert (plan.creates, plan.status, plan.events, plan.deletes) == ((), None, (), ())
        for patch, pod in zip(plan.patches, pods, strict=True):  # only our finalizer goes
            assert labels.DRIVER_OUTCOME_FINALIZER not in patched(pod, patch)["metadata"].get("finalizers", [])
    pod = summarize_pod(driver_pod(deleting=True))
    assert labels.DRIVER_OUTCOME_FINALIZER in pod.finalizers
    assert decide(Observed.of(driver(RUNNING), [pod], namespace_terminating=True), NOW).patches
    # the same observation in a live namespace starts a replacement incarnation
    lost = decide(Observed.of(driver(RUNNING), []), NOW)
    assert lost.creates and lost.status is not None and lost.status.incarnation == 2
