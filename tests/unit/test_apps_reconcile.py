"""Table and behaviour tests of the pure SparkApplication state machine (apps_controller.decide),
run against the in-memory API server of apps_controller.simulation."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from sparkop.api.models import (
    ApplicationState,
    AttemptOutcome,
    Condition,
    DriverPhase,
    SparkApplicationStatus,
    SparkDriver,
)
from sparkop.apps_controller import events
from sparkop.apps_controller import status as apps_status
from sparkop.apps_controller.decide import decide as reconcile
from sparkop.apps_controller.observed import Observed, UIConfig
from sparkop.core.plan import Create as CreateDriver
from sparkop.core.plan import Delete as DeleteApp
from sparkop.core.plan import Delete as DeleteObject
from sparkop.core.plan import Ensure as EnsureObject
from sparkop.core.specs import SpecError
from sparkop.domain import labels
from tests.support.app_runs import BASE_SPEC, POLICIES, drive, finish
from tests.support.simulation import SimCluster

# outcome name -> (final SparkDriver phase, termination reason)
OUTCOMES: dict[str, tuple[DriverPhase, str | None]] = {
    "succeeded": (DriverPhase.SUCCEEDED, "Completed"),
    "failed": (DriverPhase.FAILED, "Error"),
    "submission_failed": (DriverPhase.SUBMISSION_FAILED, "Forbidden"),
    # the driver controller replaced lost driver pods up to maxDriverPodReplacements, then gave up
    "driver_lost": (DriverPhase.FAILED, "DriverPodLost"),
}

ALWAYS_RUNS = 5  # Always never stops: we stop watching after this many runs
# (policy, outcome) -> (final state, runs, executionAttempts, submissionAttempts). Kubeflow's counting:
# every SparkDriver is a submission, counted afresh for each execution attempt; a run whose driver pod
# was accepted is an execution attempt; OnFailure retries while the count <= the policy's retries.
EXPECTED: dict[tuple[str, str], tuple[ApplicationState, int, int, int]] = {
    ("Never", "succeeded"): (ApplicationState.COMPLETED, 1, 1, 1),
    ("Never", "failed"): (ApplicationState.FAILED, 1, 1, 1),
    ("Never", "submission_failed"): (ApplicationState.FAILED, 1, 0, 1),
    ("Never", "driver_lost"): (ApplicationState.FAILED, 1, 1, 1),
    ("OnFailure", "succeeded"): (ApplicationState.COMPLETED, 1, 1, 1),
    ("OnFailure", "failed"): (ApplicationState.FAILED, 3, 3, 1),  # onFailureRetries 2: three execution attempts
    ("OnFailure", "submission_failed"): (ApplicationState.FAILED, 2, 0, 2),  # onSubmissionFailureRetries 1: two
    ("OnFailure", "driver_lost"): (ApplicationState.FAILED, 3, 3, 1),
    # Always: the newest run was just created (its driver pod not accepted yet, so the state is still the
    # one it was planned from: SUBMITTED says the pod exists); failed submissions count on
    ("Always", "succeeded"): (ApplicationState.PENDING_RERUN, ALWAYS_RUNS + 1, ALWAYS_RUNS, 1),
    ("Always", "failed"): (ApplicationState.PENDING_RERUN, ALWAYS_RUNS + 1, ALWAYS_RUNS, 1),
    ("Always", "submission_failed"): (ApplicationState.SUBMISSION_FAILED, ALWAYS_RUNS + 1, 0, ALWAYS_RUNS + 1),
    ("Always", "driver_lost"): (ApplicationState.PENDING_RERUN, ALWAYS_RUNS + 1, ALWAYS_RUNS, 1),
}


def make(policy: dict[str, Any] | None = None, **spec: Any) -> SimCluster:
    full = {**BASE_SPEC, **spec}
    if policy is not None:
        full["restartPolicy"] = policy
    return SimCluster(spec=full)


@pytest.mark.parametrize(("policy", "outcome"), list(EXPECTED))
def test_restart_policy_table(policy: str, outcome: str) -> None:
    c = make(POLICIES[policy])
    phase, reason = OUTCOMES[outcome]
    drive(c, phase, reason, max_runs=ALWAYS_RUNS)
    state, runs, executions, submissions = EXPECTED[(policy, outcome)]
    assert (c.state, len(c.created)) == (state, runs)
    status = c.app_status
    assert (status.executionAttempts, status.submissionAttempts) == (executions, submissions)
    planned = policy == "Always"  # the newest run is planned, its driver pod not accepted yet
    assert apps_status.run_planned(status) is planned
    finished = [r for r in status.attempts if apps_status.finished(r)]
    assert len(finished) == runs - (1 if planned else 0)
    assert [r.attempt for r in status.attempts if apps_status.counted(r)] == list(range(1, executions + 1))
    if state is ApplicationState.FAILED:
        assert status.terminationTime is not None and apps_status.error_message(status)
        assert reason is not None and reason in apps_status.error_message(status)
        assert status.lastError is not None and status.lastError.reason == reason
        failed = apps_status.condition(status, "Failed")
        assert failed is not None and (failed.status, failed.reason) == ("True", reason)
    if state is ApplicationState.COMPLETED:
        completed = apps_status.condition(status, "Completed")
        assert completed is not None and completed.status == "True"
    SparkApplicationStatus.model_validate(c.status)


@pytest.mark.parametrize("outcome", ["failed", "submission_failed"])
def test_retry_waits_for_the_interval(outcome: str) -> None:
    c = make(POLICIES["OnFailure"])
    phase, reason = OUTCOMES[outcome]
    interval = 3 if outcome == "failed" else 2
    drive(c, phase, reason, max_runs=3, tick=0.25)
    finished = {r.run: r.finishTime for r in c.app_status.attempts}
    for run, at in c.creates[1:]:
        before = finished[run - 1]
        assert before is not None
        waited = (at - before).total_seconds()
        assert interval <= waited < interval + 0.25 + 1e-6


def test_waiting_for_a_retry_is_a_requeue_not_a_sleep() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.FAILED, "Error")
    c.run_until_quiet()
    assert c.state == "FAILING"
    c.advance(1.25)
    plan = c.reconcile()
    assert plan is not None and plan.requeue_after == pytest.approx(1.75)
    assert plan.status.nextAttemptTime == c.app_status.terminationTime + timedelta(seconds=3)  # type: ignore[operator]


def test_kubeflow_retry_counting_on_failure_without_retries_field() -> None:
    c = make({"type": "OnFailure"})  # onFailureRetries unset: no retries (kubeflow)
    drive(c, DriverPhase.FAILED, "Error", max_runs=3)
    assert (c.state, len(c.created)) == ("FAILED", 1)


def test_the_driver_spec_is_the_run_spec_plus_attempt() -> None:
    c = make(POLICIES["OnFailure"] | {"maxDriverPodReplacements": 1}, suspend=False, timeToLiveSeconds=60)
    c.run_until_quiet()
    plan = next(p for p in [reconcile(*_fresh(make(POLICIES["Never"])))] if p)
    create = next(a for a in plan.after_status if isinstance(a, CreateDriver))
    manifest = create.manifest
    assert manifest["metadata"]["name"] == "app-1"
    assert manifest["metadata"]["labels"][labels.RUN] == "1"
    assert manifest["metadata"]["labels"][labels.APP] == "app"
    assert manifest["metadata"]["annotations"][labels.APP_GENERATION] == "1"
    assert labels.SPEC_HASH in manifest["metadata"]["annotations"]
    owner = manifest["metadata"]["ownerReferences"][0]
    assert owner["controller"] and owner["kind"] == "SparkApplication" and owner["uid"] == "app-uid"
    assert manifest["spec"]["attempt"] == 1 and manifest["spec"]["appName"] == "app"
    assert "restartPolicy" not in manifest["spec"] and "suspend" not in manifest["spec"]
    SparkDriver.model_validate(manifest)
    sim_spec = c.drivers["app-1"].spec
    assert sim_spec["maxDriverPodReplacements"] == 1 and "timeToLiveSeconds" not in sim_spec


def _fresh(c: SimCluster) -> tuple[Observed, Any]:
    obs, _ = c.observed()
    return obs, c.now


def test_crash_between_status_write_and_create_recreates_the_same_run_once() -> None:
    c = make(POLICIES["Never"])
    c.reconcile(crash_after=1)  # status written (lastRun=1, one submission), create lost
    assert c.app_status.lastRun == 1 and not c.drivers and c.app_status.submissionAttempts == 1
    c.run_until_quiet()
    assert list(c.drivers) == ["app-1"] and list(c.created) == [1]
    assert c.app_status.submissionAttempts == 1 and c.app_status.executionAttempts == 0


def test_a_run_planned_is_settled_by_its_write_and_an_adoption_is_not() -> None:
    """The pass that plans a run writes it and creates its SparkDriver: a decision on what it wrote
    plans that create again and nothing else (the simulation checks this of every settled write),
    so the shell ends the pass at the write. An adopted run's progress is the next decision's."""
    c = make(POLICIES["Never"])
    obs, _ = c.observed()
    planned = reconcile(obs, c.now)
    assert planned.settled and apps_status.state(planned.status) is ApplicationState.NEW
    assert apps_status.run_planned(planned.status)  # SUBMITTED once its driver pod is accepted
    assert [a.kind for a in planned.after_status] == ["SparkDriver"]
    c.run_until_quiet()
    c.status = {**c.status, "lastRun": 0, "attempts": []}  # an older operator's lost write
    c.rv += 1
    obs, _ = c.observed()
    adopted = reconcile(obs, c.now)
    assert any(e.reason == events.Reason.ADOPTED for e in adopted.events) and not adopted.settled


@pytest.mark.parametrize(("ttl", "settled"), [(None, True), (300, True), (0, False)])
def test_the_end_is_settled_by_its_write_unless_its_ttl_is_up(ttl: int | None, settled: bool) -> None:
    """The pass that finishes an app plans the finished app's clean-up and its TTL's requeue with the
    end, so the shell ends it at the write; an app whose TTL is up at its end is deleted by a pass of
    its own (its EXPIRED event is not the end's)."""
    c = make(POLICIES["Never"], **({} if ttl is None else {"timeToLiveSeconds": ttl}))
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.SUCCEEDED, "Completed")
    obs, _ = c.observed()
    end = reconcile(obs, c.now)
    assert apps_status.state(end.status) is ApplicationState.COMPLETED and end.settled is settled
    assert end.requeue_after == (float(ttl) if ttl else None)
    assert all(e.reason != events.Reason.EXPIRED for e in end.events)


