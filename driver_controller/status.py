"""SparkDriver.status as the driver controller reads and writes it: ``api.models.SparkDriverStatus``,
read leniently from the SparkDriver's body and written back as its JSON (``to_json``) by the skeleton
(``core.controller``: the driver controller declares the model).

A pass works on the model itself: on its own copy of what it read, whose parts it replaces and never
changes in place (the functions here return copies), so that it can compare what it arrived at with
what it read. The parts it puts in (a termination, a lastError, a condition) are built by their
models, so that a value the CRD would refuse is refused here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from sparkop.api.models import (
    LOG_TAIL_CHARS,
    DriverPhase,
    IncarnationOutcome,
    IncarnationRecord,
    LastError,
    SparkDriverStatus,
)
from sparkop.domain import status_waits
from sparkop.domain.status_waits import Since
from sparkop.driver_controller.summaries import PodSummary

HISTORY_MAX: Final = 10  # status.incarnations keeps the last ten
MAX_RECORD_MESSAGE: Final = 4096  # an incarnation record's message is cut to this
MAX_MESSAGE: Final = 32768  # a lastError's or a condition's


# ---------------------------------------------------------------------------------------------------
# the boundary


# ---------------------------------------------------------------------------------------------------
# reading


def ended(status: SparkDriverStatus) -> bool:
    """Succeeded, Failed or SubmissionFailed: the status is final."""
    return status.phase is not None and status.phase.terminal


# What a pass derives again from the pods it observes, whatever was written before.
_PROGRESS: Final = frozenset({"driverPod", "executors", "executorState"})


# What the pass that creates the first driver pod writes, all of which a later pass derives again from
# that pod (its name and incarnation label) and the SparkDriver itself.
_FIRST_POD: Final = frozenset(
    {"phase", "incarnation", "driverPod", "sparkApplicationId", "webUIAddress", "startTime", "observedGeneration"}
)


def first_pod_only(old: SparkDriverStatus, new: SparkDriverStatus) -> bool:
    """Whether ``new`` only says that the first driver pod was accepted (Pending, incarnation 1 or
    later, its name) over a status no pass has written yet. Every later pass derives it again from
    that pod (pod.recover_incarnation), so its write may wait (domain.status_waits.SPARK_DRIVER_FIRST_POD),
    and usually goes out with the pod's Running: the app counts its run then (one write each instead
    of two)."""
    if old.phase is not None or old.incarnation != 0 or old.driverPod is not None:
        return False
    if new.phase is not DriverPhase.PENDING or new.incarnation < 1 or new.driverPod is None:
        return False
    unchanged = SparkDriverStatus.model_fields.keys() - _FIRST_POD - _PROGRESS
    return all(getattr(old, f) == getattr(new, f) for f in unchanged)


def status_wait(
    old: SparkDriverStatus,
    new: SparkDriverStatus,
    now: datetime,
    driver_pod: PodSummary | None,
    executors: Sequence[PodSummary],
    *,
    announced: bool,
) -> float:
    """Seconds the write of ``new`` over ``old`` may still be held back (``core.plan.Plan.status_wait``),
    by domain.status_waits' table: counted from the current driver pod's last step (``driver_pod``,
    None while the cache has yet to show the pod this pass creates: from ``now``) and from the oldest of
    ``executors`` (the current incarnation's) still pending. ``announced``: the write posts an event,
    which goes out with it (the first pod's acceptance is then written at once)."""
    pending = [e.created for e in executors if e.phase == "Pending" and e.created is not None]
    since = {
        Since.DRIVER_POD_STEP: _last_step(driver_pod) if driver_pod is not None else now,
        Since.OLDEST_PENDING_EXECUTOR: min(pending, default=None),
    }
    if first_pod_only(old, new):
        return 0.0 if announced else status_waits.left(status_waits.SPARK_DRIVER_FIRST_POD, since, now)
    return status_waits.status_wait(old, new, status_waits.SPARK_DRIVER, since, now, by_field=_PROGRESS)


def _last_step(pod: PodSummary) -> datetime | None:
    """When the pod last moved on before it runs: created, scheduled, acknowledged by its kubelet."""
    return max((t for t in (pod.created, pod.scheduled_at, pod.start_time) if t is not None), default=None)


# ---------------------------------------------------------------------------------------------------
# changing (copies, never in place)


def with_record(
    status: SparkDriverStatus,
    incarnation: int,
    pod_name: str,
    outcome: IncarnationOutcome,
    reason: str,
    message: str,
    now: datetime,
    log_tail: str | None = None,
) -> SparkDriverStatus:
    """The incarnation's record added to status.incarnations (the newest HISTORY_MAX kept), unless
    the incarnation already has one: it ended once."""
    history = status.incarnations or []
    if any(r.incarnation == incarnation for r in history):
        return status
    # Not validated: every value comes from this controller, and the one the schema could refuse (an
    # incarnation 0, of a driver pod whose label someone edited) must not stop a pass that writes nothing.
    entry = IncarnationRecord.model_construct(
        incarnation=incarnation,
        podName=pod_name,
        outcome=outcome,
        reason=reason or None,
        message=message[:MAX_RECORD_MESSAGE] or None,
        time=now,
        logTail=log_tail[-LOG_TAIL_CHARS:] if log_tail else None,
    )
    return status.model_copy(update={"incarnations": [*history, entry][-HISTORY_MAX:]})


def with_submission_failed(
    status: SparkDriverStatus,
    now: datetime,
    reason: str,
    message: str,
    incarnation: int | None = None,
    pod_name: str = "",
) -> SparkDriverStatus:
    """SubmissionFailed, and why (lastError): a spec spark-submit would refuse (InvalidSpec), or an
    object of the incarnation the API server refused. With ``incarnation``, its record says so too."""
    failed = status.model_copy(
        update={
            "phase": DriverPhase.SUBMISSION_FAILED,
            "lastError": LastError(reason=reason, message=message[:MAX_MESSAGE], time=now),
            "completionTime": now,
        }
    )
    if incarnation is None:
        return failed
    outcome = IncarnationOutcome.SUBMISSION_FAILED
    return with_record(failed, incarnation, pod_name, outcome, reason, message, now)
