"""SUBMITTED means what it means in kubeflow: the run's driver pod exists. A run planned (its SparkDriver
created, its submission counted) keeps the state it was planned from until the SparkDriver reports its
driver pod accepted; a refused pod is a failed submission, as before (docs/state-machine.md)."""

from __future__ import annotations

from typing import Any

import pytest

from sparkop.api.models import ApplicationState, AttemptOutcome, DriverPhase, SparkApplicationStatus
from sparkop.apps_controller import events
from sparkop.apps_controller import status as apps_status
from sparkop.apps_controller.controller import apps_controller
from sparkop.apps_controller.decide import decide
from sparkop.apps_controller.transitions import FAILED_SUBMISSION_COUNT
from sparkop.core.plan import Create
from sparkop.domain import kinds
from tests.support.app_runs import BASE_SPEC, POLICIES
from tests.support.simulation import SimCluster


def written_states(c: SimCluster, passes: int = 50) -> list[str]:
    """The state each status write left, until a pass writes nothing (a held write is waited for)."""
    seen: list[str] = []
    for _ in range(passes):
        writes = c.writes
        c.reconcile()
        if c.held:
            assert c.held_for is not None
            c.advance(c.held_for)
            continue
        if c.writes == writes:
            return seen
        seen.append(c.state)
    raise AssertionError("did not settle")


def test_first_run_is_new_until_its_driver_pod_is_accepted_then_submitted_then_running() -> None:
    c = SimCluster(spec={**BASE_SPEC, "restartPolicy": POLICIES["Never"]})
    planned = c.reconcile()
    assert planned is not None and planned.status is not None
    # The run is planned: its record, lastRun, one submission, its SparkDriver created; the state stays.
    assert apps_status.state(planned.status) is ApplicationState.NEW and planned.events == ()
    assert [type(a) for a in planned.after_status] == [Create] and list(c.drivers) == ["app-1"]
    status = c.app_status
    assert (status.lastRun, status.submissionAttempts, status.executionAttempts) == (1, 1, 0)
    assert status.lastSubmissionAttemptTime == c.now and status.attempts[0].outcome is AttemptOutcome.RUNNING
    assert apps_status.run_planned(status)
    # The SparkDriver seen, its pod not created yet (a queue's admission, a slow driver controller): NEW.
    assert set(written_states(c)) <= {"NEW"} and c.state == "NEW"
    assert c.app_status.currentDriver == "app-1" and len(c.created) == 1
    c.set_phase("app-1", DriverPhase.PENDING)  # the driver controller created the driver pod
    assert written_states(c) == ["SUBMITTED"]
    assert (c.app_status.executionAttempts, c.app_status.attempts[0].attempt) == (1, 1)
    submitted = apps_status.condition(c.app_status, "Submitted")
    assert submitted is not None and (submitted.status, submitted.reason) == ("True", "Submitted")
    c.set_phase("app-1", DriverPhase.RUNNING)
    assert written_states(c) == ["RUNNING"]
    reasons = [e.reason for e in c.events]
    assert reasons == [events.Reason.SUBMITTED, events.Reason.RUNNING]
    assert len(c.created) == 1


def test_refused_driver_pods_read_new_then_submission_failed_until_failed() -> None:
    """kubeflow's e2e spec fail-submission: every state before FAILED is NEW or SUBMISSION_FAILED; each
    retry is planned from SUBMISSION_FAILED, which it keeps, and each refusal is one more failed
    submission (its event, its metric)."""
    policy = {**POLICIES["OnFailure"], "onSubmissionFailureRetries": 3}
    c = SimCluster(spec={**BASE_SPEC, "restartPolicy": policy})
    states: list[str] = []
    failed_submissions = 0
    planned_from: set[str] = set()  # the states a run was planned in, its pod not accepted yet
    for _ in range(400):
        plan = c.reconcile()
        states.append(c.state)
        if apps_status.run_planned(c.app_status):
            planned_from.add(c.state)
        if plan is not None:
            failed_submissions += sum(o.metric == FAILED_SUBMISSION_COUNT for o in plan.observations)
        if c.state == "FAILED":
            break
        for drv in c.unfinished():
            if drv.phase is None:
                c.set_phase(drv.name, DriverPhase.SUBMISSION_FAILED, "Forbidden")  # the pod's create refused
        c.advance(0.5)
    assert states[-1] == "FAILED"
    assert set(states[:-1]) == {"NEW", "SUBMISSION_FAILED"}
    assert states[0] == "NEW" and states.index("SUBMISSION_FAILED") > 0
    assert planned_from == {"NEW", "SUBMISSION_FAILED"}
    status = c.app_status
    assert (status.submissionAttempts, status.executionAttempts, len(c.created)) == (4, 0, 4)
    assert [r.outcome for r in status.attempts] == [AttemptOutcome.SUBMISSION_FAILED] * 4
    reasons = [e.reason for e in c.events]
    assert reasons.count(events.Reason.SUBMISSION_FAILED) == 4 and failed_submissions == 4
    assert events.Reason.SUBMITTED not in reasons and reasons[-1] == events.Reason.FAILED
    assert "Forbidden" in (apps_status.error_message(status) or "")


