"""What the driver controller's caches keep of Kueue's objects (where Kueue is installed) and the
summaries a pass reads of them: a SparkDriver's Workload (:class:`WorkloadSummary`), the ResourceFlavors
an admission names (:class:`FlavorSummary`) and the WorkloadPriorityClasses' values. Kueue's contract,
the Workload built and the steps that keep it, is :mod:`driver_controller.kueue`. Pure functions of a
watched body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sparkop.core.jsontypes import JSON
from sparkop.driver_controller.summaries import controlling_driver, kept

# Workload condition types (kueue.x-k8s.io/v1beta2).
QUOTA_RESERVED: Final = "QuotaReserved"
ADMITTED: Final = "Admitted"
EVICTED: Final = "Evicted"
FINISHED: Final = "Finished"
REQUEUED: Final = "Requeued"


@dataclass(frozen=True)
class WorkloadSummary:
    """A Workload as a pass reads it: its conditions, and the ResourceFlavors its admission chose per
    pod set (from the status Kueue writes)."""

    name: str
    uid: str
    owner_uid: str  # the uid of the SparkDriver that owns it (core.owners)
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


def trim_workload(body: JSON) -> JSON:
    """What the Workload cache keeps: metadata and status (the spec is ours)."""
    return kept(body, status=body.get("status") or {})


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
        owner_uid=controlling_driver(body),
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
    return kept(body, spec={k: spec[k] for k in ("nodeLabels", "tolerations") if k in spec})


def summarize_flavor(body: Mapping[str, Any]) -> FlavorSummary:
    spec = body.get("spec") or {}
    return FlavorSummary(
        name=str((body.get("metadata") or {}).get("name", "")),
        node_labels=dict(spec.get("nodeLabels") or {}),
        tolerations=tuple(dict(t) for t in spec.get("tolerations") or ()),
    )


def trim_priority_class(body: JSON) -> JSON:
    return kept(body, value=body.get("value"))


def priority_value(body: Mapping[str, Any]) -> tuple[str, int]:
    """A WorkloadPriorityClass: (name, value)."""
    return str((body.get("metadata") or {}).get("name", "")), int(body.get("value") or 0)
