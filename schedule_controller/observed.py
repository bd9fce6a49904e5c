"""What one pass of the schedule controller decides from: a ScheduledSparkApplication and the
SparkApplications it owns (its runs), read leniently from the informer caches."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from sparkop.api.scheduled import KIND, Schedule, ScheduledSparkApplicationStatus, ScheduleError, parse_schedule
from sparkop.core.jsonread import mapping
from sparkop.core.owners import ObservedOwn, OwnedView, controller_keys, owned_by, owned_identity
from sparkop.core.times import parse_time
from sparkop.domain import labels
from sparkop.domain.kinds import ServedView, served_fields
from sparkop.domain.labels import GROUP

Key = tuple[str, str]  # (namespace, ScheduledSparkApplication name)

COMPLETED: Final = "COMPLETED"
FAILED: Final = "FAILED"


@dataclass(frozen=True, kw_only=True)
class ScheduledView(ServedView):
    """The facts of one ScheduledSparkApplication a pass reads (its status: Observed.status)."""

    created: datetime
    schedule: Schedule | ScheduleError  # spec.schedule and spec.timeZone read, or why they cannot be

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ScheduledView:
        fields = served_fields(body)
        created = parse_time(mapping(body.get("metadata")).get("creationTimestamp")) or datetime.fromtimestamp(0, UTC)
        return cls(**fields, created=created, schedule=_schedule(fields["spec"], created))


def _schedule(spec: Mapping[str, Any], created: datetime) -> Schedule | ScheduleError:
    zone = spec.get("timeZone")
    try:
        return parse_schedule(
            str(spec.get("schedule") or ""), zone if isinstance(zone, str) and zone else None, created
        )
    except ScheduleError as exc:
        return exc


@dataclass(frozen=True, kw_only=True)
class RunView(OwnedView):
    """One SparkApplication a ScheduledSparkApplication started."""

    scheduled: datetime | None  # its scheduled time (annotation), None when unreadable
    created: datetime | None
    state: str | None  # status.applicationState.state

    @property
    def finished(self) -> bool:
        return self.state in (COMPLETED, FAILED)

    @property
    def when(self) -> datetime:
        """What orders runs: the scheduled time, else the creation time."""
        return self.scheduled or self.created or datetime.fromtimestamp(0, UTC)

    @classmethod
    def from_body(cls, body: Mapping[str, Any], group: str = GROUP) -> RunView:
        """A run as the schedule controller of ``group``'s ScheduledSparkApplications sees it."""
        meta = mapping(body.get("metadata"))
        state = mapping(mapping(body.get("status")).get("applicationState")).get("state")
        return cls(
            **owned_identity(body, group, KIND),
            scheduled=parse_time(mapping(meta.get("annotations")).get(labels.SCHEDULED_TIME)),
            created=parse_time(meta.get("creationTimestamp")),
            state=state if isinstance(state, str) else None,
        )


@dataclass(frozen=True)
class Observed(ObservedOwn[ScheduledSparkApplicationStatus]):
    """Everything one pass decides from. ``runs``: the SparkApplications filed under this key (only those
    whose controller is this object's uid count). ``refusals``: creates the API server refused, by
    ``core.plan.refusal_key``. ``body``: the object as listed, for the runs' ownerReference."""

    scheduled: ScheduledView
    runs: Sequence[RunView] = ()

    @property
    def owned(self) -> tuple[RunView, ...]:
        """Our runs, oldest first."""
        return owned_by(self.runs, self.scheduled.uid, lambda r: r.when)


def owner_keys(group: str = labels.GROUP) -> Callable[[Mapping[str, Any]], list[Key]]:
    """How the schedule controller of ``group`` files its runs: under their controller owner's key."""
    return controller_keys(group, KIND)
