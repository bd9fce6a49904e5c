"""Kueue's contract with the controller of a job kind it has no code for, kept as Kueue v0.17's own job
integrations keep it (its jobframework reconciler), for a SparkDriver labelled
``kueue.x-k8s.io/queue-name`` (the SparkApplication's label, copied to each run):

* the SparkDriver owns one Workload (``kueue.x-k8s.io/v1beta2``, controller ownerReference: deleted
  with it), whose pod sets are the driver (1) and the executors that start with it, with the
  requests their pods will make; ``kueue.x-k8s.io/priority-class`` names its WorkloadPriorityClass,
  whose value the Workload carries (Kueue's scheduler reads ``spec.priority``, which its webhook
  would fill for a kind it knows);
* nothing of the run is created until Kueue admits the Workload (``Admitted`` True); its pods then go
  where the admission's ResourceFlavors say: their nodeLabels join the pods' node selector, their
  tolerations the pods' tolerations (driver pod and executor template alike);
* an eviction (``Evicted`` True: preempted, its ClusterQueue stopped, deactivated) stops the current
  driver pod and its executors; once none is left, the quota is handed back as Kueue's reconciler
  hands it back (``Requeued``, ``QuotaReserved`` False "Pending", ``Admitted`` False, no
  ``admission``), and the run waits for Kueue again: the next admission starts a new incarnation
  within the same run (not a failure, not counted against maxDriverPodReplacements);
* the driver's end marks the Workload ``Finished`` (Succeeded or Failed): its quota is free.

Pure: the Workload to create, where an admission puts the pods, the status patches to send (the
Workload's summary is in :mod:`driver_controller.kueue_summaries`), and the steps of a driver's decision that
keep the contract: :func:`admission` (nothing of the run before Kueue admits it, and an eviction stops
it) and :func:`workload_finished`; :func:`let_go` when the SparkDriver goes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from sparkop.api.models import DriverPhase, IncarnationOutcome, SparkDriver
from sparkop.core.jsontypes import JSON
from sparkop.core.plan import Create, Patch, refused
from sparkop.core.times import format_time
from sparkop.domain import labels, naming
from sparkop.driver_controller import conditions, events
from sparkop.driver_controller.facts import (
    Continue,
    Facts,
    Outcome,
    Stop,
    Why,
)
from sparkop.driver_controller.kueue_summaries import (
    ADMITTED,
    EVICTED,
    FINISHED,
    QUOTA_RESERVED,
    REQUEUED,
    FlavorSummary,
    WorkloadSummary,
)
from sparkop.driver_controller.observed import Observed
from sparkop.driver_controller.render import InvalidSpec
from sparkop.driver_controller.schedulers import PodSetRequests, run_object
from sparkop.driver_controller.templates import DRIVER_CONTAINER, EXECUTOR_CONTAINER, owner_reference

API_VERSION: Final = "kueue.x-k8s.io/v1beta2"
DRIVER_POD_SET: Final = "driver"
EXECUTOR_POD_SET: Final = "executor"

# Evictions after which Kueue's reconciler says the Workload was requeued (Requeued True); after the
# others (a stopped ClusterQueue, a deactivated Workload) Requeued is False until something changes.
REQUEUED_AFTER: Final = frozenset({"Preempted", "NodeFailures"})
# Kueue's condition messages are at most this long (api.TruncateConditionMessage).
MAX_MESSAGE: Final = 32768
# Kueue puts it on every Workload; the job controller takes it off once the Workload is Finished, or
# its job or the Workload itself is going (Kueue's own reconciler does the same for its kinds).
RESOURCE_IN_USE: Final = "kueue.x-k8s.io/resource-in-use"
KUEUE_JOB_UID: Final = "kueue.x-k8s.io/job-uid"
CONDITION_QUEUED_ADMITTED: Final = "Admitted"
# How soon to look again for what a watch will not bring back: a ResourceFlavor or WorkloadPriorityClass
# named but not in the cache (they are read, not watched for changes).
REFERENCE_RETRY_SECONDS: Final = 5.0


# --- what a run asks ---------------------------------------------------------------------------------


def queue_name(driver: SparkDriver) -> str | None:
    return (driver.metadata.get("labels") or {}).get(labels.KUEUE_QUEUE_NAME) or None


def priority_class(driver: SparkDriver) -> str | None:
    return (driver.metadata.get("labels") or {}).get(labels.KUEUE_PRIORITY_CLASS) or None


def workload(driver: SparkDriver, asked: PodSetRequests, owner: JSON, priority: int | None) -> JSON:
    """The Workload of ``driver``'s run: its pod sets with the requests ``asked``, its queue and
    priority. The pod templates hold what Kueue fits flavors by: requests, node selector,
    tolerations, and the driver pod's affinity as the spec gives it."""
    spec = driver.spec
    driver_pod = _template(
        DRIVER_CONTAINER, asked.driver.as_resources(), {**(spec.nodeSelector or {}), **(spec.driver.nodeSelector or {})}
    )
    _tolerate(driver_pod, spec.driver.tolerations)
    pod_sets = [{"name": DRIVER_POD_SET, "count": 1, "template": driver_pod}]
    if asked.executors > 0:
        executor_pod = _template(
            EXECUTOR_CONTAINER,
            asked.executor.as_resources(),
            {**(spec.nodeSelector or {}), **(spec.executor.nodeSelector or {})},
        )
        _tolerate(executor_pod, spec.executor.tolerations)
        pod_sets.append({"name": EXECUTOR_POD_SET, "count": asked.executors, "template": executor_pod})
    wl_spec: JSON = {"queueName": queue_name(driver), "podSets": pod_sets}
    name = priority_class(driver)
    if name is not None and priority is not None:
        wl_spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}
        wl_spec["priority"] = priority
    # Kueue's own integrations label a Workload with its job's uid (Kueue names it in its preemption
    # messages and logs: JobUID).
    more = {labels.KUEUE_QUEUE_NAME: queue_name(driver) or "", KUEUE_JOB_UID: str(driver.metadata.get("uid", ""))}
    name = naming.workload_name(driver.metadata["name"])
    return run_object(driver, API_VERSION, "Workload", name, owner, wl_spec, **more)


