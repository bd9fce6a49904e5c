"""apps_controller.takeover: what sparkop takes over of a status kubeflow's operator left."""

from __future__ import annotations

from typing import Any

import pytest

from sparkop.api.models import ApplicationState, SparkApplicationStatus
from sparkop.apps_controller.takeover import ForeignDriver, Takeover, takeover

APP_UID = "uid-app"
SUBMISSION = "sub-1"
DRIVER = ForeignDriver(name="pi-driver", uid="uid-pod", controller_uid=APP_UID, submission_id=SUBMISSION)


def kubeflow_status(state: ApplicationState, **fields: Any) -> SparkApplicationStatus:
    return SparkApplicationStatus.model_validate({"applicationState": {"state": state}, **fields})


def take(status: SparkApplicationStatus, pods: tuple[ForeignDriver, ...] = (DRIVER,)) -> Takeover | None:
    return takeover(status, app_uid=APP_UID, submission_id=SUBMISSION, driver_pod_name="pi-driver", pods=pods)


@pytest.mark.parametrize("state", [ApplicationState.SUBMITTED, ApplicationState.RUNNING, ApplicationState.UNKNOWN])
def test_a_live_run_goes_on_with_the_driver_pod_kubeflow_made(state: ApplicationState) -> None:
    status = kubeflow_status(state, executionAttempts=2, submissionAttempts=1, driverInfo={"podName": "pi-driver"})
    assert take(status) == Takeover(run=2, adopt=DRIVER)


def test_the_driver_pod_is_found_by_the_name_kubeflow_gives_it_when_status_has_none() -> None:
    assert take(kubeflow_status(ApplicationState.SUBMITTED, executionAttempts=1)) == Takeover(run=1, adopt=DRIVER)


@pytest.mark.parametrize(
    "pod",
    [
        ForeignDriver("pi-driver", "u", controller_uid="another-app", submission_id=SUBMISSION),  # not this app's
        ForeignDriver("pi-driver", "u", controller_uid=APP_UID, submission_id="sub-0"),  # an earlier run's
        ForeignDriver("pi-other", "u", controller_uid=APP_UID, submission_id=SUBMISSION),  # another name
    ],
)
def test_only_this_runs_own_pod_is_adopted(pod: ForeignDriver) -> None:
    status = kubeflow_status(ApplicationState.RUNNING, executionAttempts=1)
    assert take(status, pods=(pod,)) == Takeover(run=1, adopt=None)


def test_a_live_run_whose_pod_is_gone_is_still_counted_as_run() -> None:
    assert take(kubeflow_status(ApplicationState.RUNNING, executionAttempts=0), pods=()) == Takeover(run=1, adopt=None)


@pytest.mark.parametrize(
    "state",
    [
        ApplicationState.PENDING_RERUN,
        ApplicationState.FAILING,
        ApplicationState.SUCCEEDING,
        ApplicationState.INVALIDATING,
        ApplicationState.SUBMISSION_FAILED,
        ApplicationState.SUSPENDING,
        ApplicationState.SUSPENDED,
        ApplicationState.RESUMING,
    ],
)
def test_a_waiting_app_counts_on_from_kubeflows_runs_and_adopts_nothing(state: ApplicationState) -> None:
    assert take(kubeflow_status(state, executionAttempts=1, submissionAttempts=1)) == Takeover(run=1, adopt=None)


@pytest.mark.parametrize("state", [ApplicationState.COMPLETED, ApplicationState.FAILED])
def test_nothing_is_taken_over_of_a_finished_app(state: ApplicationState) -> None:
    assert take(kubeflow_status(state, executionAttempts=1)) is None


def test_nothing_is_taken_over_of_a_new_app_without_a_driver_pod_of_its_own() -> None:
    assert take(SparkApplicationStatus(), pods=()) is None
    assert take(kubeflow_status(ApplicationState.NEW), pods=()) is None
    another_apps = ForeignDriver("pi-driver", "u", controller_uid="another-app", submission_id=None)
    assert take(SparkApplicationStatus(), pods=(another_apps,)) is None


def test_a_new_app_whose_driver_pod_spark_submit_made_goes_on_with_it() -> None:
    """kubeflow's operator stopped after its spark-submit made the pod, before it wrote the run (seen in
    the live swap: a scheduled run made at the minute before the stop)."""
    made = ForeignDriver("pi-driver", "uid-pod", controller_uid=APP_UID, submission_id="sub-not-written-yet")
    assert take(SparkApplicationStatus(), pods=(made,)) == Takeover(run=0, adopt=None, submitted=made)


@pytest.mark.parametrize(
    "state", [ApplicationState.PENDING_RERUN, ApplicationState.RESUMING, ApplicationState.SUBMISSION_FAILED]
)
def test_a_next_run_kubeflow_submitted_but_never_recorded_is_the_next_run_with_its_pod(state: ApplicationState) -> None:
    """The same race one state later: kubeflow stopped between its spark-submit of the next run (a pod with a
    fresh submission id) and its write of that run, leaving the state it submitted from."""
    made = ForeignDriver("pi-driver", "uid-pod-2", controller_uid=APP_UID, submission_id="sub-2")
    status = kubeflow_status(state, executionAttempts=1, submissionAttempts=1)
    assert take(status, pods=(made,)) == Takeover(run=1, adopt=None, submitted=made)
    # The previous run's pod (the status's submission id), not gone yet, is no next run.
    assert take(status, pods=(DRIVER,)) == Takeover(run=1, adopt=None)


def test_an_app_sparkop_ran_is_its_own() -> None:
    status = kubeflow_status(ApplicationState.RUNNING, executionAttempts=1, lastRun=1, currentDriver="pi-1")
    assert take(status) is None
