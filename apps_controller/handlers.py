"""The shell of the apps controller: indexes over the informer caches and enqueue-only change
handlers, and the one ``reconcile_key`` that turns a key into Observed, calls the pure state machine
and applies its plan.

Registered by ``sparkop run --controllers apps`` through :func:`register`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

import pydantic

from api.models import SparkApplicationSpec, SparkApplicationStatus
from apps_controller.decide import decide
from apps_controller.observed import AppView, DriverView, Observed, OwnedObject, UIConfig
from apps_controller.status import read_status, status_json
from apps_controller.ui import COMPONENT_UI
from core import kube, labels, logs
from core.reconciler import Applier, Learned, Plan, Refusal
from core.runtime import Runtime

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, SparkApplication name)

APPS_INDEX: Final = "apps_sparkapplications"
DRIVERS_INDEX: Final = "apps_sparkdrivers"
UI_SERVICES_INDEX: Final = "apps_ui_services"
UI_INGRESSES_INDEX: Final = "apps_ui_ingresses"
# The Spark UI Services and Ingresses, selected on the server (the labels ui.py puts on them).
UI_SELECTOR: Final = f"{labels.MANAGED_BY}={labels.MANAGER},{labels.COMPONENT}={COMPONENT_UI}"
# A refused create is decided on again at once; a pass that keeps learning ends, and the queue retries.
MAX_DECISIONS_PER_PASS: Final = 4


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
    """What the apps index hands out of a SparkApplication (a copy: the cache's objects are shared, and
    a pass writes its new status into its own)."""
    meta = body.get("metadata") or {}
    keep = ("name", "namespace", "uid", "generation", "resourceVersion", "deletionTimestamp")
    return {
        "apiVersion": body.get("apiVersion", labels.API_VERSION),
        "kind": "SparkApplication",
        "metadata": {k: meta[k] for k in keep if k in meta},
        "spec": _copy(body.get("spec") or {}),
        "status": _copy(body.get("status") or {}),
    }


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
    _spec_errors: dict[tuple[str, int], str | None] = field(default_factory=dict)
    _applier: Applier[Key] | None = None

    @property
    def kube(self) -> kube.Kube:
        return self.runtime.kube

    @property
    def applier(self) -> Applier[Key]:
        if self._applier is None:
            self._applier = Applier(self.kube, kube.Rules(), partial(logs.decision, log))
        return self._applier

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
        status = read_status(body.get("status"))
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
        return dict(self.applier.learnt(key, uid).refusals)

    async def reconcile_key(self, key: Key) -> float | None:
        """One pass for one SparkApplication; the work queue calls this, serialized per key. A create
        the API server refused is decided on again at once (the refusal is now an observation)."""
        for _ in range(MAX_DECISIONS_PER_PASS):
            seen = self.observe(key)
            if seen is None:
                self.applier.forget(key)
                return None  # deleted: the garbage collector removes what it owned
            observed, body = seen
            plan = decide(observed, datetime.now(UTC))
            try:
                if not await self.apply(plan, observed, body):
                    return None
            except Learned:
                continue
            return plan.requeue_after
        return 0.0

    async def apply(self, plan: Plan[SparkApplicationStatus], observed: Observed, body: dict[str, Any]) -> bool:
        """Run the plan (core.reconciler's order); False when the app vanished at its status write.
        ``body`` is the pass's own copy: it takes the written status and resourceVersion."""
        app = observed.app
        applied = await self.applier.apply((app.namespace, app.name), body, plan, status_json, namespace=app.namespace)
        return not applied.gone


def register(runtime: Runtime) -> None:
    """Indexes and change handlers of the apps controller; its work queue runs ``reconcile_key``."""
    opts = runtime.options
    controller = AppsController(
        runtime, UIConfig(ingress_url_format=opts.ingress_url_format, ingress_class_name=opts.ingress_class_name)
    )
    queue = runtime.queue("apps", controller.reconcile_key)
    runtime.add_index(APPS_INDEX, kube.SPARK_APPLICATIONS, _own_key, app_snapshot)
    runtime.enqueue_on_change(kube.SPARK_APPLICATIONS, queue, _own_key)
    runtime.add_index(DRIVERS_INDEX, kube.SPARK_DRIVERS, _owner_keys, DriverView.from_body)
    runtime.enqueue_on_change(kube.SPARK_DRIVERS, queue, _owner_keys)
    for index, resource in ((UI_SERVICES_INDEX, kube.SERVICES), (UI_INGRESSES_INDEX, kube.INGRESSES)):
        runtime.add_index(index, resource, _owner_keys, OwnedObject.from_body, selector=UI_SELECTOR)
        runtime.enqueue_on_change(resource, queue, _owner_keys, selector=UI_SELECTOR)


def _own_key(body: Mapping[str, Any]) -> list[Key]:
    meta = body.get("metadata") or {}
    return [(str(meta.get("namespace") or ""), str(meta.get("name") or ""))]


def _owner_keys(body: Mapping[str, Any]) -> list[Key]:
    key = owner_key(body)
    return [key] if key else []
