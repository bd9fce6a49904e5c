"""The SparkApplication state machine: ``decide(observed, now) -> Plan``.

Pure: no clock reads, no I/O, no randomness. One pass takes *one* step from the state stored in
status (docs/state-machine.md); ``core.applier`` writes the new status first, with the
resourceVersion the decision was made from, and only then runs ``plan.after_status``. Hence:

* the SparkDriver of run ``n`` is only created by a pass whose status write recorded
  ``lastRun = n`` and counted it in ``submissionAttempts``; a pass that re-plans the create (crash
  between write and create) meets 409;
* a run is counted, and its outcome recorded, exactly once (``apps_controller.runs``); the next
  SparkDriver is created by a later pass, from a status that already holds both;
* a create the API server refused comes back to the next pass as an observation
  (``Observed.refusals``) and is recorded like any other outcome.

A pass runs these phases: adopt a SparkDriver newer than status (or) take the state's step and
prune old SparkDrivers; then the Spark UI objects (``apps_controller.ui_steps``); then the conditions that
summarise it all (``apps_controller.conditions``). Two kinds of pass write nothing: one in a
namespace being deleted (plans nothing at all), and one of a finished app (COMPLETED / FAILED: frozen
status; it only deletes what is left, and at its TTL itself).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Final

from sparkop.api.models import (
    AdoptedPod,
    ApplicationState,
    AttemptOutcome,
    AttemptRecord,
    DriverPhase,
    LastError,
    SparkApplicationStatus,
)
from sparkop.apps_controller import conditions, events, policy, ui_steps
from sparkop.apps_controller.draft import APP_EXPIRED, Draft, delete_driver
from sparkop.apps_controller.observed import APP_KIND, ForeignDriver, Observed
from sparkop.apps_controller.runs import (
    count_execution,
    driver_message,
    enter_outcome,
    finish,
    link_history,
    mirror,
    missing_driver,
    outcome_of,
)
from sparkop.apps_controller.status import (
    NO_EXECUTORS,
    PLANNING_STATES,
    TERMINAL_STATES,
    error_message,
    finished,
    run_planned,
    status_wait,
)
from sparkop.apps_controller.status import state as state_of
from sparkop.apps_controller.takeover import LIVE_RUN_STATES, takeover
from sparkop.apps_controller.transitions import transitions
from sparkop.core.plan import Delete, Plan
from sparkop.domain import labels, naming

# Finished SparkDrivers kept for their logs: the current run's and the one before.
KEEP_FINISHED_DRIVERS: Final = 2
# How soon an app waiting for the history server it names looks again.
HISTORY_SERVER_RECHECK_SECONDS: Final = 5.0

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
# Outcomes whose final word (no retry) is given in the pass that entered them.
_CONCLUDED: Final = frozenset({ApplicationState.SUCCEEDING, ApplicationState.FAILING})
# States from which the next run starts a new execution attempt (submissionAttempts starts again).
_NEW_EXECUTION_ATTEMPT: Final = frozenset({ApplicationState.PENDING_RERUN, ApplicationState.RESUMING})
# A run's own progress (its driver accepted, running, its counts): a write from one of these states, or
# from a run planned whose pod is not accepted yet (status.run_planned), to another is settled by itself
# (core.plan.Plan.settled), and so is a run planned (plan_run: the write records it and its create
# follows in the same pass, which is all a decision on that status plans), and an end (just_finished
# plans the finished app's clean-up and TTL with it). Every other transition may be acted on by the
# next decision (an adoption, even within a live run, then the adopted run's progress; an end whose TTL
# is up already, then the app's deletion; a suspend, a rerun).
_LIVE: Final = frozenset({ApplicationState.SUBMITTED, ApplicationState.RUNNING})
_SPEC_CHANGED: Final = "SpecChanged"
_SUSPENDED: Final = "Suspended"


def decide(observed: Observed, now: datetime) -> Plan[SparkApplicationStatus]:
    """Decide one step for a SparkApplication from what was observed, at time ``now``; the plan
    carries the metric observations of the step (recorded once its status write succeeded)."""
    d = Draft(observed, now, observed.status)
    plan = _step(d)
    wait = 0.0
    if plan.status is not None:
        current = next((drv for drv in observed.owned if drv.name == plan.status.currentDriver), None)
        wait = status_wait(observed.status, plan.status, now, current.created if current is not None else None)
    observations = transitions(observed, plan.status, now)
    live = plan.status is not None and _following(observed.status) and _following(plan.status)
    settled = live if d.settles is None else d.settles
    return replace(plan, observations=observations, status_wait=wait, settled=settled)


def _following(status: SparkApplicationStatus) -> bool:
    """Whether a pass of ``status`` follows the current run's SparkDriver."""
    return state_of(status) in _LIVE or run_planned(status)


