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
from sparkop.core.controller import Controller, Source, start
from sparkop.core.expectations import Learnt
from sparkop.core.jsontypes import JSON
from sparkop.core.owners import snapshot
from sparkop.core.runtime import Runtime
from sparkop.core.times import utc_now
from sparkop.domain import kinds
from sparkop.schedule_controller.decide import decide
from sparkop.schedule_controller.observed import (
    Key,
    Observed,
    RunView,
    ScheduledView,
    own_key,
    owner_keys,
    read_status,
    status_json,
)

log = logging.getLogger(__name__)

SCHEDULED_INDEX: Final = "scheduled_scheduledsparkapplications"
RUNS_INDEX: Final = "scheduled_runs"

Clock = Callable[[], datetime]
CLOCK: Clock = utc_now


def schedule_controller(
    runtime: Runtime, clock: Clock | None = None
) -> Controller[Observed, ScheduledSparkApplicationStatus]:
    def observe(key: Key, body: JSON | None, learnt: Learnt) -> Observed | None:
        if body is None:
            return None  # deleted: the garbage collector removes its runs
        view = ScheduledView.from_body(body)
        runs = tuple(runtime.index(RUNS_INDEX).get(key) or ())
        terminating = runtime.namespace_terminating(view.namespace)
        return Observed(view, read_status(body.get("status")), body, runs, dict(learnt.refusals), terminating)

    return Controller(
        name="scheduled",
        own=Source(SCHEDULED_INDEX, kinds.SCHEDULED_SPARK_APPLICATIONS, own_key, snapshot),
        owned=(Source(RUNS_INDEX, kinds.SPARK_APPLICATIONS, owner_keys, RunView.from_body),),
        observe=observe,
        decide=decide,
        status_json=status_json,
        log=log,
        clock=clock or CLOCK,
    )


def register(runtime: Runtime) -> None:
    """The schedule controller's caches, change handlers and work queue."""
    start(runtime, schedule_controller(runtime))