def _template(container: str, requests: Mapping[str, str], node_selector: Mapping[str, str]) -> JSON:
    pod_spec: JSON = {"containers": [{"name": container, "resources": {"requests": dict(requests)}}]}
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    return {"spec": pod_spec}


def _tolerate(template: JSON, tolerations: Sequence[Mapping[str, Any]] | None) -> None:
    if tolerations:
        template["spec"]["tolerations"] = [dict(t) for t in tolerations]


# --- where the admission puts the pods -----------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """What an admission adds to one role's pods: the flavors' node labels and tolerations."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()


def placements(wl: WorkloadSummary, flavors: Mapping[str, FlavorSummary]) -> dict[str, Placement] | str:
    """Per pod set, where its admission puts it; or the name of a ResourceFlavor the admission names
    and this operator cannot see (not yet in its cache, or not readable: RBAC)."""
    found: dict[str, Placement] = {}
    for pod_set, names in wl.flavors.items():
        selector: dict[str, str] = {}
        tolerations: list[Mapping[str, Any]] = []
        for name in names:
            flavor = flavors.get(name)
            if flavor is None:
                return name
            selector.update(flavor.node_labels)
            tolerations.extend(t for t in flavor.tolerations if t not in tolerations)
        found[pod_set] = Placement(selector, tuple(tolerations))
    return found