def _step(d: Draft) -> Plan[SparkApplicationStatus]:
    observed = d.obs
    if observed.app.deleting or observed.namespace_terminating:
        # The garbage collector, or the namespace's deletion, removes what the app owns; a driver
        # vanishing with its namespace is not a failed run.
        return d.plan()
    if d.state in TERMINAL_STATES:
        finished_app(d)
        return d.plan()
    if take_over(d):
        conclude(d)
    elif not adopt(d):
        step(d)
        conclude(d)
        prune(d)
    ui_steps.spark_ui(d)
    conditions.conditions(d)
    if d.state in TERMINAL_STATES:
        just_finished(d)
    return d.plan()


# ---------------------------------------------------------------------------------------------------
# which step


def step(d: Draft) -> None:
    app = d.obs.app
    # A run planned from this state whose driver pod is not accepted yet is followed as SUBMITTED's
    # is: the state only tells what came before it (NEW, a failed submission, a rerun, a resume).
    state = ApplicationState.SUBMITTED if run_planned(d.status) else d.state
    if state in _DECIDING and not retries(d, state):
        _STEPS[state](d)  # the policy's final word (COMPLETED / FAILED) comes before a suspend
        return
    if app.suspend and state not in (ApplicationState.SUSPENDING, ApplicationState.SUSPENDED):
        d.transition(ApplicationState.SUSPENDING, f"{app.suspend_reason}: stopping the current run")
        suspending(d)
        return
    if state not in _NO_SPEC_CHECK and spec_changed(d):
        d.update(observedGeneration=app.generation)
        message = f"spec changed (generation {app.generation}): running it anew"
        d.transition(ApplicationState.INVALIDATING, message)
        invalidating(d)
        return
    _STEPS[state](d)


def conclude(d: Draft) -> None:
    """A run's end that the policy will not retry gets the policy's final word in the same pass
    (SUCCEEDING -> COMPLETED, FAILING -> FAILED): one status write, an event for each. Not a failed
    submission: its metric counts the SUBMISSION_FAILED state a written status shows."""
    state = d.state
    if state in _CONCLUDED and state is not state_of(d.obs.status) and not retries(d, state):
        entered = len(d.events)
        _STEPS[state](d)
        # The state entered and left in one pass is never shown: the one transition a user sees
        # (RUNNING -> COMPLETED) gets one event, saying both.
        ended = d.events[entered:]
        passed = [i for i, e in enumerate(d.events[:entered]) if e.reason == events.BY_STATE[state][1]]
        if len(ended) == 1 and passed:
            said = list(d.events)
            first, last = said.pop(passed[-1]), said[-1]
            if first.message != last.message:
                said[-1] = replace(last, message=f"{first.message}; {last.message}")
            d.restate(said)


def retries(d: Draft, outcome: ApplicationState) -> bool:
    s, app_policy = d.status, d.obs.app.policy
    cur = d.current
    if outcome is ApplicationState.FAILING and cur is not None and policy.infrastructure_budget(app_policy, cur.reason):
        return policy.retry_infrastructure(app_policy, s.infrastructureFailures)
    return policy.should_retry(app_policy, outcome, s.executionAttempts, s.submissionAttempts)


def spec_changed(d: Draft) -> bool:
    """Whether the spec of the current run (its SparkDriver's spec-hash annotation) differs from
    the app's, ignoring suspend and timeToLiveSeconds."""
    app = d.obs.app
    if app.generation <= (d.status.observedGeneration or 0):
        return False
    cur = d.current
    drv = d.driver(cur.run) if cur is not None else None
    if cur is not None and drv is None:
        # Not seen yet: it is (re)created from the newest spec, and compared once seen.
        # Gone after it finished: its spec is unknown, so run the new one.
        return finished(cur)
    if drv is not None and drv.spec_hash != app.spec_hash:
        return True
    d.update(observedGeneration=app.generation)
    return False


