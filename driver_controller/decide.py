"""decide(observed, now) -> Plan: what to do for one SparkDriver, decided without I/O.

The handler (:mod:`driver_controller.controller`) builds ``Observed``, calls ``decide`` and applies
the :class:`core.plan.Plan` in its fixed order: the creates before the status write
(ConfigMaps and Service before the pod that mounts them: status names a driver pod only once it was
accepted), then the status write (guarded by resourceVersion), then the events of that write, then
patches (finalizer removal) and deletes after it. Facts are written to status before
anything that depends on them is released: a driver pod's finalizer is removed only once its
outcome is in status, and an Event is posted only after the status it reports was written. A create
the API server refused comes back as an observation (``Observed.refusals``): the pass that sees it
records SubmissionFailed.

The phases, in the order they run (each reads the facts the earlier ones established):

1. deletion: the SparkDriver is being deleted -> only release the finalizers of its pods;
2. incarnation: recover it (max of status and pod labels);
3. the current driver pod: record its outcome, or notice it was lost and start a replacement,
   or report it stuck (:mod:`driver_controller.conditions`);
4. create whatever the current incarnation is missing, and put back its NetworkPolicy if it was edited;
5. executors: count the current incarnation's, delete stale ones, and once the driver has ended
   (Succeeded, Failed, SubmissionFailed) delete the last incarnation's live ones as well (after
   Spark's own clean-up had its moment): the SparkDriver stays their owner, so the garbage collector
   never would. Spark creates them owned by the SparkDriver already (the executor pod template's
   reference), so nothing is patched on them;
6. stale incarnations: release and delete their pods, ConfigMaps, Services and NetworkPolicies, and
   once the driver has ended the last incarnation's NetworkPolicy too (it protects executors, and none
   run any more);
7. status: computed once from the above (an :class:`api.models.SparkDriverStatus`, turned into JSON
   only by :func:`driver_controller.status.status_json` when it is written). A SparkDriver that had
   already ended is frozen: its status is never written again unless its spec changes (and then only
   observedGeneration moves).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import ValidationError

from sparkop.api.models import (
    DriverPhase,
    DriverPodInfo,
    ExecutorCounts,
    IncarnationOutcome,
    LastError,
    SparkDriver,
    SparkDriverStatus,
    Termination,
    unknown_fields,
)
from sparkop.core.jsontypes import JSON
from sparkop.core.kube import NETWORK_POLICIES
from sparkop.core.owners import controller_of
from sparkop.core.plan import Create, Ensure, Patch, Plan, Refusal, refused
from sparkop.domain import kinds, labels, naming
from sparkop.driver_controller import conditions, kueue
from sparkop.driver_controller.draft import (
    DRIVER_ENDED,
    POLICY_RESTORED,
    STALE_INCARNATION,
    Draft,
    deletion,
    policy_restore_patch,
    release,
    release_orphans,
)
from sparkop.driver_controller.observed import (
    DISRUPTION_REASONS,
    ObjectSummary,
    PodGroupSummary,
    PodSummary,
    PolicySummary,
    Terminated,
)
from sparkop.driver_controller.podbuild import RenderOptions
from sparkop.driver_controller.render import (
    IncarnationNames,
    InvalidSpec,
    names,
    network_policy,
    parse,
    render,
    spark_release,
)
from sparkop.driver_controller.status import (
    ended,
    first_pod_only,
    progress_only,
    read_status,
    with_record,
    with_submission_failed,
)
from sparkop.driver_controller.submission import owner_reference
from sparkop.driver_controller.transitions import transitions

# Event reasons (on the SparkDriver).
REASON_INCARNATION_CREATED: Final = "DriverPodCreated"
REASON_POD_LOST: Final = "DriverPodLost"
REASON_SUCCEEDED: Final = "DriverSucceeded"
REASON_FAILED: Final = "DriverFailed"
REASON_SUBMISSION_FAILED: Final = "SubmissionFailed"
REASON_STUCK: Final = "DriverPodStuck"
REASON_INVALID_SPEC: Final = "InvalidSpec"
REASON_UNKNOWN_SPEC_FIELDS: Final = "UnknownSpecFields"
REASON_UNKNOWN_SPARK_VERSION: Final = "UnknownSparkVersion"

# What a SparkApplication's own events state (SparkApplicationSubmitted, ...Succeeding, ...Failing,
# ...SubmissionFailed, DriverPodReplaced): on a SparkDriver an app controls they are not posted again.
RESTATED_BY_APP: Final = frozenset(
    {REASON_INCARNATION_CREATED, REASON_SUCCEEDED, REASON_FAILED, REASON_SUBMISSION_FAILED}
)

DEFAULT_UNSCHEDULABLE_TIMEOUT: Final = 300.0
# How long the executors of a driver that exited by itself are left to Spark's own clean-up (its
# SparkContext deletes them as it stops) before the controller deletes those still there.
EXECUTOR_CLEANUP_GRACE_SECONDS: Final = 15.0


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
    # Creates of this SparkDriver the API server refused, by core.plan.refusal_key.
    refusals: Mapping[str, Refusal] = field(default_factory=dict)
    # The executors' NetworkPolicies (Spark 4.2+) labelled for this SparkDriver.
    network_policies: Sequence[PolicySummary] = ()
    # The batch scheduler's PodGroups labelled for this SparkDriver (where their kinds are served).
    pod_groups: Sequence[PodGroupSummary] = ()
    # Kueue (where it is installed): the Workloads labelled for this SparkDriver, and what the queue's
    # admission and priority name: every ResourceFlavor and WorkloadPriorityClass value, by name.
    workloads: Sequence[kueue.WorkloadSummary] = ()
    flavors: Mapping[str, kueue.FlavorSummary] = field(default_factory=dict)
    priority_classes: Mapping[str, int] = field(default_factory=dict)


# --- status pieces ---------------------------------------------------------------------------------


def _termination(term: Terminated | None, pod: PodSummary) -> Termination | None:
    """How the driver container (or, without one, the pod) ended; None when nothing says."""
    if term is not None:
        message = term.message[-4096:] if term.message else None
        out = Termination(
            exitCode=term.exit_code, reason=term.reason or None, message=message, finishedAt=term.finished_at
        )
    elif pod.reason:
        out = Termination(reason=pod.reason, message=pod.message or None)
    else:
        return None
    return None if out == Termination() else out


# Spark's driver reads its own pod from the API server while its SparkContext starts (the Kubernetes
# scheduler backend), then asks for its executors; when the API server cannot be reached at that moment
# (restarting, a control-plane upgrade, a network blip) the driver exits before any executor or job. Its
# termination message (the log's last 2 KB) then shows the Kubernetes client failing to connect: the
# in-cluster API server's name, or only the frames of the client's HTTP library (okhttp in Spark 3,
# Vert.x in Spark 4) when, as for PySpark, the trace is printed twice and the first copy is out of the
# window. "External scheduler cannot be instantiated" is often above it.
_KUBERNETES_CLIENT: Final = (
    "kubernetes.default.svc",
    "KubernetesClientException",
    "io.fabric8.",
    "okhttp3.",
    "io.vertx.",
)
_API_SERVER_UNREACHABLE: Final = ("ConnectException", "SocketTimeoutException", "UnknownHostException")
REASON_API_SERVER_UNREACHABLE: Final = "APIServerUnreachable"
# A container's exit codes after SIGTERM and SIGKILL (128 + the signal): what a pod deletion sends.
KILLED_EXIT_CODES: Final = frozenset({143, 137})


def _backend_never_started(pod: PodSummary, had_executors: bool) -> bool:
    """The driver ended because the API server was unreachable while its SparkContext started: no
    executor was ever created for it and no job ran, so the incarnation is lost, not the application
    failed. Bounded by maxDriverPodReplacements like every loss; a refusal (403, 404) is no such case."""
    term = pod.terminated
    text = (term.message if term is not None else None) or ""
    return (
        not had_executors
        and term is not None
        and term.exit_code not in (None, 0)
        and any(marker in text for marker in _KUBERNETES_CLIENT)
        and any(marker in text for marker in _API_SERVER_UNREACHABLE)
    )


def _lost_reason(pod: PodSummary | None, had_executors: bool = True) -> tuple[str, str] | None:
    """Why a driver pod counts as lost before it finished, or None if it was not lost. ``had_executors``:
    whether any executor pod of its incarnation was seen."""
    if pod is None:
        return "PodMissing", "the driver pod disappeared before its outcome was recorded"
    if _backend_never_started(pod, had_executors):
        return REASON_API_SERVER_UNREACHABLE, (
            "the driver could not reach the API server while its SparkContext started (nothing of the application ran)"
        )
    if pod.disruption:
        return pod.disruption, pod.message or f"the driver pod was disrupted ({pod.disruption})"
    if pod.phase == "Failed" and pod.reason in DISRUPTION_REASONS:
        return pod.reason or "Evicted", pod.message or ""
    if pod.deleting:
        term = pod.terminated
        if term is not None and term.exit_code in KILLED_EXIT_CODES and term.reason != "OOMKilled":
            # Killed by the deletion's signal: the kubelet's last delete (grace 0, once the container is
            # gone) moves deletionTimestamp past the container's end, so the times alone would call it
            # an outcome when the pod is first seen this late.
            finished_before = False
        elif term is not None and term.finished_at is not None and pod.deletion_requested is not None:
            finished_before = term.finished_at < pod.deletion_requested
        else:
            finished_before = pod.phase in ("Succeeded", "Failed")
        if not finished_before:
            return "Deleted", "the driver pod was deleted before it finished"
    return None


def _outcome(pod: PodSummary) -> tuple[DriverPhase, Termination | None] | None:
    """(Succeeded | Failed, termination) once the driver has finished by itself."""
    if pod.init_failure is not None:
        return DriverPhase.FAILED, _termination(pod.init_failure, pod)
    if not pod.finished:
        return None
    term = pod.terminated
    ok = term.exit_code == 0 if term is not None else pod.phase == "Succeeded"
    return (DriverPhase.SUCCEEDED if ok else DriverPhase.FAILED), _termination(term, pod)


# --- decide ----------------------------------------------------------------------------------------


@dataclass
class _Pass:
    """The facts one pass establishes, phase by phase."""

    driver: SparkDriver
    obs: Observed
    now: datetime
    plan: Draft
    status: SparkDriverStatus  # what this pass decides: its own copy, starting as old_status
    old_status: SparkDriverStatus  # the status as observed
    owned_pods: list[PodSummary]
    incarnation: int = 0
    _names: dict[int, IncarnationNames] = field(default_factory=dict)

    def names(self) -> IncarnationNames:
        """What the current incarnation's objects are called (worked out once per pass)."""
        if self.incarnation not in self._names:
            self._names[self.incarnation] = names(self.driver, self.incarnation)
        return self._names[self.incarnation]

    @property
    def name(self) -> str:
        return str(self.driver.metadata["name"])

    @property
    def uid(self) -> str:
        return str(self.driver.metadata["uid"])

    @property
    def generation(self) -> int | None:
        generation: int | None = self.driver.metadata.get("generation")
        return generation

    @property
    def ended(self) -> bool:
        return ended(self.status)

    def update(self, **fields: Any) -> None:
        """Set status fields (by their JSON names) on the pass's own copy of the status: its parts are
        replaced, never changed in place, so what the pass read stays as it was."""
        for name, value in fields.items():
            setattr(self.status, name, value)

    def record(self, incarnation: int, pod_name: str, outcome: IncarnationOutcome, reason: str, message: str) -> None:
        self.status = with_record(self.status, incarnation, pod_name, outcome, reason, message, self.now)

    @property
    def app_controlled(self) -> bool:
        owner = controller_of({"metadata": self.driver.metadata}, labels.GROUP, kinds.SPARK_APPLICATIONS.kind)
        return owner is not None

    def event(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        if reason in RESTATED_BY_APP and self.app_controlled:
            return
        self.plan.event(type_, reason, message)

    def driver_pod(self, incarnation: int) -> PodSummary | None:
        name = naming.driver_pod_name(self.name, incarnation)
        return next((p for p in self.owned_pods if p.name == name and p.role != labels.ROLE_EXECUTOR), None)


def _owned(uid: str, items: Sequence[Any]) -> list[Any]:
    return [item for item in items if uid in item.owner_uids]


def decide(observed: Observed, now: datetime) -> Plan[SparkDriverStatus]:
    """Decide what to do for one SparkDriver. Never raises for a bad spec: that is a status."""
    body = observed.driver
    if body is None or observed.namespace_terminating:
        return _let_go(release_orphans(observed.pods), observed)
    meta = body.get("metadata") or {}
    uid = str(meta.get("uid", ""))
    owned_pods = _owned(uid, observed.pods)
    # Pods labelled for this name but owned by another (an earlier SparkDriver of the same name).
    strangers = [p for p in observed.pods if uid not in p.owner_uids]
    if meta.get("deletionTimestamp"):
        return _let_go(release_orphans(observed.pods), observed)
    plan = Draft().release_orphans(strangers)
    old_status = read_status(body)
    try:
        driver = parse(body)
    except ValueError as exc:
        unknown = unknown_fields(exc) if isinstance(exc, ValidationError) else ()
        if unknown:
            return _wait_for_known_spec(plan, old_status, unknown, now).plan()
        return _invalid(plan, old_status, body, now, f"the SparkDriver does not parse: {exc}").plan()
    p = _Pass(driver, observed, now, plan, old_status.model_copy(), old_status, owned_pods)
    _incarnation(p)
    admitted = p.ended or _admitted(p)
    if not p.ended and admitted:
        _current_pod(p)
    if not p.ended and admitted:
        _create_missing(p)
    if p.ended:
        _workload_finished(p)
    _executors(p)
    _stale(p)
    if ended(old_status):
        _frozen_status(p)
    else:
        _finish_status(p)
    plan.observations.extend(transitions(old_status, plan.status))
    return plan.plan()


def _invalid(plan: Draft, status: SparkDriverStatus, body: Mapping[str, Any], now: datetime, message: str) -> Draft:
    """A SparkDriver that does not parse: SubmissionFailed, nothing created."""
    if ended(status):
        return plan
    generation = (body.get("metadata") or {}).get("generation")
    status = status.model_copy(update={"observedGeneration": generation})
    plan.status = with_submission_failed(status, now, REASON_INVALID_SPEC, message)
    plan.event("Warning", REASON_INVALID_SPEC, message)
    return plan


def _wait_for_known_spec(plan: Draft, status: SparkDriverStatus, unknown: tuple[str, ...], now: datetime) -> Draft:
    """A SparkDriver that sets fields these models do not know (a newer CRD's): nothing is created and
    it is no failure; it waits, saying why, for an operator that knows them (or a spec without them)."""
    if ended(status):
        return plan
    message = (
        f"{', '.join(unknown)}: not known to this operator; the SparkDriver waits for an operator version "
        "that knows these fields (or for a spec without them)"
    )
    last = status.lastError
    if last is None or (last.reason, last.message) != (REASON_UNKNOWN_SPEC_FIELDS, message):
        plan.status = status.model_copy(
            update={"lastError": LastError(reason=REASON_UNKNOWN_SPEC_FIELDS, message=message, time=now)}
        )
        plan.event("Warning", REASON_UNKNOWN_SPEC_FIELDS, message)
    return plan


def _incarnation(p: _Pass) -> None:
    """Recover the incarnation: max(status, highest incarnation label among our driver pods)."""
    labelled = [pod.incarnation for pod in p.owned_pods if pod.role != labels.ROLE_EXECUTOR]
    recorded = p.status.incarnation
    p.incarnation = max([recorded, *labelled])
    if p.incarnation == 0 and not p.ended:
        _start_incarnation(p, 1)
    elif p.incarnation > recorded:
        # A pod of a later incarnation exists but its status write was lost (crash, conflict) or is
        # still held (the first pod's acceptance may wait: status.first_pod_only): derived as the pass
        # that created it derived it.
        if recorded == 0 and not p.ended:
            _start_incarnation(p, p.incarnation)
        p.update(
            incarnation=p.incarnation,
            sparkApplicationId=naming.spark_app_id(p.uid, p.incarnation),
            driverPod=DriverPodInfo(name=naming.driver_pod_name(p.name, p.incarnation)),
        )


def _start_incarnation(p: _Pass, incarnation: int) -> None:
    p.incarnation = incarnation
    p.update(
        incarnation=incarnation,
        phase=DriverPhase.PENDING,
        driverPod=None,
        termination=None,
        startTime=p.status.startTime or p.now,
        sparkApplicationId=naming.spark_app_id(p.uid, incarnation),
    )


def _terminal(
    p: _Pass, phase: DriverPhase, termination: Termination | None, reason: str, message: str, pod_name: str
) -> None:
    p.update(phase=phase, completionTime=p.now)
    if termination is not None:
        p.update(termination=termination)
    p.record(p.incarnation, pod_name, IncarnationOutcome(phase.value), reason, message)
    event_type: Literal["Normal", "Warning"] = "Normal" if phase is DriverPhase.SUCCEEDED else "Warning"
    event_reason = {DriverPhase.SUCCEEDED: REASON_SUCCEEDED, DriverPhase.FAILED: REASON_FAILED}.get(
        phase, REASON_SUBMISSION_FAILED
    )
    p.event(event_type, event_reason, message or f"driver pod {pod_name} {phase.value.lower()}")


def _current_pod(p: _Pass) -> None:
    pod = p.driver_pod(p.incarnation)
    pod_name = naming.driver_pod_name(p.name, p.incarnation)
    known = p.status.driverPod
    seen = known is not None and known.name == pod_name and bool(known.uid)
    if pod is None and not seen:
        return  # not created yet, or our index has not seen it yet: _create_missing (re)creates it
    had_executors = any(o.role == labels.ROLE_EXECUTOR and o.incarnation == p.incarnation for o in p.owned_pods)
    lost = _lost_reason(pod, had_executors)
    if lost is not None:
        _lost(p, pod_name, *lost)
        return
    assert pod is not None
    info = _pod_info(pod)
    p.update(driverPod=info)
    outcome = _outcome(pod)
    if outcome is not None:
        phase, termination = outcome
        # A real kubelet reports the driver container terminated while the pod's phase still
        # says Running (the phase turns terminal only once the sandbox is torn down), and this
        # status is final from here on: record the phase the pod is about to reach.
        p.update(driverPod=info.model_copy(update={"phase": phase.value}))
        default = "Completed" if phase is DriverPhase.SUCCEEDED else "Error"
        reason = (termination.reason if termination is not None else None) or default
        message = f"driver pod {pod_name} {phase.value.lower()}"
        if termination is not None and termination.exitCode is not None:
            message += f" with exit code {termination.exitCode}"
        _terminal(p, phase, termination, reason, message, pod_name)
        return
    _observe_running(p, pod)


def _lost(p: _Pass, pod_name: str, reason: str, message: str) -> None:
    """The current driver pod went away before it finished: replace it, or fail when the
    replacements are used up."""
    p.record(p.incarnation, pod_name, IncarnationOutcome.LOST, reason, message)
    # Incarnations Kueue's evictions started are no replacements of lost pods.
    replacements = p.incarnation - 1 - (p.status.queueEvictions or 0)
    limit = p.driver.spec.maxDriverPodReplacements
    if replacements >= limit:
        text = (
            f"driver pod {pod_name} lost ({reason}: {message}); {replacements} replacement(s) used, "
            f"maxDriverPodReplacements={limit}"
        )
        p.update(
            phase=DriverPhase.FAILED,
            termination=Termination(reason=REASON_POD_LOST, message=text),
            completionTime=p.now,
        )
        p.event("Warning", REASON_POD_LOST, text)
        return
    p.event("Warning", REASON_POD_LOST, f"driver pod {pod_name} lost ({reason}: {message}); replacing it")
    _start_incarnation(p, p.incarnation + 1)


def _pod_info(pod: PodSummary) -> DriverPodInfo:
    return DriverPodInfo(
        name=pod.name,
        uid=pod.uid,
        phase=pod.phase,
        nodeName=pod.node_name or None,
        podIP=pod.pod_ip or None,
        startTime=pod.start_time,
        ready=(pod.ready and not pod.finished) or None,
    )


def _observe_running(p: _Pass, pod: PodSummary) -> None:
    """The current pod exists and has not ended: phase and stuck states."""
    p.update(phase=DriverPhase.RUNNING if pod.phase == "Running" else DriverPhase.PENDING)
    gang = conditions.queued(_pod_group(p), pod, p.status.conditions or (), p.now, p.generation)
    if gang is not None:
        p.update(conditions=gang)
    timeout = p.obs.settings.unschedulable_timeout
    verdict = conditions.stuck(pod, p.status.conditions or (), p.now, p.generation, timeout)
    if verdict.event is not None:
        p.event("Warning", REASON_STUCK, verdict.event)
    if verdict.conditions is not None:
        p.update(conditions=verdict.conditions)
    if verdict.requeue_after is not None:
        p.plan.requeue(verdict.requeue_after)


def _pod_group(p: _Pass) -> PodGroupSummary | None:
    """This SparkDriver's PodGroup, as its batch scheduler last wrote its status (None: it has none,
    or its kind is not watched here)."""
    wanted = p.names().pod_group
    return next((g for g in _owned(p.uid, p.obs.pod_groups) if g.name == wanted), None) if wanted else None


# --- Kueue (driver_controller.kueue) ----------------------------------------------------------------

REASON_QUEUED: Final = "Queued"  # Event: Kueue evicted the run; the reason of a Queued condition too
CONDITION_QUEUED_ADMITTED: Final = "Admitted"
# How soon to look again for what a watch will not bring back: a ResourceFlavor or WorkloadPriorityClass
# named but not in the cache (they are read, not watched for changes).
REFERENCE_RETRY_SECONDS: Final = 5.0


def _let_go(plan: Plan[SparkDriverStatus], observed: Observed) -> Plan[SparkDriverStatus]:
    """The SparkDriver is gone or going: its Workloads' finalizers go too (the garbage collector, or
    whoever deleted them, is waiting for that)."""
    patches = [patch for wl in observed.workloads if (patch := kueue.let_go(wl)) is not None]
    if not patches:
        return plan
    return replace(plan, after_status=(*plan.after_status, *patches))


def _workload(p: _Pass) -> kueue.WorkloadSummary | None:
    name = naming.workload_name(p.name)
    return next((w for w in _owned(p.uid, p.obs.workloads) if w.name == name), None)


def _admitted(p: _Pass) -> bool:
    """Whether the run may have pods now: always without a Kueue queue; with one, once Kueue admitted
    its Workload (created here first), with the admission's placement put into ``p.driver``. An evicted
    run's pods are stopped and its quota handed back; the next admission starts a new incarnation."""
    queue = kueue.queue_name(p.driver)
    if queue is None:
        return True
    wl = _workload(p)
    if wl is None:
        _create_workload(p, queue)
        return False
    if wl.evicted or wl.deleting:
        _evicted(p, wl)
        return False
    if not wl.admitted:
        reason, message = wl.waiting_reason()
        _queued(p, "True", reason, f"Workload {wl.name} waits in LocalQueue {queue}: {message}")
        return False
    where = kueue.placements(wl, p.obs.flavors)
    if isinstance(where, str):
        message = f"Workload {wl.name} was admitted on ResourceFlavor {where}, which this operator cannot read yet"
        _queued(p, "True", "FlavorNotFound", message)
        p.plan.requeue(REFERENCE_RETRY_SECONDS)
        return False
    p.driver = kueue.placed(p.driver, where)
    old = next((c for c in p.status.conditions or () if c.type == conditions.CONDITION_QUEUED), None)
    if old is not None and old.status == "True":
        _queued(
            p, "False", CONDITION_QUEUED_ADMITTED, f"Workload {wl.name} admitted by ClusterQueue {wl.cluster_queue}"
        )
    return True


def _queued(p: _Pass, status: Literal["True", "False"], reason: str, message: str) -> None:
    current = p.status.conditions or ()
    p.update(
        conditions=conditions.set_condition(
            current, conditions.CONDITION_QUEUED, status, reason, message, p.now, p.generation
        )
    )


def _create_workload(p: _Pass, queue: str) -> None:
    expected = naming.workload_name(p.name)
    refusal = refused(p.obs.refusals, Create({"kind": "Workload", "metadata": {"name": expected}}))
    if refusal is not None:
        message = refusal.message
        if refusal.code == 404:
            # The API server's answer is a bare "404 page not found": what it means says more.
            message = (
                f"the cluster does not serve Kueue's Workloads ({kueue.API_VERSION}): install Kueue v0.17 or "
                f"later, or remove the label {labels.KUEUE_QUEUE_NAME}"
            )
        reason = refusal.reason if refusal.code == 409 else REASON_SUBMISSION_FAILED
        p.status = _refusal_status(p.old_status, p.name, p.generation, p.now, p.incarnation, reason, message)
        p.event("Warning", REASON_SUBMISSION_FAILED, f"Workload {expected} refused: {message}")
        return
    priority: int | None = None
    wanted_class = kueue.priority_class(p.driver)
    if wanted_class is not None:
        priority = p.obs.priority_classes.get(wanted_class)
        if priority is None:
            label = labels.KUEUE_PRIORITY_CLASS
            message = f"WorkloadPriorityClass {wanted_class} ({label}) is not known to this operator yet"
            _queued(p, "True", "PriorityClassNotFound", message)
            p.plan.requeue(REFERENCE_RETRY_SECONDS)
            return
    try:
        objects = render(p.driver, p.incarnation, p.obs.settings.render)
    except (InvalidSpec, ValueError) as exc:
        _invalid_spec(p, str(exc))
        return
    assert objects.pod_sets is not None  # the queue label asks for them
    owner = owner_reference(p.driver, controller=True)
    p.plan.creates.append(Create(kueue.workload(p.driver, objects.pod_sets, owner, priority), "QueuedInKueue"))
    _queued(p, "True", "Pending", f"Workload {expected} created in LocalQueue {queue}: waiting for Kueue to admit it")
    p.update(phase=DriverPhase.PENDING)


def _evicted(p: _Pass, wl: kueue.WorkloadSummary) -> None:
    """Kueue evicted the run (or its Workload is being deleted): stop its current driver pod (a new
    incarnation, whose pod waits for the next admission; the stale one and its executors are deleted
    by _stale and _executors), and once none of its pods is left, hand the quota back (a deleted
    Workload: let it go; the next pass creates another)."""
    evicted = wl.condition(kueue.EVICTED) or {}
    if wl.deleting:
        reason, why = "WorkloadDeleted", f"Workload {wl.name} is being deleted"
    else:
        reason, why = str(evicted.get("reason") or "Evicted"), str(evicted.get("message") or "")
    pod_name = naming.driver_pod_name(p.name, p.incarnation)
    known = p.status.driverPod
    if p.driver_pod(p.incarnation) is not None or (known is not None and known.name == pod_name):
        message = f"Kueue evicted Workload {wl.name} ({reason}: {why}); the driver pod and its executors are stopped"
        p.record(p.incarnation, pod_name, IncarnationOutcome.LOST, f"Kueue{reason}", message)
        p.update(queueEvictions=(p.status.queueEvictions or 0) + 1)
        p.event("Warning", REASON_QUEUED, f"{message}; the run waits for Kueue to admit it again")
        _start_incarnation(p, p.incarnation + 1)
    running = [pod for pod in p.owned_pods if pod.phase not in ("Succeeded", "Failed")]
    if not running and wl.deleting:
        finalizer = kueue.let_go(wl)
        if finalizer is not None:
            p.plan.patches.append(finalizer)
    elif not running and wl.holds_quota:
        body = kueue.released_status(wl, p.now)
        version = wl.resource_version
        p.plan.patches.append(
            Patch(kueue.API_VERSION, "Workload", wl.name, body, version, "QuotaReleased", subresource="status")
        )
    waiting = f"{len(running)} pod(s) still stopping" if running else "its quota handed back"
    message = f"Workload {wl.name} evicted ({reason}: {why}); {waiting}; waiting for Kueue to admit it again"
    _queued(p, "True", f"Kueue{reason}", message)
    p.update(phase=DriverPhase.PENDING)


def _workload_finished(p: _Pass) -> None:
    """The driver has ended: the Workload says so, and Kueue frees its quota."""
    if kueue.queue_name(p.driver) is None:
        return
    wl = _workload(p)
    if wl is None:
        return
    if wl.finished:
        finalizer = kueue.let_go(wl)
        if finalizer is not None:
            p.plan.patches.append(finalizer)
        return
    succeeded = p.status.phase is DriverPhase.SUCCEEDED
    message = f"SparkDriver {p.name} {p.status.phase.value.lower() if p.status.phase else 'ended'}"
    body = kueue.finished_status(wl, succeeded, message, p.now)
    p.plan.patches.append(
        Patch(kueue.API_VERSION, "Workload", wl.name, body, wl.resource_version, "RunEnded", subresource="status")
    )


def _create_missing(p: _Pass) -> None:
    """What the current incarnation lacks: ConfigMaps, Service and NetworkPolicy before the pod (the pod
    mounts the ConfigMaps; its executors are never without their policy). The incarnation is rendered
    only when the pod, a ConfigMap or the Service is missing; the NetworkPolicy is built on its own
    (:func:`render.network_policy`), so a pass can compare it with the one it sees, and put back an edit."""
    uid = p.uid
    expected = p.names()
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
        if pod_missing and objects.pod_disruption_budget is not None:
            # Before the pod too, and the same for every incarnation: a drain never finds it unprotected.
            p.plan.creates.append(Create(objects.pod_disruption_budget, why, concurrent=True))
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
            if (p.status.driverPod.name if p.status.driverPod else None) != expected.pod:
                p.update(driverPod=DriverPodInfo(name=expected.pod))
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
    p.update(webUIAddress=expected.web_ui_address, sparkApplicationId=naming.spark_app_id(uid, p.incarnation))


def _refused(p: _Pass, expected: IncarnationNames, policy: Ensure | None) -> bool:
    """An object of the current incarnation the API server refused to create (a quota, an admission
    policy, a name held by an object that is not ours, a PodGroup kind the cluster does not serve, a
    NetworkPolicy the operator's RBAC does not allow): SubmissionFailed, nothing more created; the apps
    controller decides whether to run again."""

    def create(kind: str, name: str) -> Create:
        return Create({"kind": kind, "metadata": {"name": name}})

    wanted: list[Create | Ensure] = [create("PodGroup", expected.pod_group)] if expected.pod_group else []
    wanted.append(create("PodDisruptionBudget", naming.driver_pdb_name(p.name)))
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
                f"the cluster does not serve PodGroups of spec.batchScheduler {p.driver.spec.batchScheduler}: "
                "install that scheduler's CRDs, or remove spec.batchScheduler"
            )
        p.status = _refusal_status(p.old_status, p.name, p.generation, p.now, p.incarnation, reason, message)
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