def placed(driver: SparkDriver, where: Mapping[str, Placement]) -> SparkDriver:
    """``driver`` with its admission's placement in its spec: the flavors' node labels win over the
    spec's for the same key (Kueue admitted the run on that flavor), their tolerations are added."""
    spec = driver.spec
    updates: dict[str, Any] = {}
    for role_name, pod_set in (("driver", DRIVER_POD_SET), ("executor", EXECUTOR_POD_SET)):
        placement = where.get(pod_set)
        if placement is None or (not placement.node_selector and not placement.tolerations):
            continue
        role = getattr(spec, role_name)
        selector = {**(spec.nodeSelector or {}), **(role.nodeSelector or {}), **placement.node_selector}
        tolerations = [dict(t) for t in role.tolerations or ()]
        tolerations += [dict(t) for t in placement.tolerations if dict(t) not in tolerations]
        updates[role_name] = role.model_copy(update={"nodeSelector": selector, "tolerations": tolerations or None})
    if not updates:
        return driver
    if spec.nodeSelector:
        # Each role now carries the spec-wide selector with its own (they are not allowed together).
        updates["nodeSelector"] = None
        for role_name in ("driver", "executor"):
            if role_name not in updates:
                role = getattr(spec, role_name)
                updates[role_name] = role.model_copy(
                    update={"nodeSelector": {**spec.nodeSelector, **(role.nodeSelector or {})}}
                )
    return driver.model_copy(update={"spec": spec.model_copy(update=updates)})


# --- what the job controller writes in the Workload's status --------------------------------------------


def _set(conditions: Sequence[Mapping[str, Any]], new: JSON, now: datetime) -> list[Mapping[str, Any]]:
    """``conditions`` with ``new`` in place of the one of its type (metav1 SetStatusCondition: the
    time moves only when the status does)."""
    old = next((c for c in conditions if c.get("type") == new["type"]), None)
    if old is not None and old.get("status") == new["status"] and old.get("lastTransitionTime"):
        new = {**new, "lastTransitionTime": old["lastTransitionTime"]}
    else:
        # metav1.Time: whole seconds, as Kueue writes its own.
        new = {**new, "lastTransitionTime": format_time(now.replace(microsecond=0))}
    if old is None:
        return [*conditions, new]
    return [new if c is old else c for c in conditions]


def _condition(wl: WorkloadSummary, kind: str, status: str, reason: str, message: str) -> JSON:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "observedGeneration": wl.generation,
    }


def finished_status(wl: WorkloadSummary, succeeded: bool, message: str, now: datetime) -> JSON:
    """The status patch that tells Kueue the run ended (its quota is free), sent with the
    Workload's resourceVersion as precondition: the conditions list is replaced whole."""
    reason = "Succeeded" if succeeded else "Failed"
    conditions = _set(wl.conditions, _condition(wl, FINISHED, "True", reason, message), now)
    return {"status": {"conditions": conditions}}


def let_go(wl: WorkloadSummary) -> Patch | None:
    """Kueue's finalizer off ``wl`` (None: it has none): a JSON patch that holds only if the
    finalizers are still those the decision saw."""
    if RESOURCE_IN_USE not in wl.finalizers:
        return None
    rest = [f for f in wl.finalizers if f != RESOURCE_IN_USE]
    path = "/metadata/finalizers"
    change = {"op": "replace", "path": path, "value": rest} if rest else {"op": "remove", "path": path}
    body = [{"op": "test", "path": path, "value": list(wl.finalizers)}, change]
    return Patch(API_VERSION, "Workload", wl.name, body, wl.resource_version, "ResourceNoLongerInUse")


def released_status(wl: WorkloadSummary, now: datetime) -> JSON:
    """The status patch that hands an evicted Workload's quota back once its pods are gone, as Kueue's
    reconciler does (SetRequeuedCondition, UnsetQuotaReservationWithCondition, SyncAdmittedCondition):
    Requeued, QuotaReserved False "Pending", Admitted False "NoReservation", no admission."""
    evicted = wl.condition(EVICTED) or {}
    reason, message = str(evicted.get("reason") or "Evicted"), str(evicted.get("message") or "")
    requeued = "True" if reason in REQUEUED_AFTER else "False"
    conditions = _set(wl.conditions, _condition(wl, REQUEUED, requeued, reason, message), now)
    conditions = _set(conditions, _condition(wl, QUOTA_RESERVED, "False", "Pending", message), now)
    if wl.condition(ADMITTED) is not None:
        no_reservation = _condition(wl, ADMITTED, "False", "NoReservation", "The workload has no reservation")
        conditions = _set(conditions, no_reservation, now)
    return {"status": {"conditions": conditions, "admission": None}}


