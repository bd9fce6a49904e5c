"""The SparkApplication state machine: ``reconcile(observed, now) -> Plan``.

Pure: no clock reads, no I/O, no randomness. One pass takes *one* step from the state stored in
status (docs/state-machine.md); the shell writes the new status first, with the resourceVersion the
decision was made from, and only then runs ``plan.after_status``. Hence:

* the SparkDriver of run ``n`` is only created by a pass whose status write recorded
  ``lastRun = n`` and counted it in ``submissionAttempts``; a pass that re-plans the create (crash
  between write and create) meets 409;
* a run is counted in ``executionAttempts`` by the pass that first sees its driver pod accepted, in
  the write that sets its record's ``attempt``; its outcome is recorded once, by the write that moves
  the record from Running to finished; the next SparkDriver is created by a later pass, from a
  status that already holds both;
* a create the API server refused (kube.Refused) comes back to the next pass as an observation
  (``Observed.refusals``) and is recorded like any other outcome.

A pass runs these phases: adopt a SparkDriver newer than status (or) take the state's step and
prune old SparkDrivers; then the Spark UI objects; then the conditions that summarise it all. Two
kinds of pass write nothing: one in a namespace being deleted (plans nothing at all), and one of a
finished app (COMPLETED / FAILED: frozen status; it only deletes what is left, and at its TTL itself).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Final

from api.models import ApplicationState, AttemptOutcome, DriverPhase
from apps_controller import events, policy, ui
from apps_controller.builders import DRIVER_KIND, build_driver, ui_url
from apps_controller.model import (
    CONDITION_COMPLETED,
    CONDITION_FAILED,
    CONDITION_RUNNING,
    CONDITION_STUCK,
    CONDITION_SUBMITTED,
    CONDITION_SUSPENDED,
    TERMINAL_STATES,
    AppStatus,
    AttemptRecord,
    Condition,
    DriverInfo,
    DriverView,
    LastError,
    Observed,
    clip,
)
from core.reconciler import Action, Create, Delete, Ensure, Event, Plan, refusal_key
from sparkop import labels, naming

# Finished SparkDrivers kept for their logs: the current run's and the one before.
KEEP_FINISHED_DRIVERS: Final = 2

_ACTIVE_STATES: Final = frozenset({ApplicationState.SUBMITTED, ApplicationState.RUNNING, ApplicationState.UNKNOWN})


# ---------------------------------------------------------------------------------------------------
# the actions (core.reconciler's vocabulary) and why each is taken (the decision line's reason)

RUN_CREATED: Final = "CreateRun"
RUN_STOPPED: Final = "StopRun"
APP_EXPIRED: Final = "TimeToLiveExpired"
UI_ENSURED: Final = "SparkUI"
UI_REMOVED: Final = "SparkUIRemoved"


def delete_driver(name: str, uid: str | None) -> Delete:
    """uid None: never observed (created just before a crash); deleted by its unique name."""
    return Delete(labels.API_VERSION, DRIVER_KIND, name, uid, RUN_STOPPED)


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

    def transition(self, state: ApplicationState, message: str) -> None:
        if state is self.status.state:
            return
        self.status = replace(self.status, state=state)
        kind, reason = events.BY_STATE[state]
        self.events.append(Event(kind, reason, message))
        if state in TERMINAL_STATES:
            # The status written now is final: nothing of a finished app runs any more.
            self.status = replace(self.status, executors={}, termination_time=self.status.termination_time or self.now)

    def wait_until(self, when: datetime) -> None:
        self.waits.append(max(0.0, (when - self.now).total_seconds()))

    def delete(self, drv: DriverView) -> None:
        action = delete_driver(drv.name, drv.uid)
        if not drv.deleting and action not in self.after:
            self.after.append(action)

    def create_action(self, run: int) -> Create:
        return Create(build_driver(self.obs.app, run, self.obs.ui), RUN_CREATED)

    def plan(self) -> Plan[AppStatus]:
        return Plan(
            status=self.status,
            before_status=tuple(self.before),
            after_status=tuple(self.after),
            events=tuple(self.events),
            requeue_after=min(self.waits) if self.waits else None,
        )

    # -- counting: the only places the counters change (besides the reset of a spec change) ---------

    def count_execution(self, record: AttemptRecord) -> AttemptRecord:
        """Count ``record``'s run in executionAttempts, unless its record says it was counted."""
        if record.counted:
            return record
        attempt = self.status.execution_attempts + 1
        counted = replace(record, attempt=attempt)
        self.status = replace(self.status, execution_attempts=attempt).with_attempt(counted)
        return counted

    def finish(
        self, record: AttemptRecord, outcome: AttemptOutcome, reason: str | None, message: str | None
    ) -> AttemptRecord:
        """Record how ``record``'s run ended. A run that ended on its own, not by a failed submission,
        was an execution attempt (counted here if it was not yet); a run we stopped ourselves before it
        finished (Invalidated) is given back."""
        if outcome in _EXECUTED:
            record = self.count_execution(record)
        elif outcome is AttemptOutcome.INVALIDATED and record.counted:
            self.status = replace(self.status, execution_attempts=max(0, self.status.execution_attempts - 1))
            record = replace(record, attempt=None)
        done = replace(record, outcome=outcome, reason=reason, message=clip(message), finish_time=self.now)
        self.status = self.status.with_attempt(done)
        return done

    # -- the current run ----------------------------------------------------------------------------

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
        """SUBMITTED / RUNNING / UNKNOWN: follow the current SparkDriver; count its run once when its
        driver pod is accepted, and record its outcome once when it ends."""
        cur = self.status.current
        if cur is None:
            self.submit()
            return
        if cur.finished:  # recorded already; the state was not written with it (adoption)
            self.enter_outcome(cur)
            return
        drv = self.driver(cur.run)
        if drv is None:
            self.missing_driver(cur)
            return
        self.mirror(drv)
        if drv.accepted:
            cur = self.count_execution(cur)
        outcome = _outcome_of(drv, cur)
        if outcome is not None:
            self.enter_outcome(self.finish(cur, outcome, drv.reason, _driver_message(drv)))
        elif drv.phase is DriverPhase.RUNNING:
            self.transition(ApplicationState.RUNNING, f"driver {drv.name} is running")
        else:
            self.transition(ApplicationState.SUBMITTED, f"SparkDriver {drv.name} is pending")

    def missing_driver(self, cur: AttemptRecord) -> None:
        """The current run's SparkDriver is not observed: not created (or not indexed) yet, refused by
        the API server, or deleted after it was seen."""
        if self.seen(cur):
            message = f"SparkDriver {cur.driver} was deleted before it finished"
            self.enter_outcome(self.finish(cur, AttemptOutcome.DELETED, events.DRIVER_LOST, message))
            return
        action = self.create_action(cur.run)
        refusal = self.obs.refusals.get(refusal_key(action))
        if refusal is None:
            self.after.append(action)  # planned, not seen yet: (re)issue the create; 409 if it exists
            return
        message = refusal.describe()  # the record's reason says what was refused: SparkDriverRefused
        self.enter_outcome(self.finish(cur, AttemptOutcome.SUBMISSION_FAILED, events.DRIVER_REFUSED, message))

    def enter_outcome(self, record: AttemptRecord) -> None:
        """SUCCEEDING / FAILING / SUBMISSION_FAILED, with nextAttemptTime when the policy retries and
        lastError for a failure."""
        outcome = _STATE_OF.get(record.outcome)
        if outcome is None:  # Invalidated: nothing is running, start over
            self.transition(ApplicationState.PENDING_RERUN, f"run {record.run} was stopped")
            return
        finished_at = record.finish_time or self.now
        s = self.status
        due = policy.next_attempt_time(
            self.obs.app.policy, outcome, s.execution_attempts, s.submission_attempts, finished_at
        )
        if outcome is ApplicationState.SUCCEEDING:
            self.status = replace(s, termination_time=finished_at, error_message=None, next_attempt_time=due)
            self.transition(outcome, f"driver {record.driver} succeeded")
            return
        error = _error_message(record)
        self.status = replace(
            s,
            termination_time=finished_at,
            error_message=error,
            next_attempt_time=due,
            last_error=LastError(_error_reason(record), error, finished_at),
        )
        self.transition(outcome, error)

    # -- steps ---------------------------------------------------------------------------------------

    def submit(self) -> None:
        """Plan the next run: the status write records it (lastRun, its attempt record, one more
        submission), the create follows it."""
        if self.obs.app.spec_error:
            self.invalid_spec()
        elif not self.stop_strays():
            self.plan_run()

    def invalid_spec(self) -> None:
        error = self.obs.app.spec_error
        self.status = replace(
            self.status,
            error_message=error,
            next_attempt_time=None,
            last_error=LastError(events.INVALID_SPEC, error, self.now),
        )
        self.events.append(Event(events.WARNING, events.INVALID_SPEC, error or ""))
        self.transition(ApplicationState.FAILED, f"invalid spec: {error}")

    def stop_strays(self) -> bool:
        """At most one unfinished SparkDriver: stop strays first, submit on a later pass."""
        strays = [d for d in self.unfinished() if d.run <= self.status.last_run]
        for drv in strays:
            self.delete(drv)
        return bool(strays)

    def plan_run(self) -> None:
        app = self.obs.app
        run = self.status.last_run + 1
        name = naming.driver_name(app.name, run)
        # A new execution attempt (after a run ended, or a resume) counts its submissions afresh.
        fresh = self.status.state in _NEW_EXECUTION_ATTEMPT
        self.status = replace(
            self.status,
            last_run=run,
            submission_attempts=1 if fresh else self.status.submission_attempts + 1,
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
        self.transition(ApplicationState.SUBMITTED, f"SparkDriver {name} (run {run}) submitted")
        self.after.append(self.create_action(run))

    def stop_current(self, reason: str) -> bool:
        """Delete the unfinished SparkDrivers (INVALIDATING, SUSPENDING). True once none is left; the
        current run is then recorded as Invalidated, whatever it did meanwhile (not counted)."""
        cur = self.status.current
        left = self.unfinished()
        for drv in left:
            self.delete(drv)
        if cur is not None and not cur.finished and not self.seen(cur) and self.driver(cur.run) is None:
            # Maybe created just before a crash and not indexed yet: delete it by its unique name.
            self.after.append(delete_driver(cur.driver, None))
        if left:
            return False
        if cur is not None and not cur.finished:
            last = self.driver(cur.run)
            ended = f" (it had ended {last.phase.value})" if last is not None and last.phase else ""
            self.finish(cur, AttemptOutcome.INVALIDATED, reason, f"stopped while {self.status.state.value}{ended}")
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
            last_error=None,
            spark_application_id=None,
            driver_info=replace(self.status.driver_info, pod_name=None),
            executors={},
            driver_incarnations=0,
        )
        self.transition(ApplicationState.PENDING_RERUN, "the previous run was stopped; running the new spec")

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
        self.transition(ApplicationState.SUSPENDED, "suspended: no driver is running")

    def suspended(self) -> None:
        if not self.obs.app.suspend:
            self.transition(ApplicationState.RESUMING, "resuming with a new run")

    def succeeding(self) -> None:
        if policy.should_retry(self.obs.app.policy, ApplicationState.SUCCEEDING, 0, 0):
            self.transition(ApplicationState.PENDING_RERUN, "restartPolicy Always: running again")
        else:
            message = f"completed after {self.status.execution_attempts} execution attempt(s)"
            self.transition(ApplicationState.COMPLETED, message)

    def failing(self, outcome: ApplicationState) -> None:
        """FAILING and SUBMISSION_FAILED: wait for nextAttemptTime, then run again; or give up."""
        app_policy = self.obs.app.policy
        s = self.status
        if not self.retries(outcome):
            self.status = replace(self.status, next_attempt_time=None)
            self.transition(ApplicationState.FAILED, s.error_message or "failed")
            return
        due = s.next_attempt_time or (s.termination_time or self.now) + policy.retry_interval(app_policy, outcome)
        if self.now < due:
            self.status = replace(self.status, next_attempt_time=due)
            self.wait_until(due)
        elif outcome is ApplicationState.FAILING:
            message = f"retrying after {s.execution_attempts} execution attempt(s)"
            self.transition(ApplicationState.PENDING_RERUN, message)
        else:
            self.submit()

    def finished(self) -> None:
        """COMPLETED / FAILED: the status is frozen (what its SparkDrivers do after the end, such as
        their executors going, is no news). Only clean up: stop strays, prune, delete the Spark UI
        objects, and delete the app at its TTL."""
        for drv in self.unfinished():
            self.delete(drv)
        self.prune()
        self.delete_ui_objects()
        ttl = self.obs.app.ttl_seconds
        if ttl is None or self.status.termination_time is None:
            return
        expires = self.status.termination_time + timedelta(seconds=ttl)
        if self.now >= expires:
            self.events.append(Event(events.NORMAL, events.EXPIRED, f"timeToLiveSeconds {ttl} elapsed"))
            app = self.obs.app
            self.after.append(Delete(labels.API_VERSION, "SparkApplication", app.name, app.uid, APP_EXPIRED))
        else:
            self.wait_until(expires)

    def adopt(self) -> bool:
        """A SparkDriver with a run above status.lastRun (its status write was lost) becomes the
        current run, counted as a submission. Nothing else happens in that pass."""
        newest = self.obs.owned[-1] if self.obs.owned else None
        if newest is None or newest.run <= self.status.last_run or self.status.state in TERMINAL_STATES:
            return False
        cur = self.status.current
        if cur is not None and not cur.finished:
            self.finish(cur, AttemptOutcome.INVALIDATED, events.ADOPTED, f"superseded by {newest.name}")
        self.status = replace(
            self.status,
            last_run=newest.run,
            submission_attempts=self.status.submission_attempts + 1,
            current_driver=newest.name,
            last_submission_attempt_time=self.now,
            observed_generation=newest.app_generation or self.obs.app.generation,
            next_attempt_time=None,
            termination_time=None,
            error_message=None,
        ).with_attempt(AttemptRecord(run=newest.run, driver=newest.name, start_time=self.now))
        self.events.append(Event(events.NORMAL, events.ADOPTED, f"adopted SparkDriver {newest.name}"))
        self.transition(ApplicationState.SUBMITTED, f"SparkDriver {newest.name} (run {newest.run}) adopted")
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
        if state in _DECIDING and not self.retries(state):
            _STEPS[state](self)  # the policy's final word (COMPLETED / FAILED) comes before a suspend
            return
        if app.suspend and state not in (ApplicationState.SUSPENDING, ApplicationState.SUSPENDED):
            self.transition(ApplicationState.SUSPENDING, "spec.suspend is true: stopping the current run")
            self.suspending()
            return
        if state not in _NO_SPEC_CHECK and self.spec_changed():
            self.status = replace(self.status, observed_generation=app.generation)
            message = f"spec changed (generation {app.generation}): running it anew"
            self.transition(ApplicationState.INVALIDATING, message)
            self.invalidating()
            return
        _STEPS[state](self)

    def retries(self, outcome: ApplicationState) -> bool:
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

    # -- the Spark UI ------------------------------------------------------------------------------

    def spark_ui(self) -> None:
        """Spark UI Service (and Ingress) while a run is active; removed otherwise."""
        app_id = self.status.spark_application_id
        if not (self.obs.ui.service and self.status.state in _ACTIVE_STATES and app_id is not None):
            self.remove_ui()
            return
        opts = ui.UIOptions.of(self.obs.app)
        if not self.ui_service(app_id, opts):
            self.remove_ui()
        elif self.obs.ui.ingress_url_format:
            self.ui_ingress(opts)
        else:
            self.delete_ui_objects(kind="Ingress")
            info = replace(self.status.driver_info, web_ui_ingress_name=None, web_ui_ingress_address=None)
            self.status = replace(self.status, driver_info=info)

    def ui_service(self, app_id: str, opts: ui.UIOptions) -> bool:
        app, before = self.obs.app, self.obs.status
        action = Ensure(ui.build_service(app, app_id, opts), UI_ENSURED)
        name = naming.ui_service_name(app.name)
        if self.refused(action, f"Spark UI Service {name}"):
            return False
        info = before.driver_info
        if (info.web_ui_service_name, info.web_ui_port, before.spark_application_id) != (
            name,
            opts.service_port,
            app_id,
        ):
            self.before.append(action)
        self.status = replace(
            self.status,
            driver_info=replace(
                self.status.driver_info,
                web_ui_service_name=name,
                web_ui_port=opts.service_port,
                web_ui_address=ui.service_address(app, opts),
            ),
        )
        return True

    def ui_ingress(self, opts: ui.UIOptions) -> None:
        app, cfg = self.obs.app, self.obs.ui
        url = ui_url(app, cfg)
        assert url is not None
        action = Ensure(ui.build_ingress(app, url, opts, cfg.ingress_class_name), UI_ENSURED)
        name = naming.ui_ingress_name(app.name)
        info = self.status.driver_info
        if self.refused(action, f"Spark UI Ingress {name}"):
            self.delete_ui_objects(kind="Ingress")
            info = replace(info, web_ui_ingress_name=None, web_ui_ingress_address=None)
        else:
            before = self.obs.status.driver_info
            if (before.web_ui_ingress_name, before.web_ui_ingress_address) != (name, url.address):
                self.before.append(action)
            info = replace(info, web_ui_ingress_name=name, web_ui_ingress_address=url.address)
        self.status = replace(self.status, driver_info=info)

    def refused(self, action: Ensure, what: str) -> bool:
        """A UI object the API server refused is not retried with the same content: lastError and
        one Warning event say why; the app itself carries on."""
        refusal = self.obs.refusals.get(refusal_key(action))
        if refusal is None:
            return False
        text = refusal.describe(what)
        last = self.status.last_error
        if last is None or (last.reason, last.message) != (events.UI_REFUSED, text):
            self.status = replace(self.status, last_error=LastError(events.UI_REFUSED, text, self.now))
            self.events.append(Event(events.WARNING, events.UI_REFUSED, text))
        return True

    def remove_ui(self) -> None:
        self.delete_ui_objects()
        self.status = replace(self.status, driver_info=DriverInfo(pod_name=self.status.driver_info.pod_name))

    def delete_ui_objects(self, kind: str | None = None) -> None:
        """Delete the Spark UI objects this app controls (of ``kind``), as the watch index sees them:
        status may not know one (the operator died between its create and the status write)."""
        for obj in self.obs.owned_ui:
            if not obj.deleting and kind in (None, obj.kind):
                self.before.append(Delete(obj.api_version, obj.kind, obj.name, obj.uid, UI_REMOVED))

    # -- conditions --------------------------------------------------------------------------------

    def conditions(self) -> None:
        """status.conditions from the status this pass arrived at (docs/state-machine.md,
        "Conditions"). lastTransitionTime moves only when a condition's status does."""
        old = {c.type: c for c in self.status.conditions}
        wanted = (
            self.submitted_condition(),
            self.running_condition(),
            self.stuck_condition(),
            self.suspended_condition(old.get(CONDITION_SUSPENDED)),
            self.finished_condition(),
        )
        generation = self.status.observed_generation or None
        stamped = []
        for new in wanted:
            if new is None:
                continue
            before = old.get(new.type)
            if before is not None and before.status == new.status and before.last_transition_time:
                since = before.last_transition_time
            else:
                since = new.last_transition_time or self.now
            stamped.append(replace(new, last_transition_time=since, observed_generation=generation))
        self.status = replace(self.status, conditions=tuple(stamped))

    def submitted_condition(self) -> Condition | None:
        cur = self.status.current
        if cur is None:
            return None
        where = f"run {cur.run} (SparkDriver {cur.driver})"
        if cur.outcome is AttemptOutcome.SUBMISSION_FAILED:
            return Condition(CONDITION_SUBMITTED, "False", "SubmissionFailed", cur.message or where)
        if cur.counted:
            return Condition(CONDITION_SUBMITTED, "True", "Submitted", f"{where}: driver pod accepted")
        if cur.outcome is AttemptOutcome.INVALIDATED:
            return Condition(CONDITION_SUBMITTED, "False", cur.reason or "Stopped", f"{where} was stopped")
        return Condition(CONDITION_SUBMITTED, "False", "Submitting", f"{where}: waiting for its driver pod")

    def running_condition(self) -> Condition | None:
        state = self.status.state
        if state is ApplicationState.NEW:
            return None
        if state is ApplicationState.RUNNING:
            pod = self.status.driver_info.pod_name or "?"
            message = f"driver pod {pod} of SparkDriver {self.status.current_driver} is running"
            return Condition(CONDITION_RUNNING, "True", "DriverRunning", message)
        message = self.status.error_message or f"the application is {state.value}"
        return Condition(CONDITION_RUNNING, "False", _camel(state), clip(message))

    def stuck_condition(self) -> Condition | None:
        """The current SparkDriver's Stuck condition, while its run is active."""
        if self.status.state not in _ACTIVE_STATES:
            return None
        drv = self.driver(self.status.last_run)
        if drv is None or drv.finished or drv.stuck is None:
            return None
        c = drv.stuck
        return Condition(CONDITION_STUCK, c.status, c.reason, clip(c.message), c.last_transition_time)

    def suspended_condition(self, old: Condition | None) -> Condition | None:
        if self.status.state in (ApplicationState.SUSPENDING, ApplicationState.SUSPENDED):
            return Condition(CONDITION_SUSPENDED, "True", "Suspended", "spec.suspend is true")
        if old is not None:
            return Condition(CONDITION_SUSPENDED, "False", "Resumed", "spec.suspend is false")
        return None

    def finished_condition(self) -> Condition | None:
        s = self.status
        if s.state is ApplicationState.COMPLETED:
            message = f"completed after {s.execution_attempts} execution attempt(s)"
            return Condition(CONDITION_COMPLETED, "True", "Completed", message)
        if s.state is ApplicationState.FAILED:
            reason = s.last_error.reason if s.last_error else "Failed"
            return Condition(CONDITION_FAILED, "True", reason, clip(s.error_message or "failed"))
        return None


