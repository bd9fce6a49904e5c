"""The SparkApplication metrics counted from transitions (docs/metrics.md): kubeflow spark-operator
v2's names, help texts, types and labels (``internal/metrics/sparkapplication_metrics.go``), plus
sparkop's retries.

``decide`` compares the status it read with the one it decided (:func:`transitions`, pure) and adds an
:class:`~core.plan.Observation` per transition to its plan; the Applier records them into
:data:`TRANSITIONS` only after that status write succeeded, so each is counted once. The gauges of
current state are ``apps_controller.metrics``'.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from sparkop.api.models import ApplicationState, SparkApplicationStatus
from sparkop.apps_controller import status as st
from sparkop.apps_controller.observed import Observed
from sparkop.core.metrics import MetricSpec, Transitions
from sparkop.core.plan import Observation

COUNT: Final = "spark_application_count"
SUBMIT_COUNT: Final = "spark_application_submit_count"
FAILED_SUBMISSION_COUNT: Final = "spark_application_failed_submission_count"
SUCCESS_COUNT: Final = "spark_application_success_count"
FAILURE_COUNT: Final = "spark_application_failure_count"
SUCCESS_EXECUTION_TIME: Final = "spark_application_success_execution_time_seconds"
FAILURE_EXECUTION_TIME: Final = "spark_application_failure_execution_time_seconds"
SUBMIT_LATENCY: Final = "spark_application_submit_latency_seconds"
SUBMIT_LATENCY_HISTOGRAM: Final = "spark_application_submit_latency_seconds_histogram"
START_LATENCY: Final = "spark_application_start_latency_seconds"
START_LATENCY_HISTOGRAM: Final = "spark_application_start_latency_seconds_histogram"
RETRIES: Final = "sparkop_application_retries"

# kubeflow's defaults for --metrics-job-submit-latency-buckets and --metrics-job-start-latency-buckets.
SUBMIT_LATENCY_BUCKETS: Final = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
START_LATENCY_BUCKETS: Final = (30.0, 60.0, 90.0, 120.0, 150.0, 180.0, 210.0, 240.0, 270.0, 300.0)

SPECS: Final = (
    MetricSpec(COUNT, "Total number of SparkApplication", "exact counter"),
    MetricSpec(SUBMIT_COUNT, "Total number of submitted SparkApplication", "exact counter"),
    MetricSpec(FAILED_SUBMISSION_COUNT, "Total number of failed SparkApplication submission", "exact counter"),
    MetricSpec(SUCCESS_COUNT, "Total number of successful SparkApplication", "exact counter"),
    MetricSpec(FAILURE_COUNT, "Total number of failed SparkApplication", "exact counter"),
    # kubeflow declares these two without a help text.
    MetricSpec(SUCCESS_EXECUTION_TIME, "", "summary"),
    MetricSpec(FAILURE_EXECUTION_TIME, "", "summary"),
    MetricSpec(SUBMIT_LATENCY, "Spark App Submit Latency from creation to submitted state", "summary"),
    MetricSpec(
        SUBMIT_LATENCY_HISTOGRAM,
        "Spark App Submit Latency counts in buckets from creation to submitted state",
        "histogram",
        buckets=SUBMIT_LATENCY_BUCKETS,
    ),
    MetricSpec(START_LATENCY, "Spark App Start Latency via the Operator", "summary"),
    MetricSpec(
        START_LATENCY_HISTOGRAM,
        "Spark App Start Latency counts in buckets via the Operator",
        "histogram",
        buckets=START_LATENCY_BUCKETS,
    ),
    MetricSpec(
        RETRIES, "Runs started again by the restart policy, by the outcome retried", "counter", labels=("after",)
    ),
)

# What the apps controller's Applier records into (one per operator process, as prometheus_client's
# own registry is).
TRANSITIONS: Final = Transitions(SPECS)

# The outcome a retry follows, by the state it leaves.
_RETRIED_AFTER: Final = {
    ApplicationState.FAILING: "Failed",
    ApplicationState.SUCCEEDING: "Succeeded",
    ApplicationState.SUBMISSION_FAILED: "SubmissionFailed",
}


# ---------------------------------------------------------------------------------------------------
# transitions (pure)


def transitions(observed: Observed, new: SparkApplicationStatus | None, now: datetime) -> tuple[Observation, ...]:
    """The observations of the step from ``observed.status`` to ``new`` (None: nothing written). One
    pass takes one step, so each transition appears in exactly one written status."""
    if new is None:
        return ()
    old = observed.status
    before, after = st.state(old), st.state(new)
    found: list[Observation] = []
    if before is ApplicationState.NEW and old.lastRun == 0 and (after is not ApplicationState.NEW or new.lastRun > 0):
        found.append(Observation(COUNT))  # its first run planned (the state stays NEW until its pod), or its end
    if new.lastRun > old.lastRun:
        found.append(Observation(SUBMIT_COUNT))
        if before in _RETRIED_AFTER:
            found.append(Observation(RETRIES, labels=(("after", _RETRIED_AFTER[before]),)))
        created = observed.app.created
        if new.lastRun == 1 and created is not None:  # the app's first submission, as kubeflow's
            latency = max(0.0, (now - created).total_seconds())
            found += [Observation(SUBMIT_LATENCY, latency), Observation(SUBMIT_LATENCY_HISTOGRAM, latency)]
    refused_again = after is before is ApplicationState.SUBMISSION_FAILED and st.run_planned(old)
    if refused_again and not st.run_planned(new):
        found.append(Observation(FAILED_SUBMISSION_COUNT))  # a retry planned from SUBMISSION_FAILED, refused
    if after is before:
        return tuple(found)
    if after is ApplicationState.PENDING_RERUN and before in _RETRIED_AFTER and new.lastRun == old.lastRun:
        # (a run planned in the same write, an adopted SparkDriver's, was counted with it above)
        found.append(Observation(RETRIES, labels=(("after", _RETRIED_AFTER[before]),)))
    elif after is ApplicationState.SUBMISSION_FAILED:
        found.append(Observation(FAILED_SUBMISSION_COUNT))
    elif after is ApplicationState.RUNNING:
        created = observed.app.created
        # kubeflow observes the start latency of the first execution attempt only; a replaced driver
        # pod running again is not a start.
        if new.executionAttempts == 1 and new.driverIncarnations <= 1 and created is not None:
            latency = max(0.0, (now - created).total_seconds())
            found += [Observation(START_LATENCY, latency), Observation(START_LATENCY_HISTOGRAM, latency)]
    elif after in st.TERMINAL_STATES:
        succeeded = after is ApplicationState.COMPLETED
        found.append(Observation(SUCCESS_COUNT if succeeded else FAILURE_COUNT))
        if new.lastSubmissionAttemptTime is not None and new.terminationTime is not None:
            took = max(0.0, (new.terminationTime - new.lastSubmissionAttemptTime).total_seconds())
            found.append(Observation(SUCCESS_EXECUTION_TIME if succeeded else FAILURE_EXECUTION_TIME, took))
    return tuple(found)


__all__ = ["SPECS", "TRANSITIONS", "transitions"]