def _invalid_spec(p: _Pass, message: str) -> None:
    """A spec spark-submit would refuse: SubmissionFailed, nothing created."""
    pod_name = naming.driver_pod_name(p.name, p.incarnation)
    p.status = with_submission_failed(p.status, p.now, REASON_INVALID_SPEC, message, p.incarnation, pod_name)
    p.event("Warning", REASON_INVALID_SPEC, message)


def _deletes_finished_executors(driver: SparkDriver) -> bool:
    """``spark.kubernetes.executor.deleteOnTermination`` (the typed field wins over sparkConf, as in
    :mod:`driver_controller.submission`): false asks to keep finished executor pods, e.g. for their logs."""
    typed = driver.spec.executor.deleteOnTermination
    if typed is not None:
        return typed
    value = (driver.spec.sparkConf or {}).get("spark.kubernetes.executor.deleteOnTermination")
    return value is None or value.strip().lower() != "false"


def _spark_cleanup_left(p: _Pass) -> float | None:
    """Seconds left for Spark to delete the ended driver's executors itself, or None when the
    controller deletes them now. A driver JVM that exited by itself stopped its SparkContext, which
    deletes the executors (also from its shutdown hook); a driver killed (SIGKILL, OOMKilled), lost or
    never started left them to us."""
    term, ended_at = p.status.termination, p.status.completionTime
    if term is None or term.exitCode is None or ended_at is None:
        return None
    if term.exitCode in KILLED_EXIT_CODES or term.reason == "OOMKilled":
        return None
    left = (ended_at - p.now).total_seconds() + EXECUTOR_CLEANUP_GRACE_SECONDS
    return left if left > 0 else None


