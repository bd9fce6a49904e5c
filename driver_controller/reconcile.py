"""reconcile(observed, now) -> Plan: what to do for one SparkDriver, decided without I/O.

The handler (:mod:`driver_controller.handlers`) builds ``Observed``, calls ``reconcile`` and applies
the :class:`core.reconciler.Plan` in its fixed order: the creates before the status write
(ConfigMaps and Service before the pod that mounts them: status names a driver pod only once it was
accepted), then the status write (guarded by resourceVersion), then the events of that write, then
patches (adoption, finalizer removal) and deletes after it. Facts are written to status before
anything that depends on them is released: a driver pod's finalizer is removed only once its
outcome is in status, and an Event is posted only after the status it reports was written. A create
the API server refused comes back as an observation (``Observed.refusals``): the pass that sees it
records SubmissionFailed.

The phases, in the order they run (each reads the facts the earlier ones established):

1. deletion: the SparkDriver is being deleted -> only release the finalizers of its pods;
2. incarnation: recover it (max of status and pod labels);
3. the current driver pod: record its outcome, or notice it was lost and start a replacement,
   or report it stuck;
4. create whatever the current incarnation is missing, and put back its NetworkPolicy if it was edited;
5. executors: adopt the current incarnation's, delete stale ones, and once the driver has ended
   (Succeeded, Failed, SubmissionFailed) delete the last incarnation's live ones as well: the
   SparkDriver stays their owner, so the garbage collector never would;
6. stale incarnations: release and delete their pods, ConfigMaps, Services and NetworkPolicies, and
   once the driver has ended the last incarnation's NetworkPolicy too (it protects executors, and none
   run any more);
7. status: computed once from the above. A SparkDriver that had already ended is frozen: its status
   is never written again unless its spec changes (and then only observedGeneration moves).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from api.models import SparkDriver, SparkDriverStatus
from core import labels, naming
from core.conditions import transition_time
from core.jsontypes import JSON
from core.kube import NETWORK_POLICIES, merge_patch
from core.reconciler import Create, Delete, Ensure, Event, Observation, Patch, Plan, Refusal, refused
from core.times import format_time
from driver_controller.observe import DISRUPTION_REASONS, ObjectSummary, PodSummary, PolicySummary, Terminated
from driver_controller.podbuild import RenderOptions
from driver_controller.render import (
    IncarnationNames,
    InvalidSpec,
    names,
    network_policy,
    parse,
    render,
    spark_release,
)
from driver_controller.transitions import transitions

# Event reasons (on the SparkDriver).
REASON_INCARNATION_CREATED: Final = "DriverPodCreated"
REASON_POD_LOST: Final = "DriverPodLost"
REASON_SUCCEEDED: Final = "DriverSucceeded"
REASON_FAILED: Final = "DriverFailed"
REASON_SUBMISSION_FAILED: Final = "SubmissionFailed"
REASON_STUCK: Final = "DriverPodStuck"
REASON_INVALID_SPEC: Final = "InvalidSpec"
REASON_UNKNOWN_SPARK_VERSION: Final = "UnknownSparkVersion"

CONDITION_STUCK: Final = "Stuck"
CONDITION_UNSCHEDULABLE: Final = "Unschedulable"
HISTORY_MAX: Final = 10
DEFAULT_UNSCHEDULABLE_TIMEOUT: Final = 300.0

TERMINAL: Final = frozenset({"Succeeded", "Failed", "SubmissionFailed"})


@dataclass(frozen=True)
class Settings:
    unschedulable_timeout: float = DEFAULT_UNSCHEDULABLE_TIMEOUT
    render: RenderOptions = field(default_factory=RenderOptions)


@dataclass(frozen=True)
class Observed:
    """One SparkDriver and what it owns, as the indexes see them. ``driver`` is None when the
    SparkDriver is gone and only its leftovers (pods holding our finalizer) remain."""

    driver: Mapping[str, Any] | None
    pods: Sequence[PodSummary] = ()
    config_maps: Sequence[ObjectSummary] = ()
    services: Sequence[ObjectSummary] = ()
    settings: Settings = field(default_factory=Settings)
    # A transient error (5xx, timeout) the handler met applying an earlier plan, as a lastError
    # {reason, message, time}: recorded in status by the next pass that gets through.
    transient_error: Mapping[str, Any] | None = None
    # The namespace is being deleted: only let its pods go (their finalizer would hold it up).
    namespace_terminating: bool = False
    # Creates of this SparkDriver the API server refused, by core.reconciler.refusal_key.
    refusals: Mapping[str, Refusal] = field(default_factory=dict)
    # The executors' NetworkPolicies (Spark 4.2+) labelled for this SparkDriver.
    network_policies: Sequence[PolicySummary] = ()


# Why a pod, ConfigMap, Service or NetworkPolicy is deleted (the decision line's reason).
STALE_INCARNATION: Final = "StaleIncarnation"
DRIVER_ENDED: Final = "DriverEnded"  # the last incarnation's executors and NetworkPolicy, once the driver ended
# Why a NetworkPolicy of ours is patched or created again: someone edited or deleted it.
POLICY_RESTORED: Final = "NetworkPolicyRestored"


@dataclass
class _Draft:
    """The plan as a pass builds it: creates go before the status write, patches and deletes after."""

    status: JSON | None = None  # the new status; None: unchanged
    creates: list[Create | Ensure] = field(default_factory=list)
    patches: list[Patch] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    observations: list[Observation] = field(default_factory=list)

    def requeue(self, seconds: float) -> None:
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def plan(self) -> Plan[JSON]:
        return Plan(
            status=self.status,
            before_status=tuple(self.creates),
            events=tuple(self.events),
            after_status=(*self.patches, *self.deletes),
            requeue_after=self.requeue_after,
            observations=tuple(self.observations),
        )


def _delete(kind: str, name: str, uid: str, reason: str = STALE_INCARNATION, api_version: str = "v1") -> Delete:
    # Whatever a pass deletes depends on nothing else it deletes.
    return Delete(api_version, kind, name, uid, reason, concurrent=True)


def _replace(path: str, old: Any, new: Any) -> list[JSON]:
    """A JSON patch turning the field at ``path`` from ``old`` (tested: the patch is refused if the
    field changed since) into ``new`` (None: removed). Unlike a resourceVersion precondition, a
    change of any other field (the kubelet's status updates) lets it through."""
    change = {"op": "remove", "path": path} if new is None else {"op": "replace", "path": path, "value": new}
    return [{"op": "test", "path": path, "value": old}, change]


def _release(pod: PodSummary, why: str) -> Patch:
    rest = [f for f in pod.finalizers if f != labels.DRIVER_OUTCOME_FINALIZER]
    body = _replace("/metadata/finalizers", list(pod.finalizers), rest or None)
    return Patch("v1", "Pod", pod.name, body, pod.resource_version, _reason(why))


def _reason(why: str) -> str:
    """A decision line's CamelCase reason from a few words ("outcome recorded" -> OutcomeRecorded)."""
    return why.title().replace(" ", "")


def _release_orphans(draft: _Draft, pods: Sequence[PodSummary]) -> _Draft:
    for pod in pods:
        if labels.DRIVER_OUTCOME_FINALIZER in pod.finalizers:
            draft.patches.append(_release(pod, "owner gone or deleting"))
    return draft


def release_orphans(pods: Sequence[PodSummary]) -> Plan[JSON]:
    """The SparkDriver is gone or being deleted: let its pods go."""
    return _release_orphans(_Draft(), pods).plan()


# --- status pieces ---------------------------------------------------------------------------------


def _termination(term: Terminated | None, pod: PodSummary) -> JSON:
    out: JSON = {}
    if term is not None:
        if term.exit_code is not None:
            out["exitCode"] = term.exit_code
        if term.reason:
            out["reason"] = term.reason
        if term.message:
            out["message"] = term.message[-4096:]
        if term.finished_at:
            out["finishedAt"] = format_time(term.finished_at)
    elif pod.reason:
        out["reason"] = pod.reason
        if pod.message:
            out["message"] = pod.message
    return out


def _record(
    history: list[JSON], incarnation: int, pod_name: str, outcome: str, reason: str, message: str, now: datetime
) -> list[JSON]:
    if any(r.get("incarnation") == incarnation for r in history):
        return history
    entry: JSON = {"incarnation": incarnation, "podName": pod_name, "outcome": outcome, "time": format_time(now)}
    if reason:
        entry["reason"] = reason
    if message:
        entry["message"] = message[:4096]
    return [*history, entry][-HISTORY_MAX:]


def _set_condition(
    conditions: list[JSON], type_: str, status: str, reason: str, message: str, now: datetime, generation: int | None
) -> list[JSON]:
    old = next((c for c in conditions if c.get("type") == type_), None)
    new: JSON = {"type": type_, "status": status, "reason": reason}
    if message:
        new["message"] = message[:32768]
    old_status, old_time = (old.get("status"), old.get("lastTransitionTime")) if old else (None, None)
    new["lastTransitionTime"] = transition_time(old_status, old_time, status, format_time(now))
    if generation is not None:
        new["observedGeneration"] = generation
    return [*(c for c in conditions if c.get("type") != type_), new]


def _lost_reason(pod: PodSummary | None) -> tuple[str, str] | None:
    """Why a driver pod counts as lost before it finished, or None if it was not lost."""
    if pod is None:
        return "PodMissing", "the driver pod disappeared before its outcome was recorded"
    if pod.disruption:
        return pod.disruption, pod.message or f"the driver pod was disrupted ({pod.disruption})"
    if pod.phase == "Failed" and pod.reason in DISRUPTION_REASONS:
        return pod.reason or "Evicted", pod.message or ""
    if pod.deleting:
        term = pod.terminated
        if term is not None and term.finished_at is not None and pod.deletion_requested is not None:
            finished_before = term.finished_at < pod.deletion_requested
        else:
            finished_before = pod.phase in ("Succeeded", "Failed")
        if not finished_before:
            return "Deleted", "the driver pod was deleted before it finished"
    return None


def _outcome(pod: PodSummary) -> tuple[str, JSON] | None:
    """("Succeeded" | "Failed", termination) once the driver has finished by itself."""
    if pod.init_failure is not None:
        return "Failed", _termination(pod.init_failure, pod)
    if not pod.finished:
        return None
    term = pod.terminated
    ok = term.exit_code == 0 if term is not None else pod.phase == "Succeeded"
    return ("Succeeded" if ok else "Failed"), _termination(term, pod)


# --- reconcile ---------------------------------------------------------------------------------


@dataclass
class _Pass:
    """The facts one pass establishes, phase by phase."""

    driver: SparkDriver
    body: Mapping[str, Any]
    obs: Observed
    now: datetime
    plan: _Draft
    status: JSON  # what this pass decides, starting from a copy of old_status
    old_status: JSON  # the status as observed, normalised
    owned_pods: list[PodSummary]
    incarnation: int = 0

    @property
    def name(self) -> str:
        return str(self.driver.metadata["name"])

    @property
    def namespace(self) -> str:
        return str(self.driver.metadata["namespace"])

    @property
    def phase(self) -> str | None:
        phase = self.status.get("phase")
        return str(phase) if phase else None

    def event(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.plan.events.append(Event(type_, reason, message))

    def driver_pod(self, incarnation: int) -> PodSummary | None:
        name = naming.driver_pod_name(self.name, incarnation)
        return next((p for p in self.owned_pods if p.name == name and p.role != labels.ROLE_EXECUTOR), None)


def _owned(uid: str, items: Sequence[Any]) -> list[Any]:
    return [item for item in items if uid in item.owner_uids]


def _status_dict(body: Mapping[str, Any]) -> JSON:
    raw = body.get("status") or {}
    try:
        return SparkDriverStatus.model_validate(raw).to_json()
    except ValueError:
        return {k: v for k, v in raw.items() if k in SparkDriverStatus.model_fields}


def reconcile(observed: Observed, now: datetime) -> Plan[JSON]:
    """Decide what to do for one SparkDriver. Never raises for a bad spec: that is a status."""
    body = observed.driver
    if body is None or observed.namespace_terminating:
        return release_orphans(observed.pods)
    meta = body.get("metadata") or {}
    uid = str(meta.get("uid", ""))
    owned_pods = _owned(uid, observed.pods)
    # Pods labelled for this name but owned by another (an earlier SparkDriver of the same name).
    strangers = [p for p in observed.pods if uid not in p.owner_uids]
    if meta.get("deletionTimestamp"):
        return release_orphans(observed.pods)
    plan = _release_orphans(_Draft(), strangers)
    old_status = _status_dict(body)
    status = copy.deepcopy(old_status)
    try:
        driver = parse(body)
    except ValueError as exc:
        return _invalid(plan, status, body, now, f"the SparkDriver does not parse: {exc}").plan()
    p = _Pass(driver, body, observed, now, plan, status, old_status, owned_pods)
    _incarnation(p)
    if p.phase not in TERMINAL:
        _current_pod(p)
    if p.phase not in TERMINAL:
        _create_missing(p)
    _executors(p)
    _stale(p)
    if old_status.get("phase") in TERMINAL:
        _frozen_status(p)
    else:
        _finish_status(p)
    plan.observations.extend(transitions(old_status, plan.status))
    return plan.plan()


def _invalid(plan: _Draft, status: JSON, body: Mapping[str, Any], now: datetime, message: str) -> _Draft:
    if status.get("phase") in TERMINAL:
        return plan
    new = dict(status)
    new.update(
        phase="SubmissionFailed",
        lastError={"reason": REASON_INVALID_SPEC, "message": message, "time": format_time(now)},
        completionTime=format_time(now),
        observedGeneration=(body.get("metadata") or {}).get("generation"),
    )
    plan.status = {k: v for k, v in new.items() if v is not None}
    plan.events.append(Event("Warning", REASON_INVALID_SPEC, message))
    return plan


def _incarnation(p: _Pass) -> None:
    """Recover the incarnation: max(status, highest incarnation label among our driver pods)."""
    labelled = [pod.incarnation for pod in p.owned_pods if pod.role != labels.ROLE_EXECUTOR]
    recorded = int(p.status.get("incarnation") or 0)
    p.incarnation = max([recorded, *labelled])
    if p.incarnation == 0 and p.phase not in TERMINAL:
        _start_incarnation(p, 1)
    elif p.incarnation > recorded:
        # A pod of a later incarnation exists but its status write was lost (crash, conflict).
        p.status["incarnation"] = p.incarnation
        p.status["sparkApplicationId"] = naming.spark_app_id(str(p.driver.metadata["uid"]), p.incarnation)
        p.status["driverPod"] = {"name": naming.driver_pod_name(p.name, p.incarnation)}


def _start_incarnation(p: _Pass, incarnation: int) -> None:
    p.incarnation = incarnation
    p.status["incarnation"] = incarnation
    p.status["phase"] = "Pending"
    p.status.pop("driverPod", None)
    p.status.pop("termination", None)
    p.status.setdefault("startTime", format_time(p.now))
    p.status["sparkApplicationId"] = naming.spark_app_id(str(p.driver.metadata["uid"]), incarnation)


def _terminal(p: _Pass, phase: str, termination: JSON, reason: str, message: str, pod_name: str) -> None:
    outcome = phase
    p.status["phase"] = phase
    if termination:
        p.status["termination"] = termination
    p.status["completionTime"] = format_time(p.now)
    p.status["incarnations"] = _record(
        list(p.status.get("incarnations") or []), p.incarnation, pod_name, outcome, reason, message, p.now
    )
    event_type: Literal["Normal", "Warning"] = "Normal" if phase == "Succeeded" else "Warning"
    event_reason = {"Succeeded": REASON_SUCCEEDED, "Failed": REASON_FAILED}.get(phase, REASON_SUBMISSION_FAILED)
    p.event(event_type, event_reason, message or f"driver pod {pod_name} {phase.lower()}")


def _current_pod(p: _Pass) -> None:
    pod = p.driver_pod(p.incarnation)
    pod_name = naming.driver_pod_name(p.name, p.incarnation)
    seen = (p.status.get("driverPod") or {}).get("name") == pod_name and (p.status.get("driverPod") or {}).get("uid")
    if pod is None and not seen:
        return  # not created yet, or our index has not seen it yet: _create_missing (re)creates it
    lost = _lost_reason(pod)
    if lost is not None:
        _lost(p, pod_name, *lost)
        return
    assert pod is not None
    _pod_info(p, pod)
    outcome = _outcome(pod)
    if outcome is not None:
        phase, termination = outcome
        # A real kubelet reports the driver container terminated while the pod's phase still
        # says Running (the phase turns terminal only once the sandbox is torn down), and this
        # status is final from here on: record the phase the pod is about to reach.
        p.status["driverPod"]["phase"] = phase
        reason = termination.get("reason") or ("Completed" if phase == "Succeeded" else "Error")
        message = f"driver pod {pod_name} {phase.lower()}"
        if "exitCode" in termination:
            message += f" with exit code {termination['exitCode']}"
        _terminal(p, phase, termination, reason, message, pod_name)
        return
    _observe_running(p, pod)


def _lost(p: _Pass, pod_name: str, reason: str, message: str) -> None:
    """The current driver pod went away before it finished: replace it, or fail when the
    replacements are used up."""
    p.status["incarnations"] = _record(
        list(p.status.get("incarnations") or []), p.incarnation, pod_name, "Lost", reason, message, p.now
    )
    replacements = p.incarnation - 1
    limit = p.driver.spec.maxDriverPodReplacements
    if replacements >= limit:
        text = (
            f"driver pod {pod_name} lost ({reason}: {message}); {replacements} replacement(s) used, "
            f"maxDriverPodReplacements={limit}"
        )
        p.status["phase"] = "Failed"
        p.status["termination"] = {"reason": REASON_POD_LOST, "message": text}
        p.status["completionTime"] = format_time(p.now)
        p.event("Warning", REASON_POD_LOST, text)
        return
    p.event("Warning", REASON_POD_LOST, f"driver pod {pod_name} lost ({reason}: {message}); replacing it")
    _start_incarnation(p, p.incarnation + 1)


def _pod_info(p: _Pass, pod: PodSummary) -> None:
    info: JSON = {"name": pod.name, "uid": pod.uid, "phase": pod.phase}
    if pod.node_name:
        info["nodeName"] = pod.node_name
    if pod.pod_ip:
        info["podIP"] = pod.pod_ip
    if pod.start_time:
        info["startTime"] = format_time(pod.start_time)
    p.status["driverPod"] = info


def _observe_running(p: _Pass, pod: PodSummary) -> None:
    """The current pod exists and has not ended: phase and stuck states."""
    p.status["phase"] = "Running" if pod.phase == "Running" else "Pending"
    generation = p.driver.metadata.get("generation")
    conditions = list(p.status.get("conditions") or [])
    if pod.waiting_reason:
        message = f"driver pod {pod.name}: {pod.waiting_reason}" + (
            f": {pod.waiting_message}" if pod.waiting_message else ""
        )
        if not any(
            c.get("type") == CONDITION_STUCK and c.get("status") == "True" and c.get("reason") == pod.waiting_reason
            for c in conditions
        ):
            p.event("Warning", REASON_STUCK, message)
        conditions = _set_condition(conditions, CONDITION_STUCK, "True", pod.waiting_reason, message, p.now, generation)
    elif pod.unschedulable_since is not None and pod.phase == "Pending":
        waited = (p.now - pod.unschedulable_since).total_seconds()
        timeout = p.obs.settings.unschedulable_timeout
        if waited >= timeout:
            message = f"driver pod {pod.name} unschedulable for {int(waited)}s: {pod.unschedulable_message or ''}"
            if not any(c.get("type") == CONDITION_STUCK and c.get("status") == "True" for c in conditions):
                p.event("Warning", REASON_STUCK, message)
            conditions = _set_condition(
                conditions, CONDITION_STUCK, "True", CONDITION_UNSCHEDULABLE, message, p.now, generation
            )
        else:
            p.plan.requeue(max(timeout - waited, 0.5))
    elif any(c.get("type") == CONDITION_STUCK for c in conditions):
        conditions = _set_condition(conditions, CONDITION_STUCK, "False", "Progressing", "", p.now, generation)
    if conditions:
        p.status["conditions"] = conditions


def _create_missing(p: _Pass) -> None:
    """What the current incarnation lacks: ConfigMaps, Service and NetworkPolicy before the pod (the pod
    mounts the ConfigMaps; its executors are never without their policy). The incarnation is rendered
    only when the pod, a ConfigMap or the Service is missing; the NetworkPolicy is built on its own
    (:func:`render.network_policy`), so a pass can compare it with the one it sees, and put back an edit."""
    uid = str(p.driver.metadata["uid"])
    expected = names(p.driver, p.incarnation)
    have_cm = {c.name for c in _owned(uid, p.obs.config_maps)}
    have_svc = {s.name for s in _owned(uid, p.obs.services)}
    pod_missing = p.driver_pod(p.incarnation) is None
    wanted_policy = network_policy(p.driver, p.incarnation) if expected.network_policy else None
    # Missing, it is *ensured*: a policy of ours that only looks missing because someone removed its
    # sparkop.io/driver label (the watch selects by it) is patched back instead of being met by a
    # 409 on every pass.
    ensure_policy = Ensure(wanted_policy, f"Incarnation{p.incarnation}", concurrent=True) if wanted_policy else None
    if _refused(p, expected, ensure_policy):
        return
    current_policy = next((n for n in _owned(uid, p.obs.network_policies) if n.name == expected.network_policy), None)
    if current_policy is not None:
        ensure_policy = None
        _restore_policy(p, current_policy, wanted_policy)
    if pod_missing or not expected.config_maps <= have_cm or expected.service not in have_svc:
        try:
            objects = render(p.driver, p.incarnation, p.obs.settings.render)
        except (InvalidSpec, ValueError) as exc:
            _invalid_spec(p, str(exc))
            return
        why = f"Incarnation{p.incarnation}"
        if pod_missing and objects.pod_group is not None:
            # Before the pod, which its scheduler matches to it; the same group for every incarnation,
            # so a retried or later create meets 409 with our own (the SparkDriver is its controller).
            p.plan.creates.append(Create(objects.pod_group, why, concurrent=True))
        p.plan.creates.extend(
            Create(cm, why, concurrent=True) for cm in objects.config_maps if cm["metadata"]["name"] not in have_cm
        )
        if expected.service not in have_svc:
            p.plan.creates.append(Create(objects.service, why, concurrent=True))
        if ensure_policy is not None:
            p.plan.creates.append(ensure_policy)
            ensure_policy = None
        if pod_missing:
            # Also when status already names it: a create the index has not seen yet meets 409.
            p.plan.creates.append(Create(objects.pod, why))
            if (p.status.get("driverPod") or {}).get("name") != expected.pod:
                p.status["driverPod"] = {"name": expected.pod}
                p.event(
                    "Normal",
                    REASON_INCARNATION_CREATED,
                    f"incarnation {p.incarnation}: driver pod {expected.pod}, "
                    f"spark.app.id {objects.properties['spark.app.id']}",
                )
                # Said once per driver pod created (with the event above, not on every pass): the pod
                # is built as the nearest known line's spark-submit would build it.
                release = spark_release(p.driver)
                if release is not None and release.warning:
                    p.event("Warning", REASON_UNKNOWN_SPARK_VERSION, release.warning)
    if ensure_policy is not None:  # only the policy is missing: deleted, or taken out of our watch
        p.plan.creates.append(Ensure(ensure_policy.manifest, POLICY_RESTORED, concurrent=True))
    p.status["webUIAddress"] = expected.web_ui_address
    p.status["sparkApplicationId"] = naming.spark_app_id(uid, p.incarnation)


def _refused(p: _Pass, expected: IncarnationNames, policy: Ensure | None) -> bool:
    """An object of the current incarnation the API server refused to create (a quota, an admission
    policy, a name held by an object that is not ours, a PodGroup kind the cluster does not serve, a
    NetworkPolicy the operator's RBAC does not allow): SubmissionFailed, nothing more created; the apps
    controller decides whether to run again."""

    def create(kind: str, name: str) -> Create:
        return Create({"kind": kind, "metadata": {"name": name}})

    wanted: list[Create | Ensure] = [create("PodGroup", expected.pod_group)] if expected.pod_group else []
    wanted += [create("ConfigMap", name) for name in sorted(expected.config_maps)]
    wanted += [create("Service", expected.service), *([policy] if policy else []), create("Pod", expected.pod)]
    for action in wanted:
        refusal = refused(p.obs.refusals, action)
        if refusal is None:
            continue
        kind, name = action.kind, action.name
        # 409: the name is held by an object that is not ours (never taken for ours, never adopted).
        reason = refusal.reason if refusal.code == 409 else REASON_SUBMISSION_FAILED
        message = refusal.message
        if kind == "PodGroup" and refusal.code == 404:
            message = (
                f"the cluster does not serve PodGroups of spec.batchScheduler {p.driver.spec.batchScheduler} "
                f"({refusal.message}): install that scheduler's CRDs, or remove spec.batchScheduler"
            )
        assert p.obs.driver is not None
        p.status = submission_failed(p.obs, p.now, p.incarnation, reason, message)
        p.event("Warning", REASON_SUBMISSION_FAILED, f"{kind} {name} refused: {message}")
        return True
    return False


def _restore_policy(p: _Pass, current: PolicySummary, wanted: JSON | None) -> None:
    """Put back what an edit changed of the incarnation's NetworkPolicy: one merge patch, guarded by the
    resourceVersion it was decided from, and only when something differs. One on its way out is left
    to go: its deletion brings the SparkDriver back to a pass, which creates it anew."""
    if wanted is None or current.deleting:
        return
    body = policy_restore_patch(current, wanted)
    if body is not None:
        api_version, version = NETWORK_POLICIES.api_version, current.resource_version
        restore = Patch(api_version, "NetworkPolicy", current.name, body, version, POLICY_RESTORED, concurrent=True)
        p.plan.patches.append(restore)


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


def _invalid_spec(p: _Pass, message: str) -> None:
    """A spec spark-submit would refuse: SubmissionFailed, nothing created."""
    p.status.update(
        phase="SubmissionFailed",
        lastError={"reason": REASON_INVALID_SPEC, "message": message, "time": format_time(p.now)},
        completionTime=format_time(p.now),
    )
    p.status["incarnations"] = _record(
        list(p.status.get("incarnations") or []),
        p.incarnation,
        naming.driver_pod_name(p.name, p.incarnation),
        "SubmissionFailed",
        REASON_INVALID_SPEC,
        message,
        p.now,
    )
    p.event("Warning", REASON_INVALID_SPEC, message)


def _deletes_finished_executors(driver: SparkDriver) -> bool:
    """``spark.kubernetes.executor.deleteOnTermination`` (the typed field wins over sparkConf, as in
    :mod:`driver_controller.submission`): false asks to keep finished executor pods, e.g. for their logs."""
    typed = driver.spec.executor.deleteOnTermination
    if typed is not None:
        return typed
    value = (driver.spec.sparkConf or {}).get("spark.kubernetes.executor.deleteOnTermination")
    return value is None or value.strip().lower() != "false"


def _executors(p: _Pass) -> None:
    """Count, adopt and clean up executors. Once the driver has ended, the last incarnation's executors
    are deleted too (finished ones are kept when deleteOnTermination is false), and the counts are of
    those that stay: what status keeps for good."""
    counts = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0, "unknown": 0}
    uid = str(p.driver.metadata["uid"])
    ended = p.phase in TERMINAL
    keep_finished = not _deletes_finished_executors(p.driver)
    for pod in p.owned_pods:
        if pod.role != labels.ROLE_EXECUTOR:
            continue
        if pod.incarnation < p.incarnation:
            if not pod.deleting:
                p.plan.deletes.append(_delete("Pod", pod.name, pod.uid))
            continue
        finished = pod.phase in ("Succeeded", "Failed")
        if ended and (pod.deleting or not (finished and keep_finished)):
            if not pod.deleting:
                p.plan.deletes.append(_delete("Pod", pod.name, pod.uid, DRIVER_ENDED))
            continue
        key = pod.phase.lower() if pod.phase.lower() in counts else "unknown"
        counts[key] += 1
        controller = next((r for r in pod.owner_refs if r.get("controller")), None)
        if ended or pod.deleting or (controller is not None and controller.get("uid") == uid):
            continue
        refs = []
        for ref in pod.owner_refs:
            ref = dict(ref)
            ref["controller"] = ref.get("uid") == uid
            refs.append(ref)
        body = _replace("/metadata/ownerReferences", [dict(r) for r in pod.owner_refs], refs)
        adopt = Patch("v1", "Pod", pod.name, body, pod.resource_version, _reason("adopt executor"), concurrent=True)
        p.plan.patches.append(adopt)
    p.status["executors"] = counts


def _stale(p: _Pass) -> None:
    """Pods, ConfigMaps, Services and NetworkPolicies of earlier incarnations (and the last incarnation's
    NetworkPolicy once the driver has ended); finalizers of recorded outcomes."""
    recorded = {r.get("incarnation") for r in p.status.get("incarnations") or ()}
    terminal = p.phase in TERMINAL
    for pod in p.owned_pods:
        if pod.role == labels.ROLE_EXECUTOR:
            continue
        stale = pod.incarnation < p.incarnation
        if stale and pod.incarnation not in recorded:
            # Its loss was never written (a crash between create and status write): record it now.
            lost = _lost_reason(pod) or ("Replaced", "superseded by a later incarnation")
            p.status["incarnations"] = _record(
                list(p.status.get("incarnations") or []), pod.incarnation, pod.name, "Lost", lost[0], lost[1], p.now
            )
        has_finalizer = labels.DRIVER_OUTCOME_FINALIZER in pod.finalizers
        if has_finalizer and (stale or terminal):
            p.plan.patches.append(_release(pod, "outcome recorded"))
        if stale and not pod.deleting:
            p.plan.deletes.append(_delete("Pod", pod.name, pod.uid))
    uid = str(p.driver.metadata["uid"])
    for obj in [*_owned(uid, p.obs.config_maps), *_owned(uid, p.obs.services)]:
        if obj.incarnation < p.incarnation and not obj.deleting:
            p.plan.deletes.append(_delete(obj.kind, obj.name, obj.uid))
    policies = _owned(uid, p.obs.network_policies)
    current_name = naming.network_policy_name(p.name, p.incarnation) if policies else ""
    for policy in policies:
        if policy.deleting:
            continue
        # The current incarnation's is known by its name: an edit of its incarnation label is put back
        # (_restore_policy), not taken for a stale incarnation.
        stale = policy.name != current_name and policy.incarnation < p.incarnation
        # The policy protects executors: none run once the driver has ended (_executors deletes them).
        # A frozen status stays as it is: these deletes write nothing else.
        why = STALE_INCARNATION if stale else DRIVER_ENDED if terminal else None
        if why is not None:
            p.plan.deletes.append(_delete("NetworkPolicy", policy.name, policy.uid, why, NETWORK_POLICIES.api_version))


def _last_error(p: _Pass) -> None:
    """lastError says why a driver failed to submit, or why it is slow: a transient error (5xx,
    timeout) the handler met applying an earlier plan, recorded on this pass. Without churn: the same
    error again leaves it as it is (its time stays the first one), and it is dropped only when the
    phase changes, in a write that happens anyway."""
    status, old = p.status, p.old_status
    if status.get("lastError") != old.get("lastError"):
        return  # this pass set it (an invalid spec)
    if status.get("phase") != old.get("phase"):
        status.pop("lastError", None)
    error = p.obs.transient_error
    if error is None or status.get("phase") in TERMINAL:
        return
    recorded = status.get("lastError") or {}
    if (recorded.get("reason"), recorded.get("message")) != (error.get("reason"), error.get("message")):
        status["lastError"] = dict(error)


def _finish_status(p: _Pass) -> None:
    status = p.status
    generation = p.driver.metadata.get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    _last_error(p)
    if status != p.old_status:  # only then is it worth validating
        new = SparkDriverStatus.model_validate(status).to_json()
        if new != p.old_status:
            p.plan.status = new


def _frozen_status(p: _Pass) -> None:
    """The SparkDriver had already ended: its status stays as the pass that ended it wrote it (executors
    deleted afterwards, a released finalizer, a late pod change write nothing). A spec change is
    acknowledged, and nothing else: observedGeneration moves."""
    generation = p.driver.metadata.get("generation")
    if generation is not None and p.old_status.get("observedGeneration") != generation:
        p.plan.status = {**p.old_status, "observedGeneration": generation}


def submission_failed(observed: Observed, now: datetime, incarnation: int, reason: str, message: str) -> JSON:
    """The status after the API server refused one of the incarnation's objects (422/403/400):
    SubmissionFailed with lastError; the apps controller decides whether to retry with a new run."""
    assert observed.driver is not None
    status = _status_dict(observed.driver)
    pod_name = naming.driver_pod_name(str(observed.driver["metadata"]["name"]), incarnation)
    status.update(
        phase="SubmissionFailed",
        incarnation=incarnation,
        lastError={"reason": reason, "message": message[:32768], "time": format_time(now)},
        completionTime=format_time(now),
    )
    status.pop("driverPod", None)
    status["incarnations"] = _record(
        list(status.get("incarnations") or []), incarnation, pod_name, "SubmissionFailed", reason, message, now
    )
    generation = (observed.driver.get("metadata") or {}).get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    return SparkDriverStatus.model_validate(status).to_json()
