"""The steps of a driver's decision that follow its driver pod: which incarnation is current
(:func:`recover_incarnation`), and what its pod says (:func:`follow_driver_pod`): its outcome once it
finished by itself, a loss (a replacement starts, or, the replacements used up, the driver fails), or
how it runs (stuck, or its gang queued: :mod:`driver_controller.conditions`).
"""

from __future__ import annotations

from typing import Final, Literal

from sparkop.api.models import DriverPhase, DriverPodInfo, IncarnationOutcome, Termination
from sparkop.domain import labels, naming
from sparkop.driver_controller import conditions, events
from sparkop.driver_controller.facts import Continue, Facts, Outcome, Stop, Why, stop_if_ended
from sparkop.driver_controller.summaries import DISRUPTION_REASONS, PodGroupSummary, PodSummary, Terminated

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
# What the kubelet's FallbackToLogsOnError makes a failed container's termination message: the end of its
# log, at most 80 lines and 2,048 bytes.
FALLBACK_LOG_LINES: Final = 80
FALLBACK_LOG_CHARS: Final = 2048


# ---------------------------------------------------------------------------------------------------
# the steps


def recover_incarnation(f: Facts) -> Outcome:
    """The current incarnation: max(status, highest incarnation label among our driver pods); the
    first one starts here. A driver that has ended goes no further."""
    labelled = [pod.incarnation for pod in f.owned_pods if pod.role != labels.ROLE_EXECUTOR]
    recorded = f.status.incarnation
    incarnation = max([recorded, *labelled])
    f = f.at_incarnation(incarnation)
    if incarnation == 0 and not f.ended:
        f = f.start_incarnation(1)
    elif incarnation > recorded:
        # A pod of a later incarnation exists but its status write was lost (crash, conflict) or is
        # still held (the first pod's acceptance may wait: status.first_pod_only): derived as the pass
        # that created it derived it.
        if recorded == 0 and not f.ended:
            f = f.start_incarnation(incarnation)
        pod = f.driver_pod(incarnation)
        f = f.update(
            incarnation=incarnation,
            sparkApplicationId=naming.spark_app_id(f.uid, incarnation),
            driverPod=DriverPodInfo(name=pod.name if pod is not None else f.pod_name),
        )
    return stop_if_ended(f)


def follow_driver_pod(f: Facts) -> Outcome:
    """What the current incarnation's driver pod says: its outcome (the driver has ended), its loss
    (replaced, or the driver fails), or how it runs. Not created yet, or not in the cache yet:
    nothing to follow (create_missing (re)creates it). An outcome or a loss is recorded with the end of
    the pod's log, read first (the decision stops for it and follows at once with what was read)."""
    pod = f.driver_pod(f.incarnation)
    known = f.status.driverPod
    # status.driverPod is the current incarnation's (a new incarnation starts without one), and has a
    # uid once a pass saw that pod.
    seen = known is not None and bool(known.uid)
    if pod is None and not seen:
        return Continue(f)
    pod_name = pod.name if pod is not None else (known.name if known is not None and known.name else f.pod_name)
    had_executors = any(o.role == labels.ROLE_EXECUTOR and o.incarnation == f.incarnation for o in f.owned_pods)
    loss = lost_reason(pod, had_executors)
    if loss is not None:
        f, tail = f.log_tail(pod)
        if tail is None:
            return Stop(f, Why.READING_LOG)
        return stop_if_ended(_lost(f, pod_name, *loss, log_tail=tail))
    assert pod is not None
    info = pod_info(pod, known)
    ending = outcome(pod)
    if ending is None:
        return Continue(_running(f, pod, info))
    phase, termination = ending
    # A real kubelet reports the driver container terminated while the pod's phase still says Running
    # (the phase turns terminal only once the sandbox is torn down), and this status is final from here
    # on: record the phase the pod is about to reach.
    f = f.update(driverPod=info.model_copy(update={"phase": phase.value}))
    default = "Completed" if phase is DriverPhase.SUCCEEDED else "Error"
    reason = (termination.reason if termination is not None else None) or default
    message = f"driver pod {pod_name} {phase.value.lower()}"
    if termination is not None and termination.exitCode is not None:
        message += f" with exit code {termination.exitCode}"
    f, tail = f.log_tail(pod)
    if tail is None:
        return Stop(f, Why.READING_LOG)
    read = f.observed.logs.get(pod.uid)
    termination = told_by_log(termination, read.text if read is not None else None)
    return Stop(_terminal(f, phase, termination, reason, message, pod_name, tail), Why.FINISHED)


# ---------------------------------------------------------------------------------------------------
# what a pod says


def termination(term: Terminated | None, pod: PodSummary) -> Termination | None:
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


def told_by_log(term: Termination | None, log: str | None) -> Termination | None:
    """A failed driver container's termination with no message says why with the end of ``log`` (its
    log, as read for the incarnation's record), as FallbackToLogsOnError has the kubelet say it for the
    driver pods sparkop makes. Without it the driver's reason would be "exit code 1" alone wherever the
    status is read (the app's errorMessage, kubeflow's clients) for a pod made elsewhere (kubeflow's
    spark-submit made the pod a run taken over adopts) or whose template asks for
    ``terminationMessagePolicy: File``. A message the container wrote is kept."""
    if term is None or term.message or term.exitCode in (None, 0) or not log or not log.strip():
        return term
    lines = log.rstrip("\n").splitlines()[-FALLBACK_LOG_LINES:]
    return term.model_copy(update={"message": "\n".join(lines)[-FALLBACK_LOG_CHARS:]})


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


