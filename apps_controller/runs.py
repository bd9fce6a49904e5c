"""The current run's record: the only places the execution counter changes (besides the reset of a
spec change), how a run's outcome is recorded, and the state its outcome leads to.

A run is counted in ``executionAttempts`` by the pass that first sees its driver pod accepted, in the
write that sets its record's ``attempt``; its outcome is recorded once, by the write that moves the
record from Running to finished (docs/state-machine.md).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from sparkop.api import history
from sparkop.api.models import ApplicationState, AttemptOutcome, AttemptRecord, DriverPhase, LastError
from sparkop.apps_controller import events, policy
from sparkop.apps_controller.draft import Draft
from sparkop.apps_controller.observed import DriverView
from sparkop.apps_controller.status import clip, counted, executor_counts
from sparkop.core.plan import refused
from sparkop.domain import labels

# Outcomes of runs that got past submission: each is one execution attempt.
_EXECUTED: Final = frozenset({AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED, AttemptOutcome.DELETED})
_STATE_OF: Final = {
    AttemptOutcome.SUCCEEDED: ApplicationState.SUCCEEDING,
    AttemptOutcome.FAILED: ApplicationState.FAILING,
    AttemptOutcome.DELETED: ApplicationState.FAILING,
    AttemptOutcome.SUBMISSION_FAILED: ApplicationState.SUBMISSION_FAILED,
}
_DEFAULT_REASON: Final = {
    AttemptOutcome.FAILED: "DriverFailed",
    AttemptOutcome.DELETED: events.Reason.DRIVER_LOST,
    AttemptOutcome.SUBMISSION_FAILED: "SubmissionFailed",
}


def count_execution(d: Draft, record: AttemptRecord) -> AttemptRecord:
    """Count ``record``'s run in executionAttempts, unless its record says it was counted."""
    if counted(record):
        return record
    attempt = d.status.executionAttempts + 1
    numbered = record.model_copy(update={"attempt": attempt})
    d.update(executionAttempts=attempt)
    d.record(numbered)
    return numbered


def finish(
    d: Draft,
    record: AttemptRecord,
    outcome: AttemptOutcome,
    reason: str | None,
    message: str | None,
    exit_code: int | None = None,
) -> AttemptRecord:
    """Record how ``record``'s run ended. A run that ended on its own, not by a failed submission,
    was an execution attempt (counted here if it was not yet); a run we stopped ourselves before it
    finished (Invalidated) is given back."""
    if outcome is AttemptOutcome.FAILED and policy.infrastructure_budget(d.obs.app.policy, reason):
        # Not an execution attempt: counted by the infrastructure budget instead.
        if counted(record):
            d.update(executionAttempts=max(0, d.status.executionAttempts - 1))
            record = record.model_copy(update={"attempt": None})
        d.update(infrastructureFailures=d.status.infrastructureFailures + 1)
    elif outcome in _EXECUTED:
        record = count_execution(d, record)
    elif outcome is AttemptOutcome.INVALIDATED and counted(record):
        d.update(executionAttempts=max(0, d.status.executionAttempts - 1))
        record = record.model_copy(update={"attempt": None})
    done = record.model_copy(
        update={
            "outcome": outcome,
            "reason": reason,
            "message": clip(message),
            "exitCode": exit_code,
            "finishTime": d.now,
        }
    )
    d.record(done)
    return done


def mirror(d: Draft, drv: DriverView) -> None:
    """Copy the current SparkDriver's facts into the app's status."""
    s = d.status
    if drv.incarnation > max(1, s.driverIncarnations):
        message = f"driver pod of {drv.name} was replaced: incarnation {drv.incarnation}"
        d.event(events.NORMAL, events.Reason.DRIVER_POD_REPLACED, message)
    d.update(
        currentDriver=drv.name,
        # An adopted run keeps kubeflow's submission id: its pods carry it in their label.
        submissionID=s.submissionID if _adopted(d) and s.submissionID else drv.uid,
        sparkApplicationId=drv.spark_application_id or s.sparkApplicationId,
        driverIncarnations=max(drv.incarnation, s.driverIncarnations),
        executors=executor_counts(drv.executors) if drv.executors else s.executors,
        executorState=dict(drv.executor_state) or None,
    )
    d.set_driver_info(podName=drv.pod_name or (s.driverInfo.podName if s.driverInfo else None))


def _adopted(d: Draft) -> bool:
    cur = d.current
    return cur is not None and cur.adoptedPod is not None


def link_history(d: Draft, record: AttemptRecord, drv: DriverView) -> AttemptRecord:
    """The run's spark.app.id and, where it logs to a history server, its page there, on its record
    (the current incarnation's: each driver pod is an application of its own to Spark)."""
    app_id = drv.spark_application_id
    if app_id is None or record.sparkApplicationId == app_id:
        return record
    url = history.app_url(drv.history_url, app_id) if drv.history_url else None
    linked = record.model_copy(update={"sparkApplicationId": app_id, "historyURL": url})
    d.record(linked)
    return linked


