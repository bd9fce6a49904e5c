"""What one pass has decided so far: the status arrived at, and the plan (``core.plan.Plan``, which
builds itself: the actions, the events and the earliest wait).

Every step of ``decide`` (the state steps, the run records, the Spark UI, the conditions) works on one
:class:`Draft`; :meth:`Draft.plan` hands the result to ``core.applier``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from sparkop.api.models import ApplicationState, AttemptRecord, SparkApplicationStatus
from sparkop.apps_controller import events
from sparkop.apps_controller import status as st
from sparkop.apps_controller.builders import DRIVER_KIND, build_driver
from sparkop.apps_controller.observed import DriverView, Observed
from sparkop.core.frozen import evolve
from sparkop.core.plan import Action, Create, Delete, Event, EventType, Plan
from sparkop.domain import labels

# Why each action is taken (the decision line's reason).
RUN_CREATED: Final = "CreateRun"
RUN_STOPPED: Final = "StopRun"
APP_EXPIRED: Final = "TimeToLiveExpired"
UI_ENSURED: Final = "SparkUI"
UI_REMOVED: Final = "SparkUIRemoved"


def delete_driver(name: str, uid: str | None) -> Delete:
    """uid None: never observed (created just before a crash); deleted by its unique name."""
    return Delete(labels.API_VERSION, DRIVER_KIND, name, uid, RUN_STOPPED)


@dataclass
class Draft:
    obs: Observed
    now: datetime
    status: SparkApplicationStatus
    planned: Plan[SparkApplicationStatus] = field(default_factory=Plan)  # its status: set by plan()
    # core.plan.Plan.settled where a step knows (None: as its states say, apps_controller.decide).
    settles: bool | None = None

    # -- reading -----------------------------------------------------------------------------------

    @property
    def state(self) -> ApplicationState:
        return st.state(self.status)

    @property
    def current(self) -> AttemptRecord | None:
        return st.current(self.status)

    def driver(self, run: int) -> DriverView | None:
        return next((d for d in self.obs.owned if d.run == run), None)

    def unfinished(self) -> list[DriverView]:
        return [d for d in self.obs.owned if not d.finished]

    def seen(self, record: AttemptRecord) -> bool:
        """Whether the record's SparkDriver has been observed (status.currentDriver is set on sight)."""
        return self.status.currentDriver == record.driver

    # -- status ------------------------------------------------------------------------------------

    def update(self, **fields: Any) -> None:
        """Set status fields (by their JSON names)."""
        unknown = fields.keys() - SparkApplicationStatus.model_fields.keys()
        if unknown:
            raise TypeError(f"not a SparkApplicationStatus field: {sorted(unknown)}")
        self.status = self.status.model_copy(update=fields)

    def set_error_message(self, message: str | None) -> None:
        self.status = st.with_error_message(self.status, message)

    def set_driver_info(self, **fields: Any) -> None:
        self.status = st.with_driver_info(self.status, **fields)

    def record(self, attempt: AttemptRecord) -> None:
        self.status = st.with_attempt(self.status, attempt)

    def transition(self, state: ApplicationState, message: str, again: bool = False) -> None:
        """Enter ``state`` with its event; ``again``: its event even when the state is kept (a run
        planned from SUBMISSION_FAILED refused in turn is one more failed submission)."""
        if state is self.state:
            if again:
                kind, reason = events.BY_STATE[state]
                self.event(kind, reason, message)
            return
        self.status = st.with_state(self.status, state)
        kind, reason = events.BY_STATE[state]
        self.event(kind, reason, message)
        if state in st.TERMINAL_STATES:
            # The status written now is final: nothing of a finished app runs any more.
            self.update(executors=st.NO_EXECUTORS, terminationTime=self.status.terminationTime or self.now)

    # -- the plan ----------------------------------------------------------------------------------

    @property
    def events(self) -> tuple[Event, ...]:
        return self.planned.events

    def event(self, type_: EventType, reason: str, message: str) -> None:
        self.planned = self.planned.with_event(type_, reason, message)

    def restate(self, events: Sequence[Event]) -> None:
        """The events said so far, as ``events`` (two of them merged into one)."""
        self.planned = evolve(self.planned, events=tuple(events))

    def before(self, *actions: Action) -> None:
        """Actions before the status write (the Spark UI objects: status records them)."""
        self.planned = self.planned.with_before(*actions)

    def after(self, *actions: Action) -> None:
        """Actions after the status write (a run's SparkDriver: counted first)."""
        self.planned = self.planned.with_after(*actions)

    def wait_until(self, when: datetime) -> None:
        self.planned = self.planned.requeue(max(0.0, (when - self.now).total_seconds()))

    def delete(self, drv: DriverView) -> None:
        action = delete_driver(drv.name, drv.uid)
        if not drv.deleting and action not in self.planned.after_status:
            self.after(action)

    def create_driver(self, run: int) -> Create:
        """The SparkDriver of ``run``, adopting the driver pod its record names (a run taken over)."""
        record = next((r for r in self.status.attempts or () if r.run == run), None)
        adopt = record.adoptedPod if record is not None else None
        return Create(build_driver(self.obs.app, run, self.obs.ui, self.obs.history.server, adopt), RUN_CREATED)

    def plan(self) -> Plan[SparkApplicationStatus]:
        return self.planned.with_status(self.status)