def take_over(d: Draft) -> bool:
    """The first pass of an app whose status kubeflow's operator wrote (a live swap,
    ``apps_controller.takeover``): runs are numbered on from kubeflow's. A live run with its driver pod
    goes on with that pod: its SparkDriver is created saying which pod to adopt. A live run without one
    lost its driver while no operator ran: a failed run, per the restart policy. Any other state takes
    its own step in this pass, from kubeflow's counts, unless kubeflow had submitted its next run without
    recording it: that run is planned here, adopting its driver pod (True: the pass is decided)."""
    app, s = d.obs.app, d.status
    if app.group != labels.KUBEFLOW_GROUP:
        return False  # only kubeflow's group's apps can have been run by kubeflow's operator
    taken = takeover(
        s, app_uid=app.uid, submission_id=s.submissionID, driver_pod_name=app.driver_pod_name, pods=d.obs.left
    )
    if taken is None:
        return False
    d.update(lastRun=taken.run)
    if taken.submitted is not None:
        made = taken.submitted
        plan_run(d, adopt=made)
        planned = d.current
        assert planned is not None  # plan_run records the run it plans
        message = (
            f"took over run {planned.run}, which kubeflow's operator submitted but had not recorded: "
            f"SparkDriver {planned.driver} adopts driver pod {made.name}"
        )
        d.event(events.NORMAL, events.Reason.TAKEN_OVER, message)
        return True
    if state_of(s) not in LIVE_RUN_STATES:
        return False
    name = naming.driver_name(app.name, taken.run, app.group)
    # kubeflow counted the run when it submitted it; a count it lost is made good (takeover.run).
    d.update(executionAttempts=max(s.executionAttempts, taken.run), observedGeneration=app.generation)
    started = s.lastSubmissionAttemptTime or d.now
    record = AttemptRecord(
        run=taken.run, attempt=taken.run, driver=name, outcome=AttemptOutcome.RUNNING, startTime=started
    )
    pod = taken.adopt
    if pod is None:
        gone = (s.driverInfo.podName if s.driverInfo else None) or app.driver_pod_name
        message = (
            f"driver pod {gone} of run {taken.run} (kubeflow's) is gone: its outcome was lost while no operator ran"
        )
        d.event(
            events.WARNING, events.Reason.TAKEN_OVER, f"took over run {taken.run} from kubeflow's operator; {message}"
        )
        enter_outcome(d, finish(d, record, AttemptOutcome.DELETED, events.Reason.DRIVER_LOST, message))
        return True
    d.record(record.model_copy(update={"adoptedPod": AdoptedPod(name=pod.name, uid=pod.uid)}))
    d.set_driver_info(podName=pod.name)
    message = f"took over run {taken.run} from kubeflow's operator: SparkDriver {name} adopts driver pod {pod.name}"
    d.event(events.NORMAL, events.Reason.TAKEN_OVER, message)
    d.after(d.create_driver(taken.run))
    d.settles = True  # the write records the run, its create follows: all a decision on that status plans
    return True


def adopt(d: Draft) -> bool:
    """A SparkDriver with a run above status.lastRun (its status write was lost) becomes the
    current run, counted as a submission, planned (the state it was planned from, else PENDING_RERUN).
    Nothing else happens in that pass."""
    owned = d.obs.owned
    newest = owned[-1] if owned else None
    if newest is None or newest.run <= d.status.lastRun or d.state in TERMINAL_STATES:
        return False
    cur = d.current
    if cur is not None and not finished(cur):
        finish(d, cur, AttemptOutcome.INVALIDATED, events.Reason.ADOPTED, f"superseded by {newest.name}")
    d.update(
        lastRun=newest.run,
        submissionAttempts=d.status.submissionAttempts + 1,
        currentDriver=newest.name,
        lastSubmissionAttemptTime=d.now,
        observedGeneration=newest.app_generation or d.obs.app.generation,
        nextAttemptTime=None,
        terminationTime=None,
    )
    d.set_error_message(None)
    d.record(AttemptRecord(run=newest.run, driver=newest.name, outcome=AttemptOutcome.RUNNING, startTime=d.now))
    d.event(events.NORMAL, events.Reason.ADOPTED, f"adopted SparkDriver {newest.name}")
    if d.state not in PLANNING_STATES:
        # A new run, planned as from PENDING_RERUN (status.run_planned): the next pass counts it and
        # enters SUBMITTED once its driver pod is accepted, as for any run.
        d.transition(ApplicationState.PENDING_RERUN, f"SparkDriver {newest.name} (run {newest.run}) adopted")
    d.settles = False  # the next decision mirrors the adopted run's progress, counts it, may see it running
    return True


