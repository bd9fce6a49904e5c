"""The connect controller's declaration for the skeleton (``core.controller``): the SparkConnects, the
SparkDrivers that run their servers and their Services, an ``observe`` over them, and the pure
``decide``. Registered by ``sparkop run --controllers connect`` through :func:`register`.
"""

from __future__ import annotations

import logging
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
from sparkop.core.controller import Controller, Own, Source, start
from sparkop.core.owners import object_key, snapshot
from sparkop.core.runtime import Runtime
from sparkop.domain import kinds, labels

log = logging.getLogger(__name__)

CONNECTS_INDEX: Final = "connect_sparkconnects"
SERVERS_INDEX: Final = "connect_servers"
SERVICES_INDEX: Final = "connect_services"
ROUTES_INDEX: Final = "connect_routes"
SERVICE_SELECTOR: Final = labels.CONNECT


def connect_controller(runtime: Runtime) -> Controller[Observed, SparkConnectStatus]:
    def observe(own: Own[SparkConnectStatus]) -> Observed:
        servers = tuple(runtime.index(SERVERS_INDEX).get(own.key) or ())
        services = tuple(runtime.index(SERVICES_INDEX).get(own.key) or ())
        services += tuple(runtime.index(ROUTES_INDEX).get(own.key) or ())
        view, refusals = ConnectView.from_body(own.body), dict(own.learnt.refusals)
        return Observed(view, own.status, own.body, servers, services, refusals, own.namespace_terminating)

    return Controller(
        name="connect",
        own=Source(CONNECTS_INDEX, kinds.SPARK_CONNECTS, object_key, snapshot),
        owned=(
            Source(
                SERVERS_INDEX,
                kinds.SPARK_DRIVERS,
                owner_keys,
                ServerView.from_body,
                shared=True,
                view=ServerView.from_body,
            ),
            Source(
                SERVICES_INDEX,
                resources.SERVICES,
                owner_keys,
                ServiceView.from_body,
                selector=SERVICE_SELECTOR,
                shared=True,
            ),
            Source(
                ROUTES_INDEX,
                kinds.GRPC_ROUTES,
                owner_keys,
                ServiceView.from_body,
                selector=SERVICE_SELECTOR,
                shared=True,
            ),
        ),
        observe=observe,
        decide=decide,
        status=SparkConnectStatus,
        log=log,
        record=metrics.TRANSITIONS.record,
    )


def register(runtime: Runtime) -> Controller[Observed, SparkConnectStatus]:
    """The connect controller's caches, change handlers and work queue, and its metrics."""
    declared = connect_controller(runtime)
    start(runtime, declared)
    runtime.collectors.append(metrics.collector(runtime))
    return declared
