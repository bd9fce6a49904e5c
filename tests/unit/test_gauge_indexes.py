"""The gauges of current state are filed by the caches as objects change and summed at scrape time:
a scrape decodes no object, and counts what the objects say."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from sparkop.apps_controller import metrics as app_metrics
from sparkop.core.jsontypes import JSON
from sparkop.core.resources import PODS
from sparkop.core.runtime import Runtime
from sparkop.domain.kinds import SPARK_APPLICATIONS
from sparkop.driver_controller import metrics as driver_metrics


def app(name: str, state: str, stuck: str | None = None, app_type: str | None = None) -> JSON:
    meta: dict[str, Any] = {"namespace": "ns", "name": name, "uid": name, "resourceVersion": "1"}
    if app_type:
        meta["labels"] = {"app-type": app_type}
    status: dict[str, Any] = {"applicationState": {"state": state}}
    if stuck:
        status["conditions"] = [{"type": "Stuck", "status": "True", "reason": stuck}]
    return {"metadata": meta, "status": status}


def pod(name: str, role: str, phase: str, deleting: bool = False) -> JSON:
    meta: dict[str, Any] = {"namespace": "ns", "name": name, "uid": name, "resourceVersion": "1"}
    meta["labels"] = {"spark-role": role, "sparkop.io/driver": "d", "app-type": "etl"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def exposition(runtime: Runtime) -> list[str]:
    registry = CollectorRegistry()
    for collector in runtime.collectors:
        registry.register(collector)
    return [line for line in generate_latest(registry).decode().splitlines() if not line.startswith("#")]


def test_apps_are_counted_from_the_index_as_they_change() -> None:
    runtime = Runtime(kube=SimpleNamespace(api=None))  # type: ignore[arg-type]
    runtime.collectors.append(app_metrics.collector(runtime, labels=["app-type"]))
    (informer,) = runtime.caches.informers(SPARK_APPLICATIONS)
    informer.store.replace(
        [
            app("a", "RUNNING", app_type="etl"),
            app("b", "RUNNING", app_type="etl"),
            app("c", "RUNNING"),
            app("d", "SUBMITTED", stuck="Unschedulable"),
            app("e", "FAILED", stuck="Unschedulable"),  # finished: no longer stuck
        ],
        "1",
    )
    lines = exposition(runtime)
    assert 'spark_application_running_count{app_type="etl"} 2.0' in lines
    assert 'spark_application_running_count{app_type="Unknown"} 1.0' in lines
    assert 'sparkop_applications_stuck{namespace="ns",reason="Unschedulable"} 1.0' in lines
    finished = app("a", "COMPLETED", app_type="etl")
    finished["metadata"]["resourceVersion"] = "2"
    informer.store.upsert(finished)
    assert 'spark_application_running_count{app_type="etl"} 1.0' in exposition(runtime)


def test_running_executors_are_counted_from_the_index() -> None:
    runtime = Runtime(kube=SimpleNamespace(api=None))  # type: ignore[arg-type]
    runtime.collectors.append(driver_metrics.collector(runtime, driver_metrics.EXECUTORS_INDEX))
    (informer,) = runtime.caches.informers(PODS, "sparkop.io/driver")
    informer.store.replace(
        [
            pod("e1", "executor", "Running"),
            pod("e2", "executor", "Running"),
            pod("e3", "executor", "Running", deleting=True),
            pod("e4", "executor", "Pending"),
            pod("d1", "driver", "Running"),
        ],
        "1",
    )
    assert "spark_executor_running_count 2.0" in exposition(runtime)
