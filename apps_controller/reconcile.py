"""The SparkApplication state machine: ``reconcile(observed, now) -> Plan``.

Pure: no clock reads, no I/O, no randomness. One pass takes *one* step from the state stored in
status (docs/state-machine.md); the shell writes the new status first, with the resourceVersion the
decision was made from, and only then runs ``plan.after_status``. Hence:

* an attempt's outcome is counted in the pass that observes it, and the next SparkDriver is created
  in a later pass, from a status that already holds the count;
* the SparkDriver of run ``n`` is only created by a pass whose status write recorded
  ``lastRun = n``; a pass that re-plans the create (crash between write and create) meets 409.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Final

from apps_controller import events, policy, ui
from apps_controller.builders import DRIVER_KIND, build_driver
from apps_controller.model import (
    EXECUTED_OUTCOMES,
    JSON,
    SUBMISSION_FAILED_OUTCOMES,
    TERMINAL_STATES,
    AppStatus,
    AttemptRecord,
    DriverInfo,
    DriverPhase,
    DriverView,
    Observed,
    Outcome,
    State,
)
from sparkop import naming

# Finished SparkDrivers kept for their logs: the current run's and the one before.
KEEP_FINISHED_DRIVERS: Final = 2

_ACTIVE_STATES: Final = frozenset({State.SUBMITTED, State.RUNNING, State.UNKNOWN})


# ---------------------------------------------------------------------------------------------------
# the plan


@dataclass(frozen=True)
class CreateDriver:
    run: int
    manifest: JSON

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


@dataclass(frozen=True)
class DeleteDriver:
    name: str
    uid: str | None  # None: never observed (created just before a crash); deleted by its unique name


@dataclass(frozen=True)
class DeleteApp:
    name: str
    uid: str


@dataclass(frozen=True)
class EnsureObject:
    """Create, or patch to the manifest when it exists (Spark UI Service and Ingress)."""

    manifest: JSON


@dataclass(frozen=True)
class DeleteObject:
    api_version: str
    kind: str
    name: str


Action = CreateDriver | DeleteDriver | DeleteApp | EnsureObject | DeleteObject


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class Plan:
    """What one pass wants: ``before_status`` actions (idempotent, the status then records their
    result), the status to write, ``after_status`` actions (only run once the status write succeeded),
    events to post after the write, and when to look again at the latest."""

    status: AppStatus
    before_status: tuple[Action, ...] = ()
    after_status: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None

    @property
    def actions(self) -> tuple[Action, ...]:
        return self.before_status + self.after_status


# ---------------------------------------------------------------------------------------------------
# one pass


@dataclass
class _Pass:
    obs: Observed
    now: datetime
    status: AppStatus
    before: list[Action] = field(default_factory=list)
    after: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)

    # -- helpers ------------------------------------------------------------------------------------

    def driver(self, run: int) -> DriverView | None:
        return next((d for d in self.obs.owned if d.run == run), None)

    def unfinished(self) -> list[DriverView]:
        return [d for d in self.obs.owned if not d.finished]

    def seen(self, record: AttemptRecord) -> bool:
        """Whether the record's SparkDriver has been observed (status.currentDriver is set on sight)."""
        return self.status.current_driver == record.driver

    def transition(self, state: State, message: str) -> None:
        if state is self.status.state:
            return
        self.status = replace(self.status, state=state)
        kind, reason = events.BY_STATE[state]
        self.events.append(Event(kind, reason, message))
        if state in TERMINAL_STATES and self.status.termination_time is None:
            self.status = replace(self.status, termination_time=self.now)

    def wait_until(self, when: datetime) -> None:
        self.waits.append(max(0.0, (when - self.now).total_seconds()))

    def delete(self, drv: DriverView) -> None:
        action = DeleteDriver(drv.name, drv.uid)
        if not drv.deleting and action not in self.after:
            self.after.append(action)

    def finish(self, record: AttemptRecord, outcome: Outcome, reason: str | None, message: str | None) -> AttemptRecord:
        """Record the outcome of ``record`` and count it: the one place counters change (besides the
        reset of INVALIDATING)."""
        s = self.status
        attempt = None
        if outcome in EXECUTED_OUTCOMES:
            attempt = s.execution_attempts + 1
            s = replace(s, execution_attempts=attempt)
        elif outcome in SUBMISSION_FAILED_OUTCOMES:
            attempt = s.submission_attempts + 1
            s = replace(s, submission_attempts=attempt)
        done = replace(record, outcome=outcome, attempt=attempt, reason=reason, message=message, finish_time=self.now)
        self.status = s.with_attempt(done)
        return done

    def plan(self) -> Plan:
        return Plan(
            status=self.status,
            before_status=tuple(self.before),
            after_status=tuple(self.after),
            events=tuple(self.events),
            requeue_after=min(self.waits) if self.waits else None,
        )

    # -- the current attempt -----------------------------------------------------------------------

    def mirror(self, drv: DriverView) -> None:
        """Copy the current SparkDriver's facts into the app's status."""
        if drv.incarnation > max(1, self.status.driver_incarnations):
            message = f"driver pod of {drv.name} was replaced: incarnation {drv.incarnation}"
            self.events.append(Event(events.NORMAL, events.DRIVER_POD_REPLACED, message))
        self.status = replace(
            self.status,
            current_driver=drv.name,
            spark_application_id=drv.spark_application_id or self.status.spark_application_id,
            driver_info=replace(self.status.driver_info, pod_name=drv.pod_name or self.status.driver_info.pod_name),
            driver_incarnations=max(drv.incarnation, self.status.driver_incarnations),
            executors=dict(drv.executors) or self.status.executors,
        )

    def observe_current(self) -> None:
        """SUBMITTED / RUNNING / UNKNOWN: follow the current SparkDriver; count its outcome once."""
        cur = self.status.current
        if cur is None:
            self.submit()
            return
        if cur.finished:  # counted already; the state was not written with it (adoption)
            self.enter_outcome(cur)
            return
        drv = self.driver(cur.run)
        if drv is None:
            if not self.seen(cur):  # planned, not seen yet: (re)issue the create; 409 if it exists
                self.after.append(CreateDriver(cur.run, build_driver(self.obs.app, cur.run)))
                return
            message = f"SparkDriver {cur.driver} was deleted before it finished"
            self.enter_outcome(self.finish(cur, Outcome.DELETED, events.DRIVER_LOST, message))
            return
        self.mirror(drv)
        if drv.phase in _OUTCOME_OF:
            self.enter_outcome(self.finish(cur, _OUTCOME_OF[drv.phase], drv.reason, _driver_message(drv)))
        elif drv.phase is DriverPhase.RUNNING:
            self.transition(State.RUNNING, f"driver {drv.name} is running")
        else:
            self.transition(State.SUBMITTED, f"SparkDriver {drv.name} is pending")

    def enter_outcome(self, record: AttemptRecord) -> None:
        """SUCCEEDING / FAILING / SUBMISSION_FAILED, with nextAttemptTime when the policy retries."""
        outcome = _STATE_OF.get(record.outcome)
        if outcome is None:  # Invalidated: nothing is running, start over
            self.transition(State.PENDING_RERUN, f"run {record.run} was stopped")
            return
        finished_at = record.finish_time or self.now
        error = None if outcome is State.SUCCEEDING else _error_message(record)
        s = self.status
        due = policy.next_attempt_time(
            self.obs.app.policy, outcome, s.execution_attempts, s.submission_attempts, finished_at
        )
        self.status = replace(s, termination_time=finished_at, error_message=error, next_attempt_time=due)
        self.transition(outcome, error or f"driver {record.driver} succeeded")

    # -- steps ---------------------------------------------------------------------------------------

    def submit(self) -> None:
        """Plan the next run: the status write records it (lastRun), the create follows it."""
        app = self.obs.app
        if app.spec_error:
            self.status = replace(self.status, error_message=app.spec_error, next_attempt_time=None)
            self.events.append(Event(events.WARNING, events.INVALID_SPEC, app.spec_error))
            self.transition(State.FAILED, f"invalid spec: {app.spec_error}")
            return
        strays = [d for d in self.unfinished() if d.run <= self.status.last_run]
        if strays:  # at most one unfinished SparkDriver: stop strays first, submit on a later pass
            for drv in strays:
                self.delete(drv)
            return
        run = self.status.last_run + 1
        name = naming.driver_name(app.name, run)
        self.status = replace(
            self.status,
            last_run=run,
            current_driver=None,  # set when the new SparkDriver is first seen
            last_submission_attempt_time=self.now,
            observed_generation=app.generation,
            next_attempt_time=None,
            termination_time=None,
            error_message=None,
            spark_application_id=None,
            driver_info=replace(self.status.driver_info, pod_name=None),
            driver_incarnations=0,
            executors={},
        ).with_attempt(AttemptRecord(run=run, driver=name, start_time=self.now))
        self.transition(State.SUBMITTED, f"SparkDriver {name} (run {run}) submitted")
        self.after.append(CreateDriver(run, build_driver(app, run)))

    def stop_current(self, reason: str) -> bool:
        """Delete the unfinished SparkDrivers (INVALIDATING, SUSPENDING). True once none is left; the
        current attempt is then recorded as Invalidated, whatever it did meanwhile (not counted)."""
        cur = self.status.current
        left = self.unfinished()
        for drv in left:
            self.delete(drv)
        if cur is not None and not cur.finished and not self.seen(cur) and self.driver(cur.run) is None:
            # Maybe created just before a crash and not indexed yet: delete it by its unique name.
            self.after.append(DeleteDriver(cur.driver, None))
        if left:
            return False
        if cur is not None and not cur.finished:
            last = self.driver(cur.run)
            ended = f" (it had ended {last.phase.value})" if last is not None and last.phase else ""
            self.finish(cur, Outcome.INVALIDATED, reason, f"stopped while {self.status.state.value}{ended}")
        return True

    def invalidating(self) -> None:
        if not self.stop_current(_SPEC_CHANGED):
            return
        self.status = replace(
            self.status,
            submission_attempts=0,
            execution_attempts=0,
            last_submission_attempt_time=None,
            termination_time=None,
            next_attempt_time=None,
            error_message=None,
            spark_application_id=None,
            driver_info=replace(self.status.driver_info, pod_name=None),
            executors={},
            driver_incarnations=0,
        )
        self.transition(State.PENDING_RERUN, "the previous run was stopped; running the new spec")

    def suspending(self) -> None:
        if not self.stop_current(_SUSPENDED):
            return
        self.status = replace(
            self.status,
            next_attempt_time=None,
            error_message=None,
            spark_application_id=None,
            driver_info=replace(self.status.driver_info, pod_name=None),
            executors={},
        )
        self.transition(State.SUSPENDED, "suspended: no driver is running")

    def suspended(self) -> None:
        if not self.obs.app.suspend:
            self.transition(State.RESUMING, "resuming with a new run")

    def succeeding(self) -> None:
        if policy.should_retry(self.obs.app.policy, State.SUCCEEDING, 0, 0):
            self.transition(State.PENDING_RERUN, "restartPolicy Always: running again")
        else:
            self.transition(State.COMPLETED, f"completed after {self.status.execution_attempts} run(s)")

    def failing(self, outcome: State) -> None:
        """FAILING and SUBMISSION_FAILED: wait for nextAttemptTime, then run again; or give up."""
        app_policy = self.obs.app.policy
        s = self.status
        if not policy.should_retry(app_policy, outcome, s.execution_attempts, s.submission_attempts):
            self.status = replace(self.status, next_attempt_time=None)
            self.transition(State.FAILED, s.error_message or "failed")
            return
        due = s.next_attempt_time or (s.termination_time or self.now) + policy.retry_interval(app_policy, outcome)
        if self.now < due:
            self.status = replace(self.status, next_attempt_time=due)
            self.wait_until(due)
        elif outcome is State.FAILING:
            self.transition(State.PENDING_RERUN, f"retrying after {s.execution_attempts} failed run(s)")
        else:
            self.submit()

    def terminal(self) -> None:
        """COMPLETED / FAILED never change; keep mirroring the last driver; delete the app at its TTL."""
        for drv in self.unfinished():
            self.delete(drv)
        last = self.driver(self.status.last_run)
        if last is not None:
            self.mirror(last)
        ttl = self.obs.app.ttl_seconds
        if ttl is None or self.status.termination_time is None:
            return
        expires = self.status.termination_time + timedelta(seconds=ttl)
        if self.now >= expires:
            self.events.append(Event(events.NORMAL, events.EXPIRED, f"timeToLiveSeconds {ttl} elapsed"))
            self.after.append(DeleteApp(self.obs.app.name, self.obs.app.uid))
        else:
            self.wait_until(expires)

    def adopt(self) -> bool:
        """A SparkDriver with a run above status.lastRun (its status write was lost) becomes the
        current attempt. Nothing else happens in that pass."""
        newest = self.obs.owned[-1] if self.obs.owned else None
        if newest is None or newest.run <= self.status.last_run or self.status.state in TERMINAL_STATES:
            return False
        cur = self.status.current
        if cur is not None and not cur.finished:
            self.finish(cur, Outcome.INVALIDATED, events.ADOPTED, f"superseded by {newest.name}")
        self.status = replace(
            self.status,
            last_run=newest.run,
            current_driver=newest.name,
            last_submission_attempt_time=self.now,
            observed_generation=newest.app_generation or self.obs.app.generation,
            next_attempt_time=None,
            termination_time=None,
            error_message=None,
        ).with_attempt(AttemptRecord(run=newest.run, driver=newest.name, start_time=self.now))
        self.events.append(Event(events.NORMAL, events.ADOPTED, f"adopted SparkDriver {newest.name}"))
        self.transition(State.SUBMITTED, f"SparkDriver {newest.name} (run {newest.run}) adopted")
        return True

    def spec_changed(self) -> bool:
        """Whether the spec of the current run (its SparkDriver's spec-hash annotation) differs from
        the app's, ignoring suspend and timeToLiveSeconds."""
        app = self.obs.app
        if app.generation <= self.status.observed_generation:
            return False
        cur = self.status.current
        drv = self.driver(cur.run) if cur is not None else None
        if cur is not None and drv is None:
            # Not seen yet: it is (re)created from the newest spec, and compared once seen.
            # Gone after it finished: its spec is unknown, so run the new one.
            return cur.finished
        if drv is not None and drv.spec_hash != app.spec_hash:
            return True
        self.status = replace(self.status, observed_generation=app.generation)
        return False

    def step(self) -> None:
        state = self.status.state
        app = self.obs.app
        if state in TERMINAL_STATES:
            self.terminal()
            return
        if state in _DECIDING and not self.retries(state):
            _STEPS[state](self)  # the policy's final word (COMPLETED / FAILED) comes before a suspend
            return
        if app.suspend and state not in (State.SUSPENDING, State.SUSPENDED):
            self.transition(State.SUSPENDING, "spec.suspend is true: stopping the current run")
            self.suspending()
            return
        if state not in _NO_SPEC_CHECK and self.spec_changed():
            self.status = replace(self.status, observed_generation=app.generation)
            self.transition(State.INVALIDATING, f"spec changed (generation {app.generation}): running it anew")
            self.invalidating()
            return
        _STEPS[state](self)

    def retries(self, outcome: State) -> bool:
        s = self.status
        return policy.should_retry(self.obs.app.policy, outcome, s.execution_attempts, s.submission_attempts)

    def prune(self) -> None:
        """Delete stray unfinished SparkDrivers and all but the newest finished ones."""
        last = self.status.last_run
        for drv in self.obs.owned:
            stray = not drv.finished and drv.run < last
            old = drv.finished and drv.run <= last - KEEP_FINISHED_DRIVERS
            if stray or old:
                self.delete(drv)

    def ui(self) -> None:
        """Spark UI Service (and Ingress) while a run is active; removed otherwise."""
        before = self.obs.status.driver_info
        cfg = self.obs.ui
        app = self.obs.app
        info = self.status.driver_info
        app_id = self.status.spark_application_id
        if cfg.service and self.status.state in _ACTIVE_STATES and app_id is not None:
            svc = naming.ui_service_name(app.name)
            if before.web_ui_service_name != svc or self.obs.status.spark_application_id != app_id:
                self.before.append(EnsureObject(ui.build_service(app, app_id)))
            info = replace(
                info, web_ui_service_name=svc, web_ui_port=ui.UI_PORT, web_ui_address=ui.service_address(app)
            )
            if cfg.ingress_url_format:
                url = ui.ingress_url(cfg.ingress_url_format, app)
                name = naming.ui_ingress_name(app.name)
                if before.web_ui_ingress_name != name or before.web_ui_ingress_address != url.address:
                    self.before.append(EnsureObject(ui.build_ingress(app, url, cfg.ingress_class_name)))
                info = replace(info, web_ui_ingress_name=name, web_ui_ingress_address=url.address)
        else:
            if info.web_ui_ingress_name:
                self.before.append(DeleteObject("networking.k8s.io/v1", "Ingress", info.web_ui_ingress_name))
            if info.web_ui_service_name:
                self.before.append(DeleteObject("v1", "Service", info.web_ui_service_name))
            info = DriverInfo(pod_name=info.pod_name)
        self.status = replace(self.status, driver_info=info)


