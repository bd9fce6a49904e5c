"""SparkDriver.status as the driver controller reads and writes it: ``api.models.SparkDriverStatus``,
read leniently from the SparkDriver's body and written back as its JSON (``to_json``) by the skeleton
(``core.controller``: the driver controller declares the model).

A pass works on the model itself: on its own copy of what it read, whose parts it replaces and never
changes in place (the functions here return copies), so that it can compare what it arrived at with
what it read. The parts it puts in (a termination, a lastError, a condition) are built by their
models, so that a value the CRD would refuse is refused here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from sparkop.api.models import DriverPhase, IncarnationOutcome, IncarnationRecord, LastError, SparkDriverStatus

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


_ACTIVE: Final = frozenset({DriverPhase.PENDING, DriverPhase.RUNNING})
# What a pass derives again from the pods it observes, whatever was written before.
_PROGRESS: Final = frozenset({"driverPod", "executors"})


def progress_only(old: SparkDriverStatus, new: SparkDriverStatus) -> bool:
    """Whether ``new`` differs from ``old`` only by the progress of the same driver pod in the same
    phase: the pod's uid, node, IP and start, its executors' counts. Every later pass derives
    these again from the pods it observes, so their write may wait a moment and carry what follows
    (core.applier.SETTLE_SECONDS). A phase (Running is the app's RUNNING, its event and its start
    latency), an outcome, a new incarnation or pod name, a condition, a lastError or an acknowledged
    spec is written at once; so is the pod's readiness."""
    if old.phase not in _ACTIVE or new.phase not in _ACTIVE:
        return False
    if old.driverPod is None or new.driverPod is None or old.driverPod.name != new.driverPod.name:
        return False
    if old.phase != new.phase or old.driverPod.ready != new.driverPod.ready:
        return False  # readiness routes a SparkConnect server's clients
    return all(getattr(old, f) == getattr(new, f) for f in SparkDriverStatus.model_fields if f not in _PROGRESS)


# What the pass that creates the first driver pod writes, all of which a later pass derives again from
# that pod (its name and incarnation label) and the SparkDriver itself.
_FIRST_POD: Final = frozenset(
    {"phase", "incarnation", "driverPod", "sparkApplicationId", "webUIAddress", "startTime", "observedGeneration"}
)


def first_pod_only(old: SparkDriverStatus, new: SparkDriverStatus) -> bool:
    """Whether ``new`` only says that the first driver pod was accepted (Pending, incarnation 1 or
    later, its name) over a status no pass has written yet. Every later pass derives it again from
    that pod (decide._incarnation), so its write may wait like progress, and usually goes out with
    the pod's Running: the app counts its run then (one write each instead of two). A driver pod
    that stays Pending is named in status within core.applier.SETTLE_SECONDS."""
    if old.phase is not None or old.incarnation != 0 or old.driverPod is not None:
        return False
    if new.phase is not DriverPhase.PENDING or new.incarnation < 1 or new.driverPod is None:
        return False
    unchanged = SparkDriverStatus.model_fields.keys() - _FIRST_POD - _PROGRESS
    return all(getattr(old, f) == getattr(new, f) for f in unchanged)


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
