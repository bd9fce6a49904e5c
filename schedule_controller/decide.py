"""The schedule controller's one decision: ``decide(observed, now) -> Plan``. Pure: no clock, no I/O.

Which scheduled time is due is computed from the schedule and what exists, never from a timer:

* ``last`` = the latest of the object's creationTimestamp, ``status.lastScheduledTime`` and the
  scheduled times of the runs that exist (a run created by a pass that crashed before its status
  write still counts: it exists);
* ``due`` = the latest scheduled time at or before ``now``. It is acted on when it is after
  ``last``: started, or skipped (Forbid, a run still active), or missed (older than
  ``startingDeadlineSeconds``), and ``lastScheduledTime`` records it. Earlier missed times are never
  started (CronJob's rule: one run for a gap, the latest);
* the run of time ``t`` is the SparkApplication ``<name>-<t in minutes since the epoch>``: created
  before the status write (a crash in between leaves a run that the next pass counts); a retried
  create meets its own earlier self (409, ours), so a time is never started twice.

Finished runs beyond the history limits are deleted (oldest first) after the status write that stops
listing them. The pass asks to be looked at again at the next scheduled time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sparkop.api.scheduled import (
    ConcurrencyPolicy,
    Schedule,
    ScheduledSparkApplicationStatus,
    ScheduleError,
    ScheduleState,
)
from sparkop.core.jsontypes import JSON
from sparkop.core.owners import copy_json, owner_reference
from sparkop.core.plan import Action, Create, Delete, Event, Plan, Refusal, refused
from sparkop.core.times import format_time
from sparkop.domain import labels, naming
from sparkop.schedule_controller.events import Reason
from sparkop.schedule_controller.observed import COMPLETED, FAILED, Observed, RunView, ScheduledView

APP_KIND: Final = "SparkApplication"  # what a schedule starts, in its own group


DEFAULT_HISTORY_LIMIT: Final = 1
# Wake a little after the scheduled instant, not a hair before it.
WAKE_MARGIN_SECONDS: Final = 0.05


def run_name(scheduled_name: str, at: datetime) -> str:
    return naming.scheduled_run_name(scheduled_name, int(at.timestamp()) // 60)


def build_run(sched: ScheduledView, body: JSON, at: datetime) -> JSON:
    """The SparkApplication of the run scheduled at ``at``: the template as its spec, the schedule's
    labels plus ours, controller-owned by the ScheduledSparkApplication ``body``."""
    spec: JSON = copy_json(sched.spec.get("template") or {})
    return {
        "apiVersion": sched.api_version,
        "kind": APP_KIND,
        "metadata": {
            "name": run_name(sched.name, at),
            "namespace": sched.namespace,
            "labels": {
                **sched.labels,
                labels.MANAGED_BY: labels.MANAGER,
                labels.SCHEDULED_APP: naming.label_value(sched.name),
                labels.KUBEFLOW_SCHEDULED_APP_NAME: naming.label_value(sched.name),
            },
            "annotations": {labels.SCHEDULED_TIME: format_time(at) or ""},
            "ownerReferences": [owner_reference(body)],
        },
        "spec": spec,
    }


def _int(value: Any, default: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def _history(
    runs: list[RunView], state: str, limit: int, sched: ScheduledView
) -> tuple[list[str], list[Action], list[Event]]:
    """(kept names newest first, deletes, events) for the finished runs in ``state``."""
    done = sorted((r for r in runs if r.state == state), key=lambda r: r.when, reverse=True)
    kept, pruned = done[:limit], done[limit:]
    name = sched.name
    deletes: list[Action] = [
        Delete(sched.api_version, APP_KIND, r.name, r.uid, Reason.RUN_PRUNED) for r in reversed(pruned)
    ]
    what = "successful" if state == COMPLETED else "failed"
    events = [
        Event("Normal", Reason.RUN_PRUNED, f"deleted {what} run {r.name} ({name} keeps {limit})")
        for r in reversed(pruned)
    ]
    return [r.name for r in kept], deletes, events


def decide(observed: Observed, now: datetime) -> Plan[ScheduledSparkApplicationStatus]:
    sched = observed.scheduled
    if observed.namespace_terminating or sched.deleting:
        return Plan()
    spec = sched.spec
    runs = list(observed.owned)
    status = observed.status.model_copy(deep=True)
    status.observedGeneration = sched.generation
    successful, deletes, pruned = _history(
        runs, COMPLETED, _int(spec.get("successfulRunHistoryLimit"), DEFAULT_HISTORY_LIMIT) or 0, sched
    )
    failed, more_deletes, more_pruned = _history(
        runs, FAILED, _int(spec.get("failedRunHistoryLimit"), DEFAULT_HISTORY_LIMIT) or 0, sched
    )
    plan = (
        Plan[ScheduledSparkApplicationStatus]().with_after(*deletes, *more_deletes).with_events(*pruned, *more_pruned)
    )
    status.pastSuccessfulRunNames = successful or None
    status.pastFailedRunNames = failed or None
    active = [r for r in runs if not r.finished]

    newest = max((r for r in runs if r.scheduled is not None), key=lambda r: r.when, default=None)
    if (
        newest is not None
        and newest.scheduled is not None
        and (status.lastRun is None or newest.scheduled >= status.lastRun)
    ):
        status.lastRun, status.lastRunName = newest.scheduled, newest.name
    last = max(t for t in (sched.created, status.lastScheduledTime, status.lastRun) if t is not None)

    requeue: float | None = None
    schedule: Schedule | None = None
    if isinstance(sched.schedule, ScheduleError):
        error = str(sched.schedule)
        if status.scheduleState != ScheduleState.FAILED_VALIDATION or status.reason != error:
            plan = plan.with_event("Warning", Reason.INVALID_SCHEDULE, error)
        status.scheduleState, status.reason, status.nextRun = ScheduleState.FAILED_VALIDATION, error, None
    else:
        schedule = sched.schedule
    if schedule is not None and spec.get("suspend") is True:
        # kubeflow's operator has no state for a suspended schedule (it leaves its status as it was, and
        # knows no other state when it is back in place: docs/migrating-from-kubeflow.md, "The way back").
        suspended = ScheduleState.SCHEDULED if sched.group == labels.KUBEFLOW_GROUP else ScheduleState.SUSPENDED
        status.scheduleState, status.reason, status.nextRun = suspended, "spec.suspend is true", None
    elif schedule is not None:
        status.scheduleState, status.reason = ScheduleState.SCHEDULED, None
        due = schedule.latest(now)
        if due is not None and due > last:
            started, plan = _act_on(observed, schedule, due, now, active, status, plan)
            if started is not None:
                active = [r for r in active if r.name not in started] + [
                    RunView(
                        name=run_name(sched.name, due),
                        uid="",
                        owner_uid=sched.uid,
                        scheduled=due,
                        created=now,
                        state=None,
                    )
                ]
        status.nextRun = schedule.next_after(now)
        requeue = (status.nextRun - now).total_seconds() + WAKE_MARGIN_SECONDS
    status.activeRunNames = sorted(r.name for r in active) or None
    return plan.with_status(status).requeue(requeue)


def _act_on(
    observed: Observed,
    schedule: Schedule,
    due: datetime,
    now: datetime,
    active: list[RunView],
    status: ScheduledSparkApplicationStatus,
    plan: Plan[ScheduledSparkApplicationStatus],
) -> tuple[set[str] | None, Plan[ScheduledSparkApplicationStatus]]:
    """Start, skip or miss the run of ``due``: the names of the runs it replaced when started (else None),
    and ``plan`` with what that takes."""
    spec = observed.scheduled.spec
    name = run_name(observed.scheduled.name, due)
    when = format_time(due)
    status.lastScheduledTime = due
    deadline = _int(spec.get("startingDeadlineSeconds"), None)
    late = (now - due).total_seconds()
    if deadline is not None and late > deadline:
        message = (
            f"run {name} scheduled at {when} not started: {late:.0f}s late, past startingDeadlineSeconds {deadline}"
        )
        return None, plan.with_event("Warning", Reason.RUN_MISSED, message)
    policy = spec.get("concurrencyPolicy") or ConcurrencyPolicy.ALLOW
    if policy == ConcurrencyPolicy.FORBID and active:
        running = ", ".join(r.name for r in active)
        message = f"run {name} scheduled at {when} skipped: {running} still active (Forbid)"
        return None, plan.with_event("Normal", Reason.RUN_SKIPPED, message)
    manifest = build_run(observed.scheduled, observed.body, due)
    refusal: Refusal | None = refused(observed.refusals, Create(manifest))
    if refusal is not None:
        return None, plan.with_event("Warning", Reason.RUN_REFUSED, refusal.describe(f"run {name} scheduled at {when}"))
    replaced: set[str] = set()
    if policy == ConcurrencyPolicy.REPLACE:
        for run in active:
            if run.name == name:
                continue
            plan = plan.with_before(
                Delete(observed.scheduled.api_version, APP_KIND, run.name, run.uid, Reason.RUN_REPLACED)
            )
            plan = plan.with_event(
                "Normal", Reason.RUN_REPLACED, f"deleted active run {run.name} to start {name} (Replace)"
            )
            replaced.add(run.name)
    plan = plan.with_before(Create(manifest, Reason.RUN_STARTED))
    plan = plan.with_event("Normal", Reason.RUN_STARTED, f"started run {name} scheduled at {when}")
    status.lastRun, status.lastRunName = due, name
    return replaced, plan