# States where a spec change does not invalidate: nothing runs, and the next run takes the newest spec
# (a spec changed while suspended is run on resume without resetting the counters, as kubeflow does).
_NO_SPEC_CHECK: Final = frozenset({State.SUSPENDING, State.SUSPENDED, State.RESUMING, State.INVALIDATING})
# States holding a counted outcome whose policy decision (run again, or finish) is pending.
_DECIDING: Final = frozenset({State.SUCCEEDING, State.FAILING, State.SUBMISSION_FAILED})
_SPEC_CHANGED: Final = "SpecChanged"
_SUSPENDED: Final = "Suspended"
_OUTCOME_OF: Final = {
    DriverPhase.SUCCEEDED: Outcome.SUCCEEDED,
    DriverPhase.FAILED: Outcome.FAILED,
    DriverPhase.SUBMISSION_FAILED: Outcome.SUBMISSION_FAILED,
}
_STATE_OF: Final = {
    Outcome.SUCCEEDED: State.SUCCEEDING,
    Outcome.FAILED: State.FAILING,
    Outcome.DELETED: State.FAILING,
    Outcome.SUBMISSION_FAILED: State.SUBMISSION_FAILED,
}


def _driver_message(drv: DriverView) -> str | None:
    parts = []
    if drv.exit_code is not None:
        parts.append(f"exit code {drv.exit_code}")
    if drv.message:
        parts.append(drv.message)
    return ": ".join(parts) or None


