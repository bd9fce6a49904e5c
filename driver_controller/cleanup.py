"""What every pass of a SparkDriver that parsed ends with, however far its decision went: the
executors counted and cleaned up (:func:`executors`), and what earlier incarnations left
(:func:`stale_incarnations`).

Spark creates the executors owned by the SparkDriver already (the executor pod template's reference),
so nothing is patched on them. The SparkDriver stays their owner, so once the driver has ended
(Succeeded, Failed, SubmissionFailed) the garbage collector would never delete the last incarnation's
live ones: they are deleted here, after Spark's own clean-up had its moment. Its NetworkPolicy protects
executors: it goes with them.
"""

from __future__ import annotations

from typing import Final

from sparkop.api.models import (
    TIMEOUT_REASONS,
    DriverPhase,
    ExecutorCounts,
    ExecutorState,
    IncarnationOutcome,
    SparkDriver,
)
from sparkop.core.plan import Delete, Patch
from sparkop.core.resources import NETWORK_POLICIES
from sparkop.domain import labels, naming
from sparkop.driver_controller.actions import DRIVER_ENDED, STALE_INCARNATION, deletion, holds, release
from sparkop.driver_controller.facts import Facts
from sparkop.driver_controller.pod import KILLED_EXIT_CODES, lost_reason
from sparkop.driver_controller.podname import LOST_NODE_RECHECK_SECONDS, remove_if_node_lost

# How long the executors of a driver that exited by itself are left to Spark's own clean-up (its
# SparkContext deletes them as it stops) before the controller deletes those still there.
EXECUTOR_CLEANUP_GRACE_SECONDS: Final = 15.0


def executors(f: Facts) -> Facts:
    """Count and clean up executors. Once the driver has ended, the last incarnation's executors are
    deleted too (finished ones are kept when deleteOnTermination is false), and the counts are of those
    that stay: what status keeps for good."""
    counts = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0, "unknown": 0}
    over = f.ended
    keep_finished = not _deletes_finished_executors(f.driver)
    cleanup_left = _spark_cleanup_left(f) if over else None
    deletes: list[Delete] = []
    patches: list[Patch] = []
    for pod in f.owned_pods:
        if pod.role != labels.ROLE_EXECUTOR:
            continue
        if holds(pod) and (over or pod.finished or pod.deleting or pod.incarnation < f.incarnation):
            # Its outcome is counted (spec.executorFailures, in this pass's status): it may go.
            patches.append(release(pod, "executor outcome counted"))
        if pod.incarnation < f.incarnation:
            if not pod.deleting:
                deletes.append(deletion("Pod", pod.name, pod.uid))
            continue
        finished = pod.phase in ("Succeeded", "Failed")
        if over and (pod.deleting or not (finished and keep_finished)):
            if pod.deleting:
                continue
            if cleanup_left is not None:
                f = f.requeue(cleanup_left)  # Spark's own clean-up has this long to delete it
            else:
                deletes.append(deletion("Pod", pod.name, pod.uid, DRIVER_ENDED))
            continue
        key = pod.phase.lower() if pod.phase.lower() in counts else "unknown"
        counts[key] += 1
    f = f.after(*patches, *deletes)
    return f.update(executors=ExecutorCounts(**counts), executorState=executor_states(f))


# An executor pod's phase as kubeflow's executorState says it.
_EXECUTOR_STATE: Final = {
    "Pending": ExecutorState.PENDING,
    "Running": ExecutorState.RUNNING,
    "Succeeded": ExecutorState.COMPLETED,
    "Failed": ExecutorState.FAILED,
}
_EXECUTOR_ENDED: Final = frozenset({ExecutorState.COMPLETED, ExecutorState.FAILED})


def executor_states(f: Facts) -> dict[str, ExecutorState] | None:
    """status.executorState (None: no executor), with kubeflow's values: each executor pod of the current
    incarnation by its phase; one seen before and gone since keeps its last state when it had ended, and
    is UNKNOWN while the driver runs, else COMPLETED when the driver succeeded and FAILED when not. Once
    the driver has ended, every executor has: those still running are given the state they end in (the
    status is final now). Only the ``max_tracked_executors`` lowest executor ids are named."""
    limit = f.observed.settings.max_tracked_executors
    driver_phase = f.status.phase
    if f.ended:
        settled = ExecutorState.COMPLETED if driver_phase is DriverPhase.SUCCEEDED else ExecutorState.FAILED
    else:
        settled = ExecutorState.UNKNOWN if driver_phase is DriverPhase.RUNNING else ExecutorState.FAILED
    states = {
        name: state if state in _EXECUTOR_ENDED else settled for name, state in (f.status.executorState or {}).items()
    }
    ids: dict[str, int] = {}
    for pod in f.owned_pods:
        if pod.role != labels.ROLE_EXECUTOR or pod.incarnation != f.incarnation or pod.executor_id is None:
            continue
        if pod.executor_id > limit:
            continue
        state = _EXECUTOR_STATE.get(pod.phase, ExecutorState.UNKNOWN)
        states[pod.name] = settled if f.ended and state not in _EXECUTOR_ENDED else state
        ids[pod.name] = pod.executor_id
    kept = sorted(states, key=lambda name: (ids.get(name, naming.executor_id_of(name)), name))[:limit]
    return {name: states[name] for name in kept} or None