def prune(d: Draft) -> None:
    """Delete stray unfinished SparkDrivers and all but the newest finished ones."""
    last = d.status.lastRun
    for drv in d.obs.owned:
        stray = not drv.finished and drv.run < last
        old = drv.finished and drv.run <= last - KEEP_FINISHED_DRIVERS
        if stray or old:
            d.delete(drv)


# ---------------------------------------------------------------------------------------------------
# the state steps


def submit(d: Draft) -> None:
    """NEW, PENDING_RERUN, RESUMING: plan the next run: the status write records it (lastRun, its
    attempt record, one more submission), the create follows it."""
    error = d.obs.app.spec_error
    if error is not None and error.unknown:
        wait_for_known_spec(d, error.unknown)
    elif error is not None:
        invalid_spec(d, error.message)
    elif d.obs.history.missing is not None:
        wait_for_history_server(d, d.obs.history.missing)
    elif not stop_strays(d):
        plan_run(d)


def wait_for_history_server(d: Draft, why: str) -> None:
    """The history server the app names is not there (applied in the same breath, or not yet): no run
    starts without the event log the app asked for. The app waits, saying why, and looks again soon
    (a history server's arrival asks for no pass of the apps that name it)."""
    message = f"{why}: the next run waits for it"
    last = d.status.lastError
    if last is None or (last.reason, last.message) != (events.Reason.HISTORY_SERVER_MISSING, message):
        d.update(lastError=LastError(reason=events.Reason.HISTORY_SERVER_MISSING, message=message, time=d.now))
        d.event(events.WARNING, events.Reason.HISTORY_SERVER_MISSING, message)
    d.wait_until(d.now + timedelta(seconds=HISTORY_SERVER_RECHECK_SECONDS))


def invalid_spec(d: Draft, error: str) -> None:
    d.update(nextAttemptTime=None, lastError=LastError(reason=events.Reason.INVALID_SPEC, message=error, time=d.now))
    d.set_error_message(error)
    d.event(events.WARNING, events.Reason.INVALID_SPEC, error or "")
    d.transition(ApplicationState.FAILED, f"invalid spec: {error}")


def wait_for_known_spec(d: Draft, unknown: tuple[str, ...]) -> None:
    """A spec that sets fields these models do not know (a newer CRD's, applied before the operator
    that reads them): nothing is started, and it is no failure. The app waits, saying why, until an
    operator that knows the fields reads it, or its spec drops them."""
    message = (
        f"{', '.join(unknown)}: not known to this operator; the application waits for an operator version "
        "that knows these fields (or for a spec without them)"
    )
    last = d.status.lastError
    if last is None or (last.reason, last.message) != (events.Reason.UNKNOWN_SPEC_FIELDS, message):
        d.update(lastError=LastError(reason=events.Reason.UNKNOWN_SPEC_FIELDS, message=message, time=d.now))
        d.event(events.WARNING, events.Reason.UNKNOWN_SPEC_FIELDS, message)
    d.set_error_message(message)


def stop_strays(d: Draft) -> bool:
    """At most one unfinished SparkDriver: stop strays first, submit on a later pass."""
    strays = [drv for drv in d.unfinished() if drv.run <= d.status.lastRun]
    for drv in strays:
        d.delete(drv)
    return bool(strays)


