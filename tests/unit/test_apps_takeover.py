"""apps_controller.decide's take_over: the first pass of an app whose status kubeflow's operator wrote (a
live swap), and the passes that follow it (apps_controller.takeover decides what is taken over)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sparkop.api.models import AdoptedPod, ApplicationState, AttemptOutcome, DriverPhase, SparkApplicationStatus
from sparkop.apps_controller import events
from sparkop.apps_controller.decide import decide
from sparkop.apps_controller.observed import AppView, DriverView, ForeignDriver, Observed
from sparkop.apps_controller.status import as_read
from sparkop.core.plan import Create
from sparkop.domain import labels
from tests.support.app_runs import BASE_SPEC

NOW = datetime(2026, 12, 6, 13, 0, tzinfo=UTC)
APP_UID = "uid-app"
SUBMISSION = "kubeflow-submission-1"
POD = ForeignDriver(name="pi-driver", uid="uid-pod", controller_uid=APP_UID, submission_id=SUBMISSION)


def app(**spec: Any) -> AppView:
    return AppView.from_body(
        {
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "SparkApplication",
            "metadata": {"name": "pi", "namespace": "ns", "uid": APP_UID, "generation": 1},
            "spec": {**BASE_SPEC, **spec},
        }
    )


def kubeflow_status(state: str, **fields: Any) -> SparkApplicationStatus:
    stored = {"applicationState": {"state": state}, "submissionID": SUBMISSION, **fields}
    return as_read(SparkApplicationStatus.model_validate(stored), stored)


def observed(status: SparkApplicationStatus, *, left: tuple[ForeignDriver, ...] = (POD,), **spec: Any) -> Observed:
    return Observed(app(**spec), status, left=left)


def creates(plan: Any) -> list[dict[str, Any]]:
    return [a.manifest for a in plan.after_status if isinstance(a, Create)]


@pytest.mark.parametrize("state", ["RUNNING", "SUBMITTED", "UNKNOWN"])
def test_a_live_run_goes_on_with_kubeflows_driver_pod_in_a_sparkdriver_that_adopts_it(state: str) -> None:
    status = kubeflow_status(state, executionAttempts=1, submissionAttempts=1, driverInfo={"podName": "pi-driver"})
    plan = decide(observed(status), NOW)
    assert plan.status is not None
    assert plan.status.lastRun == 1 and plan.status.executionAttempts == 1 and plan.status.submissionAttempts == 1
    record = plan.status.attempts[-1]
    assert (record.run, record.attempt, record.driver, record.outcome) == (1, 1, "pi-1-kf", AttemptOutcome.RUNNING)
    assert record.adoptedPod == AdoptedPod(name="pi-driver", uid="uid-pod")
    assert plan.status.applicationState is not None and plan.status.applicationState.state.value == state
    [driver] = creates(plan)
    assert driver["metadata"]["name"] == "pi-1-kf"
    assert driver["spec"]["adoptDriverPod"] == {"name": "pi-driver", "uid": "uid-pod"}
    assert [e.reason for e in plan.events] == [events.Reason.TAKEN_OVER]


def test_a_create_retried_after_the_write_still_adopts_the_pod_its_record_names() -> None:
    first = decide(observed(kubeflow_status("RUNNING", executionAttempts=1)), NOW)
    assert first.status is not None
    # The SparkDriver is not seen yet (created just before a crash, or not indexed): the create again.
    again = decide(observed(first.status, left=()), NOW)
    [driver] = creates(again)
    assert driver["spec"]["adoptDriverPod"] == {"name": "pi-driver", "uid": "uid-pod"}
    assert again.status is None or again.status.lastRun == 1


def adopted_driver(phase: DriverPhase | None, **status: Any) -> DriverView:
    body = {
        "apiVersion": labels.API_VERSION,
        "kind": "SparkDriver",
        "metadata": {
            "name": "pi-1-kf",
            "namespace": "ns",
            "uid": "uid-drv",
            "labels": {labels.RUN: "1"},
            "ownerReferences": [
                {
                    "apiVersion": "sparkoperator.k8s.io/v1beta2",
                    "kind": "SparkApplication",
                    "name": "pi",
                    "uid": APP_UID,
                    "controller": True,
                }
            ],
        },
        "status": {**({"phase": phase.value} if phase else {}), **status},
    }
    return DriverView.from_body(body, group=labels.KUBEFLOW_GROUP)


def test_the_adopted_run_is_counted_once_keeps_kubeflows_submission_id_and_stays_running() -> None:
    taken = decide(observed(kubeflow_status("RUNNING", executionAttempts=1, submissionAttempts=1)), NOW)
    assert taken.status is not None
    # The SparkDriver is seen before its controller said anything: the app stays RUNNING.
    quiet = decide(Observed(app(), taken.status, drivers=(adopted_driver(None),)), NOW)
    assert quiet.status is not None and quiet.status.applicationState is not None
    assert quiet.status.applicationState.state is ApplicationState.RUNNING
    running = adopted_driver(DriverPhase.RUNNING, driverPod={"name": "pi-driver", "uid": "uid-pod"}, incarnation=1)
    seen = decide(Observed(app(), quiet.status, drivers=(running,)), NOW)
    assert seen.status is not None
    assert seen.status.executionAttempts == 1 and seen.status.submissionID == SUBMISSION
    ended = adopted_driver(DriverPhase.SUCCEEDED, driverPod={"name": "pi-driver"}, incarnation=1)
    done = decide(Observed(app(), seen.status, drivers=(ended,)), NOW)
    assert done.status is not None and done.status.applicationState is not None
    assert done.status.applicationState.state is ApplicationState.COMPLETED
    assert done.status.executionAttempts == 1


def test_a_live_run_whose_driver_pod_is_gone_is_a_lost_run_per_the_restart_policy() -> None:
    never = decide(observed(kubeflow_status("RUNNING", executionAttempts=1), left=()), NOW)
    assert never.status is not None and never.status.applicationState is not None
    assert never.status.applicationState.state is ApplicationState.FAILED
    assert never.status.executionAttempts == 1 and never.status.lastRun == 1
    assert never.status.attempts[-1].outcome is AttemptOutcome.DELETED
    assert creates(never) == []
    retry = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    again = decide(observed(kubeflow_status("RUNNING", executionAttempts=1), left=(), restartPolicy=retry), NOW)
    assert again.status is not None and again.status.applicationState is not None
    assert again.status.applicationState.state is ApplicationState.FAILING
    assert again.status.nextAttemptTime is not None


def test_a_pending_rerun_numbers_its_next_run_on_from_kubeflows() -> None:
    retry = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    status = kubeflow_status("PENDING_RERUN", executionAttempts=1, submissionAttempts=1)
    plan = decide(observed(status, left=(), restartPolicy=retry), NOW)
    assert plan.status is not None
    assert plan.status.lastRun == 2 and plan.status.submissionAttempts == 1
    [driver] = creates(plan)
    assert driver["metadata"]["name"] == "pi-2-kf" and "adoptDriverPod" not in driver["spec"]


def test_a_suspended_app_takes_over_its_count_and_stays_suspended() -> None:
    plan = decide(observed(kubeflow_status("SUSPENDED", executionAttempts=1), left=(), suspend=True), NOW)
    assert plan.status is not None and plan.status.lastRun == 1
    assert plan.status.applicationState is not None
    assert plan.status.applicationState.state is ApplicationState.SUSPENDED
    assert creates(plan) == []


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED"])
def test_a_finished_kubeflow_app_gets_no_write(state: str) -> None:
    plan = decide(observed(kubeflow_status(state, executionAttempts=1)), NOW)
    assert plan.status is None or plan.status == kubeflow_status(state, executionAttempts=1)
    assert creates(plan) == [] and plan.events == ()


def test_an_app_of_sparkops_group_is_never_taken_over() -> None:
    body = {
        "apiVersion": labels.API_VERSION,
        "kind": "SparkApplication",
        "metadata": {"name": "pi", "namespace": "ns", "uid": APP_UID, "generation": 1},
        "spec": BASE_SPEC,
    }
    status = kubeflow_status("SUSPENDED", executionAttempts=3)
    plan = decide(Observed(AppView.from_body(body), status, left=(POD,)), NOW)
    assert plan.status is None or plan.status.lastRun == 0


@pytest.mark.parametrize(
    ("status", "run"),
    [
        # Seen in the live swap: a scheduled run whose pod kubeflow's spark-submit made at the minute before
        # its operator stopped, its status never written. sparkop created a driver of its own, the API
        # server refused the name (409), and the app ended FAILED: the run kubeflow started was lost.
        (SparkApplicationStatus(), 1),
        # kubeflow's PENDING_RERUN step deletes the last run's pod, runs spark-submit and then writes
        # SUBMITTED: planned as usual, the next run would wait for that pod's name, free only once the run
        # had ended unwatched, and then run it again.
        (kubeflow_status("PENDING_RERUN", executionAttempts=1, submissionAttempts=1), 2),
    ],
    ids=["new", "pending-rerun"],
)
def test_a_run_kubeflow_submitted_before_writing_it_goes_on_with_its_pod_as_the_next_run(
    status: SparkApplicationStatus, run: int
) -> None:
    made = ForeignDriver(name="pi-driver", uid="uid-pod-2", controller_uid=APP_UID, submission_id="submission-2")
    retry = {"type": "OnFailure", "onFailureRetries": 2, "onFailureRetryInterval": 1}
    plan = decide(observed(status, left=(made,), restartPolicy=retry), NOW)
    assert plan.status is not None and plan.status.lastRun == run
    assert plan.status.submissionID == "submission-2"  # what the pod's label says
    record = plan.status.attempts[-1]
    assert (record.run, record.driver, record.outcome) == (run, f"pi-{run}-kf", AttemptOutcome.RUNNING)
    assert record.adoptedPod == AdoptedPod(name="pi-driver", uid="uid-pod-2")
    [driver] = creates(plan)
    assert driver["metadata"]["name"] == f"pi-{run}-kf"
    assert driver["spec"]["adoptDriverPod"] == {"name": "pi-driver", "uid": "uid-pod-2"}
    assert [e.reason for e in plan.events] == [events.Reason.TAKEN_OVER]
    assert f"SparkDriver pi-{run}-kf adopts driver pod pi-driver" in plan.events[0].message


def test_a_new_kubeflow_app_without_a_driver_pod_is_submitted_as_usual() -> None:
    plan = decide(observed(SparkApplicationStatus(), left=()), NOW)
    [driver] = creates(plan)
    assert driver["metadata"]["name"] == "pi-1-kf" and "adoptDriverPod" not in driver["spec"]
