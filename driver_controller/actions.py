"""The actions a pass of the driver controller plans (``core.plan``'s vocabulary, built here): a
deletion of what a SparkDriver owns, a pod's finalizer released, its NetworkPolicy put back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sparkop.core.jsontypes import JSON
from sparkop.core.kube import merge_patch
from sparkop.core.plan import Delete, Patch
from sparkop.domain import labels
from sparkop.driver_controller.summaries import PodSummary, PolicySummary

# Why a pod, ConfigMap, Service or NetworkPolicy is deleted (the decision line's reason).
STALE_INCARNATION: Final = "StaleIncarnation"
DRIVER_ENDED: Final = "DriverEnded"  # the last incarnation's executors and NetworkPolicy, once the driver ended
# Why a NetworkPolicy of ours is patched or created again: someone edited or deleted it.
POLICY_RESTORED: Final = "NetworkPolicyRestored"


def deletion(kind: str, name: str, uid: str, reason: str = STALE_INCARNATION, api_version: str = "v1") -> Delete:
    # Whatever a pass deletes depends on nothing else it deletes.
    return Delete(api_version, kind, name, uid, reason, concurrent=True)


def guarded_replace(path: str, old: Any, new: Any) -> list[JSON]:
    """A JSON patch turning the field at ``path`` from ``old`` (tested: the patch is refused if the
    field changed since) into ``new`` (None: removed). Unlike a resourceVersion precondition, a
    change of any other field (the kubelet's status updates) lets it through."""
    change = {"op": "remove", "path": path} if new is None else {"op": "replace", "path": path, "value": new}
    return [{"op": "test", "path": path, "value": old}, change]


OUR_FINALIZERS: Final = frozenset({labels.DRIVER_OUTCOME_FINALIZER, labels.EXECUTOR_OUTCOME_FINALIZER})


def holds(pod: PodSummary) -> bool:
    """Whether ``pod`` carries a finalizer of ours (a driver's outcome, or an executor's)."""
    return any(f in OUR_FINALIZERS for f in pod.finalizers)


def release(pod: PodSummary, why: str) -> Patch:
    """Remove our finalizers from ``pod``."""
    rest = [f for f in pod.finalizers if f not in OUR_FINALIZERS]
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
