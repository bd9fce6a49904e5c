"""The kopf shell of the apps controller: indexes and enqueue-only event handlers, and the one
``reconcile_key`` that turns a key into Observed, calls the pure state machine and applies its plan.

Registered by ``sparkop run --controllers apps`` through :func:`register`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import kopf
import pydantic

from api.models import SparkApplicationSpec
from apps_controller.model import AppStatus, AppView, DriverView, Observed, OwnedObject, Refusal, UIConfig
from apps_controller.reconcile import (
    Action,
    CreateDriver,
    DeleteApp,
    DeleteDriver,
    DeleteObject,
    EnsureObject,
    Plan,
    reconcile,
    refusal_key,
)
from sparkop import kube, labels, logs
from sparkop.operator import Runtime

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, SparkApplication name)

APPS_INDEX: Final = "apps_sparkapplications"
DRIVERS_INDEX: Final = "apps_sparkdrivers"
UI_SERVICES_INDEX: Final = "apps_ui_services"
UI_INGRESSES_INDEX: Final = "apps_ui_ingresses"
# Fault injection for the crash tests: the process exits right after its N-th status write that
# changes an app's state, before that pass's events and after-status actions (the worst moment).
FAULT_EXIT_ENV: Final = "SPARKOP_FAULT_EXIT_AFTER_TRANSITIONS"
FAULT_EXIT_CODE: Final = 86
# Refused creates remembered per app (the newest first out); a restarted operator tries them again.
MAX_REFUSALS_PER_APP: Final = 16
_RESOURCES: Final = {
    ("v1", "Service"): kube.SERVICES,
    ("networking.k8s.io/v1", "Ingress"): kube.INGRESSES,
}


def owner_key(body: Mapping[str, Any]) -> Key | None:
    """The key of an object's controller owner, when it is a sparkop SparkApplication. Ownership, not
    a label, links an app to its SparkDrivers and UI objects: a label can be edited away."""
    meta = body.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        group = str(ref.get("apiVersion", "")).split("/")[0]
        if ref.get("controller") and ref.get("kind") == "SparkApplication" and group == labels.GROUP:
            return (str(meta.get("namespace", "")), str(ref.get("name", "")))
    return None


def driver_entry(body: Mapping[str, Any]) -> dict[Key, DriverView] | None:
    """The apps controller's index entry for a SparkDriver: under its controller owner's key."""
    key = owner_key(body)
    return {key: DriverView.from_body(body)} if key else None


def ui_object_entry(body: Mapping[str, Any]) -> dict[Key, OwnedObject] | None:
    """The index entry for a Service or Ingress a SparkApplication controls (its Spark UI)."""
    key = owner_key(body)
    return {key: OwnedObject.from_body(body)} if key else None


def app_snapshot(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the apps index keeps of a SparkApplication (a copy: kopf's bodies are live views)."""
    meta = body.get("metadata") or {}
    keep = ("name", "namespace", "uid", "generation", "resourceVersion", "deletionTimestamp")
    return {
        "apiVersion": body.get("apiVersion", labels.API_VERSION),
        "kind": "SparkApplication",
        "metadata": {k: meta[k] for k in keep if k in meta},
        "spec": _copy(body.get("spec") or {}),
        "status": _copy(body.get("status") or {}),
    }


class Learned(Exception):
    """The API server refused a create of the plan: remembered, and the key is reconciled again at
    once, so the state machine records the refusal (kube.Refused is not retried by backoff)."""


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