def test_a_stale_view_cannot_write_status_nor_create() -> None:
    c = make(POLICIES["Never"])
    old = c.snapshot()
    c.run_until_quiet()
    writes = c.writes
    c.reconcile(snap=old)  # plans run 1 again from the old status: refused by resourceVersion
    assert c.writes == writes and list(c.created) == [1]


def test_a_driver_newer_than_status_is_adopted_not_duplicated() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    # a SparkDriver for run 2 exists although status says lastRun 1 (an older operator's lost write)
    c.status = {**c.status, "lastRun": 0, "attempts": []}
    c.rv += 1
    c.run_until_quiet()
    assert c.app_status.lastRun == 1 and c.app_status.currentDriver == "app-1"
    assert any(e.reason == events.Reason.ADOPTED for e in c.events)
    assert list(c.created) == [1]
    # adopted as planned (its pod not accepted yet): the state it was planned from, SUBMITTED once accepted
    assert c.state == "NEW" and apps_status.run_planned(c.app_status)
    c.set_phase("app-1", DriverPhase.PENDING)
    c.run_until_quiet()
    assert c.state == "SUBMITTED" and c.app_status.executionAttempts == 1 and list(c.created) == [1]


def test_a_driver_adopted_while_another_run_ran_is_a_planned_rerun_until_its_pod_is_accepted() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    assert c.state == "RUNNING"
    # a lost write of an older operator: status says run 1 runs, run 2's SparkDriver exists
    c.drivers["app-2"] = replace(c.drivers["app-1"], name="app-2", uid="app-2-uid", run=2, phase=None)
    c.run_until_quiet()
    status = c.app_status
    assert (status.lastRun, c.state, apps_status.run_planned(status)) == (2, "PENDING_RERUN", True)
    assert status.attempts[0].outcome is AttemptOutcome.INVALIDATED and [d.name for d in c.unfinished()] == ["app-2"]
    c.set_phase("app-2", DriverPhase.PENDING)
    c.run_until_quiet()
    assert c.state == "SUBMITTED" and c.app_status.executionAttempts == 1