# States where a spec change does not invalidate: nothing runs, and the next run takes the newest spec
# (a spec changed while suspended is run on resume without resetting the counters, as kubeflow does).
_NO_SPEC_CHECK: Final = frozenset(
    {
        ApplicationState.SUSPENDING,
        ApplicationState.SUSPENDED,
        ApplicationState.RESUMING,
        ApplicationState.INVALIDATING,
    }
)
# States holding a recorded outcome whose policy decision (run again, or finish) is pending.
_DECIDING: Final = frozenset(
    {ApplicationState.SUCCEEDING, ApplicationState.FAILING, ApplicationState.SUBMISSION_FAILED}
)
# States from which the next run starts a new execution attempt (submissionAttempts starts again).
_NEW_EXECUTION_ATTEMPT: Final = frozenset({ApplicationState.PENDING_RERUN, ApplicationState.RESUMING})
# Outcomes of runs that got past submission: each is one execution attempt.
_EXECUTED: Final = frozenset({AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED, AttemptOutcome.DELETED})
_SPEC_CHANGED: Final = "SpecChanged"
_SUSPENDED: Final = "Suspended"
_STATE_OF: Final = {
    AttemptOutcome.SUCCEEDED: ApplicationState.SUCCEEDING,
    AttemptOutcome.FAILED: ApplicationState.FAILING,
    AttemptOutcome.DELETED: ApplicationState.FAILING,
    AttemptOutcome.SUBMISSION_FAILED: ApplicationState.SUBMISSION_FAILED,
}
_DEFAULT_REASON: Final = {
    AttemptOutcome.FAILED: "DriverFailed",
    AttemptOutcome.DELETED: events.DRIVER_LOST,
    AttemptOutcome.SUBMISSION_FAILED: "SubmissionFailed",
}


