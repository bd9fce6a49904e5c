"""Kubernetes Event reasons and types posted on a SparkApplication, one per state transition."""

from __future__ import annotations

import enum
from typing import Final, Literal

from sparkop.api.models import ApplicationState

EventType = Literal["Normal", "Warning"]
NORMAL: Final[EventType] = "Normal"
WARNING: Final[EventType] = "Warning"


class Reason(enum.StrEnum):
    """The reasons of the Events posted on a SparkApplication (CamelCase, as Kubernetes' own): one per
    state, and these others."""

    SUBMITTED = "SparkApplicationSubmitted"
    RUNNING = "SparkApplicationRunning"
    SUCCEEDING = "SparkApplicationSucceeding"
    COMPLETED = "SparkApplicationCompleted"
    FAILING = "SparkApplicationFailing"
    FAILED = "SparkApplicationFailed"
    SUBMISSION_FAILED = "SparkApplicationSubmissionFailed"
    PENDING_RERUN = "SparkApplicationPendingRerun"
    INVALIDATING = "SparkApplicationInvalidating"
    SUSPENDING = "SparkApplicationSuspending"
    SUSPENDED = "SparkApplicationSuspended"
    RESUMING = "SparkApplicationResuming"
    UNKNOWN = "SparkApplicationUnknown"
    NEW = "SparkApplicationAdded"

    ADOPTED = "SparkDriverAdopted"  # a SparkDriver newer than status.lastRun was taken as current
    # kubeflow's operator's run taken over (a live swap): its driver pod adopted, or found gone.
    TAKEN_OVER = "SparkApplicationTakenOver"
    DRIVER_LOST = "SparkDriverLost"  # the current SparkDriver vanished before it finished
    DRIVER_REFUSED = "SparkDriverRefused"  # the API server refused to create the run's SparkDriver
    DRIVER_POD_REPLACED = "DriverPodReplaced"  # the driver controller started a new incarnation
    EXPIRED = "SparkApplicationExpired"  # timeToLiveSeconds elapsed: the app is deleted
    INVALID_SPEC = "InvalidSpec"
    UNKNOWN_SPEC_FIELDS = "UnknownSpecFields"  # set by a newer CRD: the app waits for an operator that knows them
    UI_REFUSED = "SparkUIRefused"  # the API server refused the Spark UI Service or Ingress
    # The history server spec.historyServer names is not there (or its claim cannot be mounted): no run yet.
    HISTORY_SERVER_MISSING = "HistoryServerNotFound"


BY_STATE: Final[dict[ApplicationState, tuple[EventType, str]]] = {
    ApplicationState.NEW: (NORMAL, Reason.NEW),
    ApplicationState.SUBMITTED: (NORMAL, Reason.SUBMITTED),
    ApplicationState.RUNNING: (NORMAL, Reason.RUNNING),
    ApplicationState.SUCCEEDING: (NORMAL, Reason.SUCCEEDING),
    ApplicationState.COMPLETED: (NORMAL, Reason.COMPLETED),
    ApplicationState.FAILING: (WARNING, Reason.FAILING),
    ApplicationState.FAILED: (WARNING, Reason.FAILED),
    ApplicationState.SUBMISSION_FAILED: (WARNING, Reason.SUBMISSION_FAILED),
    ApplicationState.PENDING_RERUN: (NORMAL, Reason.PENDING_RERUN),
    ApplicationState.INVALIDATING: (NORMAL, Reason.INVALIDATING),
    ApplicationState.SUSPENDING: (NORMAL, Reason.SUSPENDING),
    ApplicationState.SUSPENDED: (NORMAL, Reason.SUSPENDED),
    ApplicationState.RESUMING: (NORMAL, Reason.RESUMING),
    ApplicationState.UNKNOWN: (WARNING, Reason.UNKNOWN),
}