def test_outcome_is_counted_once_even_when_replayed() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.FAILED, "Error")
    c.reconcile(crash_after=0)  # crash before the recording write
    c.reconcile()  # records the outcome
    counted = c.app_status.executionAttempts
    for _ in range(3):
        c.reconcile()
    assert counted == c.app_status.executionAttempts == 1
    assert c.app_status.attempts[0].outcome is AttemptOutcome.FAILED and c.app_status.attempts[0].attempt == 1


def test_driver_pod_replacement_is_not_an_application_failure() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.drivers["app-1"].incarnation = 2  # the driver controller replaced a lost driver pod
    c.run_until_quiet()
    assert c.state == "RUNNING" and c.app_status.driverIncarnations == 2
    assert c.app_status.executionAttempts == 1  # the same execution attempt
    assert [e.reason for e in c.events].count(events.Reason.DRIVER_POD_REPLACED) == 1
    c.set_phase("app-1", DriverPhase.SUCCEEDED)
    c.run_until_quiet()
    assert c.state == "COMPLETED" and len(c.created) == 1


def test_a_deleted_spark_driver_counts_as_a_failed_run() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    del c.drivers["app-1"]
    c.run_until_quiet()
    assert c.state == "FAILING"
    assert c.app_status.attempts[-1].outcome is AttemptOutcome.DELETED
    assert c.app_status.executionAttempts == 1


