"""SparkApplication.status as the state machine reads and writes it: ``api.models``' schema, read
leniently at the boundary and written back in the shape ``kubectl get`` and the tests know.

The state machine works on :class:`api.models.SparkApplicationStatus` itself, copied with
``model_copy(update=...)`` (no validation on the hot path: :func:`read_status` validated what came in,
and every value put in comes from a validated object or from this controller). The few facts that
are not plain fields (the state, the current run's record, a condition by type) are read through the
functions here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from sparkop.api.models import (
    ApplicationState,
    ApplicationStateInfo,
    AttemptOutcome,
    AttemptRecord,
    Condition,
    DriverInfo,
    ExecutorCounts,
    SparkApplicationStatus,
)
from sparkop.core.specs import lenient
from sparkop.domain import status_waits
from sparkop.domain.status_waits import Since

Status = SparkApplicationStatus

MAX_ATTEMPT_HISTORY: Final = 20
MAX_MESSAGE: Final = 4096  # condition, attempt and lastError messages are cut to this
TERMINAL_STATES: Final = frozenset({ApplicationState.COMPLETED, ApplicationState.FAILED})
# States a run is planned from. The state is kept while the run's driver pod is not accepted yet: as in
# kubeflow, SUBMITTED says the driver pod exists (docs/state-machine.md).
PLANNING_STATES: Final = frozenset(
    {
        ApplicationState.NEW,
        ApplicationState.PENDING_RERUN,
        ApplicationState.RESUMING,
        ApplicationState.SUBMISSION_FAILED,
    }
)

# Condition types on SparkApplication.status.conditions (docs/state-machine.md, "Conditions"), in the
# order they are listed; ``Stuck`` mirrors the current SparkDriver's condition of that name.
CONDITION_SUBMITTED: Final = "Submitted"
CONDITION_RUNNING: Final = "Running"
CONDITION_STUCK: Final = "Stuck"
CONDITION_QUEUED: Final = "Queued"  # the current SparkDriver's: its gang waits for its batch scheduler
CONDITION_SUSPENDED: Final = "Suspended"
CONDITION_COMPLETED: Final = "Completed"
CONDITION_FAILED: Final = "Failed"


def clip(text: str | None, limit: int = MAX_MESSAGE) -> str | None:
    return text[:limit] if text else text


# ---------------------------------------------------------------------------------------------------
# the boundary


def read_status(data: Any) -> Status:
    """``data`` (a stored status) as a pass reads it: ``core.specs.lenient``, then :func:`as_read`."""
    return as_read(lenient(Status, data), data)


def as_read(status: Status, stored: Any) -> Status:
    """``status`` (read by ``core.specs.lenient`` from ``stored``) with what a pass needs always present
    (state NEW, observedGeneration 0, an empty driverInfo, attempts oldest first); a stored state no
    longer known reads as UNKNOWN, so that a status written by another version never stops a pass."""
    stored_state = stored.get("applicationState") if isinstance(stored, Mapping) else None
    if status.applicationState is None and isinstance(stored_state, Mapping) and stored_state.get("state"):
        status = status.model_copy(update={"applicationState": ApplicationStateInfo(state=ApplicationState.UNKNOWN)})
    return status.model_copy(
        update={
            "applicationState": status.applicationState or ApplicationStateInfo(state=ApplicationState.NEW),
            "observedGeneration": status.observedGeneration or 0,
            "driverInfo": status.driverInfo or DriverInfo(),
            "attempts": sorted(status.attempts or (), key=lambda r: r.run),
            "conditions": list(status.conditions or ()),
        }
    )


def executor_counts(counts: Mapping[str, int]) -> ExecutorCounts:
    """A SparkDriver's executor counts, holding just the phases it reported."""
    return ExecutorCounts.model_validate(
        {k: v for k, v in counts.items() if k in ExecutorCounts.model_fields and v >= 0}
    )


NO_EXECUTORS: Final = ExecutorCounts()


# ---------------------------------------------------------------------------------------------------
# reading


def state(status: Status) -> ApplicationState:
    return status.applicationState.state if status.applicationState else ApplicationState.NEW


def error_message(status: Status) -> str | None:
    return status.applicationState.errorMessage if status.applicationState else None


def driver_info(status: Status) -> DriverInfo:
    return status.driverInfo or DriverInfo()


def current(status: Status) -> AttemptRecord | None:
    """The attempt record of run ``lastRun`` (always kept: history drops the oldest first)."""
    return next((r for r in reversed(status.attempts or ()) if r.run == status.lastRun), None)


def condition(status: Status, kind: str) -> Condition | None:
    return next((c for c in status.conditions or () if c.type == kind), None)


def finished(record: AttemptRecord) -> bool:
    return record.outcome is not AttemptOutcome.RUNNING


def run_planned(status: Status) -> bool:
    """Whether the current run is planned (its record unfinished) and its driver pod not accepted yet:
    the state is still the one the run was planned from, and a pass follows the run."""
    cur = current(status)
    return state(status) in PLANNING_STATES and cur is not None and not finished(cur)


def counted(record: AttemptRecord) -> bool:
    """Whether the record's run was counted in executionAttempts (it then holds its number)."""
    return record.attempt is not None


def status_wait(old: Status, new: Status, now: datetime, driver_created: datetime | None) -> float:
    """Seconds the write of ``new`` over ``old`` may still be held back (``core.plan.Plan.status_wait``),
    by domain.status_waits' table: the first sight of the current run's SparkDriver (created at
    ``driver_created``) may wait for the first thing it reports; every other change, the run's progress
    copied from its SparkDriver included, is written at once."""
    since = {Since.SPARK_DRIVER_CREATED: driver_created}
    return status_waits.status_wait(old, new, status_waits.SPARK_APPLICATION, since, now)


# ---------------------------------------------------------------------------------------------------
# changing (copies, never in place: a pass compares what it made with what it saw)


def with_state(status: Status, new_state: ApplicationState) -> Status:
    info = ApplicationStateInfo.model_construct(state=new_state, errorMessage=error_message(status))
    return status.model_copy(update={"applicationState": info})


def with_error_message(status: Status, message: str | None) -> Status:
    info = ApplicationStateInfo.model_construct(state=state(status), errorMessage=message)
    return status.model_copy(update={"applicationState": info})


def with_driver_info(status: Status, **changes: Any) -> Status:
    return status.model_copy(update={"driverInfo": driver_info(status).model_copy(update=changes)})


def with_attempt(status: Status, record: AttemptRecord) -> Status:
    """Insert or replace the record of ``record.run``; keep the newest MAX_ATTEMPT_HISTORY."""
    others = [r for r in status.attempts or () if r.run != record.run]
    history = sorted([*others, record], key=lambda r: r.run)[-MAX_ATTEMPT_HISTORY:]
    return status.model_copy(update={"attempts": history})
