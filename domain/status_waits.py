"""What may wait to be written, and for how long: the one table of the status fields whose change a
pass may hold back (docs/api-writes.md, "What waits, and for how long").

Every status write costs the API server and etcd (``bench/perf.py`` holds sparkop to 16 writes per
app), and what a user reads (``kubectl get spark -w``, ``sparkop status``, the metrics) must be
current. A change of a field listed here may be held back, so that what follows it goes out in the same
write; a change of any other field is written by the pass that sees it, and carries whatever was held.
A wait is counted from when the objects themselves show the change happened (a pod's creation, its
last step), never from a pass: every pass works the deadline out again from what it observes and
``now``, so a restart holds nothing longer, and nothing held is lost (every pass derives it again).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Final

from pydantic import BaseModel


class Since(Enum):
    """What a wait is counted from: a time the observed objects carry."""

    DRIVER_POD_STEP = "the current driver pod's last step: created, scheduled, started by its kubelet"
    OLDEST_PENDING_EXECUTOR = "the creation of the oldest executor pod of the current incarnation still pending"
    SPARK_DRIVER_CREATED = "the creation of the current run's SparkDriver"


@dataclass(frozen=True)
class Wait:
    """A change may be held back until ``seconds`` after ``since``."""

    seconds: float
    since: Since


# Progress a user rarely looks at between the steps that matter: under load a pod's steps come many
# seconds apart (a driver pod Pending for 10 s and more), and a window shorter than that saves nothing
# (1,000 apps at once: 16.9 writes per app with 10 s, 15 with 30 s).
SETTLE_SECONDS: Final = 30.0
# Executors Spark asks for start within a few seconds of their creation: their Running is written
# with their creation (one write for both), or this long after it.
PENDING_EXECUTORS_SECONDS: Final = 3.0
# An executor pod's change asks for its SparkDriver's pass within this long (core.runtime's ``within``),
# and that pass writes the counts: the changes of a moment (a dozen executors starting) are one write,
# and the app's copy follows its SparkDriver's within a pass (COALESCE_SECONDS).
EXECUTOR_CHANGE_SECONDS: Final = 1.0

SPARK_DRIVER: Final[Mapping[str, Wait]] = {
    # The current driver pod's progress in the same phase of the SparkDriver (the pod's own phase as
    # first seen: Pending). Its name and readiness are not here, nor the SparkDriver's phase: a new pod,
    # readiness (it routes a SparkConnect server's clients) and Running (the app's RUNNING, its event
    # and its start latency) are written at once.
    "driverPod.uid": Wait(SETTLE_SECONDS, Since.DRIVER_POD_STEP),
    "driverPod.phase": Wait(SETTLE_SECONDS, Since.DRIVER_POD_STEP),
    "driverPod.nodeName": Wait(SETTLE_SECONDS, Since.DRIVER_POD_STEP),
    "driverPod.podIP": Wait(SETTLE_SECONDS, Since.DRIVER_POD_STEP),
    "driverPod.startTime": Wait(SETTLE_SECONDS, Since.DRIVER_POD_STEP),
    # Not driverPod.createdTime, runningTime, readyTime: the run's timeouts count from them
    # (driver_controller/timeouts.py); a process restarting inside a wait must read them, not see again.
    # Executors asked for, not running yet. The other counts (running, succeeded, failed, unknown) are
    # not here: written by the pass that sees them, within EXECUTOR_CHANGE_SECONDS of the pods' change.
    "executors.pending": Wait(PENDING_EXECUTORS_SECONDS, Since.OLDEST_PENDING_EXECUTOR),
    # Each executor's state (kubeflow's executorState), held as its count is: a pending one's entry goes
    # out with its Running, or this long after its creation; any other change with the counts, at once.
    "executorState": Wait(PENDING_EXECUTORS_SECONDS, Since.OLDEST_PENDING_EXECUTOR),
}
# A SparkDriver's first status, when it only says that its first driver pod was accepted (Pending,
# incarnation 1, the pod named: driver_controller.status.first_pod_only) and its write posts no event
# (a SparkDriver an app controls): usually written with the pod's Running.
SPARK_DRIVER_FIRST_POD: Final = Wait(SETTLE_SECONDS, Since.DRIVER_POD_STEP)

SPARK_APPLICATION: Final[Mapping[str, Wait]] = {
    # That the current run's SparkDriver exists: written with the first thing it reports (its driver
    # pod accepted, which counts the run). While it is held, the one difference it makes is that a
    # SparkDriver deleted before anything of it was written is created again as the same run.
    # Everything else, the executor counts included (the SparkDriver held what could wait), is
    # written at once.
    "currentDriver": Wait(SETTLE_SECONDS, Since.SPARK_DRIVER_CREATED),
    # The run's submission id (its SparkDriver's uid, the label on its pods), seen with currentDriver:
    # kubeflow's operator writes it with SUBMITTED, and so does this, in the same write.
    "submissionID": Wait(SETTLE_SECONDS, Since.SPARK_DRIVER_CREATED),
}


def changed_fields(old: BaseModel, new: BaseModel, by_field: Collection[str] = ()) -> set[str]:
    """The fields of a status that differ between ``old`` and ``new``; those named in ``by_field``,
    when both sides have them, as ``field.subfield`` (``executors.running``)."""
    return set(_changed(old, new, by_field))


def _changed(old: BaseModel, new: BaseModel, by_field: Collection[str]) -> Iterator[str]:
    """:func:`changed_fields` one at a time, in the order of the model's fields (:func:`may_wait` stops at
    the first that may not wait)."""
    for name, after in new:
        before = getattr(old, name)
        # A copy with some fields replaced shares the others: by identity, no model compares field by field.
        if before is after or before == after:
            continue
        if name in by_field and isinstance(before, BaseModel) and isinstance(after, BaseModel):
            yield from (f"{name}.{sub}" for sub, value in after if getattr(before, sub) != value)
        else:
            yield name


def left(wait: Wait | None, since: Mapping[Since, datetime | None], now: datetime) -> float:
    """Seconds ``wait`` may still hold a change back at ``now`` (0: write it now). Nothing to count
    from, or a time later than ``now`` (a clock ahead of ours), holds nothing."""
    at = since.get(wait.since) if wait is not None else None
    if wait is None or at is None or at > now:
        return 0.0
    return max(0.0, min(wait.seconds, (at - now).total_seconds() + wait.seconds))


def may_wait(
    changed: Iterable[str], table: Mapping[str, Wait], since: Mapping[Since, datetime | None], now: datetime
) -> float:
    """Seconds the write of ``changed`` may still be held back: the least any of them may (a field the
    table does not list may not wait at all)."""
    least: float | None = None
    for name in changed:
        seconds = left(table.get(name), since, now)
        if seconds == 0.0:
            return 0.0  # the write goes now: what the others may wait does not matter
        least = seconds if least is None else min(least, seconds)
    return least or 0.0


def status_wait(
    old: BaseModel,
    new: BaseModel,
    table: Mapping[str, Wait],
    since: Mapping[Since, datetime | None],
    now: datetime,
    by_field: Collection[str] = (),
) -> float:
    """Seconds the write of ``new`` over ``old`` may still be held back by ``table``: :func:`may_wait` of
    the fields that changed (:func:`changed_fields`), looked at only until one may not wait."""
    return may_wait(_changed(old, new, by_field), table, since, now)