# --- the steps of a driver's decision ---------------------------------------------------------------


def admission(f: Facts) -> Outcome:
    """Whether the run may have pods now: always without a Kueue queue; with one, once Kueue admitted
    its Workload (created here first), the admission's placement then being what the pods render from
    (``Facts.placed``). An evicted run's pods are stopped and its quota handed back; the next admission
    starts a new incarnation."""
    queue = queue_name(f.driver)
    if queue is None:
        return Continue(f)
    wl = _workload(f)
    if wl is None:
        return _create_workload(f, queue)
    if wl.evicted or wl.deleting:
        return Stop(_evicted(f, wl), Why.WAITING_FOR_KUEUE)
    if not wl.admitted:
        reason, message = wl.waiting_reason()
        return Stop(
            _queued(f, "True", reason, f"Workload {wl.name} waits in LocalQueue {queue}: {message}"),
            Why.WAITING_FOR_KUEUE,
        )
    where = placements(wl, f.observed.flavors)
    if isinstance(where, str):
        message = f"Workload {wl.name} was admitted on ResourceFlavor {where}, which this operator cannot read yet"
        f = _queued(f, "True", "FlavorNotFound", message).requeue(REFERENCE_RETRY_SECONDS)
        return Stop(f, Why.WAITING_FOR_KUEUE)
    f = f.admitted(placed(f.driver, where))
    old = next((c for c in f.status.conditions or () if c.type == conditions.CONDITION_QUEUED), None)
    if old is not None and old.status == "True":
        message = f"Workload {wl.name} admitted by ClusterQueue {wl.cluster_queue}"
        f = _queued(f, "False", CONDITION_QUEUED_ADMITTED, message)
    return Continue(f)


def workload_finished(f: Facts) -> Facts:
    """The driver has ended: the Workload says so, and Kueue frees its quota (its finalizer goes once
    Kueue has seen it Finished)."""
    if not f.ended or queue_name(f.driver) is None:
        return f
    wl = _workload(f)
    if wl is None:
        return f
    if wl.finished:
        return f.after(*_let_go(wl))
    succeeded = f.status.phase is DriverPhase.SUCCEEDED
    message = f"SparkDriver {f.name} {f.status.phase.value.lower() if f.status.phase else 'ended'}"
    body = finished_status(wl, succeeded, message, f.now)
    return f.after(Patch(API_VERSION, "Workload", wl.name, body, wl.resource_version, "RunEnded", subresource="status"))


def let_go_of_workloads(observed: Observed) -> tuple[Patch, ...]:
    """The SparkDriver is gone or going: its Workloads' finalizers go too (the garbage collector, or
    whoever deleted them, is waiting for that)."""
    return tuple(patch for wl in observed.workloads for patch in _let_go(wl))


def _workload(f: Facts) -> WorkloadSummary | None:
    name = naming.workload_name(f.name)
    return next((w for w in f.owned(f.observed.workloads) if w.name == name), None)


def _queued(f: Facts, status: Literal["True", "False"], reason: str, message: str) -> Facts:
    current = f.status.conditions or ()
    return f.update(
        conditions=conditions.set_condition(
            current, conditions.CONDITION_QUEUED, status, reason, message, f.now, f.generation
        )
    )