def test_spec_change_mid_run_reruns_exactly_once_with_reset_counters() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.FAILED, "Error")
    c.run_until_quiet()
    c.advance(3)
    c.run_until_quiet()
    c.set_phase("app-2", DriverPhase.RUNNING)
    c.run_until_quiet()
    assert c.app_status.executionAttempts == 2  # run 1 failed, run 2 runs
    c.edit_spec(arguments=["1000"])
    c.run_until_quiet()
    assert set(c.drivers) == {"app-3"} and len(c.created) == 3  # app-2 stopped, app-1 pruned
    status = c.app_status
    # run 3 is planned from PENDING_RERUN, which it keeps until its driver pod is accepted
    assert apps_status.state(status) is ApplicationState.PENDING_RERUN and status.observedGeneration == c.generation
    assert apps_status.run_planned(status)
    # counters reset; run 3 is the new spec's first submission, its driver pod not accepted yet
    assert status.executionAttempts == 0 and status.submissionAttempts == 1
    assert status.attempts[-2].outcome is AttemptOutcome.INVALIDATED
    assert c.drivers["app-3"].spec["arguments"] == ["1000"]
    reasons = [e.reason for e in c.events]
    assert reasons.count(events.Reason.INVALIDATING) == 1 and reasons[-1] == events.Reason.PENDING_RERUN
    c.set_phase("app-3", DriverPhase.PENDING)
    c.run_until_quiet()
    assert c.state == "SUBMITTED" and c.app_status.executionAttempts == 1 and len(c.created) == 3
    assert [e.reason for e in c.events][-2:] == [events.Reason.PENDING_RERUN, events.Reason.SUBMITTED]


@pytest.mark.parametrize("change", [{"timeToLiveSeconds": 30}, {"suspend": False}])
def test_changing_only_ttl_or_suspend_false_does_not_rerun(change: dict[str, Any]) -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.edit_spec(**change)
    c.run_until_quiet()
    assert c.state == "RUNNING" and list(c.created) == [1]
    assert c.app_status.observedGeneration == c.generation


def test_suspend_and_resume() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.edit_spec(suspend=True)
    c.run_until_quiet()
    assert c.state == "SUSPENDED" and not c.unfinished()
    assert c.app_status.attempts[-1].outcome is AttemptOutcome.INVALIDATED
    assert c.app_status.attempts[-1].attempt is None
    assert c.app_status.executionAttempts == 0  # a suspended run is given back
    suspended = apps_status.condition(c.app_status, "Suspended")
    assert suspended is not None and suspended.status == "True"
    assert "webUIServiceName" not in c.status.get("driverInfo", {})
    c.advance(100)
    c.run_until_quiet()
    assert c.state == "SUSPENDED" and len(c.created) == 1
    c.edit_spec(suspend=False)
    c.run_until_quiet()
    # run 2 is planned from RESUMING, which it keeps until its driver pod is accepted
    assert c.state == "RESUMING" and list(c.created) == [1, 2] and apps_status.run_planned(c.app_status)
    assert (c.app_status.executionAttempts, c.app_status.submissionAttempts) == (0, 1)
    c.set_phase("app-2", DriverPhase.PENDING)
    c.run_until_quiet()
    assert c.state == "SUBMITTED" and list(c.created) == [1, 2]
    assert (c.app_status.executionAttempts, c.app_status.submissionAttempts) == (1, 1)
    resumed = apps_status.condition(c.app_status, "Suspended")
    assert resumed is not None and (resumed.status, resumed.reason) == ("False", "Resumed")
    reasons = [e.reason for e in c.events]
    i = reasons.index(events.Reason.SUSPENDING)
    assert reasons[i:] == [
        events.Reason.SUSPENDING,
        events.Reason.SUSPENDED,
        events.Reason.RESUMING,
        events.Reason.SUBMITTED,
    ]


def test_suspend_while_waiting_for_a_retry_then_resume_runs_at_once() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.FAILED, "Error")
    c.run_until_quiet()
    c.edit_spec(suspend=True)
    c.run_until_quiet()
    assert c.state == "SUSPENDED"
    c.edit_spec(suspend=False)
    c.run_until_quiet()
    assert c.state == "RESUMING" and len(c.created) == 2 and apps_status.run_planned(c.app_status)
    assert c.app_status.executionAttempts == 1
    c.set_phase("app-2", DriverPhase.PENDING)
    c.run_until_quiet()
    assert c.state == "SUBMITTED" and len(c.created) == 2
    assert c.app_status.executionAttempts == 2