def _outcome_of(drv: DriverView, record: AttemptRecord) -> AttemptOutcome | None:
    if drv.phase is DriverPhase.SUCCEEDED:
        return AttemptOutcome.SUCCEEDED
    if drv.phase is DriverPhase.FAILED:
        return AttemptOutcome.FAILED
    if drv.phase is DriverPhase.SUBMISSION_FAILED:
        # A refused *replacement* of a driver pod that ran is a failed run, not a failed submission.
        return AttemptOutcome.FAILED if record.counted else AttemptOutcome.SUBMISSION_FAILED
    return None


def _driver_message(drv: DriverView) -> str | None:
    parts = []
    if drv.exit_code is not None:
        parts.append(f"exit code {drv.exit_code}")
    if drv.message:
        parts.append(drv.message)
    return ": ".join(parts) or None


def _error_reason(record: AttemptRecord) -> str:
    return record.reason or _DEFAULT_REASON.get(record.outcome, "Failed")


def _error_message(record: AttemptRecord) -> str:
    if record.outcome is AttemptOutcome.DELETED:
        return record.message or f"SparkDriver {record.driver} was deleted"
    what = "could not be submitted" if record.outcome is AttemptOutcome.SUBMISSION_FAILED else "failed"
    text = f"run {record.run} ({record.driver}) {what}"
    detail = ", ".join(p for p in (record.reason, record.message) if p)
    return clip(f"{text}: {detail}" if detail else text) or text


