"""One driver pod name at a time (kubeflow's naming: ``spec.driver.podName``, else ``<app>-driver``, for
every run of an app and every incarnation of a run). The next pod of the name is created only once the
last one's outcome and the end of its log are in status and it is gone:

* an earlier incarnation's pod is released and deleted once recorded (``cleanup.stale_incarnations``);
* an earlier run's pod (its SparkDriver ended, controlled by the same app or SparkConnect) is deleted by
  the next run's SparkDriver, which waits for it to go (its outcome is in its own SparkDriver's status);
* a pod on its way out is waited for, whoever's;
* a pod being deleted on a node known lost (its kubelet stopped reporting: it will never finish the
  deletion) is removed at once, grace 0, once its outcome is recorded;
* a pod of the name that is neither ours nor of an earlier run, and not on its way out, refuses the
  submission (``DriverPodNameTaken``, naming the holder and ``spec.driver.podName``).
"""

from __future__ import annotations

from typing import Final

from sparkop.core.plan import Delete
from sparkop.domain import labels
from sparkop.driver_controller import events
from sparkop.driver_controller.actions import deletion
from sparkop.driver_controller.facts import Facts
from sparkop.driver_controller.summaries import PodSummary

# How soon to look again while the next driver pod's name is held by an earlier run's pod on its way out
# (that pod's deletion brings its own SparkDriver a pass, not this one).
NAME_WAIT_SECONDS: Final = 0.5
# How often a pass looks again at its earlier driver pod being deleted, in case its node is lost only
# after the deletion began (a Node's change brings no pass by itself).
LOST_NODE_RECHECK_SECONDS: Final = 5.0
# Why a pod is deleted so that the next driver pod can have its name; why one is removed at once.
NAME_FOR_NEXT_RUN: Final = "NameForNextRun"
NODE_LOST: Final = "NodeLost"


def name_held(f: Facts, name: str) -> tuple[Facts, bool]:
    """Whether the driver pod's name is still held by another pod (the facts with what is done about it:
    a deletion, a removal at once, a look again soon, or the refusal's status)."""
    earlier = [
        pod
        for pod in f.owned_pods
        if pod.role != labels.ROLE_EXECUTOR and pod.name == name and pod.incarnation < f.incarnation
    ]
    if earlier:
        return f, True  # stale_incarnations records, releases and deletes it; its deletion brings a pass
    holder = f.observed.name_holder
    if holder is None:
        return f, False
    pod = holder.pod
    if pod.deleting or holder.going:
        # Never another's; an earlier run's once its own controller has let it go (outcome recorded).
        if holder.same_owner and holder.ended and labels.DRIVER_OUTCOME_FINALIZER not in pod.finalizers:
            f = remove_if_node_lost(f, pod)
        return f.requeue(NAME_WAIT_SECONDS), True
    if holder.same_owner and holder.ended:
        why = f"the next run's driver pod needs its name; its outcome is in SparkDriver {holder.driver}'s status"
        f = f.after(deletion("Pod", pod.name, pod.uid, NAME_FOR_NEXT_RUN)).requeue(NAME_WAIT_SECONDS)
        return f.event("Normal", events.Reason.NAME_FOR_NEXT_RUN, f"deleting driver pod {pod.name}: {why}"), True
    if holder.same_owner:
        return f.requeue(NAME_WAIT_SECONDS), True  # an earlier run still ending: its SparkDriver records it first
    whose = f"the driver pod of SparkDriver {holder.driver}" if holder.driver else "another pod"
    message = (
        f"the driver pod name {name} is held by {whose}, which is not of an earlier run of this one; set "
        "spec.driver.podName to another name, or delete that pod's owner"
    )
    return f.refused(events.Reason.NAME_TAKEN, message).event("Warning", events.Reason.SUBMISSION_FAILED, message), True


def remove_if_node_lost(f: Facts, pod: PodSummary) -> Facts:
    """A driver pod being deleted on a node known lost (its kubelet stopped reporting) is never finished
    by that kubelet: once its outcome is recorded (the caller knows), it is removed at once (grace 0),
    which frees its name. Never before the node is known lost: a kubelet that still runs must stop the
    container first."""
    if pod.node_name not in f.observed.lost_nodes:
        return f
    message = f"driver pod {pod.name} removed at once: its node {pod.node_name} is lost"
    f = f.after(Delete("v1", "Pod", pod.name, pod.uid, NODE_LOST, concurrent=True, grace_seconds=0))
    return f.event("Normal", events.Reason.NODE_LOST, message)


__all__ = ["LOST_NODE_RECHECK_SECONDS", "NAME_FOR_NEXT_RUN", "NAME_WAIT_SECONDS", "NODE_LOST", "name_held"]