def plan_run(d: Draft, adopt: ForeignDriver | None = None) -> None:
    """The next run: recorded by this pass's status write, its SparkDriver created after it. ``adopt``:
    the driver pod kubeflow's operator made for this run and never recorded (``take_over``), which the
    run goes on with."""
    app = d.obs.app
    run = d.status.lastRun + 1
    name = naming.driver_name(app.name, run, app.group)
    # A new execution attempt (after a run ended, or a resume) counts its submissions afresh.
    fresh = d.state in _NEW_EXECUTION_ATTEMPT
    d.update(
        lastRun=run,
        submissionAttempts=1 if fresh else d.status.submissionAttempts + 1,
        currentDriver=None,  # set when the new SparkDriver is first seen
        lastSubmissionAttemptTime=d.now,
        observedGeneration=app.generation,
        nextAttemptTime=None,
        terminationTime=None,
        sparkApplicationId=None,
        # An adopted pod carries kubeflow's submission id in its label, and the status says the same.
        submissionID=adopt.submission_id if adopt is not None else None,
        driverIncarnations=0,
        executors=NO_EXECUTORS,
        executorState=None,
    )
    if d.state is not ApplicationState.SUBMISSION_FAILED:
        # The state is kept until the run's driver pod is accepted; a failed submission's message says
        # why it is SUBMISSION_FAILED until then.
        d.set_error_message(None)
    # kubeflow's clients read the driver pod's name as soon as a run is submitted (it is the same for
    # every run: the SparkDriver creates it once the last one is gone).
    d.set_driver_info(podName=app.driver_pod_name)
    adopted = AdoptedPod(name=adopt.name, uid=adopt.uid) if adopt is not None else None
    d.record(AttemptRecord(run=run, driver=name, outcome=AttemptOutcome.RUNNING, startTime=d.now, adoptedPod=adopted))
    # No state change: SUBMITTED waits for the driver pod (observe_current), as kubeflow's says it exists.
    d.after(d.create_driver(run))
    d.settles = True


def observe_current(d: Draft) -> None:
    """SUBMITTED / RUNNING / UNKNOWN, and a run planned whose driver pod is not accepted yet: follow the
    current SparkDriver; count its run once when its driver pod is accepted (then SUBMITTED), and record
    its outcome once when it ends."""
    cur = d.current
    if cur is None:
        submit(d)
        return
    if finished(cur):  # recorded already; the state was not written with it (adoption)
        enter_outcome(d, cur)
        return
    drv = d.driver(cur.run)
    if drv is None:
        missing_driver(d, cur)
        return
    mirror(d, drv)
    cur = link_history(d, cur, drv)
    pod = f"driver pod {drv.pod_name}" if drv.pod_name else "its driver pod"
    accepted = f"SparkDriver {drv.name}: {pod} accepted"
    if drv.accepted:
        planned = run_planned(d.status)
        cur = count_execution(d, cur)
        d.set_error_message(None)  # a run goes on
        if planned:
            # The run got past submission: SUBMITTED (and its event), even when this pass goes on to
            # RUNNING or to the run's outcome (a SparkDriver seen only then).
            d.transition(ApplicationState.SUBMITTED, accepted)
    outcome = outcome_of(drv, cur)
    if outcome is not None:
        enter_outcome(d, finish(d, cur, outcome, drv.reason, driver_message(drv), drv.exit_code))
    elif drv.phase is DriverPhase.RUNNING:
        d.transition(ApplicationState.RUNNING, f"driver {drv.name} is running")
    elif drv.accepted:
        # A SparkDriver whose driver pod is not accepted yet changes no state: a run planned keeps the
        # state it was planned from, and a run taken over RUNNING stays so until its SparkDriver reports
        # the adopted pod. A replaced driver pod, pending, is SUBMITTED again.
        d.transition(ApplicationState.SUBMITTED, accepted)


def stop_current(d: Draft, reason: str) -> bool:
    """Delete the unfinished SparkDrivers (INVALIDATING, SUSPENDING). True once none is left; the
    current run is then recorded as Invalidated, whatever it did meanwhile (not counted)."""
    cur = d.current
    left = d.unfinished()
    for drv in left:
        d.delete(drv)
    if cur is not None and not finished(cur) and not d.seen(cur) and d.driver(cur.run) is None:
        # Maybe created just before a crash and not indexed yet: delete it by its unique name.
        d.after(delete_driver(cur.driver, None))
    if left:
        return False
    if cur is not None and not finished(cur):
        last = d.driver(cur.run)
        ended = f" (it had ended {last.phase.value})" if last is not None and last.phase else ""
        finish(d, cur, AttemptOutcome.INVALIDATED, reason, f"stopped while {d.state.value}{ended}")
    return True


def invalidating(d: Draft) -> None:
    if not stop_current(d, _SPEC_CHANGED):
        return
    d.update(
        submissionAttempts=0,
        executionAttempts=0,
        infrastructureFailures=0,
        lastSubmissionAttemptTime=None,
        terminationTime=None,
        nextAttemptTime=None,
        lastError=None,
        sparkApplicationId=None,
        submissionID=None,
        executors=NO_EXECUTORS,
        executorState=None,
        driverIncarnations=0,
    )
    d.set_error_message(None)
    d.set_driver_info(podName=None)
    d.transition(ApplicationState.PENDING_RERUN, "the previous run was stopped; running the new spec")


