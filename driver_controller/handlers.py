"""The shell of the driver controller: indexes over the informer caches, enqueueing change handlers,
and one ``reconcile_key`` that applies the pure plan through core.kube.

Keys are ``(namespace, sparkop.io/driver label value)``: the label every owned object carries (the
executor pod template puts it on executors too), so the pods, ConfigMaps and Services are watched
with that label as a server-side selector, and an owned object's change maps to its SparkDriver
without reading anything.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from core import labels, logs, naming
from core.caches import NotCurrent
from core.kube import CONFIGMAPS, PODS, SERVICES, SPARK_DRIVERS, Kube, Resource, Rules
from core.reconciler import Applied, Applier, Learned, Learnt, Plan
from core.runtime import Runtime
from driver_controller import reconcile as rc
from driver_controller.observe import ObjectSummary, PodSummary, summarize_object, summarize_pod

log = logging.getLogger(__name__)

Key = tuple[str, str]
Body = dict[str, Any]

INDEX_DRIVERS = "sparkop_driver_sparkdrivers"
INDEX_PODS = "sparkop_driver_pods"
INDEX_CONFIGMAPS = "sparkop_driver_configmaps"
INDEX_SERVICES = "sparkop_driver_services"

# A refused create is decided on again at once; a pass that keeps learning ends, and the queue retries.
MAX_DECISIONS_PER_PASS: Final = 4


def driver_key(namespace: str, name: str) -> Key:
    return (namespace, naming.label_value(name))


class DriverController:
    """State shared by the handlers of one operator: the runtime and the work queue."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.kube: Kube = runtime.kube
        self.settings = rc.Settings(unschedulable_timeout=runtime.options.unschedulable_timeout_seconds)
        self.queue = runtime.queue("driver", self.reconcile_key)
        self.applier: Applier[Key] = Applier(self.kube, Rules(), partial(logs.decision, log))

    def _values(self, index: str, key: Key) -> list[Any]:
        try:
            store = self.runtime.index(index).get(key)
        except KeyError:
            return []
        return list(store) if store is not None else []

    def ensure_owner_current(self, key: Key, uid: str) -> None:
        """Before creating children of the SparkDriver ``uid``: it must still be in the cache, and the
        cache continuous (NotCurrent otherwise: the queue looks again shortly, on a fresh view). A
        SparkDriver deleted during a watch gap leaves the cache with the re-list, so nothing is ever
        created for it from a stale view."""
        drivers = self._values(INDEX_DRIVERS, key)
        if not any((d.get("metadata") or {}).get("uid") == uid for d in drivers):
            raise NotCurrent(f"SparkDriver {key[0]}/{key[1]} of uid {uid} is no longer in the cache")

    def observe(self, key: Key) -> rc.Observed:
        drivers = self._values(INDEX_DRIVERS, key)
        pods: list[PodSummary] = self._values(INDEX_PODS, key)
        config_maps: list[ObjectSummary] = self._values(INDEX_CONFIGMAPS, key)
        services: list[ObjectSummary] = self._values(INDEX_SERVICES, key)
        return rc.Observed(
            drivers[0] if drivers else None,
            pods,
            config_maps,
            services,
            self.settings,
            transient_error=self.transient.get(key),
            namespace_terminating=self.runtime.namespace_terminating(key[0]),
        )

    @property
    def transient(self) -> dict[Key, Body]:
        """Transient errors met applying a plan, by key, until a pass records them in lastError."""
        return self.applier.transient_errors()

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

    async def apply(self, key: Key, observed: rc.Observed, plan: Plan[Body], learnt: Learnt) -> Applied:
        """Apply ``plan`` (core.reconciler's order); creates only while the SparkDriver is current."""
        body = copy.deepcopy(dict(observed.driver)) if observed.driver is not None else None
        uid = str(((body or {}).get("metadata") or {}).get("uid", ""))
        return await self.applier.apply(
            key,
            body,
            plan,
            dict,
            namespace=key[0],
            seen=learnt,
            owner_current=lambda: self.ensure_owner_current(key, uid),
        )


def register(runtime: Runtime) -> None:
    """``sparkop run --controllers driver``: install the driver controller into ``runtime``."""
    install(runtime)


def install(runtime: Runtime) -> DriverController:
    """Install the driver controller's indexes and change handlers into ``runtime``."""
    controller = DriverController(runtime)
    runtime.add_index(INDEX_DRIVERS, SPARK_DRIVERS, _own_key, copy.deepcopy)
    runtime.enqueue_on_change(SPARK_DRIVERS, controller.queue, _own_key)
    owned: tuple[tuple[str, Resource, Any], ...] = (
        (INDEX_PODS, PODS, summarize_pod),
        (INDEX_CONFIGMAPS, CONFIGMAPS, summarize_object),
        (INDEX_SERVICES, SERVICES, summarize_object),
    )
    for index, resource, summarize in owned:
        # Selected on the server by the label's presence: nothing else of the kind is ever sent.
        runtime.add_index(index, resource, _owner_key, summarize, selector=labels.DRIVER)
        runtime.enqueue_on_change(resource, controller.queue, _owner_key, selector=labels.DRIVER)
    return controller


def _own_key(body: Mapping[str, Any]) -> list[Key]:
    meta = body.get("metadata") or {}
    return [driver_key(str(meta.get("namespace") or ""), str(meta.get("name") or ""))]


def _owner_key(body: Mapping[str, Any]) -> list[Key]:
    meta = body.get("metadata") or {}
    value = (meta.get("labels") or {}).get(labels.DRIVER)
    return [(str(meta.get("namespace") or ""), str(value))] if value is not None else []