def _error_message(record: AttemptRecord) -> str:
    if record.outcome is Outcome.DELETED:
        return record.message or f"SparkDriver {record.driver} was deleted"
    what = "could not create its driver pod" if record.outcome is Outcome.SUBMISSION_FAILED else "failed"
    text = f"run {record.run} ({record.driver}) {what}"
    detail = ", ".join(p for p in (record.reason, record.message) if p)
    return f"{text}: {detail}" if detail else text


_STEPS: Final[dict[State, Callable[[_Pass], None]]] = {
    State.NEW: _Pass.submit,
    State.SUBMITTED: _Pass.observe_current,
    State.RUNNING: _Pass.observe_current,
    State.UNKNOWN: _Pass.observe_current,
    State.SUCCEEDING: _Pass.succeeding,
    State.FAILING: lambda p: p.failing(State.FAILING),
    State.SUBMISSION_FAILED: lambda p: p.failing(State.SUBMISSION_FAILED),
    State.PENDING_RERUN: _Pass.submit,
    State.INVALIDATING: _Pass.invalidating,
    State.SUSPENDING: _Pass.suspending,
    State.SUSPENDED: _Pass.suspended,
    State.RESUMING: _Pass.submit,
}


def reconcile(observed: Observed, now: datetime) -> Plan:
    """Decide one step for a SparkApplication from what was observed, at time ``now``."""
    p = _Pass(observed, now, observed.status)
    if observed.app.deleting:  # the garbage collector removes what the app owns
        return p.plan()
    if not p.adopt():
        p.step()
        p.prune()
    p.ui()
    return p.plan()


__all__ = [
    "DRIVER_KIND",
    "Action",
    "CreateDriver",
    "DeleteApp",
    "DeleteDriver",
    "DeleteObject",
    "EnsureObject",
    "Event",
    "Plan",
    "reconcile",
]