@dataclass
class AppsController:
    runtime: Runtime
    ui: UIConfig = field(default_factory=UIConfig)
    exit_after_transitions: int = field(default_factory=lambda: int(os.environ.get(FAULT_EXIT_ENV) or 0))
    _transitions: int = 0
    _spec_errors: dict[tuple[str, int], str | None] = field(default_factory=dict)
    _refusals: dict[Key, tuple[str, dict[str, Refusal]]] = field(default_factory=dict)  # key -> (app uid, ...)

    @property
    def kube(self) -> kube.Kube:
        return self.runtime.kube

    def spec_error(self, body: Mapping[str, Any]) -> str | None:
        """A spec the API server accepted but that can never run (checked once per generation)."""
        meta = body["metadata"]
        key = (str(meta.get("uid")), int(meta.get("generation") or 0))
        if key not in self._spec_errors:
            try:
                SparkApplicationSpec.model_validate(body.get("spec") or {})
                self._spec_errors[key] = None
            except pydantic.ValidationError as exc:
                self._spec_errors[key] = "; ".join(
                    f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
                )
        return self._spec_errors[key]

    def observe(self, key: Key) -> tuple[Observed, dict[str, Any]] | None:
        apps = self.runtime.index(APPS_INDEX).get(key)
        body = next(iter(apps), None) if apps is not None else None
        if body is None:
            return None
        drivers: Iterable[DriverView] = self.runtime.index(DRIVERS_INDEX).get(key) or ()
        ui_objects = [
            o for index in (UI_SERVICES_INDEX, UI_INGRESSES_INDEX) for o in self.runtime.index(index).get(key) or ()
        ]
        app = AppView.from_body(body, spec_error=self.spec_error(body))
        status = AppStatus.from_json(body.get("status"))
        observed = Observed(
            app,
            status,
            tuple(drivers),
            self.ui,
            self.refusals(key, app.uid),
            ui_objects=tuple(ui_objects),
            namespace_terminating=self.runtime.namespace_terminating(app.namespace),
        )
        return observed, body

    def refusals(self, key: Key, uid: str) -> dict[str, Refusal]:
        """What the API server refused for this app (a new app of the same name starts afresh)."""
        owner, known = self._refusals.get(key, ("", {}))
        return dict(known) if owner == uid else {}

    def remember(self, key: Key, uid: str, action_key: str, refusal: Refusal) -> None:
        known = self.refusals(key, uid)
        known[action_key] = refusal
        self._refusals[key] = (uid, dict(list(known.items())[-MAX_REFUSALS_PER_APP:]))

    async def reconcile_key(self, key: Key) -> float | None:
        """One pass for one SparkApplication; the work queue calls this, serialized per key."""
        seen = self.observe(key)
        if seen is None:
            self._refusals.pop(key, None)
            return None  # deleted: the garbage collector removes what it owned
        observed, body = seen
        plan = reconcile(observed, datetime.now(UTC))
        try:
            if not await self.apply(plan, observed, body):
                return None
        except Learned:
            return 0.0
        return plan.requeue_after

    async def apply(self, plan: Plan, observed: Observed, body: dict[str, Any]) -> bool:
        """Run the plan: before-actions, the status write (guarded by resourceVersion; Conflict
        propagates to the queue, which reconciles again from a fresh view), events, after-actions."""
        namespace, name, uid = observed.app.namespace, observed.app.name, observed.app.uid
        key = (namespace, name)
        for action in plan.before_status:
            await self.do(key, uid, action)
        if plan.status != observed.status or plan.after_status:
            written = await self.kube.patch_status(
                kube.SPARK_APPLICATIONS,
                namespace,
                name,
                old=body.get("status") or {},
                new=plan.status.to_json(),
                resource_version=str(body["metadata"].get("resourceVersion", "")),
            )
            if written is None:
                return False  # the app is gone
            body["metadata"]["resourceVersion"] = written.get("metadata", {}).get("resourceVersion")
            body["status"] = written.get("status") or {}
            if plan.status.state is not observed.status.state:
                self._transitions += 1
                if self.exit_after_transitions and self._transitions >= self.exit_after_transitions:
                    log.warning("%s=%d: exiting now", FAULT_EXIT_ENV, self.exit_after_transitions)
                    os._exit(FAULT_EXIT_CODE)
        for event in plan.events:
            logs.decision(log, f"{namespace}/{name}", event.message, event.reason, state=plan.status.state.value)
            await self.kube.event(body, type_=event.type, reason=event.reason, message=event.message)  # type: ignore[arg-type]
        for action in plan.after_status:
            await self.do(key, uid, action)
        return True

    async def do(self, key: Key, uid: str, action: Action) -> None:
        namespace = key[0]
        if isinstance(action, CreateDriver):
            created = await self.create(key, uid, action)
            what = "created" if created else "already existed (a retried create)"
            logs.decision(log, f"{namespace}/{key[1]}", f"SparkDriver {action.name} {what}", "CreateRun")
        elif isinstance(action, EnsureObject):
            if not await self.create(key, uid, action):
                manifest = action.manifest
                meta = manifest["metadata"]
                wanted = {k: meta[k] for k in ("labels", "annotations") if k in meta}
                patch = {"metadata": wanted, "spec": manifest["spec"]}
                await self.kube.patch(kube.resource_of(manifest), namespace, meta["name"], patch)
        elif isinstance(action, DeleteDriver):
            logs.decision(log, f"{namespace}/{key[1]}", f"delete SparkDriver {action.name}", "StopRun")
            await self.kube.delete(kube.SPARK_DRIVERS, namespace, action.name, uid=action.uid)
        elif isinstance(action, DeleteApp):
            logs.decision(log, f"{namespace}/{key[1]}", "delete the finished app", "TimeToLiveExpired")
            await self.kube.delete(kube.SPARK_APPLICATIONS, namespace, action.name, uid=action.uid)
        elif isinstance(action, DeleteObject):
            logs.decision(log, f"{namespace}/{key[1]}", f"delete {action.kind} {action.name}", "SparkUIRemoved")
            resource = _RESOURCES[(action.api_version, action.kind)]
            await self.kube.delete(resource, namespace, action.name, uid=action.uid)

    async def create(self, key: Key, uid: str, action: CreateDriver | EnsureObject) -> bool:
        """Create; a refusal (400/403/422) is remembered for the next pass and ends this one."""
        try:
            return await self.kube.create(action.manifest)
        except kube.Refused as exc:
            meta = action.manifest["metadata"]
            log.warning("%s/%s: %s %s refused: %s", *key, action.manifest["kind"], meta["name"], exc)
            self.remember(key, uid, refusal_key(action), Refusal(exc.status, exc.reason, exc.message))
            raise Learned from exc


