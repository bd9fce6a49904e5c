"""Application metrics: each transition is observed once by decide, and recorded only after the
status write that makes it succeeded (the in-memory simulation drives the real Applier)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from sparkop.api.models import DriverPhase
from sparkop.apps_controller import transitions as at
from sparkop.apps_controller.metrics import AppCollector
from sparkop.core import kube
from sparkop.core.applier import Applier
from sparkop.core.metrics import Transitions
from sparkop.core.plan import Observation
from sparkop.driver_controller import transitions as dt
from tests.support.app_runs import BASE_SPEC, POLICIES, drive, finish
from tests.support.simulation import EPOCH, SimCluster


def sim(policy: str = "Never") -> tuple[SimCluster, Transitions]:
    c = SimCluster(spec={**BASE_SPEC, "restartPolicy": POLICIES[policy]})
    store = Transitions(at.SPECS)
    attach(c, store)
    view = c.app_view
    c.app_view = lambda: dataclasses.replace(view(), created=EPOCH - timedelta(seconds=40))  # type: ignore[method-assign]
    return c, store


def attach(c: SimCluster, store: Transitions) -> None:
    """The operator process (a new one after a crash) with its Applier recording into ``store``."""
    c._applier = Applier(c, kube.Rules(), lambda obj, what, reason: None, store.record, clock=c.clock)


def counts(store: Transitions) -> dict[str, float]:
    names = [at.COUNT, at.SUBMIT_COUNT, at.FAILED_SUBMISSION_COUNT, at.SUCCESS_COUNT, at.FAILURE_COUNT]
    found = {n: store.value(n) for n in names}
    found[at.START_LATENCY] = store.value(at.START_LATENCY)
    for after in ("Failed", "SubmissionFailed"):
        found[f"retries {after}"] = store.value(at.RETRIES, ("ns", after))
    return found


def expected(**values: float) -> dict[str, float]:
    base = {at.COUNT: 1.0, at.SUBMIT_COUNT: 1.0, at.FAILED_SUBMISSION_COUNT: 0.0, at.SUCCESS_COUNT: 0.0}
    base |= {at.FAILURE_COUNT: 0.0, at.START_LATENCY: 1.0, "retries Failed": 0.0, "retries SubmissionFailed": 0.0}
    return base | values


def test_success_is_counted_once_and_stays_counted() -> None:
    c, store = sim()
    drive(c, DriverPhase.SUCCEEDED, "Completed", max_runs=1)
    assert c.state == "COMPLETED"
    assert counts(store) == expected(**{at.SUCCESS_COUNT: 1})
    assert store.value(at.SUCCESS_EXECUTION_TIME) == 1
    for _ in range(3):  # a finished app is frozen: further passes write nothing, count nothing
        c.reconcile()
    assert counts(store) == expected(**{at.SUCCESS_COUNT: 1})


def test_on_failure_retries_count_each_run_and_one_failure() -> None:
    c, store = sim("OnFailure")
    drive(c, DriverPhase.FAILED, "Error", max_runs=3)
    assert c.state == "FAILED"
    # onFailureRetries 2: three runs, two retries, one failure in the end; one start (the first attempt)
    assert counts(store) == expected(**{at.SUBMIT_COUNT: 3, at.FAILURE_COUNT: 1, "retries Failed": 2})
    assert store.value(at.FAILURE_EXECUTION_TIME) == 1


def test_failed_submissions_and_their_retry() -> None:
    c, store = sim("OnFailure")
    drive(c, DriverPhase.SUBMISSION_FAILED, "Forbidden", max_runs=2)
    assert c.state == "FAILED"
    found = expected(**{at.SUBMIT_COUNT: 2, at.FAILED_SUBMISSION_COUNT: 2, at.FAILURE_COUNT: 1})
    assert counts(store) == found | {at.START_LATENCY: 0, "retries SubmissionFailed": 1}


def test_a_conflicting_write_records_nothing_and_the_retry_records_once() -> None:
    c, store = sim()
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    stale = c.snapshot()
    c.rv += 1  # someone else wrote the app meanwhile: the write from the stale view is refused
    plan = c.reconcile(stale)
    assert plan is not None and plan.observations  # the transition was decided...
    assert store.value(at.START_LATENCY) == 0  # ...and not recorded: its write failed
    c.run_until_quiet()
    assert c.state == "RUNNING" and store.value(at.START_LATENCY) == 1


def test_a_crash_before_the_write_counts_nothing_and_after_it_counts_once() -> None:
    c, store = sim()
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.SUCCEEDED, "Completed")
    c.reconcile(crash_after=0)  # the process dies before its status write
    assert store.value(at.SUCCESS_COUNT) == 0
    attach(c, store)
    c.run_until_quiet()
    assert c.state == "COMPLETED" and store.value(at.SUCCESS_COUNT) == 1


def test_every_observation_of_decide_belongs_to_a_status_change() -> None:
    c, _ = sim("OnFailure")
    seen: list[tuple[str, ...]] = []
    original = c.reconcile

    def reconcile(*args: Any, **kwargs: Any) -> Any:
        before = c.app_status
        plan = original(*args, **kwargs)
        if plan is not None and plan.observations:
            assert plan.status is not None and plan.status != before
            seen.append(tuple(o.metric for o in plan.observations))
        return plan

    c.reconcile = reconcile  # type: ignore[method-assign]
    drive(c, DriverPhase.FAILED, "Error", max_runs=3)
    flat = [m for metrics in seen for m in metrics]
    assert flat.count(at.COUNT) == 1 and flat.count(at.FAILURE_COUNT) == 1 and flat.count(at.SUBMIT_COUNT) == 3


def test_driver_transitions_lost_replaced_and_executor_outcomes() -> None:
    old = {"incarnation": 1, "executors": {"running": 2, "succeeded": 0, "failed": 0}}
    new = {
        "incarnation": 2,
        "incarnations": [{"incarnation": 1, "outcome": "Lost", "reason": "Evicted"}],
        "executors": {"running": 0, "succeeded": 0, "failed": 1},
    }
    metrics = [(o.metric, o.labels) for o in dt.transitions(old, new)]
    assert metrics == [
        (dt.DRIVER_PODS_LOST, (("reason", "Evicted"),)),
        (dt.DRIVER_PODS_REPLACED, ()),
        (dt.EXECUTOR_FAILURE_COUNT, ()),
    ]
    assert dt.transitions(new, new) == ()  # written again unchanged: nothing new
    ended = {**new, "executors": {"running": 0, "succeeded": 2, "failed": 1}}
    assert [o.metric for o in dt.transitions(new, ended)] == [dt.EXECUTOR_SUCCESS_COUNT] * 2
    assert dt.transitions(old, None) == ()  # nothing written


def test_exposition_uses_kubeflow_names_and_labels() -> None:
    store = Transitions(at.SPECS, label_names=["app-type"])
    body = {"metadata": {"namespace": "ns", "labels": {"app-type": "etl"}}}
    store.record(body, Observation(at.SUCCESS_COUNT))
    store.record({"metadata": {"namespace": "ns"}}, Observation(at.START_LATENCY_HISTOGRAM, 45.0))

    class NoCaches:
        indexes: dict[str, Any] = {}

    registry = CollectorRegistry()
    registry.register(AppCollector(NoCaches(), ["apps"], store))  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    assert 'spark_application_success_count{app_type="etl"} 1.0' in text.splitlines()
    assert 'spark_application_start_latency_seconds_histogram_bucket{app_type="Unknown",le="30"} 0.0' in text
    assert 'spark_application_start_latency_seconds_histogram_bucket{app_type="Unknown",le="60"} 1.0' in text
    assert "# TYPE spark_application_running_count gauge" in text
    assert "spark_application_success_count_total" not in text
