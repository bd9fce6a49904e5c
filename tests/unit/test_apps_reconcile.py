"""Table and behaviour tests of the pure SparkApplication state machine (apps_controller.reconcile),
run against the in-memory API server of apps_controller.simulation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from api.models import SparkApplicationStatus, SparkDriver
from apps_controller import events
from apps_controller.model import AppStatus, DriverPhase, Observed, Outcome, State, UIConfig
from apps_controller.reconcile import CreateDriver, DeleteApp, DeleteObject, EnsureObject, reconcile
from apps_controller.simulation import SimCluster
from sparkop import labels

BASE_SPEC: dict[str, Any] = {
    "type": "Scala",
    "sparkVersion": "3.5.3",
    "image": "spark:3.5.3",
    "mainClass": "org.apache.spark.examples.SparkPi",
    "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
    "driver": {"cores": 1, "memory": "512m", "annotations": {"sim.sparkop.io/run-seconds": "1"}},
    "executor": {"instances": 1, "cores": 1, "memory": "512m"},
}

POLICIES: dict[str, dict[str, Any]] = {
    "Never": {"type": "Never"},
    "OnFailure": {
        "type": "OnFailure",
        "onFailureRetries": 2,
        "onFailureRetryInterval": 3,
        "onSubmissionFailureRetries": 1,
        "onSubmissionFailureRetryInterval": 2,
    },
    "Always": {"type": "Always", "onFailureRetryInterval": 3, "onSubmissionFailureRetryInterval": 2},
}

# outcome name -> (final SparkDriver phase, termination reason)
OUTCOMES: dict[str, tuple[DriverPhase, str | None]] = {
    "succeeded": (DriverPhase.SUCCEEDED, "Completed"),
    "failed": (DriverPhase.FAILED, "Error"),
    "submission_failed": (DriverPhase.SUBMISSION_FAILED, "Forbidden"),
    # the driver controller replaced lost driver pods up to maxDriverPodReplacements, then gave up
    "driver_lost": (DriverPhase.FAILED, "DriverPodLost"),
}

ALWAYS_RUNS = 5  # Always never stops: we stop watching after this many runs
# (policy, outcome) -> (final state, runs)
EXPECTED: dict[tuple[str, str], tuple[State, int]] = {
    ("Never", "succeeded"): (State.COMPLETED, 1),
    ("Never", "failed"): (State.FAILED, 1),
    ("Never", "submission_failed"): (State.FAILED, 1),
    ("Never", "driver_lost"): (State.FAILED, 1),
    ("OnFailure", "succeeded"): (State.COMPLETED, 1),
    ("OnFailure", "failed"): (State.FAILED, 3),  # onFailureRetries 2: three runs
    ("OnFailure", "submission_failed"): (State.FAILED, 2),  # onSubmissionFailureRetries 1: two
    ("OnFailure", "driver_lost"): (State.FAILED, 3),
    ("Always", "succeeded"): (State.SUBMITTED, ALWAYS_RUNS + 1),
    ("Always", "failed"): (State.SUBMITTED, ALWAYS_RUNS + 1),
    ("Always", "submission_failed"): (State.SUBMITTED, ALWAYS_RUNS + 1),
    ("Always", "driver_lost"): (State.SUBMITTED, ALWAYS_RUNS + 1),
}


def make(policy: dict[str, Any] | None = None, **spec: Any) -> SimCluster:
    full = {**BASE_SPEC, **spec}
    if policy is not None:
        full["restartPolicy"] = policy
    return SimCluster(spec=full)


def live(c: SimCluster) -> str:
    (name,) = (d.name for d in c.unfinished())
    return name


def finish(c: SimCluster, name: str, phase: DriverPhase, reason: str | None = None) -> None:
    if phase is not DriverPhase.SUBMISSION_FAILED:
        c.set_phase(name, DriverPhase.RUNNING)
        c.run_until_quiet()
    c.set_phase(name, phase, reason, None if phase is not DriverPhase.FAILED else 1)


def drive(c: SimCluster, phase: DriverPhase, reason: str | None, max_runs: int, tick: float = 0.25) -> None:
    """Every run ends with ``phase``; time moves in ``tick`` steps while waiting for the next run."""
    c.run_until_quiet()
    for _ in range(200):
        if len(c.created) > max_runs or c.state in ("COMPLETED", "FAILED"):
            return
        if c.unfinished():
            finish(c, live(c), phase, reason)
        c.run_until_quiet()
        if not c.unfinished():
            c.advance(tick)
    raise AssertionError("did not settle")


@pytest.mark.parametrize(("policy", "outcome"), list(EXPECTED))
def test_restart_policy_table(policy: str, outcome: str) -> None:
    c = make(POLICIES[policy])
    phase, reason = OUTCOMES[outcome]
    drive(c, phase, reason, max_runs=ALWAYS_RUNS)
    state, runs = EXPECTED[(policy, outcome)]
    assert (c.state, len(c.created)) == (state, runs)
    status = c.app_status
    counted = [r for r in status.attempts if r.finished]
    assert len(counted) == runs - (1 if state is State.SUBMITTED else 0)
    if outcome == "submission_failed":
        assert status.submission_attempts == len(counted) and status.execution_attempts == 0
    else:
        assert status.execution_attempts == len(counted) and status.submission_attempts == 0
    if state is State.FAILED:
        assert status.termination_time is not None and status.error_message
        assert reason is not None and reason in status.error_message
    SparkApplicationStatus.model_validate(c.status)


@pytest.mark.parametrize("outcome", ["failed", "submission_failed"])
def test_retry_waits_for_the_interval(outcome: str) -> None:
    c = make(POLICIES["OnFailure"])
    phase, reason = OUTCOMES[outcome]
    interval = 3 if outcome == "failed" else 2
    drive(c, phase, reason, max_runs=3, tick=0.25)
    finished = {r.run: r.finish_time for r in c.app_status.attempts}
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
    assert plan.status.next_attempt_time == c.app_status.termination_time + timedelta(seconds=3)  # type: ignore[operator]


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
    c.reconcile(crash_after=1)  # status written (lastRun=1), create lost
    assert c.app_status.last_run == 1 and not c.drivers
    c.run_until_quiet()
    assert list(c.drivers) == ["app-1"] and list(c.created) == [1]
    assert c.app_status.submission_attempts == 0 and c.app_status.execution_attempts == 0


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
    assert c.app_status.last_run == 1 and c.app_status.current_driver == "app-1"
    assert any(e.reason == events.ADOPTED for e in c.events)
    assert list(c.created) == [1]


def test_outcome_is_counted_once_even_when_replayed() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.FAILED, "Error")
    c.reconcile(crash_after=0)  # crash before the counting write
    c.reconcile()  # counts
    counted = c.app_status.execution_attempts
    for _ in range(3):
        c.reconcile()
    assert counted == c.app_status.execution_attempts == 1


def test_driver_pod_replacement_is_not_an_application_failure() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.drivers["app-1"].incarnation = 2  # the driver controller replaced a lost driver pod
    c.run_until_quiet()
    assert c.state == "RUNNING" and c.app_status.driver_incarnations == 2
    assert c.app_status.execution_attempts == 0
    assert [e.reason for e in c.events].count(events.DRIVER_POD_REPLACED) == 1
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
    assert c.app_status.attempts[-1].outcome is Outcome.DELETED
    assert c.app_status.execution_attempts == 1


def test_spec_change_mid_run_reruns_exactly_once_with_reset_counters() -> None:
    c = make(POLICIES["OnFailure"])
    c.run_until_quiet()
    finish(c, "app-1", DriverPhase.FAILED, "Error")
    c.run_until_quiet()
    c.advance(3)
    c.run_until_quiet()
    c.set_phase("app-2", DriverPhase.RUNNING)
    c.run_until_quiet()
    assert c.app_status.execution_attempts == 1
    c.edit_spec(arguments=["1000"])
    c.run_until_quiet()
    assert set(c.drivers) == {"app-3"} and len(c.created) == 3  # app-2 stopped, app-1 pruned
    status = c.app_status
    assert status.state is State.SUBMITTED and status.observed_generation == c.generation
    assert status.execution_attempts == 0 and status.submission_attempts == 0
    assert status.attempts[-2].outcome is Outcome.INVALIDATED
    assert c.drivers["app-3"].spec["arguments"] == ["1000"]
    reasons = [e.reason for e in c.events]
    assert reasons.count(events.INVALIDATING) == 1 and reasons[-2:] == [events.PENDING_RERUN, events.SUBMITTED]


@pytest.mark.parametrize("change", [{"timeToLiveSeconds": 30}, {"suspend": False}])
def test_changing_only_ttl_or_suspend_false_does_not_rerun(change: dict[str, Any]) -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.edit_spec(**change)
    c.run_until_quiet()
    assert c.state == "RUNNING" and list(c.created) == [1]
    assert c.app_status.observed_generation == c.generation


def test_suspend_and_resume() -> None:
    c = make(POLICIES["Never"])
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.edit_spec(suspend=True)
    c.run_until_quiet()
    assert c.state == "SUSPENDED" and not c.unfinished()
    assert c.app_status.attempts[-1].outcome is Outcome.INVALIDATED
    assert c.app_status.execution_attempts == 0  # a suspended run is not counted
    assert "webUIServiceName" not in c.status.get("driverInfo", {})
    c.advance(100)
    c.run_until_quiet()
    assert c.state == "SUSPENDED" and len(c.created) == 1
    c.edit_spec(suspend=False)
    c.run_until_quiet()
    assert c.state == "SUBMITTED" and list(c.created) == [1, 2]
    reasons = [e.reason for e in c.events]
    i = reasons.index(events.SUSPENDING)
    assert reasons[i:] == [
        events.SUSPENDING,
        events.SUSPENDED,
        events.RESUMING,
        events.SUBMITTED,
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
    assert c.state == "SUBMITTED" and len(c.created) == 2
    assert c.app_status.execution_attempts == 1


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
    bad = Observed(obs.app.__class__(**{**obs.app.__dict__, "spec_error": "spec.type: bad"}), obs.status)
    plan = reconcile(bad, c.now)
    assert plan.status.state is State.FAILED and not plan.after_status
    assert events.INVALID_SPEC in [e.reason for e in plan.events]


def test_status_round_trips_through_json_and_the_api_model() -> None:
    c = make(POLICIES["OnFailure"], timeToLiveSeconds=5)
    drive(c, DriverPhase.FAILED, "Error", max_runs=5)
    assert AppStatus.from_json(c.status).to_json() == c.status
    SparkApplicationStatus.model_validate(c.status)
