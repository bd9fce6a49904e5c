"""decide(observed, now) -> Plan: what to do for one SparkDriver, decided without I/O, as an ordered
table of steps.

A SparkDriver that is gone or being deleted (or whose namespace is) only lets its pods and Workloads go;
one whose spec does not parse fails (SubmissionFailed) or, when it only sets fields this operator does
not know yet, waits. For the rest, each row of :data:`STEPS` takes the facts so far
(:class:`driver_controller.facts.Facts`, frozen) and returns them with what it adds, either to go on or to
stop there (the driver has ended, the run waits for Kueue, the API server refused an object, the spec
cannot run, a timeout ended the run: :mod:`driver_controller.timeouts`). Then every row of
:data:`CLOSING` runs, however far the decision went: the Workload told of the end, the executors
counted and cleaned up, what earlier incarnations left removed, and the status, computed once
(:func:`status`).

The skeleton applies the plan in ``core.applier``'s fixed order: the creates before the status write
(ConfigMaps and Service before the pod that mounts them: status names a driver pod only once it was
accepted), then the status write (guarded by resourceVersion), then the events of that write, then
patches (a finalizer's release, a Workload's status) and deletes after it. Facts are written to status
before anything that depends on them is released: a driver pod's finalizer is removed only once its
outcome is in status, and an Event is posted only after the status it reports was written. A create the
API server refused comes back as an observation (``Observed.refusals``): the pass that sees it records
SubmissionFailed.

A SparkDriver that had already ended is frozen: its status is never written again unless its spec
changes (and then only observedGeneration moves).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

from sparkop.api.models import LastError, SparkDriverStatus
from sparkop.core.frozen import evolve
from sparkop.core.plan import Delete, Patch, Plan
from sparkop.core.specs import SpecError
from sparkop.domain import labels
from sparkop.driver_controller import events, kueue, timeouts
from sparkop.driver_controller.actions import holds, release
from sparkop.driver_controller.adoption import adopt_driver_pod, made_elsewhere
from sparkop.driver_controller.cleanup import executors, stale_incarnations
from sparkop.driver_controller.create import create_missing
from sparkop.driver_controller.facts import Closing, Facts, Step, Why, run
from sparkop.driver_controller.observed import DriverView, Observed
from sparkop.driver_controller.pod import follow_driver_pod, recover_incarnation
from sparkop.driver_controller.status import ended, status_wait, with_submission_failed
from sparkop.driver_controller.summaries import PodSummary
from sparkop.driver_controller.transitions import transitions

STEPS: Final[tuple[Step, ...]] = (
    recover_incarnation,  # which incarnation is current; the first one starts; an ended driver stops here
    adopt_driver_pod,  # a run taken over from kubeflow: its first incarnation is kubeflow's pod, claimed
    timeouts.deadline,  # activeDeadlineSeconds over: the run ends (also while it waits for Kueue)
    kueue.admission,  # with a Kueue queue: nothing of the run before its Workload is admitted
    follow_driver_pod,  # the current driver pod's outcome, loss (replaced) or progress
    timeouts.waits,  # a start, readiness or executor-failure limit over: the run ends; else the next one
    made_elsewhere,  # the adopted incarnation's objects are spark-submit's: nothing to create
    create_missing,  # what the current incarnation lacks, its driver pod last
)
"""The decision, in order: each row may stop it (:class:`driver_controller.facts.Stop`)."""

CLOSING: Final[tuple[Closing, ...]] = (
    kueue.workload_finished,  # the driver ended: its Workload says so
    executors,  # counted; those of earlier incarnations, and of an ended driver, deleted
    stale_incarnations,  # earlier incarnations' objects deleted, recorded outcomes' finalizers released
)
"""What every pass that parsed ends with, however far its decision went; then :func:`status`."""


def decide(observed: Observed, now: datetime) -> Plan[SparkDriverStatus]:
    """Decide what to do for one SparkDriver. Never raises for a bad spec: that is a status."""
    driver = observed.driver
    if driver is None or driver.deleting or observed.namespace_terminating:
        return _settled(let_go(observed))
    # Pods filed under this name but owned by another (an earlier SparkDriver of the same name).
    strangers = [p for p in observed.pods if p.owner_uid != driver.uid]
    plan: Plan[SparkDriverStatus] = Plan().with_after(*_release(strangers))
    if isinstance(driver.spec, SpecError):
        return _settled(_spec_refused(plan, driver, driver.spec, now))
    facts, stop = run(STEPS, Facts.first(observed, driver.spec, now, plan))
    if stop is not None and stop.reason is Why.READING_LOG:
        # Only the read: the Applier reads the log, then the decision follows at once with it.
        return _settled(facts.plan)
    for closing in CLOSING:
        facts = closing(facts)
    return status(facts)


def let_go(observed: Observed) -> Plan[SparkDriverStatus]:
    """The SparkDriver is gone or being deleted (or its namespace is): let its pods and Workloads go."""
    return Plan().with_after(*_release(observed.pods), *kueue.let_go_of_workloads(observed))


def _release(pods: Iterable[PodSummary]) -> tuple[Patch, ...]:
    """Let go of ``pods`` holding our finalizer: their SparkDriver is gone or being deleted, or they are
    another's."""
    return tuple(release(p, "owner gone or deleting") for p in pods if holds(p))