def _create_workload(f: Facts, queue: str) -> Outcome:
    """The run's Workload, sized as its pods will ask (rendered here; nothing else of the run is
    created before Kueue admits it)."""
    expected = naming.workload_name(f.name)
    refusal = refused(f.observed.refusals, Create({"kind": "Workload", "metadata": {"name": expected}}))
    if refusal is not None:
        message = refusal.message
        if refusal.code == 404:
            # The API server's answer is a bare "404 page not found": what it means says more.
            message = (
                f"the cluster does not serve Kueue's Workloads ({API_VERSION}): install Kueue v0.17 or "
                f"later, or remove the label {labels.KUEUE_QUEUE_NAME}"
            )
        reason = refusal.reason if refusal.code == 409 else events.Reason.SUBMISSION_FAILED
        f = f.refused(reason, message).event(
            "Warning", events.Reason.SUBMISSION_FAILED, f"Workload {expected} refused: {message}"
        )
        return Stop(f, Why.REFUSED)
    priority: int | None = None
    wanted_class = priority_class(f.driver)
    if wanted_class is not None:
        priority = f.observed.priority_classes.get(wanted_class)
        if priority is None:
            label = labels.KUEUE_PRIORITY_CLASS
            message = f"WorkloadPriorityClass {wanted_class} ({label}) is not known to this operator yet"
            f = _queued(f, "True", "PriorityClassNotFound", message).requeue(REFERENCE_RETRY_SECONDS)
            return Stop(f, Why.WAITING_FOR_KUEUE)
    try:
        f, objects = f.render()
    except (InvalidSpec, ValueError) as exc:
        return Stop(f.invalid_spec(str(exc)), Why.INVALID_SPEC)
    assert objects.pod_sets is not None  # the queue label asks for them
    owner = owner_reference(f.driver, controller=True)
    f = f.before(Create(workload(f.driver, objects.pod_sets, owner, priority), "QueuedInKueue"))
    f = _queued(
        f, "True", "Pending", f"Workload {expected} created in LocalQueue {queue}: waiting for Kueue to admit it"
    )
    return Stop(f.update(phase=DriverPhase.PENDING), Why.WAITING_FOR_KUEUE)


def _evicted(f: Facts, wl: WorkloadSummary) -> Facts:
    """Kueue evicted the run (or its Workload is being deleted): stop its current driver pod (a new
    incarnation, whose pod waits for the next admission; the stale one and its executors are deleted
    by the closing steps), and once none of its pods is left, hand the quota back (a deleted Workload:
    let it go; the next pass creates another)."""
    evicted = wl.condition(EVICTED) or {}
    if wl.deleting:
        reason, why = "WorkloadDeleted", f"Workload {wl.name} is being deleted"
    else:
        reason, why = str(evicted.get("reason") or "Evicted"), str(evicted.get("message") or "")
    pod = f.driver_pod(f.incarnation)
    known = f.status.driverPod
    if pod is not None or (known is not None and known.name):
        pod_name = pod.name if pod is not None else (known.name if known is not None and known.name else f.pod_name)
        f, tail = f.log_tail(pod)
        if tail is None:
            return f  # read first: the decision follows at once with it (nothing of this pass is written)
        message = f"Kueue evicted Workload {wl.name} ({reason}: {why}); the driver pod and its executors are stopped"
        f = f.record(f.incarnation, pod_name, IncarnationOutcome.LOST, f"Kueue{reason}", message, tail)
        f = f.update(queueEvictions=(f.status.queueEvictions or 0) + 1)
        f = f.event("Warning", events.Reason.QUEUED, f"{message}; the run waits for Kueue to admit it again")
        f = f.start_incarnation(f.incarnation + 1)
    running = [pod for pod in f.owned_pods if pod.phase not in ("Succeeded", "Failed")]
    if not running and wl.deleting:
        f = f.after(*_let_go(wl))
    elif not running and wl.holds_quota:
        body = released_status(wl, f.now)
        version = wl.resource_version
        f = f.after(Patch(API_VERSION, "Workload", wl.name, body, version, "QuotaReleased", subresource="status"))
    waiting = f"{len(running)} pod(s) still stopping" if running else "its quota handed back"
    message = f"Workload {wl.name} evicted ({reason}: {why}); {waiting}; waiting for Kueue to admit it again"
    return _queued(f, "True", f"Kueue{reason}", message).update(phase=DriverPhase.PENDING)


def _let_go(wl: WorkloadSummary) -> tuple[Patch, ...]:
    finalizer = let_go(wl)
    return (finalizer,) if finalizer is not None else ()
