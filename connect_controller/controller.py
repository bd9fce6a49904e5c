"""The connect controller's declaration for the skeleton (``core.controller``): the SparkConnects, the
SparkDrivers that run their servers and their Services, an ``observe`` over them, and the pure
``decide``. Registered by ``sparkop run --controllers connect`` through :func:`register`, once for each
served group (sparkop's, and kubeflow's with ``--kubeflow-api``).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Final

from sparkop.api.connect import SparkConnectStatus
from sparkop.connect_controller import metrics
from sparkop.connect_controller.decide import decide
from sparkop.connect_controller.observed import (
    ConnectView,
    Observed,
    ServerView,
    ServiceView,
    owner_keys,
)
from sparkop.core import resources
from sparkop.core.controller import Controller, Names, Own, Source, start
from sparkop.core.runtime import Runtime
from sparkop.domain import kinds, labels
from sparkop.domain.kinds import API

log = logging.getLogger(__name__)

SERVICE_SELECTOR: Final = labels.CONNECT


def connect_controller(runtime: Runtime, api: API = kinds.SPARKOP_API) -> Controller[Observed, SparkConnectStatus]:
    """The connect controller of ``api``'s SparkConnects."""
    names = Names("connect", api.named)
    servers_index, services_index, routes_index = (names.index(what) for what in ("servers", "services", "routes"))

    def observe(own: Own[SparkConnectStatus]) -> Observed:
        servers = runtime.filed(servers_index, own.key)
        services = runtime.filed(services_index, own.key)
        services += runtime.filed(routes_index, own.key)
        return Observed(ConnectView.from_body(own.body), servers, services, **own.observed())

    keys = owner_keys(api.group)
    server_view = partial(ServerView.from_body, group=api.group)
    service_view = partial(ServiceView.from_body, group=api.group)
    return Controller(
        name=names.name,
        by_namespace_selector=True,
        own=names.own_source(api.connects),
        owned=(
            Source(servers_index, kinds.SPARK_DRIVERS, keys, server_view, shared=True, view=server_view),
            Source(services_index, resources.SERVICES, keys, service_view, selector=SERVICE_SELECTOR, shared=True),
            Source(routes_index, kinds.GRPC_ROUTES, keys, service_view, selector=SERVICE_SELECTOR, shared=True),
        ),
        observe=observe,
        decide=decide,
        status=SparkConnectStatus,
        log=api.log(log),
        record=metrics.TRANSITIONS.record,
    )


def register(runtime: Runtime) -> tuple[Controller[Observed, SparkConnectStatus], ...]:
    """The connect controller's caches, change handlers and work queue for each served group, and its
    metrics (over the SparkConnects of every group)."""
    apis = kinds.served_apis(runtime.options.kubeflow_api)
    declared = tuple(connect_controller(runtime, api) for api in apis)
    for controller in declared:
        start(runtime, controller)
    gauges = [(api.named(metrics.GAUGES_INDEX), api.connects) for api in apis]
    runtime.collectors.append(metrics.collector(runtime, gauges))
    return declared