def test_ttl_deletes_a_finished_app_after_its_time() -> None:
    c = make(POLICIES["Never"], timeToLiveSeconds=30)
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.SUCCEEDED)
    c.run_until_quiet()
    assert c.state == "COMPLETED"
    c.advance(10)
    plan = c.reconcile()
    assert plan is not None and plan.requeue_after == pytest.approx(20)
    c.advance(20)
    plan = c.reconcile()
    assert plan is not None and any(isinstance(a, DeleteApp) for a in plan.after_status)
    assert c.deleted


def test_terminal_states_stay_terminal_under_spec_edits_and_suspend() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.FAILED, "Error")
    c.run_until_quiet()
    assert c.state == "FAILED"
    c.edit_spec(arguments=["x"])
    c.edit_spec(suspend=True)
    c.run_until_quiet()
    assert c.state == "FAILED" and len(c.created) == 1


def test_spark_ui_service_and_ingress_follow_the_current_driver() -> None:
    c = make(POLICIES["Always"])
    c.ui = UIConfig(ingress_url_format="{{$appName}}.{{$appNamespace}}.example.com", ingress_class_name="nginx")
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    svc = c.ui_objects[("Service", "app-ui-svc")]
    assert svc["spec"]["selector"] == {
        labels.SPARK_APP_SELECTOR: c.drivers["app-1"].view().spark_application_id,
        labels.SPARK_ROLE: "driver",
    }
    assert svc["spec"]["ports"][0]["port"] == 4040
    ingress = c.ui_objects[("Ingress", "app-ui-ingress")]
    assert ingress["spec"]["rules"][0]["host"] == "app.ns.example.com"
    assert ingress["spec"]["ingressClassName"] == "nginx"
    info = c.status["driverInfo"]
    assert info["webUIServiceName"] == "app-ui-svc" and info["webUIPort"] == 4040
    assert info["webUIAddress"] == "app-ui-svc.ns.svc:4040"
    assert info["webUIIngressAddress"] == "http://app.ns.example.com"
    # the next run's driver gets the Service
    c.set_phase("app-1", DriverPhase.SUCCEEDED)
    c.run_until_quiet()
    c.set_phase("app-2", DriverPhase.RUNNING)
    c.run_until_quiet()
    selector = c.ui_objects[("Service", "app-ui-svc")]["spec"]["selector"]
    assert selector[labels.SPARK_APP_SELECTOR] == c.drivers["app-2"].view().spark_application_id


def test_ui_objects_are_removed_when_the_app_finishes() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.SUCCEEDED)
    c.reconcile()  # SUCCEEDING
    plan = c.reconcile()  # COMPLETED
    assert plan is not None and c.state == "COMPLETED"
    assert not c.ui_objects and "webUIServiceName" not in c.status.get("driverInfo", {})
    assert not any(isinstance(a, EnsureObject | DeleteObject) for a in (c.reconcile() or plan).actions)


def test_old_finished_drivers_are_pruned_keeping_the_last_two() -> None:
    c = make(POLICIES["Always"])
    drive(c, DriverPhase.SUCCEEDED, None, max_runs=4)
    assert sorted(c.drivers) == ["app-4", "app-5"]


def test_an_app_being_deleted_is_left_to_the_garbage_collector() -> None:
    c = make(POLICIES["Never"])
    obs, _ = c.observed()
    deleting = Observed(obs.app.__class__(**{**obs.app.__dict__, "deleting": True}), obs.status, obs.drivers, obs.ui)
    plan = reconcile(deleting, c.now)
    assert not plan.actions and plan.status == obs.status


def test_invalid_spec_fails_without_a_driver() -> None:
    c = make(POLICIES["Never"])
    obs, _ = c.observed()
    bad = Observed(obs.app.__class__(**{**obs.app.__dict__, "spec_error": SpecError("spec.type: bad")}), obs.status)
    plan = reconcile(bad, c.now)
    assert apps_status.state(plan.status) is ApplicationState.FAILED and not plan.after_status
    assert events.Reason.INVALID_SPEC in [e.reason for e in plan.events]


