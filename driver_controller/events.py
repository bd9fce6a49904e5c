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

# What a SparkApplication's own events state (SparkApplicationSubmitted, ...Succeeding, ...Failing,
# ...SubmissionFailed, DriverPodReplaced): on a SparkDriver an app controls they are not posted again.
RESTATED_BY_APP: Final = frozenset({INCARNATION_CREATED, SUCCEEDED, FAILED, SUBMISSION_FAILED})