def lost_reason(pod: PodSummary | None, had_executors: bool = True) -> tuple[str, str] | None:
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


def outcome(pod: PodSummary) -> tuple[DriverPhase, Termination | None] | None:
    """(Succeeded | Failed, termination) once the driver has finished by itself."""
    if pod.init_failure is not None:
        return DriverPhase.FAILED, termination(pod.init_failure, pod)
    if not pod.finished:
        return None
    term = pod.terminated
    ok = term.exit_code == 0 if term is not None else pod.phase == "Succeeded"
    return (DriverPhase.SUCCEEDED if ok else DriverPhase.FAILED), termination(term, pod)


def pod_info(pod: PodSummary, known: DriverPodInfo | None = None) -> DriverPodInfo:
    """The current driver pod, as status names it; the times the run's timeouts count from
    (:mod:`driver_controller.timeouts`) kept from ``known``, what status said of the same pod."""
    kept = known if known is not None and known.name == pod.name else None
    return DriverPodInfo(
        name=pod.name,
        uid=pod.uid,
        phase=pod.phase,
        nodeName=pod.node_name or None,
        podIP=pod.pod_ip or None,
        startTime=pod.start_time,
        ready=(pod.ready and not pod.finished) or None,
        createdTime=kept.createdTime if kept is not None else None,
        runningTime=kept.runningTime if kept is not None else None,
        readyTime=kept.readyTime if kept is not None else None,
    )


# ---------------------------------------------------------------------------------------------------
# what follows from it


def _terminal(
    f: Facts, phase: DriverPhase, term: Termination | None, reason: str, message: str, pod_name: str, log_tail: str
) -> Facts:
    f = f.update(phase=phase, completionTime=f.now)
    if term is not None:
        f = f.update(termination=term)
    f = f.record(f.incarnation, pod_name, IncarnationOutcome(phase.value), reason, message, log_tail)
    event_type: Literal["Normal", "Warning"] = "Normal" if phase is DriverPhase.SUCCEEDED else "Warning"
    event_reason = {DriverPhase.SUCCEEDED: events.Reason.SUCCEEDED, DriverPhase.FAILED: events.Reason.FAILED}.get(
        phase, events.Reason.SUBMISSION_FAILED
    )
    return f.event(event_type, event_reason, message or f"driver pod {pod_name} {phase.value.lower()}")


def _lost(f: Facts, pod_name: str, reason: str, message: str, *, log_tail: str) -> Facts:
    """The current driver pod went away before it finished: replace it (a pod of the same name, once
    this one is gone), or fail when the replacements are used up."""
    f = f.record(f.incarnation, pod_name, IncarnationOutcome.LOST, reason, message, log_tail)
    # Incarnations Kueue's evictions started are no replacements of lost pods.
    replacements = f.incarnation - 1 - (f.status.queueEvictions or 0)
    limit = f.driver.spec.maxDriverPodReplacements
    if replacements >= limit:
        text = (
            f"driver pod {pod_name} lost ({reason}: {message}); {replacements} replacement(s) used, "
            f"maxDriverPodReplacements={limit}"
        )
        f = f.update(
            phase=DriverPhase.FAILED,
            termination=Termination(reason=events.Reason.POD_LOST, message=text),
            completionTime=f.now,
        )
        return f.event("Warning", events.Reason.POD_LOST, text)
    f = f.event("Warning", events.Reason.POD_LOST, f"driver pod {pod_name} lost ({reason}: {message}); replacing it")
    return f.start_incarnation(f.incarnation + 1)


def _running(f: Facts, pod: PodSummary, info: DriverPodInfo) -> Facts:
    """The current pod exists and has not ended: phase and stuck states."""
    f = f.update(driverPod=info, phase=DriverPhase.RUNNING if pod.phase == "Running" else DriverPhase.PENDING)
    gang = conditions.queued(_pod_group(f), pod, f.status.conditions or (), f.now, f.generation)
    if gang is not None:
        f = f.update(conditions=gang)
    timeout = f.observed.settings.unschedulable_timeout
    verdict = conditions.stuck(pod, f.status.conditions or (), f.now, f.generation, timeout)
    if verdict.event is not None:
        f = f.event("Warning", events.Reason.STUCK, verdict.event)
    if verdict.conditions is not None:
        f = f.update(conditions=verdict.conditions)
    if verdict.requeue_after is not None:
        f = f.requeue(verdict.requeue_after)
    return f


def _pod_group(f: Facts) -> PodGroupSummary | None:
    """This SparkDriver's PodGroup, as its batch scheduler last wrote its status (None: it has none,
    or its kind is not watched here)."""
    wanted = f.names.pod_group
    return next((g for g in f.owned(f.observed.pod_groups) if g.name == wanted), None) if wanted else None


__all__ = [
    "FALLBACK_LOG_CHARS",
    "FALLBACK_LOG_LINES",
    "KILLED_EXIT_CODES",
    "REASON_API_SERVER_UNREACHABLE",
    "follow_driver_pod",
    "lost_reason",
    "outcome",
    "pod_info",
    "recover_incarnation",
    "termination",
    "told_by_log",
]