def test_unknown_spec_fields_wait_for_an_operator_that_knows_them() -> None:
    """A newer CRD's field, applied before the operator that reads it: no driver, no failure, one
    Warning; the same spec then waits quietly; read by an operator that knows the field, it runs."""
    c = make(POLICIES["Never"])
    obs, _ = c.observed()
    unknown = SpecError("spec.upgradeNote: Extra inputs are not permitted", ("spec.upgradeNote",))
    newer = obs.app.__class__(**{**obs.app.__dict__, "spec_error": unknown})
    first = reconcile(Observed(newer, obs.status), c.now)
    assert apps_status.state(first.status) is ApplicationState.NEW and not first.after_status
    assert first.status.lastError is not None and first.status.lastError.reason == events.Reason.UNKNOWN_SPEC_FIELDS
    assert "spec.upgradeNote" in apps_status.error_message(first.status)
    assert [(e.type, e.reason) for e in first.events] == [("Warning", events.Reason.UNKNOWN_SPEC_FIELDS)]
    assert apps_status.condition(first.status, "Failed") is None
    again = reconcile(Observed(newer, first.status), c.now + timedelta(minutes=5))
    assert again.status == first.status and again.events == () and not again.after_status
    known = reconcile(Observed(obs.app, first.status), c.now + timedelta(minutes=6))
    # its run planned: NEW until the run's driver pod is accepted
    assert apps_status.state(known.status) is ApplicationState.NEW and known.after_status
    assert apps_status.run_planned(known.status) and known.status.lastRun == 1
    assert not apps_status.error_message(known.status)


def test_status_round_trips_through_json_and_the_api_model() -> None:
    c = make(POLICIES["OnFailure"], timeToLiveSeconds=5)
    drive(c, DriverPhase.FAILED, "Error", max_runs=5)
    assert apps_status.read_status(c.status).to_json() == c.status
    SparkApplicationStatus.model_validate(c.status)


# -- counting attempts (kubeflow's semantics) ------------------------------------------------------


def test_a_run_is_an_execution_attempt_once_its_driver_pod_is_accepted() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    status = c.app_status
    # the SparkDriver exists, no driver pod yet: still NEW (kubeflow's SUBMITTED says the pod exists)
    assert apps_status.state(status) is ApplicationState.NEW and apps_status.run_planned(status)
    assert (status.executionAttempts, status.submissionAttempts) == (0, 1)
    assert events.Reason.SUBMITTED not in [e.reason for e in c.events]
    submitted = apps_status.condition(status, "Submitted")
    assert submitted is not None and (submitted.status, submitted.reason) == ("False", "Submitting")
    c.set_phase("app-1", DriverPhase.PENDING)  # the driver controller created the driver pod
    c.run_until_quiet()
    status = c.app_status
    assert apps_status.state(status) is ApplicationState.SUBMITTED and status.executionAttempts == 1
    assert [e.reason for e in c.events].count(events.Reason.SUBMITTED) == 1
    assert status.attempts[0].attempt == 1 and status.attempts[0].outcome is AttemptOutcome.RUNNING
    submitted = apps_status.condition(status, "Submitted")
    assert submitted is not None and submitted.status == "True"
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    status = c.app_status
    assert apps_status.state(status) is ApplicationState.RUNNING and status.executionAttempts == 1  # ATTEMPTS 1
    running = apps_status.condition(status, "Running")
    assert running is not None and (running.status, running.reason) == ("True", "DriverRunning")
    c.set_phase("app-1", DriverPhase.SUCCEEDED, "Completed")
    c.run_until_quiet()
    assert c.state == "COMPLETED" and c.app_status.executionAttempts == 1


def test_a_run_seen_only_when_finished_is_counted_once_with_its_outcome() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.set_phase("app-1", DriverPhase.FAILED, "Error", 1)  # too fast to be seen running
    c.run_until_quiet()
    assert c.state == "FAILING" and c.app_status.executionAttempts == 1
    assert c.app_status.attempts[0].attempt == 1


@pytest.mark.parametrize("crash_after", [0, 1, 2])
def test_counting_at_acceptance_is_exactly_once_across_crashes(crash_after: int) -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.reconcile(crash_after=crash_after)  # 0: before the counting write; 1+: after it
    for _ in range(3):
        c.reconcile()
    assert c.app_status.executionAttempts == 1 and c.app_status.attempts[0].attempt == 1


def test_a_failed_submission_is_not_an_execution_attempt() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.SUBMISSION_FAILED, "SubmissionFailed")
    c.run_until_quiet()
    status = c.app_status
    assert apps_status.state(status) is ApplicationState.SUBMISSION_FAILED
    assert (status.executionAttempts, status.submissionAttempts) == (0, 1)
    assert status.attempts[0].attempt is None


def test_a_refused_replacement_driver_pod_fails_the_run_not_the_submission() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.drivers["app-1"].incarnation = 2  # the first pod was lost; its replacement is refused
    c.set_phase("app-1", DriverPhase.SUBMISSION_FAILED, "SubmissionFailed")
    c.run_until_quiet()
    status = c.app_status
    assert c.state == "FAILED" and status.attempts[0].outcome is AttemptOutcome.FAILED
    assert (status.executionAttempts, status.submissionAttempts) == (1, 1)


