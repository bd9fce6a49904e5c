"""Restart policy decisions, as kubeflow's spark-operator makes them (pkg/util ShouldRetry).

* ``executionAttempts`` counts the runs whose driver pod the API server accepted;
* ``submissionAttempts`` counts the SparkDrivers created for the current execution attempt (every
  submission, refused or not), and starts again at 1 when a new execution attempt starts after a
  finished or failed run or a resume, as kubeflow v1beta2 resets it when it reruns an app;
* after a failure, ``OnFailure`` retries while ``executionAttempts <= onFailureRetries``, so
  ``onFailureRetries: 2`` means at most three execution attempts;
* after a submission failure, ``OnFailure`` retries while
  ``submissionAttempts <= onSubmissionFailureRetries``: ``onSubmissionFailureRetries: 1`` means at
  most two submissions for one execution attempt;
* ``Always`` retries after any outcome, ``Never`` after none;
* a run that failed because of the infrastructure (its driver never started, its executors never
  did: ``api.models.INFRASTRUCTURE_FAILURES``) is, where ``onInfrastructureFailureRetries`` is set,
  not an execution attempt: it is counted in ``infrastructureFailures`` and retried, whatever the
  type, while ``infrastructureFailures <= onInfrastructureFailureRetries`` (the Apache operator's
  OnInfrastructureFailure, as a budget of its own).

Kubeflow waits ``interval * submissionAttempts`` counted from the *submission* time, so a long run
retries at once. We wait the configured interval counted from the moment the failure was observed
(docs/state-machine.md, "Retry timing").
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sparkop.api.models import INFRASTRUCTURE_FAILURES, ApplicationState, RestartPolicyType
from sparkop.apps_controller.observed import RestartPolicy


def should_retry(
    policy: RestartPolicy, outcome: ApplicationState, execution_attempts: int, submission_attempts: int
) -> bool:
    """Whether an app whose current attempt ended in ``outcome`` (SUCCEEDING, FAILING or
    SUBMISSION_FAILED) runs again."""
    if policy.type is RestartPolicyType.ALWAYS:
        return True
    if policy.type is not RestartPolicyType.ON_FAILURE:
        return False
    if outcome is ApplicationState.FAILING:
        return policy.on_failure_retries is not None and execution_attempts <= policy.on_failure_retries
    if outcome is ApplicationState.SUBMISSION_FAILED:
        limit = policy.on_submission_failure_retries
        return limit is not None and submission_attempts <= limit
    return False


def retry_interval(policy: RestartPolicy, outcome: ApplicationState) -> timedelta:
    if outcome is ApplicationState.FAILING:
        return timedelta(seconds=max(0, policy.on_failure_retry_interval))
    if outcome is ApplicationState.SUBMISSION_FAILED:
        return timedelta(seconds=max(0, policy.on_submission_failure_retry_interval))
    return timedelta(0)  # Always after a success: rerun at once


def next_attempt_time(
    policy: RestartPolicy,
    outcome: ApplicationState,
    execution_attempts: int,
    submission_attempts: int,
    observed_at: datetime,
) -> datetime | None:
    """When the next attempt may start, or None when the policy does not retry."""
    if not should_retry(policy, outcome, execution_attempts, submission_attempts):
        return None
    return observed_at + retry_interval(policy, outcome)


def infrastructure_budget(policy: RestartPolicy, reason: str | None) -> bool:
    """Whether a run that failed for ``reason`` is judged by the infrastructure budget
    (onInfrastructureFailureRetries) rather than by the failures the policy counts."""
    return policy.on_infrastructure_failure_retries is not None and reason in INFRASTRUCTURE_FAILURES


def retry_infrastructure(policy: RestartPolicy, failures: int) -> bool:
    """Whether the run after the ``failures``-th infrastructure failure starts (any type: Never too)."""
    limit = policy.on_infrastructure_failure_retries
    return limit is not None and failures <= limit
