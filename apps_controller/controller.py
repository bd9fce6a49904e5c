"""The apps controller's declaration for the skeleton (``core.controller``): the caches it reads (the
SparkApplications, their SparkDrivers and Spark UI objects), an ``observe`` over them, and the pure
``decide``. Registered by ``sparkop run --controllers apps`` through :func:`register`.
"""

from __future__ import annotations

import logging
from typing import Final

from sparkop.api.models import SparkApplicationStatus
from sparkop.apps_controller import metrics
from sparkop.apps_controller.decide import decide
from sparkop.apps_controller.observed import (
    AppView,
    DriverView,
    HistoryServerView,
    Observed,
    OwnedObject,
    SpecErrors,
    UIConfig,
    app_snapshot,
    choose_history,
    history_keys,
    owner_keys,
)
from sparkop.apps_controller.status import as_read
from sparkop.apps_controller.transitions import TRANSITIONS
from sparkop.apps_controller.ui import UI_SELECTOR
from sparkop.core import resources
from sparkop.core.controller import Controller, Own, Source, start
from sparkop.core.owners import object_key
from sparkop.core.runtime import Runtime
from sparkop.domain import kinds

log = logging.getLogger(__name__)

APPS_INDEX: Final = "apps_sparkapplications"
DRIVERS_INDEX: Final = "apps_sparkdrivers"
UI_INDEXES: Final = (
    ("apps_ui_services", resources.SERVICES),
    ("apps_ui_ingresses", resources.INGRESSES),
    ("apps_ui_routes", kinds.HTTP_ROUTES),
)
HISTORY_INDEX: Final = "apps_history_servers"


def apps_controller(
    runtime: Runtime, ui: UIConfig | None = None, spec_error: SpecErrors | None = None
) -> Controller[Observed, SparkApplicationStatus]:
    ui = ui or UIConfig()
    spec_error = spec_error or SpecErrors()

    def observe(own: Own[SparkApplicationStatus]) -> Observed:
        app = AppView.from_body(own.body, spec_error=spec_error(own.body))
        drivers = tuple(runtime.index(DRIVERS_INDEX).get(own.key) or ())
        ui_objects = tuple(o for index, _ in UI_INDEXES for o in runtime.index(index).get(own.key) or ())
        status = as_read(own.status, own.body.get("status"))
        history = choose_history(app, lambda at: tuple(runtime.index(HISTORY_INDEX).get(at) or ()))
        refusals = dict(own.learnt.refusals)
        return Observed(app, status, drivers, ui, refusals, ui_objects, own.namespace_terminating, history)

    ui_sources = tuple(
        Source(index, resource, owner_keys, OwnedObject.from_body, selector=UI_SELECTOR, shared=True)
        for index, resource in UI_INDEXES
    )
    return Controller(
        name="apps",
        own=Source(APPS_INDEX, kinds.SPARK_APPLICATIONS, object_key, app_snapshot),
        owned=(
            Source(
                DRIVERS_INDEX,
                kinds.SPARK_DRIVERS,
                owner_keys,
                DriverView.from_body,
                shared=True,
                view=DriverView.from_body,
            ),
            *ui_sources,
        ),
        observe=observe,
        decide=decide,
        status=SparkApplicationStatus,
        log=log,
        record=TRANSITIONS.record,
        unchanged=_unchanged,
        # The history servers the apps name: read when a run is planned, a change of one asks for no pass.
        reads=(Source(HISTORY_INDEX, kinds.SPARK_HISTORY_SERVERS, history_keys, HistoryServerView.from_body),),
    )


def _unchanged(observed: Observed, status: SparkApplicationStatus) -> bool:
    # Executor counts are written as the SparkDriver reported them: a zero it reported is not its absence.
    old = observed.status
    return status == old and status.executors.model_fields_set == old.executors.model_fields_set


def register(runtime: Runtime) -> Controller[Observed, SparkApplicationStatus]:
    """The apps controller's caches, change handlers and work queue, and its metrics."""
    opts = runtime.options
    ui = UIConfig(
        service=opts.ui_service, ingress_url_format=opts.ingress_url_format, ingress_class_name=opts.ingress_class_name
    )
    declared = apps_controller(runtime, ui)
    start(runtime, declared)
    runtime.collectors.append(metrics.collector(runtime, metrics.GAUGES_INDEX, opts.metrics_labels))
    return declared
