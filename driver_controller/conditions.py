"""status.conditions of a SparkDriver: ``Queued``, from its batch scheduler's PodGroup while the gang
waits (:func:`queued`), and ``Stuck``, from what its current driver pod shows while it has
not ended. True when the Spark container waits in a state that does not clear by itself
(ImagePullBackOff, CrashLoopBackOff, ...: :data:`driver_controller.summaries.STUCK_WAITING`; the reason
is the waiting reason) or when the pod has been unschedulable for ``unschedulable_timeout`` seconds
(reason Unschedulable); False (Progressing) once that is over. lastTransitionTime moves only when the
condition's status does. Pure: :func:`stuck` says what to record, decide records it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from sparkop.api.models import Condition, with_condition
from sparkop.driver_controller.status import MAX_MESSAGE
from sparkop.driver_controller.summaries import PodGroupSummary, PodSummary

CONDITION_STUCK: Final = "Stuck"
CONDITION_UNSCHEDULABLE: Final = "Unschedulable"  # the Stuck condition's reason for a pod not scheduled
PROGRESSING: Final = "Progressing"  # its reason once the pod is no longer stuck

CONDITION_QUEUED: Final = "Queued"
SCHEDULED: Final = "Scheduled"  # the Queued condition's reason once the gang got its place
# The PodGroup phases in which a gang has not been given its place: Volcano's Pending (not enqueued:
# its minResources do not fit the queue or the cluster) and Inqueue (admitted, its pods not yet
# bound); scheduler-plugins' Pending, PreScheduling and Scheduling.
GANG_WAITING_PHASES: Final = frozenset({"Pending", "Inqueue", "PreScheduling", "Scheduling"})


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


def queued(
    group: PodGroupSummary | None,
    pod: PodSummary,
    conditions: Sequence[Condition],
    now: datetime,
    generation: int | None,
) -> list[Condition] | None:
    """The Queued condition of a driver whose pods a batch scheduler places as a gang: True while its
    driver pod is unbound and its PodGroup waits (reason and message from the PodGroup's status),
    False (Scheduled) once the driver pod is bound after having waited. None: leave the conditions
    as they are (no PodGroup, or a gang that never waited)."""
    old = next((c for c in conditions if c.type == CONDITION_QUEUED), None)
    if group is None:
        return None
    if pod.node_name is None and pod.phase == "Pending" and group.phase in GANG_WAITING_PHASES:
        reason = group.reason or f"PodGroup{group.phase}"
        # A PodGroup without a condition of its own (scheduler-plugins'): its scheduler said why on the pod.
        said = group.message or (
            f"driver pod {pod.name}: {pod.unschedulable_message}" if pod.unschedulable_message else ""
        )
        why = f": {said}" if said else ""
        message = f"PodGroup {group.name} is {group.phase}{why}"
        return set_condition(conditions, CONDITION_QUEUED, "True", reason, message, now, generation)
    if old is not None and old.status == "True":
        message = f"PodGroup {group.name} is {group.phase}; driver pod {pod.name} bound to {pod.node_name or '?'}"
        return set_condition(conditions, CONDITION_QUEUED, "False", SCHEDULED, message, now, generation)
    return None


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
    """``conditions`` with the one of type ``kind`` set (``api.models.with_condition``), its message cut to
    the status's bound (an empty one: none)."""
    return with_condition(conditions, kind, status, reason, message[:MAX_MESSAGE] or None, now, generation)
