"""The apps controller's declaration for the skeleton (``core.controller``): the caches it reads (the
SparkApplications, their SparkDrivers and Spark UI objects), an ``observe`` over them, and the pure
``decide``. Registered by ``sparkop run --controllers apps`` through :func:`register`: once for each
served group (sparkop's, and kubeflow's with ``--kubeflow-api``), each with its own kind's cache and work
queue, over the same SparkDriver and Service caches; an app's key and what is filed under it are of its
group only (``observed.owner_keys``).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Final

from sparkop.api.models import SparkApplicationStatus
from sparkop.apps_controller import metrics
from sparkop.apps_controller.decide import decide
from sparkop.apps_controller.observed import (
    AppView,
    DriverView,
    ForeignDriver,
    HistoryServerView,
    Observed,
    OwnedObject,
    SpecErrors,
    UIConfig,
    app_snapshot,
    choose_history,
    history_keys,
    left_driver_keys,
    owner_keys,
)
from sparkop.apps_controller.status import as_read
from sparkop.apps_controller.transitions import TRANSITIONS
from sparkop.apps_controller.ui import UI_SELECTOR
from sparkop.core import resources
from sparkop.core.controller import Controller, Names, Own, Source, start
from sparkop.core.runtime import Runtime
from sparkop.domain import kinds
from sparkop.domain.kinds import API
from sparkop.domain.labels import KUBEFLOW_LEFT_PODS

log = logging.getLogger(__name__)

UI_KINDS: Final = (
    ("ui_services", resources.SERVICES),
    ("ui_ingresses", resources.INGRESSES),
    ("ui_routes", kinds.HTTP_ROUTES),
)


def apps_controller(
    runtime: Runtime,
    ui: UIConfig | None = None,
    spec_error: SpecErrors | None = None,
    api: API = kinds.SPARKOP_API,
) -> Controller[Observed, SparkApplicationStatus]:
    """The apps controller of ``api``'s SparkApplications."""
    ui = ui or UIConfig()
    spec_error = spec_error or SpecErrors()
    names = Names("apps", api.named)
    drivers_index, history_index = names.index("sparkdrivers"), names.index("history_servers")
    ui_indexes = tuple((names.index(what), resource) for what, resource in UI_KINDS)
    # The driver pods kubeflow's operator left, by their app.
    left_drivers_index = names.index("left_drivers")
    keys = partial(owner_keys, group=api.group)
    # Only kubeflow's group's apps can have been left running by kubeflow's operator (a live swap).
    takes_over = api is kinds.KUBEFLOW_API
    left_sources = (
        (
            Source(
                left_drivers_index,
                resources.PODS,
                left_driver_keys,
                ForeignDriver.from_body,
                selector=KUBEFLOW_LEFT_PODS,
            ),
        )
        if takes_over
        else ()
    )

    def observe(own: Own[SparkApplicationStatus]) -> Observed:
        app = AppView.from_body(own.body, spec_error=spec_error(own.body))
        drivers = runtime.filed(drivers_index, own.key)
        ui_objects = tuple(o for index, _ in ui_indexes for o in runtime.filed(index, own.key))
        status = as_read(own.status, own.body.get("status"))
        history = choose_history(app, lambda at: runtime.filed(history_index, at))
        refusals = dict(own.learnt.refusals)
        left = runtime.filed(left_drivers_index, own.key) if takes_over else ()
        return Observed(app, status, drivers, ui, refusals, ui_objects, own.namespace_terminating, history, left)

    owned_ui = partial(OwnedObject.from_body, group=api.group)
    ui_sources = tuple(
        Source(index, resource, keys, owned_ui, selector=UI_SELECTOR, shared=True) for index, resource in ui_indexes
    )
    driver_view = partial(DriverView.from_body, group=api.group)
    return Controller(
        name=names.name,
        by_namespace_selector=True,
        own=names.own_source(api.applications, app_snapshot),
        owned=(
            Source(drivers_index, kinds.SPARK_DRIVERS, keys, driver_view, shared=True, view=driver_view),
            *ui_sources,
        ),
        observe=observe,
        decide=decide,
        status=SparkApplicationStatus,
        log=api.log(log),
        record=TRANSITIONS.record,
        unchanged=_unchanged,
        # The history servers the apps name: read when a run is planned, a change of one asks for no pass.
        # kubeflow's driver pods: read by the first pass of an app taken over (the caches are listed before).
        reads=(
            Source(history_index, kinds.SPARK_HISTORY_SERVERS, history_keys, HistoryServerView.from_body),
            *left_sources,
        ),
    )


def _unchanged(observed: Observed, status: SparkApplicationStatus) -> bool:
    # Executor counts are written as the SparkDriver reported them: a zero it reported is not its absence.
    old = observed.status
    return status == old and status.executors.model_fields_set == old.executors.model_fields_set


def register(runtime: Runtime) -> tuple[Controller[Observed, SparkApplicationStatus], ...]:
    """The apps controller's caches, change handlers and work queue for each served group, and its
    metrics (one set, over the apps of every group, as kubeflow's metrics count its own)."""
    opts = runtime.options
    ui = UIConfig(
        service=opts.ui_service, ingress_url_format=opts.ingress_url_format, ingress_class_name=opts.ingress_class_name
    )
    apis = kinds.served_apis(opts.kubeflow_api)
    declared = tuple(apps_controller(runtime, ui, api=api) for api in apis)
    for controller in declared:
        start(runtime, controller)
    gauges = [(api.named(metrics.GAUGES_INDEX), api.applications) for api in apis]
    runtime.collectors.append(metrics.collector(runtime, gauges, opts.metrics_labels))
    return declared
