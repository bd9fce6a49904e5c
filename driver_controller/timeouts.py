"""A run's timeouts and its bound on executors failing in a loop, as level-triggered facts: pure
functions of the SparkDriver's spec, the operator's defaults, the times its status records (and the
objects' own creation times), and ``now``. Nothing is a timer in memory: a restarted operator works
out the same deadlines from the same times, so a wait is neither reset nor doubled.

* ``DriverStartTimedOut``: the driver container not running ``timeouts.driverStartSeconds`` after its
  pod's creation (unschedulable, image not pulled, a volume not mounted): an infrastructure failure;
* ``DriverReadyTimedOut``: the driver pod not Ready ``timeouts.driverReadySeconds`` after its creation
  (a Spark Connect server whose gRPC port never answers);
* ``ExecutorsStartTimedOut``: fewer executors running than the run needs
  ``timeouts.executorsStartSeconds`` after the driver started: an infrastructure failure;
* ``DeadlineExceeded``: the run (the SparkDriver) still going ``activeDeadlineSeconds`` after it was
  created;
* ``ExecutorsCrashLooping``: more than ``executorFailures.maxFailures`` executor pods of the current
  driver pod failed within ``executorFailures.windowSeconds``.

Each ends the run (Failed, with the reason above and a message naming what was waited for and why it
did not come), and the closing steps then delete its driver pod and executors
(:func:`driver_controller.cleanup.stale_incarnations`, :func:`driver_controller.cleanup.executors`).

Two steps of the decision (:data:`driver_controller.decide.STEPS`) apply them: :func:`deadline` right
after the incarnation is known (a run past its deadline ends also while it waits for Kueue or for its
driver pod), and :func:`waits` once the driver pod was followed (the times it is seen running and Ready
recorded, the executors counted, the first wait that is over ends the run, else status says which is
next and the queue looks again then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from sparkop.api import models
from sparkop.api.models import (
    DriverPhase,
    ExecutorFailure,
    IncarnationOutcome,
    PendingTimeout,
    SparkDriverSpec,
    Termination,
)
from sparkop.core.times import parse_time
from sparkop.domain import labels
from sparkop.driver_controller.facts import Continue, Facts, Outcome, Stop, Why
from sparkop.driver_controller.observed import Limits
from sparkop.driver_controller.pod import outcome
from sparkop.driver_controller.summaries import PodSummary

DRIVER_START: Final = models.DRIVER_START_TIMED_OUT
DRIVER_READY: Final = models.DRIVER_READY_TIMED_OUT
EXECUTORS_START: Final = models.EXECUTORS_START_TIMED_OUT
DEADLINE: Final = models.DEADLINE_EXCEEDED
CRASH_LOOP: Final = models.EXECUTORS_CRASH_LOOPING
REASONS: Final = models.TIMEOUT_REASONS
# Spark's default spark.executor.instances.
DEFAULT_INSTANCES: Final = 2
MAX_FAILURES_KEPT: Final = 64
MAX_TEXT: Final = 2048
MAX_MESSAGE: Final = 4096


def _set(value: int | None, default: int | None) -> int | None:
    chosen = value if value is not None else default
    return chosen if chosen else None  # 0: none


def limits(spec: SparkDriverSpec, defaults: Limits) -> Limits:
    """The spec's limits, the operator's ``defaults`` where it sets none (0 in either: none)."""
    t = spec.timeouts
    failures = spec.executorFailures
    return Limits(
        driver_start=_set(t.driverStartSeconds if t else None, defaults.driver_start),
        driver_ready=_set(t.driverReadySeconds if t else None, defaults.driver_ready),
        executors_start=_set(t.executorsStartSeconds if t else None, defaults.executors_start),
        deadline=_set(spec.activeDeadlineSeconds, defaults.deadline),
        max_failures=failures.maxFailures if failures else defaults.max_failures or None,
        failure_window=failures.windowSeconds if failures else defaults.failure_window,
    )


def required_executors(spec: SparkDriverSpec) -> int:
    """The executors a run needs running for its start to be over: dynamicAllocation's minExecutors,
    else executor.instances (spark.executor.instances, Spark's default 2); at least one."""
    dynamic = spec.dynamicAllocation
    conf: Mapping[str, Any] = spec.sparkConf or {}
    if (dynamic is not None and dynamic.enabled) or str(conf.get("spark.dynamicAllocation.enabled")).lower() == "true":
        wanted = dynamic.minExecutors if dynamic is not None and dynamic.minExecutors is not None else 0
    elif spec.executor.instances is not None:
        wanted = spec.executor.instances
    else:
        text = str(conf.get("spark.executor.instances", DEFAULT_INSTANCES)).strip()
        wanted = int(text) if text.isdigit() else DEFAULT_INSTANCES
    return max(1, wanted)


@dataclass(frozen=True)
class Times:
    """The times the timeouts are counted from and what ends each wait (None: not yet)."""

    run_created: datetime | None  # the SparkDriver's creationTimestamp
    pod_created: datetime | None  # the current driver pod's creation
    running: datetime | None  # its driver container first seen running
    ready: datetime | None  # it was first seen Ready
    executors_started: datetime | None  # the run's executors first all running
    ended: bool = False  # the driver pod has finished: no start or readiness is awaited any more


@dataclass(frozen=True)
class Expired:
    reason: str
    message: str


def pending(lim: Limits, facts: Times) -> list[PendingTimeout]:
    """Every wait still running, with when it expires."""

    def after(start: datetime | None, seconds: int | None) -> datetime | None:
        return start + timedelta(seconds=seconds) if start is not None and seconds is not None else None

    waits = [(DEADLINE, after(facts.run_created, lim.deadline))]
    if not facts.ended:
        if facts.running is None:
            waits.append((DRIVER_START, after(facts.pod_created, lim.driver_start)))
        if facts.ready is None:
            waits.append((DRIVER_READY, after(facts.pod_created, lim.driver_ready)))
        if facts.running is not None and facts.executors_started is None:
            waits.append((EXECUTORS_START, after(facts.running, lim.executors_start)))
    return sorted((PendingTimeout(reason=r, time=t) for r, t in waits if t is not None), key=lambda p: p.time)


def expired(
    lim: Limits, facts: Times, now: datetime, pod: PodSummary | None, running: int, needed: int
) -> Expired | None:
    """The first wait that is over at ``now``, with what it waited for and why it did not come."""
    for wait in pending(lim, facts):
        if wait.time > now:
            return None
        return Expired(wait.reason, _message(wait.reason, lim, pod, running, needed))
    return None


def _message(reason: str, lim: Limits, pod: PodSummary | None, running: int, needed: int) -> str:
    name = pod.name if pod is not None else "the driver pod"
    why = _why_not_started(pod)
    if reason == DRIVER_START:
        return f"driver pod {name} not running {lim.driver_start}s after its creation{why}"
    if reason == DRIVER_READY:
        return f"driver pod {name} not Ready {lim.driver_ready}s after its creation{why}"
    if reason == EXECUTORS_START:
        return f"{running} of {needed} executors running {lim.executors_start}s after the driver started"
    return f"the run was still going {lim.deadline}s after it was created (activeDeadlineSeconds): stopped"


def _why_not_started(pod: PodSummary | None) -> str:
    if pod is None:
        return ": no driver pod"
    if pod.waiting_reason:
        return f": {pod.waiting_reason}" + (f": {pod.waiting_message}" if pod.waiting_message else "")
    if pod.unschedulable_message or pod.unschedulable_since is not None:
        return f": unschedulable: {pod.unschedulable_message or ''}".rstrip(": ")
    return f" (pod phase {pod.phase or 'unknown'})"


# ---------------------------------------------------------------------------------------------------
# executors failing in a loop


def failures(
    recorded: Sequence[ExecutorFailure], failed: Sequence[PodSummary], lim: Limits, now: datetime
) -> list[ExecutorFailure]:
    """The failed executor pods of the current incarnation within the window: those recorded, plus
    those ``failed`` shows that are not yet (each once, by pod name), oldest first."""
    known = {f.pod for f in recorded}
    found = list(recorded)
    for pod in failed:
        if pod.name in known:
            continue
        term = pod.terminated
        found.append(
            ExecutorFailure(
                pod=pod.name,
                time=(term.finished_at if term is not None and term.finished_at is not None else now),
                exitCode=term.exit_code if term is not None else None,
                reason=(term.reason if term is not None else None) or pod.reason or None,
                message=((term.message if term is not None else None) or pod.message or "")[-MAX_TEXT:] or None,
            )
        )
    since = now - timedelta(seconds=lim.failure_window)
    kept = [f for f in found if f.time is None or f.time >= since]
    return sorted(kept, key=lambda f: (f.time or now, f.pod))[-MAX_FAILURES_KEPT:]


def crash_loop(lim: Limits, within: Sequence[ExecutorFailure]) -> Expired | None:
    """More failed executors within the window than the bound: the run fails, naming the last error."""
    if lim.max_failures is None or len(within) <= lim.max_failures:
        return None
    last = within[-1]
    error = ", ".join(
        part
        for part in (
            f"exit code {last.exitCode}" if last.exitCode is not None else "",
            last.reason or "",
            _last_lines(last.message),
        )
        if part
    )
    message = (
        f"{len(within)} executor pods failed within {lim.failure_window}s (executorFailures.maxFailures "
        f"{lim.max_failures}); the last, {last.pod}: {error or 'no error recorded'}"
    )
    return Expired(CRASH_LOOP, message)


def _last_lines(message: str | None, count: int = 3) -> str:
    """The end of an executor's message (its log's end, with FallbackToLogsOnError) on one line: a JVM
    that cannot start says why above its closing "Error: A fatal exception has occurred"."""
    lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
    return " / ".join(lines[-count:])[-MAX_TEXT:]


# ---------------------------------------------------------------------------------------------------
# the steps


def deadline(f: Facts) -> Outcome:
    """activeDeadlineSeconds: a run still going that long after the SparkDriver's creation ends, also
    while it waits for Kueue or for its driver pod. A driver pod that finished meanwhile is followed
    instead (its outcome, not the deadline, is the run's)."""
    lim = limits(f.driver.spec, f.observed.settings.timeouts)
    created = parse_time(f.driver.metadata.get("creationTimestamp"))
    if lim.deadline is None or created is None:
        return Continue(f)
    pod = f.driver_pod(f.incarnation)
    if pod is not None and outcome(pod) is not None:
        return Continue(f)
    at = created + timedelta(seconds=lim.deadline)
    if at > f.now:
        # waits() says which wait is next when the decision gets that far; this is the next one otherwise.
        f = f.update(nextTimeout=PendingTimeout(reason=DEADLINE, time=at))
        return Continue(f.requeue(_seconds_until(at, f.now)))
    return Stop(time_out(f, Expired(DEADLINE, _message(DEADLINE, lim, pod, 0, 0))), Why.TIMED_OUT)


def waits(f: Facts) -> Outcome:
    """The driver's start and readiness, its executors' start, and its executors failing in a loop:
    the times they count from recorded (first seen: a later pass, by any process, counts from the same
    instant), the first that is over ends the run; otherwise status says which comes next."""
    lim = limits(f.driver.spec, f.observed.settings.timeouts)
    if not lim.any:
        return Continue(f.update(nextTimeout=None) if f.status.nextTimeout is not None else f)
    current = [o for o in f.owned_pods if o.role == labels.ROLE_EXECUTOR and o.incarnation == f.incarnation]
    running = sum(1 for o in current if o.phase == "Running" and not o.deleting)
    needed = required_executors(f.driver.spec)
    if lim.executors_start is not None and f.status.executorsStartedTime is None and running >= needed:
        f = f.update(executorsStartedTime=f.now)
    if lim.bounds_failures:
        failed = [o for o in current if o.phase == "Failed"]
        recorded = f.status.executorFailures or ()
        within = failures(recorded, failed, lim, f.now)
        if [x.pod for x in within] != [x.pod for x in recorded]:
            f = f.update(executorFailures=within or None)
        looping = crash_loop(lim, within)
        if looping is not None:
            return Stop(time_out(f, looping), Why.TIMED_OUT)
    pod = f.driver_pod(f.incarnation)
    if lim.times_wanted and pod is not None:
        f = _pod_times(f, pod)
    info = f.status.driverPod
    times = Times(
        run_created=parse_time(f.driver.metadata.get("creationTimestamp")),
        pod_created=(pod.created if pod is not None else None) or (info.createdTime if info else None),
        running=info.runningTime if info else None,
        ready=info.readyTime if info else None,
        executors_started=f.status.executorsStartedTime,
        ended=pod is not None and pod.finished,
    )
    over = expired(lim, times, f.now, pod, running, needed)
    if over is not None:
        return Stop(time_out(f, over), Why.TIMED_OUT)
    upcoming = pending(lim, times)
    next_one = upcoming[0] if upcoming else None
    if f.status.nextTimeout != next_one:
        f = f.update(nextTimeout=next_one)
    return Continue(f.requeue(_seconds_until(next_one.time, f.now)) if next_one is not None else f)


def _pod_times(f: Facts, pod: PodSummary) -> Facts:
    """The current driver pod's info with when it was created, first seen running and first seen Ready
    (kept from status for the same pod, else now when it is so)."""
    info = f.status.driverPod
    if info is None or info.name != pod.name:
        return f
    started = pod.phase == "Running" or pod.terminated is not None
    times = {
        "createdTime": pod.created or info.createdTime,
        "runningTime": info.runningTime or (f.now if started else None),
        "readyTime": info.readyTime or (f.now if pod.ready else None),
    }
    if all(getattr(info, k) == v for k, v in times.items()):
        return f
    return f.update(driverPod=info.model_copy(update=times))


def time_out(f: Facts, over: Expired) -> Facts:
    """End the run with the reason of the timeout (or bound) that is over: Failed, recorded, a Warning.
    Its driver pod and executors are deleted by the closing steps, as after any end."""
    message = over.message[-MAX_MESSAGE:]
    f = f.update(
        phase=DriverPhase.FAILED,
        termination=Termination(reason=over.reason, message=message),
        completionTime=f.now,
        nextTimeout=None,
    )
    f = f.record(f.incarnation, f.pod_name, IncarnationOutcome.FAILED, over.reason, message)
    return f.event("Warning", over.reason, message)


def _seconds_until(at: datetime, now: datetime) -> float:
    return max((at - now).total_seconds(), 0.5)


__all__ = [
    "CRASH_LOOP",
    "DEADLINE",
    "DRIVER_READY",
    "DRIVER_START",
    "EXECUTORS_START",
    "REASONS",
    "Expired",
    "Times",
    "crash_loop",
    "deadline",
    "expired",
    "failures",
    "limits",
    "pending",
    "required_executors",
    "time_out",
    "waits",
]
