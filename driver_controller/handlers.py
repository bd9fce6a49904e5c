"""The kopf shell of the driver controller: indexes, enqueueing event handlers, and one
``reconcile_key`` that applies the pure plan through sparkop.kube.

Keys are ``(namespace, sparkop.io/driver label value)``: the label every owned object carries,
so a pod's, ConfigMap's or Service's event maps to its SparkDriver without reading anything.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf

from driver_controller import reconcile as rc
from driver_controller.observe import ObjectSummary, PodSummary, summarize_object, summarize_pod
from sparkop import labels, naming
from sparkop.kube import CONFIGMAPS, PODS, SERVICES, SPARK_DRIVERS, Conflict, Kube, Refused, Resource
from sparkop.operator import Runtime

log = logging.getLogger(__name__)

Key = tuple[str, str]
Body = dict[str, Any]

INDEX_DRIVERS = "sparkop_driver_sparkdrivers"
INDEX_PODS = "sparkop_driver_pods"
INDEX_CONFIGMAPS = "sparkop_driver_configmaps"
INDEX_SERVICES = "sparkop_driver_services"

_RESOURCES: dict[str, Resource] = {"Pod": PODS, "ConfigMap": CONFIGMAPS, "Service": SERVICES}
CONFLICT_RETRY_S = 0.05


def driver_key(namespace: str, name: str) -> Key:
    return (namespace, naming.label_value(name))


class DriverController:
    """State shared by the handlers of one operator: the runtime and the work queue."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.kube: Kube = runtime.kube
        self.settings = rc.Settings(unschedulable_timeout=runtime.options.unschedulable_timeout_seconds)
        self.queue = runtime.queue("driver", self.reconcile_key)

    def _values(self, index: str, key: Key) -> list[Any]:
        try:
            store = self.runtime.index(index).get(key)
        except KeyError:
            return []
        return list(store) if store is not None else []

    def observe(self, key: Key) -> rc.Observed:
        drivers = self._values(INDEX_DRIVERS, key)
        pods: list[PodSummary] = self._values(INDEX_PODS, key)
        config_maps: list[ObjectSummary] = self._values(INDEX_CONFIGMAPS, key)
        services: list[ObjectSummary] = self._values(INDEX_SERVICES, key)
        return rc.Observed(drivers[0] if drivers else None, pods, config_maps, services, self.settings)

    async def reconcile_key(self, key: Key) -> float | None:
        observed = self.observe(key)
        now = datetime.now(UTC).replace(microsecond=0)
        plan = rc.reconcile(observed, now)
        return await self.apply(key, observed, plan, now)

    async def apply(self, key: Key, observed: rc.Observed, plan: rc.Plan, now: datetime) -> float | None:
        namespace = key[0]
        body = observed.driver
        requeue = plan.requeue_after
        # ConfigMaps and Service together, then the pod that mounts them.
        pods = [o for o in plan.create if o["kind"] == "Pod"]
        others = [o for o in plan.create if o["kind"] != "Pod"]
        for batch in (others, pods):
            results = await asyncio.gather(*(self.kube.create(o) for o in batch), return_exceptions=True)
            failures = [(o, r) for o, r in zip(batch, results, strict=True) if isinstance(r, BaseException)]
            if not failures:
                continue
            obj, exc = failures[0]
            if not isinstance(exc, Refused) or body is None:
                raise exc
            log.warning("%s/%s: %s refused: %s", namespace, key[1], obj["kind"], exc)
            status = rc.submission_failed(observed, now, plan.incarnation, "SubmissionFailed", exc.message)
            await self._write_status(body, status)
            await self.kube.event(
                dict(body),
                type_="Warning",
                reason=rc.REASON_SUBMISSION_FAILED,
                message=f"{obj['kind']} {obj['metadata']['name']} refused: {exc}",
            )
            return None
        if body is not None and plan.status is not None:
            await self._write_status(body, plan.status)
        if body is not None:
            for event in plan.events:
                await self.kube.event(dict(body), type_=event.type, reason=event.reason, message=event.message)
        for patch in plan.patches:
            patch_body = copy.deepcopy(patch.body)
            patch_body.setdefault("metadata", {})["resourceVersion"] = patch.resource_version
            try:
                await self.kube.patch(PODS, patch.namespace, patch.name, patch_body)
            except Conflict:
                # The pod moved on since we looked; its event re-enqueues us, but do not depend on it.
                requeue = CONFLICT_RETRY_S
        for delete in plan.deletes:
            await self.kube.delete(_RESOURCES[delete.kind], delete.namespace, delete.name, uid=delete.uid)
        return requeue

    async def _write_status(self, body: Mapping[str, Any], status: Body) -> None:
        meta = body["metadata"]
        await self.kube.patch_status(
            SPARK_DRIVERS,
            meta["namespace"],
            meta["name"],
            old=body.get("status") or {},
            new=status,
            resource_version=meta["resourceVersion"],
        )


def register(registry: kopf.OperatorRegistry, runtime: Runtime) -> None:
    """``sparkop run --controllers driver``: install the driver controller into ``registry``."""
    install(registry, runtime)


def install(registry: kopf.OperatorRegistry, runtime: Runtime) -> DriverController:
    """Install the driver controller's indexes and handlers into ``registry``."""
    controller = DriverController(runtime)
    present = {labels.DRIVER: kopf.PRESENT}

    @kopf.index(labels.GROUP, labels.VERSION, "sparkdrivers", id=INDEX_DRIVERS, registry=registry)  # type: ignore[arg-type]
    async def sparkdrivers(namespace: str, name: str, body: kopf.Body, **_: Any) -> dict[Key, Body]:
        return {driver_key(namespace, name): copy.deepcopy(dict(body))}

    @kopf.index("pods", labels=present, id=INDEX_PODS, registry=registry)  # type: ignore[arg-type]
    async def pods(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict[Key, PodSummary]:
        return {(namespace, labels[_DRIVER]): summarize_pod(body)}

    @kopf.index("configmaps", labels=present, id=INDEX_CONFIGMAPS, registry=registry)  # type: ignore[arg-type]
    async def configmaps(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict[Key, ObjectSummary]:
        return {(namespace, labels[_DRIVER]): summarize_object(body)}

    @kopf.index("services", labels=present, id=INDEX_SERVICES, registry=registry)  # type: ignore[arg-type]
    async def services(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict[Key, ObjectSummary]:
        return {(namespace, labels[_DRIVER]): summarize_object(body)}

    @kopf.on.event(labels.GROUP, labels.VERSION, "sparkdrivers", id="sparkop-driver-on-sparkdriver", registry=registry)  # type: ignore[arg-type]
    async def on_driver(namespace: str, name: str, **_: Any) -> None:
        controller.queue.enqueue(driver_key(namespace, name))

    for plural in ("pods", "configmaps", "services"):

        @kopf.on.event(plural, labels=present, id=f"sparkop-driver-on-{plural}", registry=registry)  # type: ignore[arg-type]
        async def on_owned(namespace: str, labels: kopf.Labels, **_: Any) -> None:
            controller.queue.enqueue((namespace, labels[_DRIVER]))

    return controller


_DRIVER = labels.DRIVER
