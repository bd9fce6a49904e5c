"""The schedule controller's declaration for the skeleton (``core.controller``): the
ScheduledSparkApplications and the SparkApplications they own, an ``observe`` over them, and the pure
``decide``. Registered by ``sparkop run --controllers scheduled`` through :func:`register`.

Its clock is :data:`CLOCK`, the real one; a test that must move the operator's time (rather than
sleep until the next scheduled minute) runs the operator through a wrapper that replaces it
(``tests/support/shifted_clock.py``). Nothing of that ships in the operator.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Final

from sparkop.api.scheduled import ScheduledSparkApplicationStatus
from sparkop.core.controller import Controller, Own, Source, start
from sparkop.core.owners import object_key, snapshot
from sparkop.core.runtime import Runtime
from sparkop.core.times import utc_now
from sparkop.domain import kinds
from sparkop.schedule_controller.decide import decide
from sparkop.schedule_controller.observed import (
    Observed,
    RunView,
    ScheduledView,
    owner_keys,
)

log = logging.getLogger(__name__)

SCHEDULED_INDEX: Final = "scheduled_scheduledsparkapplications"
RUNS_INDEX: Final = "scheduled_runs"

Clock = Callable[[], datetime]
CLOCK: Clock = utc_now


def schedule_controller(
    runtime: Runtime, clock: Clock | None = None
) -> Controller[Observed, ScheduledSparkApplicationStatus]:
    def observe(own: Own[ScheduledSparkApplicationStatus]) -> Observed:
        runs = tuple(runtime.index(RUNS_INDEX).get(own.key) or ())
        view = ScheduledView.from_body(own.body)
        return Observed(view, own.status, own.body, runs, dict(own.learnt.refusals), own.namespace_terminating)

    return Controller(
        name="scheduled",
        own=Source(SCHEDULED_INDEX, kinds.SCHEDULED_SPARK_APPLICATIONS, object_key, snapshot),
        owned=(Source(RUNS_INDEX, kinds.SPARK_APPLICATIONS, owner_keys, RunView.from_body),),
        observe=observe,
        decide=decide,
        status=ScheduledSparkApplicationStatus,
        log=log,
        clock=clock or CLOCK,
    )


def register(runtime: Runtime) -> Controller[Observed, ScheduledSparkApplicationStatus]:
    """The schedule controller's caches, change handlers and work queue."""
    declared = schedule_controller(runtime)
    start(runtime, declared)
    return declared