def missing_driver(d: Draft, cur: AttemptRecord) -> None:
    """The current run's SparkDriver is not observed: not created (or not indexed) yet, refused by
    the API server, or deleted after it was seen."""
    if d.seen(cur):
        message = f"SparkDriver {cur.driver} was deleted before it finished"
        enter_outcome(d, finish(d, cur, AttemptOutcome.DELETED, events.Reason.DRIVER_LOST, message))
        return
    action = d.create_driver(cur.run)
    refusal = refused(d.obs.refusals, action)
    if refusal is None:
        d.after(action)  # planned, not seen yet: (re)issue the create; 409 if it exists
        return
    message = refusal.describe()  # the record's reason says what was refused: SparkDriverRefused
    enter_outcome(d, finish(d, cur, AttemptOutcome.SUBMISSION_FAILED, events.Reason.DRIVER_REFUSED, message))


def enter_outcome(d: Draft, record: AttemptRecord) -> None:
    """SUCCEEDING / FAILING / SUBMISSION_FAILED, with nextAttemptTime when the policy retries and
    lastError for a failure."""
    outcome = _STATE_OF.get(record.outcome)
    if outcome is None:  # Invalidated: nothing is running, start over
        d.transition(ApplicationState.PENDING_RERUN, f"run {record.run} was stopped")
        return
    finished_at = record.finishTime or d.now
    s = d.status
    app_policy = d.obs.app.policy
    due = policy.next_attempt_time(app_policy, outcome, s.executionAttempts, s.submissionAttempts, finished_at)
    if outcome is ApplicationState.FAILING and policy.infrastructure_budget(app_policy, record.reason):
        again = policy.retry_infrastructure(app_policy, s.infrastructureFailures)
        interval = timedelta(seconds=app_policy.on_infrastructure_failure_retry_interval)
        due = finished_at + interval if again else None
    if outcome is ApplicationState.SUCCEEDING:
        d.update(terminationTime=finished_at, nextAttemptTime=due)
        d.set_error_message(None)
        d.transition(outcome, f"driver {record.driver} succeeded")
        return
    error = _error_message(record)
    d.update(
        terminationTime=finished_at,
        nextAttemptTime=due,
        lastError=LastError(reason=_error_reason(record), message=error, time=finished_at),
    )
    d.set_error_message(kubeflow_worded(record, error) if d.obs.app.group == labels.KUBEFLOW_GROUP else error)
    d.transition(outcome, error, again=True)  # a retry planned from SUBMISSION_FAILED stays in it until now


def outcome_of(drv: DriverView, record: AttemptRecord) -> AttemptOutcome | None:
    if drv.phase is DriverPhase.SUCCEEDED:
        return AttemptOutcome.SUCCEEDED
    if drv.phase is DriverPhase.FAILED:
        return AttemptOutcome.FAILED
    if drv.phase is DriverPhase.SUBMISSION_FAILED:
        # A refused *replacement* of a driver pod that ran is a failed run, not a failed submission.
        return AttemptOutcome.FAILED if counted(record) else AttemptOutcome.SUBMISSION_FAILED
    return None


def driver_message(drv: DriverView) -> str | None:
    parts = []
    if drv.exit_code is not None:
        parts.append(f"exit code {drv.exit_code}")
    if drv.message:
        parts.append(drv.message)
    return ": ".join(parts) or None


def _error_reason(record: AttemptRecord) -> str:
    return record.reason or _DEFAULT_REASON.get(record.outcome, "Failed")


def kubeflow_worded(record: AttemptRecord, error: str) -> str:
    """``error`` led by the words kubeflow's operator puts in ``applicationState.errorMessage`` for the same
    outcome, which its clients (and its own e2e suite) look for: a refused submission is spark-submit's
    failure there, a driver that exited non-zero is its container's exit code and reason."""
    if record.outcome is AttemptOutcome.SUBMISSION_FAILED:
        return clip(f"failed to run spark-submit: {error}") or error
    if record.outcome is AttemptOutcome.FAILED and record.exitCode:
        lead = f"driver container failed with ExitCode: {record.exitCode}, Reason: {record.reason or 'Error'}"
        return clip(f"{lead}; {error}") or error
    return error


def _error_message(record: AttemptRecord) -> str:
    if record.outcome is AttemptOutcome.DELETED:
        return record.message or f"SparkDriver {record.driver} was deleted"
    what = "could not be submitted" if record.outcome is AttemptOutcome.SUBMISSION_FAILED else "failed"
    text = f"run {record.run} ({record.driver}) {what}"
    detail = ", ".join(p for p in (record.reason, record.message) if p)
    return clip(f"{text}: {detail}" if detail else text) or text


__all__ = [
    "count_execution",
    "driver_message",
    "enter_outcome",
    "finish",
    "link_history",
    "mirror",
    "missing_driver",
    "outcome_of",
]