def stale_incarnations(f: Facts) -> Facts:
    """Pods, ConfigMaps, Services and NetworkPolicies of earlier incarnations (and the last incarnation's
    NetworkPolicy once the driver has ended); finalizers of recorded outcomes."""
    recorded = {r.incarnation for r in f.status.incarnations or ()}
    terminal = f.ended
    timed_out = f.status.termination is not None and f.status.termination.reason in TIMEOUT_REASONS
    for pod in f.owned_pods:
        if pod.role == labels.ROLE_EXECUTOR:
            continue
        stale = pod.incarnation < f.incarnation
        if stale and pod.incarnation not in recorded:
            # Its loss was never written (a crash between create and status write): record it now, with
            # the end of its log (read first: the decision then follows at once), before it may go.
            f, tail = f.log_tail(pod)
            if tail is None:
                continue
            lost = lost_reason(pod) or ("Replaced", "superseded by a later incarnation")
            f = f.record(pod.incarnation, pod.name, IncarnationOutcome.LOST, *lost, tail)
        has_finalizer = labels.DRIVER_OUTCOME_FINALIZER in pod.finalizers
        if has_finalizer and (stale or terminal):
            f = f.after(release(pod, "outcome recorded"))
        if stale and not pod.deleting:
            f = f.after(deletion("Pod", pod.name, pod.uid))
        elif stale:
            # Being deleted, its outcome recorded (the finalizer goes first, in this same pass): its name
            # is the next incarnation's. A lost node's kubelet never finishes it: removed at once; and
            # looked at again now and then, in case its node is lost only after it was deleted.
            f = remove_if_node_lost(f, pod).requeue(LOST_NODE_RECHECK_SECONDS)
        elif terminal and timed_out and not pod.finished and not pod.deleting:
            # A timeout ended the run while its driver ran: the pod goes, also when the pass that ended it
            # died before deleting it.
            f = f.after(deletion("Pod", pod.name, pod.uid, DRIVER_ENDED))
    for obj in [*f.owned(f.observed.config_maps), *f.owned(f.observed.services)]:
        if obj.incarnation < f.incarnation and not obj.deleting:
            f = f.after(deletion(obj.kind, obj.name, obj.uid))
    policies = f.owned(f.observed.network_policies)
    current_name = naming.network_policy_name(f.name, f.incarnation) if policies else ""
    for policy in policies:
        if policy.deleting:
            continue
        # The current incarnation's is known by its name: an edit of its incarnation label is put back
        # (create_missing), not taken for a stale incarnation.
        stale = policy.name != current_name and policy.incarnation < f.incarnation
        # The policy protects executors: none run once the driver has ended (executors deletes them).
        # A frozen status stays as it is: these deletes write nothing else.
        why = STALE_INCARNATION if stale else DRIVER_ENDED if terminal else None
        if why is not None:
            api_version = NETWORK_POLICIES.api_version
            f = f.after(deletion("NetworkPolicy", policy.name, policy.uid, why, api_version))
    return f


def _deletes_finished_executors(driver: SparkDriver) -> bool:
    """``spark.kubernetes.executor.deleteOnTermination`` (the typed field wins over sparkConf, as in
    :mod:`driver_controller.submission`): false asks to keep finished executor pods, e.g. for their logs."""
    typed = driver.spec.executor.deleteOnTermination
    if typed is not None:
        return typed
    value = (driver.spec.sparkConf or {}).get("spark.kubernetes.executor.deleteOnTermination")
    return value is None or value.strip().lower() != "false"


def _spark_cleanup_left(f: Facts) -> float | None:
    """Seconds left for Spark to delete the ended driver's executors itself, or None when the
    controller deletes them now. A driver JVM that exited by itself stopped its SparkContext, which
    deletes the executors (also from its shutdown hook); a driver killed (SIGKILL, OOMKilled), lost or
    never started left them to us."""
    term, ended_at = f.status.termination, f.status.completionTime
    if term is None or term.exitCode is None or ended_at is None:
        return None
    if term.exitCode in KILLED_EXIT_CODES or term.reason == "OOMKilled":
        return None
    left = (ended_at - f.now).total_seconds() + EXECUTOR_CLEANUP_GRACE_SECONDS
    return left if left > 0 else None


__all__ = ["EXECUTOR_CLEANUP_GRACE_SECONDS", "executors", "stale_incarnations"]
