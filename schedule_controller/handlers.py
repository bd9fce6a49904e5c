"""The shell of the schedule controller: indexes over the ScheduledSparkApplications and the
SparkApplications they own, enqueue-only change handlers, and the one ``reconcile_key`` that observes,
calls the pure ``decide`` and applies its plan. Registered by ``sparkop run --controllers scheduled``.

The clock is :func:`clock`: the real one, shifted by the number of seconds in the file
``$SPARKOP_TEST_CLOCK_OFFSET_FILE`` when that variable is set. It is for the integration tests only
(they move an operator's time forward instead of sleeping until the next minute); a deployment never
sets it. The file is read on every pass, so a test moves time by rewriting it (and touching the
object, whose change enqueues it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Final

from api.scheduled import ScheduledSparkApplicationStatus
from core import kube, logs
from core.reconciler import Applier, Learned, Plan
from core.runtime import Runtime
from schedule_controller.decide import decide
from schedule_controller.observed import (
    Key,
    Observed,
    RunView,
    ScheduledView,
    own_key,
    owner_keys,
    read_status,
    snapshot,
    status_json,
)

log = logging.getLogger(__name__)

SCHEDULED_INDEX: Final = "scheduled_scheduledsparkapplications"
RUNS_INDEX: Final = "scheduled_runs"
CLOCK_OFFSET_ENV: Final = "SPARKOP_TEST_CLOCK_OFFSET_FILE"
MAX_DECISIONS_PER_PASS: Final = 4

Clock = Callable[[], datetime]


def clock() -> datetime:
    """Now; shifted by the test-only offset file of ``$SPARKOP_TEST_CLOCK_OFFSET_FILE`` when set."""
    now = datetime.now(UTC)
    path = os.environ.get(CLOCK_OFFSET_ENV)
    if not path:
        return now
    try:
        with open(path) as f:
            return now + timedelta(seconds=float(f.read().strip() or 0))
    except (OSError, ValueError) as exc:
        log.warning("%s=%s unreadable (%s): using the real clock", CLOCK_OFFSET_ENV, path, exc)
        return now


@dataclass
class ScheduleController:
    runtime: Runtime
    now: Clock = clock
    _applier: Applier[Key] | None = None

    @property
    def applier(self) -> Applier[Key]:
        if self._applier is None:
            self._applier = Applier(self.runtime.kube, kube.Rules(), partial(logs.decision, log))
        return self._applier

    def observe(self, key: Key) -> tuple[Observed, dict[str, Any]] | None:
        body = next(iter(self.runtime.index(SCHEDULED_INDEX).get(key) or ()), None)
        if body is None:
            return None
        view = ScheduledView.from_body(body)
        runs = tuple(self.runtime.index(RUNS_INDEX).get(key) or ())
        refusals = dict(self.applier.learnt(key, view.uid).refusals)
        terminating = self.runtime.namespace_terminating(view.namespace)
        return Observed(view, read_status(body.get("status")), body, runs, refusals, terminating), body

    async def reconcile_key(self, key: Key) -> float | None:
        """One pass for one ScheduledSparkApplication; a refused create is decided on again at once."""
        for _ in range(MAX_DECISIONS_PER_PASS):
            seen = self.observe(key)
            if seen is None:
                self.applier.forget(key)
                return None  # deleted: the garbage collector removes its runs
            observed, body = seen
            plan = decide(observed, self.now())
            try:
                applied = await self.apply(plan, observed, body)
            except Learned:
                continue
            return None if applied.gone else applied.requeue_after
        return 0.0

    async def apply(self, plan: Plan[ScheduledSparkApplicationStatus], observed: Observed, body: dict[str, Any]) -> Any:
        view = observed.scheduled
        key = (view.namespace, view.name)
        return await self.applier.apply(
            key,
            body,
            plan,
            status_json,
            namespace=view.namespace,
            owner_current=partial(self.runtime.ensure_holds, SCHEDULED_INDEX, key, view.uid),
        )


def register(runtime: Runtime) -> None:
    """Indexes and change handlers of the schedule controller; its work queue runs ``reconcile_key``."""
    controller = ScheduleController(runtime)
    queue = runtime.queue("scheduled", controller.reconcile_key)
    runtime.add_index(SCHEDULED_INDEX, kube.SCHEDULED_SPARK_APPLICATIONS, own_key, snapshot)
    runtime.enqueue_on_change(kube.SCHEDULED_SPARK_APPLICATIONS, queue, own_key)
    runtime.add_index(RUNS_INDEX, kube.SPARK_APPLICATIONS, owner_keys, RunView.from_body)
    runtime.enqueue_on_change(kube.SPARK_APPLICATIONS, queue, owner_keys, coalesce=True)