def status(f: Facts) -> Plan[SparkDriverStatus]:
    """The plan, with its status computed once from everything the steps established: observedGeneration
    and lastError; the write may wait when it only moves progress, for as long as domain.status_waits
    says (``core.plan.Plan.status_wait``). A driver that had already ended keeps the status the pass
    that ended it wrote (executors deleted afterwards, a released finalizer, a late pod change write
    nothing): only a spec change is acknowledged (observedGeneration)."""
    plan, read = f.plan, f.read
    if ended(read):
        if f.generation is not None and read.observedGeneration != f.generation:
            plan = plan.with_status(read.model_copy(update={"observedGeneration": f.generation}))
    else:
        if f.generation is not None:
            f = f.update(observedGeneration=f.generation)
        if f.ended and f.status.nextTimeout is not None:
            f = f.update(nextTimeout=None)  # nothing is awaited of an ended run
        f = _last_error(f)
        if f.status is not read and f.status != read:  # identical: no step changed anything (Facts.update)
            plan = evolve(plan, status=f.status, status_wait=_status_wait(f, announced=bool(plan.events)))
    return _settled(plan.with_observations(*transitions(read, plan.status)))


def _status_wait(f: Facts, *, announced: bool) -> float:
    """How long the write of the status decided may still wait: counted from the current driver pod's
    last step and the current incarnation's oldest pending executor (driver_controller.status)."""
    current = [p for p in f.owned_pods if p.role == labels.ROLE_EXECUTOR and p.incarnation == f.incarnation]
    return status_wait(f.read, f.status, f.now, f.driver_pod(f.incarnation), current, announced=announced)


def _last_error(f: Facts) -> Facts:
    """lastError says why a driver failed to submit, or why it is slow: a transient error (5xx,
    timeout) the skeleton met applying an earlier plan, recorded on this pass. Without churn: the same
    error again leaves it as it is (its time stays the first one), and it is dropped only when the
    phase changes, in a write that happens anyway."""
    old = f.read
    if f.status.lastError != old.lastError:
        return f  # this pass set it (an invalid spec, a refused create)
    if f.status.phase != old.phase:
        f = f.update(lastError=None)
    error = f.observed.transient_error
    if error is None or f.ended:
        return f
    recorded = f.status.lastError
    said = (recorded.reason, recorded.message) if recorded is not None else (None, None)
    if said != (error.get("reason"), error.get("message")):
        f = f.update(lastError=LastError.model_validate(dict(error)))
    return f


def _spec_refused(
    plan: Plan[SparkDriverStatus], driver: DriverView, error: SpecError, now: datetime
) -> Plan[SparkDriverStatus]:
    """A SparkDriver whose spec does not parse: SubmissionFailed, nothing created. One that only sets
    fields these models do not know (a newer CRD's): nothing is created and it is no failure; it
    waits, saying why, for an operator that knows them (or a spec without them)."""
    status = driver.status
    if ended(status):
        return plan
    if not error.unknown:
        status = status.model_copy(update={"observedGeneration": driver.generation})
        failed = with_submission_failed(status, now, events.Reason.INVALID_SPEC, error.message)
        return plan.with_status(failed).with_event("Warning", events.Reason.INVALID_SPEC, error.message)
    message = (
        f"{', '.join(error.unknown)}: not known to this operator; the SparkDriver waits for an operator "
        "version that knows these fields (or for a spec without them)"
    )
    last = status.lastError
    if last is not None and (last.reason, last.message) == (events.Reason.UNKNOWN_SPEC_FIELDS, message):
        return plan
    waiting = status.model_copy(
        update={"lastError": LastError(reason=events.Reason.UNKNOWN_SPEC_FIELDS, message=message, time=now)}
    )
    return plan.with_status(waiting).with_event("Warning", events.Reason.UNKNOWN_SPEC_FIELDS, message)


def _settled(plan: Plan[SparkDriverStatus]) -> Plan[SparkDriverStatus]:
    """What a pass releases (finalizers, a Workload's status) goes before what it deletes; and every
    driver decision is settled by its own status write: it decides the whole of what the view asks for
    at once (tests/unit/test_driver_settles.py)."""
    patches = tuple(a for a in plan.after_status if not isinstance(a, Delete))
    deletes = tuple(a for a in plan.after_status if isinstance(a, Delete))
    return evolve(plan, after_status=(*patches, *deletes), settled=True)


__all__ = ["CLOSING", "STEPS", "decide", "let_go", "status"]
