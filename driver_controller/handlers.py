"""The shell of the driver controller: indexes over the informer caches (keys:
:data:`driver_controller.observe.Key`), enqueue-only change handlers, and one ``reconcile_key`` that
applies the pure plan through the shared Applier. Registered by ``sparkop run --controllers driver``.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from core import labels, logs
from core.jsontypes import JSON
from core.kube import CONFIGMAPS, NETWORK_POLICIES, PODS, SERVICES, SPARK_DRIVERS, Resource, Rules
from core.reconciler import Applied, Applier, Learned, Learnt, Plan
from core.runtime import Runtime
from driver_controller import metrics
from driver_controller import reconcile as rc
from driver_controller.observe import (
    Key,
    own_key,
    owner_key,
    pod_view,
    policy_view,
    summarize_object,
    summarize_pod,
    summarize_policy,
    trim_owned,
    trim_pod,
    trim_policy,
)
from driver_controller.transitions import TRANSITIONS

log = logging.getLogger(__name__)


INDEX_DRIVERS = "sparkop_driver_sparkdrivers"
INDEX_PODS = "sparkop_driver_pods"
INDEX_CONFIGMAPS = "sparkop_driver_configmaps"
INDEX_SERVICES = "sparkop_driver_services"
INDEX_NETWORK_POLICIES = "sparkop_driver_networkpolicies"

# A refused create is decided on again at once; a pass that keeps learning ends, and the queue retries.
MAX_DECISIONS_PER_PASS: Final = 4


class DriverController:
    """State shared by the handlers of one operator: the runtime and the work queue."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = rc.Settings(unschedulable_timeout=runtime.options.unschedulable_timeout_seconds)
        self.queue = runtime.queue("driver", self.reconcile_key)
        decision = partial(logs.decision, log)
        self.applier: Applier[Key] = Applier(runtime.kube, Rules(), decision, TRANSITIONS.record)

    def _values(self, index: str, key: Key) -> list[Any]:
        return list(self.runtime.index(index).get(key) or ())

    def observe(self, key: Key) -> rc.Observed:
        drivers = self._values(INDEX_DRIVERS, key)
        return rc.Observed(
            drivers[0] if drivers else None,
            self._values(INDEX_PODS, key),
            self._values(INDEX_CONFIGMAPS, key),
            self._values(INDEX_SERVICES, key),
            self.settings,
            transient_error=self.applier.transient_error(key),
            namespace_terminating=self.runtime.namespace_terminating(key[0]),
            network_policies=self._values(INDEX_NETWORK_POLICIES, key),
        )

    async def reconcile_key(self, key: Key) -> float | None:
        """Observe, decide, apply; a create the API server refused is decided on again at once (the
        refusal is now an observation)."""
        for _ in range(MAX_DECISIONS_PER_PASS):
            observed = self.observe(key)
            uid = str(((observed.driver or {}).get("metadata") or {}).get("uid", ""))
            learnt = self.applier.learnt(key, uid)
            observed = replace(observed, refusals=learnt.refusals)
            plan = rc.reconcile(observed, datetime.now(UTC))
            try:
                applied = await self.apply(key, observed, plan, learnt)
            except Learned:
                continue
            return applied.requeue_after
        return 0.0

    async def apply(self, key: Key, observed: rc.Observed, plan: Plan[JSON], learnt: Learnt) -> Applied:
        """Apply ``plan`` (core.reconciler's order); creates only while the SparkDriver is current."""
        # The pass's own copy already: the SparkDriver index decodes every read afresh.
        body = dict(observed.driver) if observed.driver is not None else None
        uid = str(((body or {}).get("metadata") or {}).get("uid", ""))
        current = partial(self.runtime.ensure_holds, INDEX_DRIVERS, key, uid)
        return await self.applier.apply(key, body, plan, dict, namespace=key[0], seen=learnt, owner_current=current)


def as_read(body: JSON) -> JSON:
    return body


def register(runtime: Runtime) -> None:
    """``sparkop run --controllers driver``: the driver controller's indexes and change handlers."""
    controller = DriverController(runtime)
    # As read: every read of the cache is already a copy of its own (core.informer.Store).
    runtime.add_index(INDEX_DRIVERS, SPARK_DRIVERS, own_key, as_read)
    runtime.enqueue_on_change(SPARK_DRIVERS, controller.queue, own_key)
    owned: tuple[tuple[str, Resource, Any, Any, Any], ...] = (
        (INDEX_PODS, PODS, summarize_pod, pod_view, trim_pod),
        (INDEX_CONFIGMAPS, CONFIGMAPS, summarize_object, summarize_object, trim_owned),
        (INDEX_SERVICES, SERVICES, summarize_object, summarize_object, trim_owned),
        (INDEX_NETWORK_POLICIES, NETWORK_POLICIES, summarize_policy, policy_view, trim_policy),
    )
    for index, resource, summarize, view, trim in owned:
        # Selected on the server by the label's presence: nothing else of the kind is ever sent.
        runtime.add_index(index, resource, owner_key, summarize, selector=labels.DRIVER, transform=trim, shared=True)
        runtime.enqueue_on_change(
            resource, controller.queue, owner_key, selector=labels.DRIVER, view=view, coalesce=True
        )
    runtime.collectors.append(metrics.collector(runtime, metrics.EXECUTORS_INDEX, runtime.options.metrics_labels))
