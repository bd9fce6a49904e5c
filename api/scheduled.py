"""``ScheduledSparkApplication`` (``sparkop.io/v1alpha1``): a SparkApplication template run on a cron
schedule, with kubeflow spark-operator v1beta2's field names, plus ``startingDeadlineSeconds``.

Also the one reading of a schedule (:func:`parse_schedule`), shared by the controller
(``schedule_controller``) and ``sparkop validate``, and the cross-field rules of the kind: the
SparkApplication rules of :mod:`api.rules`, moved under ``spec.template`` (the template is validated
as a SparkApplicationSpec), and the shape of ``spec.schedule``.

What a schedule is:

- five cron fields (minute hour day-of-month month day-of-week), read by croniter, in ``timeZone``
  (an IANA name; UTC when unset);
- a macro: ``@yearly``, ``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@midnight``,
  ``@hourly``;
- ``@every <duration>`` (Go's duration syntax, e.g. ``3m``, ``1h30m``): the times
  ``creationTimestamp + k * duration``, k >= 1. At least one minute: a run is named after the minute
  it is scheduled for.

Wall-clock times that a daylight-saving change repeats (the second 01:30 of a fall-back night) are
not run again when the schedule names its hours; times skipped by a spring-forward gap run at the
first instant after the gap (croniter's reading, and cron's).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Annotated, Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import Field

from sparkop.domain import labels

from . import rules
from .models import KindObject, Model, SparkApplicationSpec
from .types import Str, Time

KIND: Final = "ScheduledSparkApplication"

MACROS: Final = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_GO_DURATION_UNITS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GO_DURATION: Final = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
# The shape the API server checks (CEL) and `sparkop validate` checks the same way; the values
# themselves (a minute 61, an unknown time zone) are checked by parse_schedule.
SCHEDULE_PATTERN: Final = (
    r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)"
    r"|@every ([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h)"
    r"(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))*"
    r"|[^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+)$"
)
MIN_EVERY: Final = timedelta(minutes=1)
SHAPE_HINT: Final = "write five cron fields such as '*/10 * * * *', a macro such as @hourly, or @every 5m"
_WILDCARD_HOURS: Final = re.compile(r"^\*(/[0-9]+)?$")


class ConcurrencyPolicy(enum.StrEnum):
    """What a scheduled time does while an earlier run is still going: start beside it, skip, or replace it."""

    ALLOW = "Allow"
    FORBID = "Forbid"
    REPLACE = "Replace"


class ScheduleState(enum.StrEnum):
    """State of a ScheduledSparkApplication (kubeflow spark-operator's values)."""

    SCHEDULED = "Scheduled"
    SUSPENDED = "Suspended"
    FAILED_VALIDATION = "FailedValidation"


class ScheduledSparkApplicationSpec(Model):
    """A SparkApplication template and the schedule its runs are started on (kubeflow v1beta2)."""

    schedule: Annotated[str, Field(max_length=256)] = Field(
        description="When to start a run: five cron fields (minute hour day-of-month month day-of-week), a macro "
        "(@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly), or @every <duration> (Go syntax, "
        "at least 1m; the times creationTimestamp + k x duration). Each run is a SparkApplication named "
        "<name>-<scheduled time in minutes since the Unix epoch>."
    )
    timeZone: Str | None = Field(
        None,
        description="IANA time zone the cron fields are read in, e.g. Europe/Paris (default UTC; kubeflow's "
        "default is the operator's local zone, which is UTC in its image).",
    )
    template: SparkApplicationSpec = Field(
        description="The spec of each run's SparkApplication (validated as one; the ScheduledSparkApplication's "
        "labels are copied onto each run)."
    )
    suspend: bool | None = Field(
        None,
        description="true: start no new runs (running ones go on). Scheduled times passed while suspended count "
        "as missed: on resuming, the latest is started if within startingDeadlineSeconds (as a CronJob does).",
    )
    concurrencyPolicy: ConcurrencyPolicy = Field(
        ConcurrencyPolicy.ALLOW,
        description="When a run is due while another is still running: Allow starts it anyway, Forbid skips "
        "this scheduled time, Replace deletes the running one(s) and starts the new one.",
    )
    successfulRunHistoryLimit: int = Field(
        1, ge=0, description="Completed runs to keep (the oldest are deleted first)."
    )
    failedRunHistoryLimit: int = Field(1, ge=0, description="Failed runs to keep (the oldest are deleted first).")
    startingDeadlineSeconds: int | None = Field(
        None,
        ge=0,
        description="sparkop's addition (CronJob's field; kubeflow has none): a run not started within this many "
        "seconds of its scheduled time (the operator was down, or the object suspended) is not started at all. "
        "Unset: the latest missed time is started however late. Of several missed times only the latest is "
        "ever started.",
    )


class ScheduledSparkApplicationStatus(Model):
    """What the schedule did (kubeflow v1beta2's fields, plus a few)."""

    scheduleState: ScheduleState | None = Field(None, description="Scheduled, Suspended or FailedValidation.")
    reason: Annotated[str, Field(max_length=4096)] | None = Field(
        None, description="Why the state is what it is (the schedule's error when FailedValidation)."
    )
    observedGeneration: int | None = Field(None, ge=0, description="metadata.generation last acted on.")
    lastRun: Time | None = Field(None, description="Scheduled time of the most recent run started.")
    lastRunName: Annotated[str, Field(max_length=253)] | None = Field(
        None, description="SparkApplication of the most recent run."
    )
    nextRun: Time | None = Field(None, description="When the next run is due (unset while suspended or invalid).")
    lastScheduledTime: Time | None = Field(
        None,
        description="The latest scheduled time acted on: started, skipped (Forbid) or missed (past "
        "startingDeadlineSeconds). A time is never acted on twice.",
    )
    activeRunNames: list[Annotated[str, Field(max_length=253)]] | None = Field(
        None, max_length=1024, description="Runs not finished yet."
    )
    pastSuccessfulRunNames: list[Annotated[str, Field(max_length=253)]] | None = Field(
        None, max_length=1024, description="Completed runs kept, newest first."
    )
    pastFailedRunNames: list[Annotated[str, Field(max_length=253)]] | None = Field(
        None, max_length=1024, description="Failed runs kept, newest first."
    )


class ScheduledSparkApplication(KindObject[ScheduledSparkApplicationSpec, ScheduledSparkApplicationStatus]):
    """A SparkApplication started on a schedule (in sparkop's group, or in kubeflow's)."""

    apiVersion: Literal["sparkop.io/v1alpha1", "sparkoperator.k8s.io/v1beta2"] = "sparkop.io/v1alpha1"
    kind: Literal["ScheduledSparkApplication"] = "ScheduledSparkApplication"


# ------------------------------------------------------------------------------------------------
# reading a schedule


class ScheduleError(ValueError):
    """A schedule or time zone that cannot be read: the field, what is wrong, how to fix it."""

    def __init__(self, field: str, message: str, hint: str) -> None:
        super().__init__(f"{field}: {message} (fix: {hint})")
        self.field = field
        self.message = message
        self.hint = hint


def _go_duration(text: str) -> timedelta:
    pos, seconds = 0, 0.0
    for match in _GO_DURATION.finditer(text):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _GO_DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ScheduleError("spec.schedule", f"{text!r} is not a duration", "write it as Go does, e.g. 5m or 1h30m")
    return timedelta(seconds=seconds)


@dataclass(frozen=True)
class Schedule:
    """The scheduled times of one ScheduledSparkApplication: cron fields in a zone, or a fixed period
    from an anchor (its creationTimestamp)."""

    expression: str | None  # cron fields or a macro
    zone: tzinfo
    every: timedelta | None
    anchor: datetime

    def _repeat(self, at: datetime) -> bool:
        """``at`` is the second instance of a wall-clock time a fall-back repeats, and the schedule
        names its hours (a time like "daily at 01:30" runs once)."""
        assert self.expression is not None
        local = at.astimezone(self.zone)
        if not local.fold:
            return False
        if local.replace(fold=0).astimezone(UTC) == at.astimezone(UTC):
            return False  # not ambiguous
        fields = self.expression.split()
        hours = fields[1] if len(fields) == 5 else ""
        return not _WILDCARD_HOURS.match(hours)

    def latest(self, now: datetime) -> datetime | None:
        """The latest scheduled time at or before ``now`` (after the anchor), or None."""
        if self.every is not None:
            periods = (now - self.anchor) // self.every
            return self.anchor + periods * self.every if periods >= 1 else None
        assert self.expression is not None
        it = croniter(self.expression, now.astimezone(self.zone))
        prev: datetime = it.get_prev(datetime)
        after: datetime = croniter(self.expression, prev).get_next(datetime)
        if after <= now:
            prev = after
        for _ in range(3):  # at most one repeated wall-clock time to pass over
            if not self._repeat(prev):
                break
            prev = croniter(self.expression, prev).get_prev(datetime)
        return prev.astimezone(UTC) if prev > self.anchor else None

    def next_after(self, moment: datetime) -> datetime:
        """The first scheduled time strictly after ``moment`` (and after the anchor)."""
        moment = max(moment, self.anchor)
        if self.every is not None:
            return self.anchor + ((moment - self.anchor) // self.every + 1) * self.every
        assert self.expression is not None
        it = croniter(self.expression, moment.astimezone(self.zone))
        found: datetime = it.get_next(datetime)
        for _ in range(3):
            if not self._repeat(found):
                break
            found = it.get_next(datetime)
        return found.astimezone(UTC)


def parse_schedule(schedule: str, time_zone: str | None, anchor: datetime) -> Schedule:
    """The schedule of ``spec.schedule`` in ``spec.timeZone``; ScheduleError says what is wrong."""
    zone: tzinfo = UTC
    if time_zone:
        try:
            zone = ZoneInfo(time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ScheduleError(
                "spec.timeZone", f"unknown time zone {time_zone!r}", "use an IANA name such as Europe/Paris"
            ) from None
    text = schedule.strip()
    if not re.fullmatch(SCHEDULE_PATTERN, text):
        raise ScheduleError("spec.schedule", f"{schedule!r} is not a schedule", SHAPE_HINT)
    if text.startswith("@every "):
        every = _go_duration(text.removeprefix("@every ").strip())
        if every < MIN_EVERY:
            raise ScheduleError(
                "spec.schedule",
                f"{text!r} is shorter than a minute",
                "use at least @every 1m (runs are named after the minute they are scheduled for)",
            )
        return Schedule(None, zone, every, anchor.replace(microsecond=0))
    if not croniter.is_valid(text):
        raise ScheduleError("spec.schedule", f"{schedule!r} has a field out of range", SHAPE_HINT)
    return Schedule(text, zone, None, anchor)


# ------------------------------------------------------------------------------------------------
# rules


TEMPLATE: Final = ("spec", "template")


def _template_rules() -> tuple[rules.Rule, ...]:
    """The SparkApplication rules, each moved from ``spec`` to ``spec.template``."""
    out = []
    for rule in rules.RULES:
        if rules.APP not in rule.kinds:
            continue
        paths = tuple(TEMPLATE + path[1:] for path in rule.paths if path[:1] == ("spec",))
        if paths:
            out.append(
                rules.Rule(
                    name=f"template-{rule.name}",
                    kinds=(KIND,),
                    paths=paths,
                    cel=rule.cel,
                    message=rule.message,
                    predicate=rule.predicate,
                    field_path=rule.field_path,
                    hint=rule.hint.replace("spec.", "spec.template."),
                    reason=rule.reason,
                    extra=rule.extra,
                    measure=rule.measure,
                    groups=rule.groups,
                )
            )
    return tuple(out)


SCHEDULE_SHAPE: Final = rules.Rule(
    name="schedule-shape",
    kinds=(KIND,),
    paths=(("spec",),),
    cel=f"self.schedule.matches('{SCHEDULE_PATTERN}')",
    message="schedule must be five cron fields, a macro (@hourly, @daily, ...) or @every <duration>",
    field_path=".schedule",
    hint=SHAPE_HINT,
    predicate=lambda s: re.fullmatch(SCHEDULE_PATTERN, str(s.get("schedule", ""))) is not None,
)


def rules_for(kind: str, group: str = labels.GROUP) -> tuple[rules.Rule, ...]:
    """Every cross-field rule of ``kind`` in ``group``'s CRD: api.rules' table, and for this kind its own."""
    every = (*_template_rules(), SCHEDULE_SHAPE) if kind == KIND else tuple(r for r in rules.RULES if kind in r.kinds)
    return tuple(r for r in every if group in r.groups)


def schedule_errors(doc: object) -> list[tuple[str, str, str]]:
    """(field path, message, hint) when a ScheduledSparkApplication's schedule or time zone cannot be
    read (what the controller would report as FailedValidation): ``sparkop validate`` says it first."""
    spec = doc.get("spec") if isinstance(doc, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("schedule"), str):
        return []
    zone = spec.get("timeZone")
    if not re.fullmatch(SCHEDULE_PATTERN, spec["schedule"]) and not (isinstance(zone, str) and zone):
        return []  # the shape rule already says it
    try:
        parse_schedule(spec["schedule"], zone if isinstance(zone, str) else None, datetime(2000, 1, 1, tzinfo=UTC))
    except ScheduleError as exc:
        return [(exc.field, exc.message, exc.hint)]
    return []


__all__ = [
    "KIND",
    "ConcurrencyPolicy",
    "Schedule",
    "ScheduleError",
    "ScheduleState",
    "ScheduledSparkApplication",
    "ScheduledSparkApplicationSpec",
    "ScheduledSparkApplicationStatus",
    "parse_schedule",
    "rules_for",
    "schedule_errors",
]
