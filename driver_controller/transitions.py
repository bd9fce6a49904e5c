"""The SparkDriver metrics counted from transitions (docs/metrics.md): kubeflow's executor outcome
counters and sparkop's driver incarnations lost and replaced.

``reconcile`` compares the status it read with the one it decided (:func:`transitions`, pure) and adds
an :class:`~core.reconciler.Observation` per transition to its plan; the Applier records them into
:data:`TRANSITIONS` only after that status write succeeded, so each is counted once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from core.metrics import MetricSpec, Transitions
from core.reconciler import Observation

EXECUTOR_SUCCESS_COUNT: Final = "spark_executor_success_count"
EXECUTOR_FAILURE_COUNT: Final = "spark_executor_failure_count"
DRIVER_PODS_LOST: Final = "sparkop_driver_pods_lost"
DRIVER_PODS_REPLACED: Final = "sparkop_driver_pods_replaced"

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
)

TRANSITIONS: Final = Transitions(SPECS)


def transitions(old: Mapping[str, Any], new: Mapping[str, Any] | None) -> tuple[Observation, ...]:
    """The observations of a SparkDriver's status going from ``old`` to ``new`` (None: not written)."""
    if new is None:
        return ()
    found: list[Observation] = []
    lost_before = {r.get("incarnation") for r in old.get("incarnations") or () if r.get("outcome") == "Lost"}
    for record in new.get("incarnations") or ():
        if record.get("outcome") == "Lost" and record.get("incarnation") not in lost_before:
            found.append(Observation(DRIVER_PODS_LOST, labels=(("reason", str(record.get("reason") or "Unknown")),)))
    was, now = int(old.get("incarnation") or 0), int(new.get("incarnation") or 0)
    found += [Observation(DRIVER_PODS_REPLACED)] * (max(0, now - max(was, 1)))
    # The counts are of the current incarnation's executors: a new one starts from none.
    before = (old.get("executors") or {}) if now == was else {}
    after = new.get("executors") or {}
    for phase, metric in (("succeeded", EXECUTOR_SUCCESS_COUNT), ("failed", EXECUTOR_FAILURE_COUNT)):
        found += [Observation(metric)] * max(0, int(after.get(phase) or 0) - int(before.get(phase) or 0))
    return tuple(found)


__all__ = ["SPECS", "TRANSITIONS", "transitions"]
