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

Pure: summaries of watched bodies, the Workload to create, the status patches to send.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from sparkop.api.models import SparkDriver
from sparkop.core.jsontypes import JSON
from sparkop.core.owners import owner_references
from sparkop.core.plan import Patch
from sparkop.core.times import format_time
from sparkop.domain import labels, naming
from sparkop.driver_controller.schedulers import PodSetRequests, pod_group_labels
from sparkop.driver_controller.submission import DRIVER_CONTAINER, EXECUTOR_CONTAINER

API_VERSION: Final = "kueue.x-k8s.io/v1beta2"
DRIVER_POD_SET: Final = "driver"
EXECUTOR_POD_SET: Final = "executor"

# Workload condition types (kueue.x-k8s.io/v1beta2).
QUOTA_RESERVED: Final = "QuotaReserved"
ADMITTED: Final = "Admitted"
EVICTED: Final = "Evicted"
FINISHED: Final = "Finished"
REQUEUED: Final = "Requeued"
# Evictions after which Kueue's reconciler says the Workload was requeued (Requeued True); after the
# others (a stopped ClusterQueue, a deactivated Workload) Requeued is False until something changes.
REQUEUED_AFTER: Final = frozenset({"Preempted", "NodeFailures"})
# Kueue's condition messages are at most this long (api.TruncateConditionMessage).
MAX_MESSAGE: Final = 32768
# Kueue puts it on every Workload; the job controller takes it off once the Workload is Finished, or
# its job or the Workload itself is going (Kueue's own reconciler does the same for its kinds).
RESOURCE_IN_USE: Final = "kueue.x-k8s.io/resource-in-use"
KUEUE_JOB_UID: Final = "kueue.x-k8s.io/job-uid"


@dataclass(frozen=True)
class WorkloadSummary:
    """A Workload as a pass reads it: its conditions, and the ResourceFlavors its admission chose per
    pod set (from the status Kueue writes)."""

    name: str
    uid: str
    owner_uids: tuple[str, ...]
    resource_version: str
    generation: int
    conditions: tuple[Mapping[str, Any], ...] = ()
    flavors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # pod set -> flavor names
    cluster_queue: str | None = None
    has_admission: bool = False
    finalizers: tuple[str, ...] = ()
    deleting: bool = False

    def condition(self, kind: str) -> Mapping[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == kind), None)

    def true(self, kind: str) -> bool:
        found = self.condition(kind)
        return found is not None and found.get("status") == "True"

    @property
    def admitted(self) -> bool:
        return self.true(ADMITTED)

    @property
    def evicted(self) -> bool:
        return self.true(EVICTED)

    @property
    def finished(self) -> bool:
        return self.true(FINISHED)

    @property
    def holds_quota(self) -> bool:
        """Quota is reserved for it (Kueue's HasQuotaReservation), or an admission still says so."""
        return self.true(QUOTA_RESERVED) or self.has_admission

    def waiting_reason(self) -> tuple[str, str]:
        """Why it is not admitted yet, as Kueue says it (the QuotaReserved condition: "couldn't assign
        flavors to pod set driver: insufficient quota for cpu in flavor default, ..."), else why not."""
        reserved = self.condition(QUOTA_RESERVED)
        if reserved is not None and reserved.get("status") == "False":
            return str(reserved.get("reason") or "Pending"), str(reserved.get("message") or "")
        admitted = self.condition(ADMITTED)
        if reserved is not None and admitted is not None and admitted.get("status") == "False":
            return str(admitted.get("reason") or "Pending"), str(admitted.get("message") or "")
        return "Pending", "waiting for Kueue to consider it"


@dataclass(frozen=True)
class FlavorSummary:
    """A ResourceFlavor: where the pods admitted on it go."""

    name: str
    node_labels: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]


def _kept_meta(body: Mapping[str, Any]) -> JSON:
    return {k: v for k, v in (body.get("metadata") or {}).items() if k not in ("managedFields", "annotations")}


def trim_workload(body: JSON) -> JSON:
    """What the Workload cache keeps: metadata and status (the spec is ours)."""
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": _kept_meta(body),
        "status": body.get("status") or {},
    }


def summarize_workload(body: Mapping[str, Any]) -> WorkloadSummary:
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    admission = status.get("admission") or {}
    flavors = {
        str(assignment.get("name")): tuple(sorted(set((assignment.get("flavors") or {}).values())))
        for assignment in admission.get("podSetAssignments") or ()
    }
    return WorkloadSummary(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        owner_uids=tuple(str(r.get("uid")) for r in owner_references(body)),
        resource_version=str(meta.get("resourceVersion", "")),
        generation=int(meta.get("generation") or 0),
        conditions=tuple(dict(c) for c in status.get("conditions") or ()),
        flavors=flavors,
        cluster_queue=admission.get("clusterQueue") or None,
        has_admission=bool(admission),
        finalizers=tuple(meta.get("finalizers") or ()),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def workload_view(body: Mapping[str, Any]) -> WorkloadSummary:
    """What a pass reads of a Workload, but for its resourceVersion and the conditions' times (Kueue
    rewrites a pending Workload's QuotaReserved message as the queue changes; the times alone ask
    for no pass)."""
    summary = summarize_workload(body)
    conditions = tuple({k: v for k, v in c.items() if k != "lastTransitionTime"} for c in summary.conditions)
    return WorkloadSummary(**{**summary.__dict__, "resource_version": "", "conditions": conditions})


def trim_flavor(body: JSON) -> JSON:
    spec = body.get("spec") or {}
    kept = {k: spec[k] for k in ("nodeLabels", "tolerations") if k in spec}
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": _kept_meta(body),
        "spec": kept,
    }


def summarize_flavor(body: Mapping[str, Any]) -> FlavorSummary:
    spec = body.get("spec") or {}
    return FlavorSummary(
        name=str((body.get("metadata") or {}).get("name", "")),
        node_labels=dict(spec.get("nodeLabels") or {}),
        tolerations=tuple(dict(t) for t in spec.get("tolerations") or ()),
    )


def trim_priority_class(body: JSON) -> JSON:
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": _kept_meta(body),
        "value": body.get("value"),
    }


def priority_value(body: Mapping[str, Any]) -> tuple[str, int]:
    """A WorkloadPriorityClass: (name, value)."""
    return str((body.get("metadata") or {}).get("name", "")), int(body.get("value") or 0)


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
    meta = driver.metadata
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": naming.workload_name(meta["name"]),
            "namespace": meta["namespace"],
            # Kueue's own integrations label a Workload with its job's uid (Kueue names it in its
            # preemption messages and logs: JobUID).
            "labels": {
                **pod_group_labels(driver),
                labels.KUEUE_QUEUE_NAME: queue_name(driver) or "",
                KUEUE_JOB_UID: str(meta.get("uid", "")),
            },
            "ownerReferences": [owner],
        },
        "spec": wl_spec,
    }


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
