"""The kopf shell of the driver controller: indexes, enqueueing event handlers, and one
``reconcile_key`` that applies the pure plan through sparkop.kube.

Keys are ``(namespace, sparkop.io/driver label value)``: the label every owned object carries,
so a pod's, ConfigMap's or Service's event maps to its SparkDriver without reading anything.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp
import kopf
from kubernetes_asyncio.client.exceptions import ApiException

from driver_controller import reconcile as rc
from driver_controller.observe import ObjectSummary, PodSummary, summarize_object, summarize_pod
from sparkop import labels, logs, naming
from sparkop.kube import CONFIGMAPS, PODS, SERVICES, SPARK_DRIVERS, Conflict, Kube, Refused, Resource
from sparkop.operator import Runtime
from sparkop.times import format_time

log = logging.getLogger(__name__)

Key = tuple[str, str]
Body = dict[str, Any]
T = TypeVar("T")

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
        # Transient errors met applying a plan, by key, until a pass records them in lastError.
        self.transient: dict[Key, Body] = {}

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
        return rc.Observed(
            drivers[0] if drivers else None,
            pods,
            config_maps,
            services,
            self.settings,
            transient_error=self.transient.get(key),
            namespace_terminating=self.runtime.namespace_terminating(key[0]),
        )

    async def reconcile_key(self, key: Key) -> float | None:
        observed = self.observe(key)
        now = datetime.now(UTC).replace(microsecond=0)
        plan = rc.reconcile(observed, now)
        try:
            requeue = await self.apply(key, observed, plan, now)
        except Exception as exc:
            if isinstance(exc, Failed) and (error := transient_error(exc.__cause__, exc.doing)) is not None:
                self.transient[key] = error  # for the next pass to record (the queue backs off and retries)
            raise
        if observed.transient_error is not None or observed.driver is None:
            self.transient.pop(key, None)  # recorded by this pass (or already there), or nowhere to record it
        return requeue

    async def apply(self, key: Key, observed: rc.Observed, plan: rc.Plan, now: datetime) -> float | None:
        """Creates (ConfigMaps and Service together, then the pod that mounts them), the status write,
        events, patches, deletes. An API error is raised as :class:`Failed`, saying what was being done."""
        body = observed.driver
        pods = [o for o in plan.create if o["kind"] == "Pod"]
        others = [o for o in plan.create if o["kind"] != "Pod"]
        for batch in (others, pods):
            refused = await self._create(batch, body is not None)
            if refused is not None:
                assert body is not None
                await self._submission_failed(key, observed, plan, now, *refused)
                return None
        if body is not None and plan.status is not None:
            await _doing("writing the status", self._write_status(body, plan.status))
        if body is not None:
            obj = f"{key[0]}/{body['metadata']['name']}"
            for event in plan.events:
                logs.decision(log, obj, event.message, event.reason, incarnation=plan.incarnation)
                await _doing(
                    f"posting the {event.reason} event",
                    self.kube.event(dict(body), type_=event.type, reason=event.reason, message=event.message),
                )
        requeue = plan.requeue_after
        for patch in plan.patches:
            logs.decision(log, f"{key[0]}/{key[1]}", f"patch Pod {patch.name}", patch.why.title().replace(" ", ""))
            if not await self._patch(patch):
                requeue = CONFLICT_RETRY_S
        for delete in plan.deletes:
            logs.decision(log, f"{key[0]}/{key[1]}", f"delete {delete.kind} {delete.name}", delete.reason)
            resource = _RESOURCES[delete.kind]
            await _doing(
                f"deleting {delete.kind} {delete.name}",
                self.kube.delete(resource, delete.namespace, delete.name, uid=delete.uid),
            )
        return requeue

    async def _create(self, batch: list[Body], refusable: bool) -> tuple[Body, Refused] | None:
        """Create ``batch`` concurrently. (object, refusal) when the API server refused one for good."""
        results = await asyncio.gather(*(self.kube.create(o) for o in batch), return_exceptions=True)
        failures = [(o, r) for o, r in zip(batch, results, strict=True) if isinstance(r, BaseException)]
        if not failures:
            return None
        obj, exc = failures[0]
        if isinstance(exc, Refused) and refusable:
            return obj, exc
        if not isinstance(exc, Exception):
            raise exc  # cancellation
        raise Failed(f"creating {obj['kind']} {obj['metadata']['name']}") from exc

    async def _submission_failed(
        self, key: Key, observed: rc.Observed, plan: rc.Plan, now: datetime, obj: Body, exc: Refused
    ) -> None:
        assert observed.driver is not None
        body = observed.driver
        log.warning("%s/%s: %s refused: %s", key[0], key[1], obj["kind"], exc)
        # 409: the name is held by an object that is not ours (sparkop.kube never takes it for ours).
        reason = exc.reason if exc.status == 409 else rc.REASON_SUBMISSION_FAILED
        status = rc.submission_failed(observed, now, plan.incarnation, reason, exc.message)
        await _doing("writing the status", self._write_status(body, status))
        await self.kube.event(
            dict(body),
            type_="Warning",
            reason=rc.REASON_SUBMISSION_FAILED,
            message=f"{obj['kind']} {obj['metadata']['name']} refused: {exc}",
        )

    async def _patch(self, patch: rc.Patch) -> bool:
        """A pod merge patch guarded by its resourceVersion; False if the pod moved on since we looked
        (its event re-enqueues us, but the caller does not depend on it)."""
        metadata = {**patch.body.get("metadata", {}), "resourceVersion": patch.resource_version}
        try:
            await _doing(
                f"patching Pod {patch.name} ({patch.why})",
                self.kube.patch(PODS, patch.namespace, patch.name, {**patch.body, "metadata": metadata}),
            )
        except Conflict:
            return False
        return True

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


class Failed(Exception):
    """An API call of a plan failed; ``doing`` says which (the API error is the ``__cause__``)."""

    def __init__(self, doing: str) -> None:
        super().__init__(doing)
        self.doing = doing


async def _doing(doing: str, call: Awaitable[T]) -> T:
    """``await call``; an API error comes out as :class:`Failed` (Conflict stays itself: the queue
    reconciles again from a fresh view)."""
    try:
        return await call
    except Conflict:
        raise
    except Exception as exc:
        raise Failed(doing) from exc


def transient_error(exc: BaseException | None, doing: str) -> Body | None:
    """A lastError {reason, message, time} for an error a retry may get past: 5xx or 429 from the API
    server, a timeout, a lost connection. None for anything else."""
    if isinstance(exc, ApiException) and (exc.status == 429 or (exc.status or 0) >= 500):
        reason, message = _api_status(exc)
        text = f"{doing}: {exc.status} {reason}: {message}"
    elif isinstance(exc, TimeoutError):
        reason, text = "Timeout", f"{doing}: the API server did not answer in time"
    elif isinstance(exc, (aiohttp.ClientError, ConnectionError)):
        reason, text = "ConnectionError", f"{doing}: {exc}"
    else:
        return None
    return {"reason": reason, "message": text[:32768], "time": format_time(datetime.now(UTC).replace(microsecond=0))}


def _api_status(exc: ApiException) -> tuple[str, str]:
    """(reason, message) of the Status the API server sent with an error."""
    try:
        status = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        status = {}
    if not isinstance(status, dict):
        status = {}
    default = "TooManyRequests" if exc.status == 429 else "InternalError"
    return str(status.get("reason") or default), str(status.get("message") or exc.reason or "")


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