def suspending(d: Draft) -> None:
    if not stop_current(d, _SUSPENDED):
        return
    d.update(nextAttemptTime=None, sparkApplicationId=None, executors=NO_EXECUTORS, executorState=None)
    d.set_error_message(None)
    d.set_driver_info(podName=None)
    d.transition(ApplicationState.SUSPENDED, "suspended: no driver is running")


def suspended(d: Draft) -> None:
    if not d.obs.app.suspend:
        d.transition(ApplicationState.RESUMING, "resuming with a new run")


def succeeding(d: Draft) -> None:
    if policy.should_retry(d.obs.app.policy, ApplicationState.SUCCEEDING, 0, 0):
        d.transition(ApplicationState.PENDING_RERUN, "restartPolicy Always: running again")
    else:
        d.transition(ApplicationState.COMPLETED, f"completed after {d.status.executionAttempts} execution attempt(s)")


def failing(d: Draft, outcome: ApplicationState) -> None:
    """FAILING and SUBMISSION_FAILED: wait for nextAttemptTime, then run again; or give up."""
    s = d.status
    if not retries(d, outcome):
        d.update(nextAttemptTime=None)
        d.transition(ApplicationState.FAILED, error_message(s) or "failed")
        return
    due = s.nextAttemptTime or (s.terminationTime or d.now) + policy.retry_interval(d.obs.app.policy, outcome)
    if d.now < due:
        d.update(nextAttemptTime=due)
        d.wait_until(due)
    elif outcome is ApplicationState.FAILING:
        d.transition(ApplicationState.PENDING_RERUN, f"retrying after {s.executionAttempts} execution attempt(s)")
    else:
        submit(d)


def finished_app(d: Draft) -> None:
    """COMPLETED / FAILED: the status is frozen (what its SparkDrivers do after the end, such as
    their executors going, is no news). Only clean up: stop strays, prune, delete the Spark UI
    objects, and delete the app at its TTL."""
    for drv in d.unfinished():
        d.delete(drv)
    prune(d)
    ui_steps.delete_ui_objects(d)
    app, expires = d.obs.app, expiry(d)
    if expires is None:
        return
    if d.now >= expires:
        d.event(events.NORMAL, events.Reason.EXPIRED, f"timeToLiveSeconds {app.ttl_seconds} elapsed")
        d.after(Delete(app.api_version, APP_KIND, app.name, app.uid, APP_EXPIRED))
    else:
        d.wait_until(expires)


def just_finished(d: Draft) -> None:
    """The pass that finishes the app also plans what a pass of the finished app would (its Spark
    UI objects went with the end already, ui_steps): then its write is settled, and the app's next
    pass is its TTL's. Not when the TTL is up already: the pass that deletes the app is a pass of
    its own, after the end was written."""
    for drv in d.unfinished():
        d.delete(drv)
    prune(d)
    expires = expiry(d)
    if expires is not None and d.now >= expires:
        d.settles = False
        return
    if expires is not None:
        d.wait_until(expires)
    d.settles = True


def expiry(d: Draft) -> datetime | None:
    """When the app's timeToLiveSeconds since it ended are up (None: no TTL, or it has not ended)."""
    ttl, ended = d.obs.app.ttl_seconds, d.status.terminationTime
    return None if ttl is None or ended is None else ended + timedelta(seconds=ttl)


_STEPS: Final[dict[ApplicationState, Callable[[Draft], None]]] = {
    ApplicationState.NEW: submit,
    ApplicationState.SUBMITTED: observe_current,
    ApplicationState.RUNNING: observe_current,
    ApplicationState.UNKNOWN: observe_current,
    ApplicationState.SUCCEEDING: succeeding,
    ApplicationState.FAILING: lambda d: failing(d, ApplicationState.FAILING),
    ApplicationState.SUBMISSION_FAILED: lambda d: failing(d, ApplicationState.SUBMISSION_FAILED),
    ApplicationState.PENDING_RERUN: submit,
    ApplicationState.INVALIDATING: invalidating,
    ApplicationState.SUSPENDING: suspending,
    ApplicationState.SUSPENDED: suspended,
    ApplicationState.RESUMING: submit,
}

__all__ = ["KEEP_FINISHED_DRIVERS", "decide"]