def test_a_retry_planned_from_submission_failed_keeps_it_and_its_message() -> None:
    c = SimCluster(spec={**BASE_SPEC, "restartPolicy": POLICIES["OnFailure"]})
    c.run_until_quiet()
    c.set_phase("app-1", DriverPhase.SUBMISSION_FAILED, "Forbidden")
    c.run_until_quiet()
    failed = c.app_status
    assert c.state == "SUBMISSION_FAILED" and failed.nextAttemptTime is not None
    c.advance(2)
    c.run_until_quiet()
    planned = c.app_status
    assert c.state == "SUBMISSION_FAILED" and list(c.created) == [1, 2] and apps_status.run_planned(planned)
    assert planned.submissionAttempts == 2 and planned.nextAttemptTime is None
    assert apps_status.error_message(planned) == apps_status.error_message(failed)  # why it is SUBMISSION_FAILED
    c.set_phase("app-2", DriverPhase.PENDING)
    c.run_until_quiet()
    assert c.state == "SUBMITTED" and not apps_status.error_message(c.app_status)
    assert c.app_status.executionAttempts == 1


def test_a_restart_between_planning_and_the_pod_decides_the_same() -> None:
    """Level-triggered: the facts are in status (the current run's record, outcome Running). An operator
    restarted at any point of the run's submission decides the same from the same observation, and
    never plans a second run."""
    c = SimCluster(spec={**BASE_SPEC, "restartPolicy": POLICIES["OnFailure"]})
    c.reconcile(crash_after=1)  # the run recorded, the operator dies before its create
    assert c.state == "NEW" and not c.drivers and apps_status.run_planned(c.app_status)
    obs, _ = c.observed()
    first, restarted = decide(obs, c.now), decide(obs, c.now)
    assert first == restarted
    assert apps_status.state(first.status) is ApplicationState.NEW and first.status == obs.status
    assert [a.manifest["metadata"]["name"] for a in first.after_status if isinstance(a, Create)] == ["app-1"]
    c.run_until_quiet()
    assert list(c.drivers) == ["app-1"] and c.state == "NEW" and c.app_status.submissionAttempts == 1
    c.set_phase("app-1", DriverPhase.PENDING)
    c.reconcile(crash_after=0)  # the pod accepted; the operator dies before the write that says so
    assert c.state == "NEW" and c.app_status.executionAttempts == 0
    obs, _ = c.observed()
    assert decide(obs, c.now) == decide(obs, c.now)
    c.run_until_quiet()
    status = c.app_status
    assert c.state == "SUBMITTED" and (status.executionAttempts, status.submissionAttempts) == (1, 1)
    assert list(c.created) == [1] and [e.reason for e in c.events].count(events.Reason.SUBMITTED) == 1


@pytest.mark.parametrize("group", ["sparkop", "kubeflow"])
def test_new_is_written_as_kubeflows_empty_state_in_both_groups(group: str) -> None:
    """kubeflow's ApplicationStateNew is "": a run planned from NEW reads so to kubeflow's clients (its e2e
    spec fail-submission allows only it and SUBMISSION_FAILED before FAILED; Airflow's
    SparkKubernetesOperator waits while the state is absent or SUBMITTED, and reads the pod <app>-driver
    on any other). sparkop's group writes the same, so Airflow waits there too (a NEW written before the
    pod existed failed its task)."""
    runtime: Any = object()  # the declaration reads nothing of it
    apis = dict(zip(("sparkop", "kubeflow"), kinds.served_apis(kubeflow=True), strict=True))
    declared = apps_controller(runtime, api=apis[group])
    assert declared.status is SparkApplicationStatus
    c = SimCluster(spec={**BASE_SPEC, "restartPolicy": POLICIES["Never"]})
    planned = c.reconcile()
    assert planned is not None and planned.status is not None
    status = declared.read_status({"status": planned.status.to_json()})
    written = declared.status_json(apps_status.as_read(status, planned.status.to_json()))
    assert "applicationState" not in written and written["lastRun"] == 1 and written["submissionAttempts"] == 1
    assert "applicationState" not in c.status  # what the simulated apps controller wrote
    back = apps_status.as_read(declared.read_status({"status": written}), written)
    assert apps_status.state(back) is ApplicationState.NEW and apps_status.run_planned(back)
    assert declared.status_json(back) == written  # read and written again: the same, so no write
    waiting = apps_status.with_error_message(back, "spec.x: not known to this operator")
    assert declared.status_json(waiting)["applicationState"] == {
        "state": "NEW",
        "errorMessage": "spec.x: not known to this operator",
    }
    c.set_phase("app-1", DriverPhase.PENDING)
    c.run_until_quiet()
    accepted = declared.read_status({"status": c.status})
    assert declared.status_json(accepted)["applicationState"] == {"state": "SUBMITTED"}


def test_a_driver_seen_first_running_is_submitted_and_running_in_one_write() -> None:
    """The pass that first sees the driver pod accepted enters SUBMITTED even when it goes on: the write
    says RUNNING, and both events follow it (kubeflow's clients wait for SparkApplicationSubmitted)."""
    c = SimCluster(spec={**BASE_SPEC, "restartPolicy": POLICIES["Never"]})
    c.run_until_quiet()
    assert c.state == "NEW" and c.events == []
    c.set_phase("app-1", DriverPhase.RUNNING)
    plan = c.reconcile()
    assert plan is not None and plan.status is not None
    assert apps_status.state(plan.status) is ApplicationState.RUNNING and plan.status.executionAttempts == 1
    assert [e.reason for e in plan.events] == [events.Reason.SUBMITTED, events.Reason.RUNNING]
    assert c.state == "RUNNING" and [e.reason for e in c.events] == [events.Reason.SUBMITTED, events.Reason.RUNNING]
