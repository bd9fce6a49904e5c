"""The reasons of the Events the driver controller posts on a SparkDriver (CamelCase, as Kubernetes'
own), and which of them a SparkApplication's own events restate."""

from __future__ import annotations

from typing import Final

INCARNATION_CREATED: Final = "DriverPodCreated"
POD_LOST: Final = "DriverPodLost"
SUCCEEDED: Final = "DriverSucceeded"
FAILED: Final = "DriverFailed"
SUBMISSION_FAILED: Final = "SubmissionFailed"
STUCK: Final = "DriverPodStuck"
INVALID_SPEC: Final = "InvalidSpec"
UNKNOWN_SPEC_FIELDS: Final = "UnknownSpecFields"
UNKNOWN_SPARK_VERSION: Final = "UnknownSparkVersion"
QUEUED: Final = "Queued"  # Kueue evicted the run; the reason of a Queued condition too
NAME_TAKEN: Final = "DriverPodNameTaken"  # another live owner's pod holds the driver pod's name
NAME_FOR_NEXT_RUN: Final = "DriverPodReleased"  # an earlier run's driver pod deleted for the next run's
NODE_LOST: Final = "DriverPodRemoved"  # a driver pod on a lost node removed at once

# What a SparkApplication's own events state (SparkApplicationSubmitted, ...Succeeding, ...Failing,
# ...SubmissionFailed, DriverPodReplaced): on a SparkDriver an app controls they are not posted again.
RESTATED_BY_APP: Final = frozenset({INCARNATION_CREATED, SUCCEEDED, FAILED, SUBMISSION_FAILED})
