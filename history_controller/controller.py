"""The history controller's declaration for the skeleton (``core.controller``): the SparkHistoryServers,
the Deployments, Services, Ingresses and HTTPRoutes they control, an ``observe`` over them, and the
pure ``decide``. Registered by ``sparkop run --controllers history`` through :func:`register`.
"""

from __future__ import annotations

import logging
from typing import Final

from sparkop.api.history import SparkHistoryServerStatus
from sparkop.core import resources
from sparkop.core.controller import Controller, Own, Source, own_source, start
from sparkop.core.runtime import Runtime
from sparkop.domain import kinds
from sparkop.history_controller.build import SELECTOR
from sparkop.history_controller.decide import decide
from sparkop.history_controller.observed import ChildView, Observed, ServerView, owner_keys

log = logging.getLogger(__name__)

SERVERS_INDEX: Final = "history_servers"
CHILD_INDEXES: Final = (
    ("history_deployments", resources.DEPLOYMENTS),
    ("history_services", resources.SERVICES),
    ("history_ingresses", resources.INGRESSES),
    ("history_routes", kinds.HTTP_ROUTES),
)


def history_controller(runtime: Runtime) -> Controller[Observed, SparkHistoryServerStatus]:
    def observe(own: Own[SparkHistoryServerStatus]) -> Observed:
        children = tuple(c for index, _ in CHILD_INDEXES for c in runtime.filed(index, own.key))
        return Observed(ServerView.from_body(own.body), children, **own.observed())

    return Controller(
        name="history",
        own=own_source(SERVERS_INDEX, kinds.SPARK_HISTORY_SERVERS),
        owned=tuple(
            Source(
                index,
                resource,
                owner_keys,
                ChildView.from_body,
                selector=SELECTOR,
                shared=True,
                view=ChildView.from_body,  # a Deployment's rollout says more than its readiness: no pass for that
            )
            for index, resource in CHILD_INDEXES
        ),
        observe=observe,
        decide=decide,
        status=SparkHistoryServerStatus,
        log=log,
    )


def register(runtime: Runtime) -> tuple[Controller[Observed, SparkHistoryServerStatus]]:
    """The history controller's caches, change handlers and work queue (sparkop's group only: kubeflow
    has no such kind)."""
    declared = history_controller(runtime)
    start(runtime, declared)
    return (declared,)
