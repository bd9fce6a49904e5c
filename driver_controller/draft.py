"""The plan one pass draws up (:class:`Draft`), and the actions it is made of: creates go before the
status write, patches and deletes after it (:mod:`driver_controller.decide` says why).
:meth:`Draft.plan` hands the result to ``core.applier``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from sparkop.api.models import SparkDriverStatus
from sparkop.core.jsontypes import JSON
from sparkop.core.kube import merge_patch
from sparkop.core.plan import Create, Delete, Ensure, Event, Observation, Patch, Plan
from sparkop.domain import labels
from sparkop.driver_controller.observed import PodSummary, PolicySummary

# Why a pod, ConfigMap, Service or NetworkPolicy is deleted (the decision line's reason).
STALE_INCARNATION: Final = "StaleIncarnation"
DRIVER_ENDED: Final = "DriverEnded"  # the last incarnation's executors and NetworkPolicy, once the driver ended
# Why a NetworkPolicy of ours is patched or created again: someone edited or deleted it.
POLICY_RESTORED: Final = "NetworkPolicyRestored"


@dataclass
class Draft:
    """The plan as a pass builds it: creates go before the status write, patches and deletes after."""

    status: SparkDriverStatus | None = None  # the new status; None: unchanged
    creates: list[Create | Ensure] = field(default_factory=list)
    patches: list[Patch] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    observations: list[Observation] = field(default_factory=list)
    status_can_wait: bool = False  # core.plan.Plan's: the change is progress only

    def requeue(self, seconds: float) -> None:
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def event(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))

    def release_orphans(self, pods: Sequence[PodSummary]) -> Draft:
        """Let go of ``pods`` holding our finalizer: their SparkDriver is gone or being deleted, or
        they are another's."""
        for pod in pods:
            if labels.DRIVER_OUTCOME_FINALIZER in pod.finalizers:
                self.patches.append(release(pod, "owner gone or deleting"))
        return self

    def plan(self) -> Plan[SparkDriverStatus]:
        return Plan(
            status=self.status,
            before_status=tuple(self.creates),
            events=tuple(self.events),
            after_status=(*self.patches, *self.deletes),
            requeue_after=self.requeue_after,
            observations=tuple(self.observations),
            status_can_wait=self.status_can_wait,
            # Every driver decision is settled by its own status write: it decides the whole of what
            # the view asks for at once (tests/unit/test_driver_settles.py).
            settled=True,
        )


def release_orphans(pods: Sequence[PodSummary]) -> Plan[SparkDriverStatus]:
    """The SparkDriver is gone or being deleted: let its pods go."""
    return Draft().release_orphans(pods).plan()


# ---------------------------------------------------------------------------------------------------
# the actions


def deletion(kind: str, name: str, uid: str, reason: str = STALE_INCARNATION, api_version: str = "v1") -> Delete:
    # Whatever a pass deletes depends on nothing else it deletes.
    return Delete(api_version, kind, name, uid, reason, concurrent=True)


def guarded_replace(path: str, old: Any, new: Any) -> list[JSON]:
    """A JSON patch turning the field at ``path`` from ``old`` (tested: the patch is refused if the
    field changed since) into ``new`` (None: removed). Unlike a resourceVersion precondition, a
    change of any other field (the kubelet's status updates) lets it through."""
    change = {"op": "remove", "path": path} if new is None else {"op": "replace", "path": path, "value": new}
    return [{"op": "test", "path": path, "value": old}, change]


def release(pod: PodSummary, why: str) -> Patch:
    """Remove our finalizer from ``pod``."""
    rest = [f for f in pod.finalizers if f != labels.DRIVER_OUTCOME_FINALIZER]
    body = guarded_replace("/metadata/finalizers", list(pod.finalizers), rest or None)
    return Patch("v1", "Pod", pod.name, body, pod.resource_version, decision_reason(why))


def decision_reason(why: str) -> str:
    """A decision line's CamelCase reason from a few words ("outcome recorded" -> OutcomeRecorded)."""
    return why.title().replace(" ", "")


def _as_stored(spec: Mapping[str, Any]) -> JSON:
    """A NetworkPolicy spec as the API server stores it: without policyTypes it defaults them to
    Ingress, plus Egress when the policy has egress rules (networking/v1 SetDefaults_NetworkPolicy)."""
    if spec.get("policyTypes"):
        return dict(spec)
    return {**spec, "policyTypes": ["Ingress", *(["Egress"] if spec.get("egress") else [])]}


def policy_restore_patch(current: PolicySummary, wanted: JSON) -> JSON | None:
    """The merge patch that turns the observed NetworkPolicy ``current`` back into ``wanted`` (the
    manifest sparkop creates), or None when it is as wanted. Labels as on every object of ours: those
    sparkop and Spark set are put back, others' are left alone. The spec is Spark's whole: a rule or a
    peer someone added would admit traffic the policy exists to keep out, so what it does not have is
    removed (null), and what the API server defaults (policyTypes) counts as wanted."""
    want_labels: Mapping[str, str] = wanted["metadata"].get("labels") or {}
    labels_back = {key: value for key, value in want_labels.items() if current.labels.get(key) != value}
    want_spec = _as_stored(wanted.get("spec") or {})
    if not labels_back and current.spec == want_spec:
        return None  # every pass asks; as wanted, it is answered without working out a patch
    spec_back = merge_patch(current.spec, want_spec)
    patch: JSON = {}
    if labels_back:
        patch["metadata"] = {"labels": labels_back}
    if spec_back:
        patch["spec"] = spec_back
    return patch or None
