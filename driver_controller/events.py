"""The reasons of the Events the driver controller posts on a SparkDriver (CamelCase, as Kubernetes'
own), and which of them a SparkApplication's own events restate."""

from __future__ import annotations

import enum
from typing import Final


class Reason(enum.StrEnum):
    """The reasons of the Events posted on a SparkDriver (CamelCase, as Kubernetes' own)."""

    INCARNATION_CREATED = "DriverPodCreated"
    POD_LOST = "DriverPodLost"
    SUCCEEDED = "DriverSucceeded"
    FAILED = "DriverFailed"
    SUBMISSION_FAILED = "SubmissionFailed"
    STUCK = "DriverPodStuck"
    INVALID_SPEC = "InvalidSpec"
    UNKNOWN_SPEC_FIELDS = "UnknownSpecFields"
    UNKNOWN_SPARK_VERSION = "UnknownSparkVersion"
    QUEUED = "Queued"  # Kueue evicted the run; the reason of a Queued condition too
    NAME_TAKEN = "DriverPodNameTaken"  # another live owner's pod holds the driver pod's name
    NAME_FOR_NEXT_RUN = "DriverPodReleased"  # an earlier run's driver pod deleted for the next run's
    NODE_LOST = "DriverPodRemoved"  # a driver pod on a lost node removed at once


# What a SparkApplication's own events state (SparkApplicationSubmitted, ...Succeeding, ...Failing,
# ...SubmissionFailed, DriverPodReplaced): on a SparkDriver an app controls they are not posted again.
RESTATED_BY_APP: Final = frozenset(
    {Reason.INCARNATION_CREATED, Reason.SUCCEEDED, Reason.FAILED, Reason.SUBMISSION_FAILED}
)