def _executors(p: _Pass) -> None:
    """Count and clean up executors. Once the driver has ended, the last incarnation's executors
    are deleted too (finished ones are kept when deleteOnTermination is false), and the counts are of
    those that stay: what status keeps for good."""
    counts = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0, "unknown": 0}
    over = p.ended
    keep_finished = not _deletes_finished_executors(p.driver)
    cleanup_left = _spark_cleanup_left(p) if over else None
    for pod in p.owned_pods:
        if pod.role != labels.ROLE_EXECUTOR:
            continue
        if pod.incarnation < p.incarnation:
            if not pod.deleting:
                p.plan.deletes.append(deletion("Pod", pod.name, pod.uid))
            continue
        finished = pod.phase in ("Succeeded", "Failed")
        if over and (pod.deleting or not (finished and keep_finished)):
            if pod.deleting:
                continue
            if cleanup_left is not None:
                p.plan.requeue(cleanup_left)  # Spark's own clean-up has this long to delete it
            else:
                p.plan.deletes.append(deletion("Pod", pod.name, pod.uid, DRIVER_ENDED))
            continue
        key = pod.phase.lower() if pod.phase.lower() in counts else "unknown"
        counts[key] += 1
    p.update(executors=ExecutorCounts(**counts))


def _stale(p: _Pass) -> None:
    """Pods, ConfigMaps, Services and NetworkPolicies of earlier incarnations (and the last incarnation's
    NetworkPolicy once the driver has ended); finalizers of recorded outcomes."""
    recorded = {r.incarnation for r in p.status.incarnations or ()}
    terminal = p.ended
    for pod in p.owned_pods:
        if pod.role == labels.ROLE_EXECUTOR:
            continue
        stale = pod.incarnation < p.incarnation
        if stale and pod.incarnation not in recorded:
            # Its loss was never written (a crash between create and status write): record it now.
            lost = _lost_reason(pod) or ("Replaced", "superseded by a later incarnation")
            p.record(pod.incarnation, pod.name, IncarnationOutcome.LOST, *lost)
        has_finalizer = labels.DRIVER_OUTCOME_FINALIZER in pod.finalizers
        if has_finalizer and (stale or terminal):
            p.plan.patches.append(release(pod, "outcome recorded"))
        if stale and not pod.deleting:
            p.plan.deletes.append(deletion("Pod", pod.name, pod.uid))
    uid = p.uid
    for obj in [*_owned(uid, p.obs.config_maps), *_owned(uid, p.obs.services)]:
        if obj.incarnation < p.incarnation and not obj.deleting:
            p.plan.deletes.append(deletion(obj.kind, obj.name, obj.uid))
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
            api_version = NETWORK_POLICIES.api_version
            p.plan.deletes.append(deletion("NetworkPolicy", policy.name, policy.uid, why, api_version))


