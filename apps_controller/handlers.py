"""The shell of the apps controller: indexes over the informer caches and enqueue-only change
handlers, and the one ``reconcile_key`` that turns a key into Observed, calls the pure state machine
and applies its plan. Registered by ``sparkop run --controllers apps`` through :func:`register`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from api.models import SparkApplicationStatus
from apps_controller import metrics
from apps_controller.decide import decide
from apps_controller.observed import (
    AppView,
    DriverView,
    Key,
    Observed,
    OwnedObject,
    SpecErrors,
    UIConfig,
    app_snapshot,
    own_key,
    owner_keys,
)
from apps_controller.status import read_status, status_json
from apps_controller.transitions import TRANSITIONS
from apps_controller.ui import UI_SELECTOR
from core import kube, logs
from core.reconciler import Applier, Learned, Plan, Refusal
from core.runtime import Runtime

log = logging.getLogger(__name__)

APPS_INDEX: Final = "apps_sparkapplications"
DRIVERS_INDEX: Final = "apps_sparkdrivers"
UI_INDEXES: Final = (("apps_ui_services", kube.SERVICES), ("apps_ui_ingresses", kube.INGRESSES))
# A refused create is decided on again at once; a pass that keeps learning ends, and the queue retries.
MAX_DECISIONS_PER_PASS: Final = 4


@dataclass
class AppsController:
    runtime: Runtime
    ui: UIConfig = field(default_factory=UIConfig)
    spec_error: SpecErrors = field(default_factory=SpecErrors)
    _applier: Applier[Key] | None = None

    @property
    def applier(self) -> Applier[Key]:
        if self._applier is None:
            decision = partial(logs.decision, log)
            self._applier = Applier(self.runtime.kube, kube.Rules(), decision, TRANSITIONS.record)
        return self._applier

    def observe(self, key: Key) -> tuple[Observed, dict[str, Any]] | None:
        body = next(iter(self.runtime.index(APPS_INDEX).get(key) or ()), None)
        if body is None:
            return None
        app = AppView.from_body(body, spec_error=self.spec_error(body))
        drivers = tuple(self.runtime.index(DRIVERS_INDEX).get(key) or ())
        ui_objects = tuple(o for index, _ in UI_INDEXES for o in self.runtime.index(index).get(key) or ())
        terminating = self.runtime.namespace_terminating(app.namespace)
        status = read_status(body.get("status"))
        return Observed(app, status, drivers, self.ui, self.refusals(key, app.uid), ui_objects, terminating), body

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
        key = (app.namespace, app.name)
        applied = await self.applier.apply(
            key,
            body,
            plan,
            status_json,
            namespace=app.namespace,
            owner_current=partial(self.runtime.ensure_holds, APPS_INDEX, key, app.uid),
        )
        return not applied.gone


def register(runtime: Runtime) -> None:
    """Indexes and change handlers of the apps controller; its work queue runs ``reconcile_key``."""
    opts = runtime.options
    controller = AppsController(
        runtime, UIConfig(ingress_url_format=opts.ingress_url_format, ingress_class_name=opts.ingress_class_name)
    )
    queue = runtime.queue("apps", controller.reconcile_key)
    runtime.collectors.append(metrics.collector(runtime, metrics.GAUGES_INDEX, opts.metrics_labels))
    runtime.add_index(APPS_INDEX, kube.SPARK_APPLICATIONS, own_key, app_snapshot)
    runtime.enqueue_on_change(kube.SPARK_APPLICATIONS, queue, own_key)
    runtime.add_index(DRIVERS_INDEX, kube.SPARK_DRIVERS, owner_keys, DriverView.from_body, shared=True)
    runtime.enqueue_on_change(kube.SPARK_DRIVERS, queue, owner_keys, view=DriverView.from_body, coalesce=True)
    for index, resource in UI_INDEXES:
        runtime.add_index(index, resource, owner_keys, OwnedObject.from_body, selector=UI_SELECTOR, shared=True)
        runtime.enqueue_on_change(resource, queue, owner_keys, selector=UI_SELECTOR, coalesce=True)