def test_on_failure_retries_count_execution_attempts_not_failed_submissions() -> None:
    """onFailureRetries 1, onSubmissionFailureRetries 1: run 1 fails; run 2's submission fails and is
    retried as run 3, which fails too: two execution attempts, FAILED."""
    policy = {**POLICIES["OnFailure"], "onFailureRetries": 1}
    c = make(policy)
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.FAILED, "Error")
    c.run_until_quiet()
    c.advance(3)
    c.run_until_quiet()
    assert c.app_status.submissionAttempts == 1  # a new execution attempt counts submissions afresh
    c.set_phase("app-2", DriverPhase.SUBMISSION_FAILED, "SubmissionFailed")
    c.run_until_quiet()
    assert c.state == "SUBMISSION_FAILED"
    c.advance(2)
    c.run_until_quiet()
    assert c.app_status.submissionAttempts == 2 and c.app_status.executionAttempts == 1
    finish(c, "app-3", DriverPhase.FAILED, "Error")
    c.run_until_quiet()
    c.advance(10)
    c.run_until_quiet()
    status = c.app_status
    assert c.state == "FAILED" and len(c.created) == 3
    assert (status.executionAttempts, status.submissionAttempts) == (2, 2)
    assert [r.attempt for r in status.attempts] == [1, None, 2]


def test_suspending_a_running_app_gives_its_attempt_back() -> None:
    c = make({**POLICIES["OnFailure"], "onFailureRetries": 0})  # one execution attempt
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    assert c.app_status.executionAttempts == 1
    c.edit_spec(suspend=True)
    c.run_until_quiet()
    assert c.app_status.executionAttempts == 0
    c.edit_spec(suspend=False)
    c.run_until_quiet()
    finish(c, "app-2", DriverPhase.FAILED, "Error")
    c.run_until_quiet()
    status = c.app_status
    assert c.state == "FAILED" and status.executionAttempts == 1  # within onFailureRetries 0
    assert [r.attempt for r in status.attempts] == [None, 1]


# -- a SparkDriver create the API server refuses ---------------------------------------------------


def test_a_refused_spark_driver_is_a_failed_submission_with_the_servers_message() -> None:
    c = make(POLICIES["OnFailure"])  # onSubmissionFailureRetries 1, interval 2
    c.refuse_drivers = True
    c.run_until_quiet()
    status = c.app_status
    assert c.state == "SUBMISSION_FAILED" and not c.drivers and not c.created
    assert (status.executionAttempts, status.submissionAttempts) == (0, 1)
    assert apps_status.error_message(status) is not None and "exceeded quota" in apps_status.error_message(status)
    assert status.lastError is not None and status.lastError.reason == events.Reason.DRIVER_REFUSED
    assert status.lastError.message is not None and "exceeded quota" in status.lastError.message
    submitted = apps_status.condition(status, "Submitted")
    assert submitted is not None and (submitted.status, submitted.reason) == ("False", "SubmissionFailed")
    assert events.Reason.SUBMISSION_FAILED in [e.reason for e in c.events]
    c.advance(2)
    c.run_until_quiet()
    status = c.app_status
    assert c.state == "FAILED" and status.submissionAttempts == 2 and status.lastRun == 2
    failed = apps_status.condition(status, "Failed")
    assert failed is not None and failed.reason == events.Reason.DRIVER_REFUSED
    SparkApplicationStatus.model_validate(c.status)


def test_a_refusal_lifted_before_the_retry_lets_the_next_run_through() -> None:
    c = make(POLICIES["OnFailure"])
    c.refuse_drivers = True
    c.run_until_quiet()
    c.refuse_drivers = False  # the quota was raised
    c.advance(2)
    c.run_until_quiet()
    c.set_phase("app-2", DriverPhase.RUNNING)
    c.run_until_quiet()
    status = c.app_status
    assert c.state == "RUNNING" and list(c.created) == [2]
    assert (status.executionAttempts, status.submissionAttempts) == (1, 2)


def test_a_refusal_forgotten_in_a_crash_is_learned_again_without_counting_twice() -> None:
    c = make(POLICIES["Never"])
    c.refuse_drivers = True
    c.reconcile()  # plans run 1, the create is refused and remembered
    assert c.refusals and c.state == "NEW" and apps_status.run_planned(c.app_status)
    c.reconcile(crash_after=0)  # the operator dies: what it learned is gone
    assert not c.refusals
    c.run_until_quiet()  # the create is tried again, refused again, recorded
    status = c.app_status
    assert c.state == "FAILED" and status.submissionAttempts == 1 and not c.created


# -- conditions and lastError -----------------------------------------------------------------------


