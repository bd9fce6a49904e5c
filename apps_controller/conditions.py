"""status.conditions of a SparkApplication, from the status a pass arrived at (docs/state-machine.md,
"Conditions"): Submitted, Running, Queued and Stuck (the current SparkDriver's), Suspended, Completed,
Failed.
lastTransitionTime moves only when a condition's status does."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from sparkop.api.models import ApplicationState, AttemptOutcome, Condition
from sparkop.apps_controller.draft import Draft
from sparkop.apps_controller.observed import DriverView
from sparkop.apps_controller.status import (
    CONDITION_COMPLETED,
    CONDITION_FAILED,
    CONDITION_QUEUED,
    CONDITION_RUNNING,
    CONDITION_STUCK,
    CONDITION_SUBMITTED,
    CONDITION_SUSPENDED,
    clip,
    counted,
    driver_info,
    error_message,
    run_planned,
)
from sparkop.apps_controller.ui import ACTIVE_STATES
from sparkop.core.conditions import transition_time

Truth = Literal["True", "False", "Unknown"]


def conditions(d: Draft) -> None:
    old = {c.type: c for c in d.status.conditions or ()}
    wanted = (
        _submitted(d),
        _running(d),
        _queued(d),
        _stuck(d),
        _suspended(d, old.get(CONDITION_SUSPENDED)),
        _finished(d),
    )
    generation = d.status.observedGeneration or None
    stamped = []
    for new in wanted:
        if new is None:
            continue
        before = old.get(new.type)
        old_status, old_time = (before.status, before.lastTransitionTime) if before else (None, None)
        since = transition_time(old_status, old_time, new.status, new.lastTransitionTime or d.now)
        stamped.append(new.model_copy(update={"lastTransitionTime": since, "observedGeneration": generation}))
    d.update(conditions=stamped)


def _condition(kind: str, status: Truth, reason: str, message: str | None, since: datetime | None = None) -> Condition:
    return Condition(type=kind, status=status, reason=reason, message=message, lastTransitionTime=since)


def _submitted(d: Draft) -> Condition | None:
    cur = d.current
    if cur is None:
        return None
    where = f"run {cur.run} (SparkDriver {cur.driver})"
    if cur.outcome is AttemptOutcome.SUBMISSION_FAILED:
        return _condition(CONDITION_SUBMITTED, "False", "SubmissionFailed", cur.message or where)
    if counted(cur):
        return _condition(CONDITION_SUBMITTED, "True", "Submitted", f"{where}: driver pod accepted")
    if cur.outcome is AttemptOutcome.INVALIDATED:
        return _condition(CONDITION_SUBMITTED, "False", cur.reason or "Stopped", f"{where} was stopped")
    return _condition(CONDITION_SUBMITTED, "False", "Submitting", f"{where}: waiting for its driver pod")


def _running(d: Draft) -> Condition | None:
    state = d.state
    if state is ApplicationState.NEW:
        return None
    if state is ApplicationState.RUNNING:
        pod = driver_info(d.status).podName or "?"
        message = f"driver pod {pod} of SparkDriver {d.status.currentDriver} is running"
        return _condition(CONDITION_RUNNING, "True", "DriverRunning", message)
    message = error_message(d.status) or f"the application is {state.value}"
    return _condition(CONDITION_RUNNING, "False", _camel(state), clip(message))


def _stuck(d: Draft) -> Condition | None:
    """The current SparkDriver's Stuck condition, while its run is active."""
    drv = _active_driver(d)
    return _mirrored(CONDITION_STUCK, drv.stuck) if drv is not None else None


def _queued(d: Draft) -> Condition | None:
    """The current SparkDriver's Queued condition (its gang waits for its batch scheduler), while its
    run is active."""
    drv = _active_driver(d)
    return _mirrored(CONDITION_QUEUED, drv.queued) if drv is not None else None


def _active_driver(d: Draft) -> DriverView | None:
    if d.state not in ACTIVE_STATES and not run_planned(d.status):
        return None
    drv = d.driver(d.status.lastRun)
    return None if drv is None or drv.finished else drv


def _mirrored(kind: str, c: Condition | None) -> Condition | None:
    if c is None:
        return None
    return _condition(kind, c.status, c.reason or "Unknown", clip(c.message or None), c.lastTransitionTime)


def _suspended(d: Draft, old: Condition | None) -> Condition | None:
    if d.state in (ApplicationState.SUSPENDING, ApplicationState.SUSPENDED):
        return _condition(CONDITION_SUSPENDED, "True", "Suspended", d.obs.app.suspend_reason)
    if old is not None:
        return _condition(CONDITION_SUSPENDED, "False", "Resumed", "spec.suspend is false")
    return None


def _finished(d: Draft) -> Condition | None:
    s = d.status
    if d.state is ApplicationState.COMPLETED:
        message = f"completed after {s.executionAttempts} execution attempt(s)"
        return _condition(CONDITION_COMPLETED, "True", "Completed", message)
    if d.state is ApplicationState.FAILED:
        reason = s.lastError.reason if s.lastError else "Failed"
        return _condition(CONDITION_FAILED, "True", reason, clip(error_message(s) or "failed"))
    return None


def _camel(state: ApplicationState) -> str:
    """SUBMISSION_FAILED -> SubmissionFailed: a state as a condition reason."""
    return "".join(word.capitalize() for word in state.value.split("_"))
