"""Kubernetes Event reasons and types posted on a SparkApplication, one per state transition."""

from __future__ import annotations

from typing import Final

from apps_controller.model import State

NORMAL: Final = "Normal"
WARNING: Final = "Warning"

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
DRIVER_LOST: Final = "SparkDriverLost"  # the current SparkDriver vanished before it finished
DRIVER_POD_REPLACED: Final = "DriverPodReplaced"  # the driver controller started a new incarnation
EXPIRED: Final = "SparkApplicationExpired"  # timeToLiveSeconds elapsed: the app is deleted
INVALID_SPEC: Final = "InvalidSpec"

BY_STATE: Final[dict[State, tuple[str, str]]] = {
    State.NEW: (NORMAL, NEW),
    State.SUBMITTED: (NORMAL, SUBMITTED),
    State.RUNNING: (NORMAL, RUNNING),
    State.SUCCEEDING: (NORMAL, SUCCEEDING),
    State.COMPLETED: (NORMAL, COMPLETED),
    State.FAILING: (WARNING, FAILING),
    State.FAILED: (WARNING, FAILED),
    State.SUBMISSION_FAILED: (WARNING, SUBMISSION_FAILED),
    State.PENDING_RERUN: (NORMAL, PENDING_RERUN),
    State.INVALIDATING: (NORMAL, INVALIDATING),
    State.SUSPENDING: (NORMAL, SUSPENDING),
    State.SUSPENDED: (NORMAL, SUSPENDED),
    State.RESUMING: (NORMAL, RESUMING),
    State.UNKNOWN: (WARNING, UNKNOWN),
}
