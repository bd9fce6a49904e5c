"""Kubernetes Event reasons and types posted on a SparkApplication, one per state transition."""

from __future__ import annotations

from typing import Final, Literal

from sparkop.api.models import ApplicationState

EventType = Literal["Normal", "Warning"]
NORMAL: Final[EventType] = "Normal"
WARNING: Final[EventType] = "Warning"

SUBMITTED: Final = "SparkApplicationSubmitted"
RUNNING: Final = "SparkApplicationRunning"
SUCCEEDING: Final = "SparkApplicationSucceeding"
COMPLETED: Final = "SparkApplicationCompleted"
FAILING: Final = "SparkApplicationFailing"
FAILED: Final = "SparkApplicationFailed"
SUBMISSION_FAILED: Final = "SparkApplicationSubmissionFailed"
PENDING_RERUN: Final = "SparkApplicationPendingRerun"
INVALIDATING: Final = "SparkApplicationInvalidating"
SUSPENDING: Final = "SparkApplicationSuspending"
SUSPENDED: Final = "SparkApplicationSuspended"
RESUMING: Final = "SparkApplicationResuming"
UNKNOWN: Final = "SparkApplicationUnknown"
NEW: Final = "SparkApplicationAdded"

ADOPTED: Final = "SparkDriverAdopted"  # a SparkDriver newer than status.lastRun was taken as current
# kubeflow's operator's run taken over (a live swap): its driver pod adopted, or found gone.
TAKEN_OVER: Final = "SparkApplicationTakenOver"
DRIVER_LOST: Final = "SparkDriverLost"  # the current SparkDriver vanished before it finished
DRIVER_REFUSED: Final = "SparkDriverRefused"  # the API server refused to create the run's SparkDriver
DRIVER_POD_REPLACED: Final = "DriverPodReplaced"  # the driver controller started a new incarnation
EXPIRED: Final = "SparkApplicationExpired"  # timeToLiveSeconds elapsed: the app is deleted
INVALID_SPEC: Final = "InvalidSpec"
UNKNOWN_SPEC_FIELDS: Final = "UnknownSpecFields"  # set by a newer CRD: the app waits for an operator that knows them
UI_REFUSED: Final = "SparkUIRefused"  # the API server refused the Spark UI Service or Ingress
# The history server spec.historyServer names is not there (or its claim cannot be mounted): no run yet.
HISTORY_SERVER_MISSING: Final = "HistoryServerNotFound"

BY_STATE: Final[dict[ApplicationState, tuple[EventType, str]]] = {
    ApplicationState.NEW: (NORMAL, NEW),
    ApplicationState.SUBMITTED: (NORMAL, SUBMITTED),
    ApplicationState.RUNNING: (NORMAL, RUNNING),
    ApplicationState.SUCCEEDING: (NORMAL, SUCCEEDING),
    ApplicationState.COMPLETED: (NORMAL, COMPLETED),
    ApplicationState.FAILING: (WARNING, FAILING),
    ApplicationState.FAILED: (WARNING, FAILED),
    ApplicationState.SUBMISSION_FAILED: (WARNING, SUBMISSION_FAILED),
    ApplicationState.PENDING_RERUN: (NORMAL, PENDING_RERUN),
    ApplicationState.INVALIDATING: (NORMAL, INVALIDATING),
    ApplicationState.SUSPENDING: (NORMAL, SUSPENDING),
    ApplicationState.SUSPENDED: (NORMAL, SUSPENDED),
    ApplicationState.RESUMING: (NORMAL, RESUMING),
    ApplicationState.UNKNOWN: (WARNING, UNKNOWN),
}