def _camel(state: ApplicationState) -> str:
    """SUBMISSION_FAILED -> SubmissionFailed: a state as a condition reason."""
    return "".join(word.capitalize() for word in state.value.split("_"))


_STEPS: Final[dict[ApplicationState, Callable[[_Pass], None]]] = {
    ApplicationState.NEW: _Pass.submit,
    ApplicationState.SUBMITTED: _Pass.observe_current,
    ApplicationState.RUNNING: _Pass.observe_current,
    ApplicationState.UNKNOWN: _Pass.observe_current,
    ApplicationState.SUCCEEDING: _Pass.succeeding,
    ApplicationState.FAILING: lambda p: p.failing(ApplicationState.FAILING),
    ApplicationState.SUBMISSION_FAILED: lambda p: p.failing(ApplicationState.SUBMISSION_FAILED),
    ApplicationState.PENDING_RERUN: _Pass.submit,
    ApplicationState.INVALIDATING: _Pass.invalidating,
    ApplicationState.SUSPENDING: _Pass.suspending,
    ApplicationState.SUSPENDED: _Pass.suspended,
    ApplicationState.RESUMING: _Pass.submit,
}


def reconcile(observed: Observed, now: datetime) -> Plan[AppStatus]:
    """Decide one step for a SparkApplication from what was observed, at time ``now``."""
    p = _Pass(observed, now, observed.status)
    if observed.app.deleting or observed.namespace_terminating:
        # The garbage collector, or the namespace's deletion, removes what the app owns; a driver
        # vanishing with its namespace is not a failed run.
        return p.plan()
    if observed.status.state in TERMINAL_STATES:
        p.finished()
        return p.plan()
    if not p.adopt():
        p.step()
        p.prune()
    p.spark_ui()
    p.conditions()
    return p.plan()


__all__ = ["DRIVER_KIND", "delete_driver", "reconcile"]
