"""The steps of a driver's decision for a run taken over from kubeflow's operator (a live swap:
docs/migrating-from-kubeflow.md): its first incarnation is the driver pod kubeflow's ``spark-submit``
made (``spec.adoptDriverPod``, which the apps controller sets from ``apps_controller.takeover``), not
one of ours.

:func:`adopt_driver_pod` claims that pod, and the executors its driver made, as the incarnation's: one
JSON patch each, which tests the pod's uid and resourceVersion (so it claims exactly the pod observed,
as observed, or nothing) and adds sparkop's labels for the SparkDriver and incarnation 1 (bringing it
into the driver controller's pod cache), a reference to the SparkDriver (never the controller one: the
SparkApplication stays the driver pod's controller, its driver pod the executors'), and, on the driver
pod, the outcome finalizer. ``app.kubernetes.io/managed-by`` is not added: the pod stays in the
selection of what kubeflow left (``domain.labels.KUBEFLOW_LEFT_PODS``) until it is gone, so a pass never
takes a pod it claimed a moment ago, and that its own cache does not show yet, for a pod lost. Until
the claim shows, the pass follows the pod as the other selection shows it: its phase, its exit, its log
tail are recorded like any incarnation's (``pod.follow_driver_pod``).

:func:`made_elsewhere` stops the decision before ``create.create_missing`` for that incarnation: its pod,
ConfigMaps and Service are spark-submit's. A pod that is gone before it was claimed lost its outcome with
it: the incarnation is lost, and replaced under maxDriverPodReplacements like any lost driver pod (the
next incarnation is sparkop's own).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from sparkop.api.models import DriverPodInfo
from sparkop.core.jsontypes import JSON
from sparkop.core.plan import Patch
from sparkop.domain import labels
from sparkop.driver_controller.facts import Continue, Facts, Outcome, Stop, Why
from sparkop.driver_controller.summaries import PodSummary
from sparkop.driver_controller.templates import owner_reference, sparkop_labels

ADOPTED_INCARNATION: Final = 1
CLAIMED: Final = "AdoptDriverPod"  # the decision line's reason
# Executors the adopted driver makes later are not in the driver controller's pod cache until claimed,
# and their arrival asks for no pass: a live adopted driver is looked at again this often to claim them.
EXECUTORS_RECHECK_SECONDS: Final = 5.0


def adopt_driver_pod(f: Facts) -> Outcome:
    """The adopted incarnation's pod and executors, claimed and followed (module docstring)."""
    wanted = f.driver.spec.adoptDriverPod
    if wanted is None or f.incarnation != ADOPTED_INCARNATION:
        return Continue(f)
    left = f.observed.left_pods
    pod = next((p for p in left if p.uid == wanted.uid and p.role == labels.ROLE_DRIVER), None)
    if pod is None:
        known = f.status.driverPod
        if f.driver_pod(ADOPTED_INCARNATION) is None and (known is None or not known.uid):
            # Gone before it was claimed: follow_driver_pod records it lost, as a pod it had seen.
            return Continue(f.update(driverPod=DriverPodInfo(name=wanted.name, uid=wanted.uid)))
        return Continue(f)
    executors = [
        p
        for p in left
        if p.role == labels.ROLE_EXECUTOR and pod.app_selector is not None and p.app_selector == pod.app_selector
    ]
    ours = {p.uid for p in f.owned_pods}
    mine = [p for p in (pod, *executors) if p.uid not in ours]
    # One on its way out is followed, not claimed: the API server takes no new finalizer on it.
    claims = tuple(_claim(f, p) for p in mine if p.owner_uid != f.uid and not p.deleting)
    label = sparkop_labels(f.driver, ADOPTED_INCARNATION)[labels.DRIVER]
    as_claimed = tuple(replace(p, incarnation=ADOPTED_INCARNATION, owner_uid=f.uid, driver=label) for p in mine)
    f = f.with_pods(as_claimed).before(*claims)
    if pod.app_selector:
        f = f.update(sparkApplicationId=pod.app_selector)
    if not pod.finished and not f.ended:
        f = f.requeue(EXECUTORS_RECHECK_SECONDS)
    return Continue(f)


def made_elsewhere(f: Facts) -> Outcome:
    """The adopted incarnation's objects are spark-submit's: nothing of it is created here."""
    if f.driver.spec.adoptDriverPod is not None and f.incarnation == ADOPTED_INCARNATION:
        return Stop(f, Why.ADOPTED)
    return Continue(f)


def _claim(f: Facts, pod: PodSummary) -> Patch:
    """One JSON patch that claims ``pod`` for the SparkDriver as observed, or fails (422: looked at again)."""
    ops: list[JSON] = [
        {"op": "test", "path": "/metadata/uid", "value": pod.uid},
        {"op": "test", "path": "/metadata/resourceVersion", "value": pod.resource_version},
    ]
    for key, value in sparkop_labels(f.driver, ADOPTED_INCARNATION).items():
        if key != labels.MANAGED_BY:
            ops.append({"op": "add", "path": f"/metadata/labels/{_pointer(key)}", "value": value})
    ops.append(
        {"op": "add", "path": "/metadata/ownerReferences/-", "value": owner_reference(f.driver, controller=False)}
    )
    if pod.role == labels.ROLE_DRIVER and labels.DRIVER_OUTCOME_FINALIZER not in pod.finalizers:
        if pod.finalizers:
            ops.append({"op": "add", "path": "/metadata/finalizers/-", "value": labels.DRIVER_OUTCOME_FINALIZER})
        else:
            ops.append({"op": "add", "path": "/metadata/finalizers", "value": [labels.DRIVER_OUTCOME_FINALIZER]})
    return Patch("v1", "Pod", pod.name, ops, pod.resource_version, CLAIMED, concurrent=True)


def _pointer(key: str) -> str:
    """A label key as a JSON pointer's segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


__all__ = ["EXECUTORS_RECHECK_SECONDS", "adopt_driver_pod", "made_elsewhere"]
