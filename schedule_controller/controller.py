"""The schedule controller's declaration for the skeleton (``core.controller``): the
ScheduledSparkApplications and the SparkApplications they own, an ``observe`` over them, and the pure
``decide``. Registered by ``sparkop run --controllers scheduled`` through :func:`register`, once for each
served group (sparkop's, and kubeflow's with ``--kubeflow-api``): a schedule starts SparkApplications of
its own group.

Its clock is :data:`CLOCK`, the real one; a test that must move the operator's time (rather than
sleep until the next scheduled minute) runs the operator through a wrapper that replaces it
(``tests/support/shifted_clock.py``). Nothing of that ships in the operator.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial

from sparkop.api.scheduled import ScheduledSparkApplicationStatus
from sparkop.core.controller import Controller, Names, Own, Source, start
from sparkop.core.runtime import Runtime
from sparkop.core.times import utc_now
from sparkop.domain import kinds
from sparkop.domain.kinds import API
from sparkop.schedule_controller.decide import decide
from sparkop.schedule_controller.observed import (
    Observed,
    RunView,
    ScheduledView,
    owner_keys,
)

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
CLOCK: Clock = utc_now


def schedule_controller(
    runtime: Runtime, clock: Clock | None = None, api: API = kinds.SPARKOP_API
) -> Controller[Observed, ScheduledSparkApplicationStatus]:
    """The schedule controller of ``api``'s ScheduledSparkApplications."""
    names = Names("scheduled", api.named)
    runs_index = names.index("runs")

    def observe(own: Own[ScheduledSparkApplicationStatus]) -> Observed:
        runs = runtime.filed(runs_index, own.key)
        return Observed(ScheduledView.from_body(own.body), runs, **own.observed())

    run_view = partial(RunView.from_body, group=api.group)
    return Controller(
        name=names.name,
        by_namespace_selector=True,
        own=names.own_source(api.scheduled),
        owned=(Source(runs_index, api.applications, owner_keys(api.group), run_view),),
        observe=observe,
        decide=decide,
        status=ScheduledSparkApplicationStatus,
        log=api.log(log),
        clock=clock or CLOCK,
    )


def register(runtime: Runtime) -> tuple[Controller[Observed, ScheduledSparkApplicationStatus], ...]:
    """The schedule controller's caches, change handlers and work queue, for each served group."""
    declared = tuple(schedule_controller(runtime, api=api) for api in kinds.served_apis(runtime.options.kubeflow_api))
    for controller in declared:
        start(runtime, controller)
    return declared