def register(registry: kopf.OperatorRegistry, runtime: Runtime) -> None:
    """Indexes and handlers of the apps controller; its work queue runs ``reconcile_key``."""
    opts = runtime.options
    controller = AppsController(
        runtime, UIConfig(ingress_url_format=opts.ingress_url_format, ingress_class_name=opts.ingress_class_name)
    )
    queue = runtime.queue("apps", controller.reconcile_key)

    @kopf.index(labels.GROUP, labels.VERSION, "sparkapplications", id=APPS_INDEX, registry=registry)
    async def apps_sparkapplications(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Key, Any]:
        return {(namespace or "", name): app_snapshot(body)}

    @kopf.index(labels.GROUP, labels.VERSION, "sparkdrivers", id=DRIVERS_INDEX, registry=registry)
    async def apps_sparkdrivers(body: kopf.Body, **_: Any) -> dict[Key, DriverView] | None:
        return driver_entry(body)

    @kopf.index("", "v1", "services", id=UI_SERVICES_INDEX, registry=registry)
    async def apps_ui_services(body: kopf.Body, **_: Any) -> dict[Key, OwnedObject] | None:
        return ui_object_entry(body)

    @kopf.index("networking.k8s.io", "v1", "ingresses", id=UI_INGRESSES_INDEX, registry=registry)
    async def apps_ui_ingresses(body: kopf.Body, **_: Any) -> dict[Key, OwnedObject] | None:
        return ui_object_entry(body)

    @kopf.on.event(labels.GROUP, labels.VERSION, "sparkapplications", registry=registry)
    async def apps_on_sparkapplication(namespace: str | None, name: str, **_: Any) -> None:
        queue.enqueue((namespace or "", name))

    for group, version, plural in (
        (labels.GROUP, labels.VERSION, "sparkdrivers"),
        ("", "v1", "services"),
        ("networking.k8s.io", "v1", "ingresses"),
    ):

        @kopf.on.event(group, version, plural, id=f"apps_on_{plural}", registry=registry)
        async def apps_on_owned(body: kopf.Body, **_: Any) -> None:
            key = owner_key(body)
            if key:
                queue.enqueue(key)
