"""status.conditions of a SparkDriver: ``Stuck``, from what its current driver pod shows while it has
not ended. True when the Spark container waits in a state that does not clear by itself
(ImagePullBackOff, CrashLoopBackOff, ...: :data:`driver_controller.observe.STUCK_WAITING`; the reason
is the waiting reason) or when the pod has been unschedulable for ``unschedulable_timeout`` seconds
(reason Unschedulable); False (Progressing) once that is over. lastTransitionTime moves only when the
condition's status does. Pure: :func:`stuck` says what to record, decide records it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from api.models import Condition
from core.conditions import transition_time
from driver_controller.observe import PodSummary
from driver_controller.status import MAX_MESSAGE

CONDITION_STUCK: Final = "Stuck"
CONDITION_UNSCHEDULABLE: Final = "Unschedulable"  # the Stuck condition's reason for a pod not scheduled
PROGRESSING: Final = "Progressing"  # its reason once the pod is no longer stuck


@dataclass(frozen=True)
class Verdict:
    """What the current driver pod's state says: the conditions to record (None: leave them as they
    are), the message of the DriverPodStuck event to post (None: none, it was said already), and how
    soon to look again (None: at the next change)."""

    conditions: list[Condition] | None = None
    event: str | None = None
    requeue_after: float | None = None


def stuck(
    pod: PodSummary, conditions: Sequence[Condition], now: datetime, generation: int | None, timeout: float
) -> Verdict:
    """The Stuck condition of a driver pod that exists and has not ended."""
    if pod.waiting_reason:
        waiting = f": {pod.waiting_message}" if pod.waiting_message else ""
        message = f"driver pod {pod.name}: {pod.waiting_reason}{waiting}"
        said = any(_true(c) and c.reason == pod.waiting_reason for c in conditions)
        new = set_condition(conditions, CONDITION_STUCK, "True", pod.waiting_reason, message, now, generation)
        return Verdict(new, None if said else message)
    if pod.unschedulable_since is not None and pod.phase == "Pending":
        waited = (now - pod.unschedulable_since).total_seconds()
        if waited < timeout:
            return Verdict(requeue_after=max(timeout - waited, 0.5))
        message = f"driver pod {pod.name} unschedulable for {int(waited)}s: {pod.unschedulable_message or ''}"
        said = any(_true(c) for c in conditions)
        new = set_condition(conditions, CONDITION_STUCK, "True", CONDITION_UNSCHEDULABLE, message, now, generation)
        return Verdict(new, None if said else message)
    if any(c.type == CONDITION_STUCK for c in conditions):
        return Verdict(set_condition(conditions, CONDITION_STUCK, "False", PROGRESSING, "", now, generation))
    return Verdict()


def _true(condition: Condition) -> bool:
    return condition.type == CONDITION_STUCK and condition.status == "True"


def set_condition(
    conditions: Sequence[Condition],
    kind: str,
    status: Literal["True", "False", "Unknown"],
    reason: str,
    message: str,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    """``conditions`` with the one of type ``kind`` replaced (moved to the end) or added."""
    old = next((c for c in conditions if c.type == kind), None)
    old_status, old_time = (old.status, old.lastTransitionTime) if old else (None, None)
    new = Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message[:MAX_MESSAGE] or None,
        lastTransitionTime=transition_time(old_status, old_time, status, now),
        observedGeneration=generation,
    )
    return [*(c for c in conditions if c.type != kind), new]