def test_conditions_follow_the_app_and_move_their_time_only_on_a_status_change() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.PENDING)
    c.run_until_quiet()
    first = apps_status.condition(c.app_status, "Running")
    assert first is not None and (first.status, first.reason) == ("False", "Submitted")
    c.advance(5)
    c.drivers["app-1"].stuck = Condition(
        type="Stuck",
        status="True",
        reason="ImagePullBackOff",
        message="Back-off pulling image",
        lastTransitionTime=c.now,
    )
    c.run_until_quiet()
    stuck = apps_status.condition(c.app_status, "Stuck")
    assert stuck is not None and (stuck.status, stuck.reason) == ("True", "ImagePullBackOff")
    assert stuck.message == "Back-off pulling image" and stuck.lastTransitionTime == c.now
    running = apps_status.condition(c.app_status, "Running")
    assert running == first  # nothing about it changed
    c.advance(5)
    c.drivers["app-1"].stuck = Condition(type="Stuck", status="False", reason="Progressing", lastTransitionTime=c.now)
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    running = apps_status.condition(c.app_status, "Running")
    assert running is not None and running.status == "True" and running.lastTransitionTime == c.now
    stuck = apps_status.condition(c.app_status, "Stuck")
    assert stuck is not None and stuck.status == "False"
    c.advance(5)
    c.set_phase("app-1", DriverPhase.SUCCEEDED, "Completed")
    c.run_until_quiet()
    status = c.app_status
    assert [x.type for x in status.conditions] == ["Submitted", "Running", "Completed"]  # no Stuck
    assert all(x.observedGeneration == 1 for x in status.conditions)
    writes = c.writes
    c.advance(60)
    c.run_until_quiet()
    assert c.writes == writes  # no status churn


def test_last_error_is_set_on_every_failure_and_kept_after_a_success() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.FAILED, "OOMKilled")
    c.run_until_quiet()
    error = c.app_status.lastError
    assert error is not None and error.reason == "OOMKilled" and error.time == c.app_status.terminationTime
    assert error.message is not None and "run 1 (app-1) failed" in error.message
    c.advance(3)
    c.run_until_quiet()
    c.set_phase("app-2", DriverPhase.RUNNING)
    del c.drivers["app-2"]  # somebody deletes the running SparkDriver
    c.run_until_quiet()
    error = c.app_status.lastError
    assert error is not None and error.reason == events.Reason.DRIVER_LOST
    c.advance(3)
    c.run_until_quiet()
    finish(c, "app-3", DriverPhase.SUCCEEDED, "Completed")
    c.run_until_quiet()
    assert c.state == "COMPLETED" and c.app_status.lastError == error  # the last error, kept
    assert apps_status.error_message(c.app_status) is None


def test_a_spec_change_clears_last_error() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.FAILED, "Error")
    c.run_until_quiet()
    assert c.app_status.lastError is not None
    c.edit_spec(arguments=["2"])
    c.run_until_quiet()
    assert c.app_status.lastError is None and c.state == "PENDING_RERUN" and apps_status.run_planned(c.app_status)


def test_invalid_spec_sets_last_error_and_the_failed_condition() -> None:
    c = make(POLICIES["Never"])
    obs, _ = c.observed()
    bad = Observed(obs.app.__class__(**{**obs.app.__dict__, "spec_error": SpecError("spec.type: bad")}), obs.status)
    status = reconcile(bad, c.now).status
    assert status.lastError is not None and status.lastError.reason == events.Reason.INVALID_SPEC
    failed = apps_status.condition(status, "Failed")
    assert failed is not None and (failed.status, failed.reason) == ("True", events.Reason.INVALID_SPEC)


def test_the_current_drivers_queued_condition_is_the_apps_while_its_run_is_active() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.PENDING)
    waits = "PodGroup app-1-pg is Pending: 1/1 tasks in gang unschedulable"
    c.drivers["app-1"].queued = Condition(
        type="Queued", status="True", reason="NotEnoughResources", message=waits, lastTransitionTime=c.now
    )
    c.run_until_quiet()
    queued = apps_status.condition(c.app_status, "Queued")
    assert queued is not None and (queued.status, queued.reason, queued.message) == (
        "True",
        "NotEnoughResources",
        waits,
    )
    assert queued.lastTransitionTime == c.now
    c.advance(5)
    c.drivers["app-1"].queued = Condition(type="Queued", status="False", reason="Scheduled", lastTransitionTime=c.now)
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    queued = apps_status.condition(c.app_status, "Queued")
    assert queued is not None and (queued.status, queued.reason) == ("False", "Scheduled")
    assert queued.lastTransitionTime == c.now
    c.set_phase("app-1", DriverPhase.SUCCEEDED, "Completed")
    c.run_until_quiet()
    assert [x.type for x in c.app_status.conditions] == ["Submitted", "Running", "Completed"]  # no Queued