def _last_error(p: _Pass) -> None:
    """lastError says why a driver failed to submit, or why it is slow: a transient error (5xx,
    timeout) the handler met applying an earlier plan, recorded on this pass. Without churn: the same
    error again leaves it as it is (its time stays the first one), and it is dropped only when the
    phase changes, in a write that happens anyway."""
    old = p.old_status
    if p.status.lastError != old.lastError:
        return  # this pass set it (an invalid spec, a refused create)
    if p.status.phase != old.phase:
        p.update(lastError=None)
    error = p.obs.transient_error
    if error is None or p.ended:
        return
    recorded = p.status.lastError
    said = (recorded.reason, recorded.message) if recorded is not None else (None, None)
    if said != (error.get("reason"), error.get("message")):
        p.update(lastError=LastError.model_validate(dict(error)))


def _finish_status(p: _Pass) -> None:
    if p.generation is not None:
        p.update(observedGeneration=p.generation)
    _last_error(p)
    if p.status != p.old_status:
        p.plan.status = p.status
        p.plan.status_can_wait = progress_only(p.old_status, p.status) or (
            first_pod_only(p.old_status, p.status) and not p.plan.events
        )


def _frozen_status(p: _Pass) -> None:
    """The SparkDriver had already ended: its status stays as the pass that ended it wrote it (executors
    deleted afterwards, a released finalizer, a late pod change write nothing). A spec change is
    acknowledged, and nothing else: observedGeneration moves."""
    generation = p.generation
    if generation is not None and p.old_status.observedGeneration != generation:
        p.plan.status = p.old_status.model_copy(update={"observedGeneration": generation})


def _refusal_status(
    status: SparkDriverStatus,
    name: str,
    generation: int | None,
    now: datetime,
    incarnation: int,
    reason: str,
    message: str,
) -> SparkDriverStatus:
    """``status`` (as read) after the API server refused one of the incarnation's objects: the
    incarnation SubmissionFailed, no driver pod."""
    status = status.model_copy(update={"incarnation": incarnation, "driverPod": None})
    if generation is not None:
        status = status.model_copy(update={"observedGeneration": generation})
    pod_name = naming.driver_pod_name(name, incarnation)
    return with_submission_failed(status, now, reason, message, incarnation, pod_name)


def submission_failed(
    observed: Observed, now: datetime, incarnation: int, reason: str, message: str
) -> SparkDriverStatus:
    """The status after the API server refused one of the incarnation's objects (422/403/400):
    SubmissionFailed with lastError; the apps controller decides whether to retry with a new run."""
    assert observed.driver is not None
    meta = observed.driver.get("metadata") or {}
    status = read_status(observed.driver)
    return _refusal_status(status, str(meta["name"]), meta.get("generation"), now, incarnation, reason, message)
