"""The SparkDriver metrics counted from transitions (docs/metrics.md): kubeflow's executor outcome
counters and sparkop's driver incarnations lost and replaced.

``decide`` compares the status it read with the one it decided (:func:`transitions`, pure) and adds
an :class:`~core.plan.Observation` per transition to its plan; the Applier records them into
:data:`TRANSITIONS` only after that status write succeeded, so each is counted once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sparkop.api import models
from sparkop.api.models import ExecutorCounts, IncarnationOutcome, SparkDriverStatus
from sparkop.core.metrics import MetricSpec, Transitions
from sparkop.core.plan import Observation

EXECUTOR_SUCCESS_COUNT: Final = "spark_executor_success_count"
EXECUTOR_FAILURE_COUNT: Final = "spark_executor_failure_count"
DRIVER_PODS_LOST: Final = "sparkop_driver_pods_lost"
DRIVER_PODS_REPLACED: Final = "sparkop_driver_pods_replaced"
RUNS_TIMED_OUT: Final = "sparkop_driver_runs_timed_out"

SPECS: Final = (
    MetricSpec(EXECUTOR_SUCCESS_COUNT, "Total number of successful Spark executors", "exact counter"),
    MetricSpec(EXECUTOR_FAILURE_COUNT, "Total number of failed Spark executors", "exact counter"),
    MetricSpec(
        DRIVER_PODS_LOST,
        "Driver pods (incarnations) lost before they finished: deleted, evicted, preempted",
        "counter",
        labels=("reason",),
    ),
    MetricSpec(DRIVER_PODS_REPLACED, "Driver pods created to replace a lost incarnation", "counter", labels=()),
    MetricSpec(
        RUNS_TIMED_OUT,
        "Runs sparkop ended: a timeout (DriverStartTimedOut, DriverReadyTimedOut, ExecutorsStartTimedOut, "
        "DeadlineExceeded) or executors failing in a loop (ExecutorsCrashLooping)",
        "counter",
        labels=("reason",),
    ),
)

TRANSITIONS: Final = Transitions(SPECS)


def transitions(
    old: SparkDriverStatus | Mapping[str, Any], new: SparkDriverStatus | Mapping[str, Any] | None
) -> tuple[Observation, ...]:
    """The observations of a SparkDriver's status going from ``old`` to ``new`` (None: not written);
    either as the model or as its JSON."""
    if new is None:
        return ()
    before_status, after_status = _typed(old), _typed(new)
    found: list[Observation] = []
    lost = IncarnationOutcome.LOST
    lost_before = {r.incarnation for r in before_status.incarnations or () if r.outcome == lost}
    for record in after_status.incarnations or ():
        if record.outcome == lost and record.incarnation not in lost_before:
            found.append(Observation(DRIVER_PODS_LOST, labels=(("reason", str(record.reason or "Unknown")),)))
    ended = after_status.termination.reason if after_status.termination else None
    if ended in models.TIMEOUT_REASONS and not (before_status.phase and before_status.phase.terminal):
        found.append(Observation(RUNS_TIMED_OUT, labels=(("reason", ended),)))
    was, now = before_status.incarnation, after_status.incarnation
    found += [Observation(DRIVER_PODS_REPLACED)] * (max(0, now - max(was, 1)))
    # The counts are of the current incarnation's executors: a new one starts from none.
    before = before_status.executors if now == was else ExecutorCounts()
    after = after_status.executors
    found += [Observation(EXECUTOR_SUCCESS_COUNT)] * max(0, after.succeeded - before.succeeded)
    found += [Observation(EXECUTOR_FAILURE_COUNT)] * max(0, after.failed - before.failed)
    return tuple(found)


def _typed(status: SparkDriverStatus | Mapping[str, Any]) -> SparkDriverStatus:
    return status if isinstance(status, SparkDriverStatus) else SparkDriverStatus.model_validate(status)


__all__ = ["SPECS", "TRANSITIONS", "transitions"]
