"""Taking over an application another operator was running (kubeflow's spark-operator, in a live swap:
docs/migrating-from-kubeflow.md, "Moving a running cluster"). Pure: what to do is decided from the
status that operator left and the driver pods its ``spark-submit`` made; nothing here reads or writes.

kubeflow keeps one driver per run, named ``spec.driver.podName`` or ``<app>-driver`` (the name it gives
every run of the app), controlled by the SparkApplication (an ownerReference with its uid) and labelled
with the run's ``sparkoperator.k8s.io/submission-id`` (``status.submissionID``); ``executionAttempts``
counts its runs, ``submissionAttempts`` the submissions of the current one. sparkop's own status is
told apart by ``lastRun``: sparkop sets it with its first run of an app, and kubeflow never writes it.

:func:`takeover` answers, once per app (the first pass that sees such a status):

- ``None``: nothing to take over. The app is sparkop's (``lastRun`` set), has never run (``NEW``, or
  kubeflow's empty state, with no driver pod of its own: submitted as usual), or is finished
  (``COMPLETED``/``FAILED``: frozen, never written, as every finished app);
- a :class:`Takeover` otherwise: its ``run`` becomes ``status.lastRun`` (so runs are numbered on from
  kubeflow's, and the restart policy counts kubeflow's attempts), and ``adopt`` names the driver pod the
  run goes on with, when kubeflow left one for its current run (``SUBMITTED``, ``RUNNING``, ``UNKNOWN``):
  the apps controller then creates that run's SparkDriver saying so, and the driver controller claims
  the pod as the run's first incarnation instead of creating one: it labels it as its own (which brings
  it into its cache), puts its outcome finalizer on it and a non-controller ownerReference to the
  SparkDriver, with the pod's uid as precondition, and from then on records its outcome like any
  incarnation's. No second driver is made for that run: the pod's name is taken until it is gone.
  Without such a pod (it ended and was deleted while no operator ran), the run is a lost one: the
  state's own step counts it, per the restart policy. In every other state (``PENDING_RERUN``,
  ``FAILING``, ``SUCCEEDING``, ``INVALIDATING``, ``SUBMISSION_FAILED``, ``SUSPENDING``, ``SUSPENDED``,
  ``RESUMING``) the state's own step goes on from the counts, and the next run's pod, named as
  kubeflow's was, is created only once that pod is gone.
- ``submitted``, in the states kubeflow submits from (``NEW``/empty, ``PENDING_RERUN``, ``RESUMING``,
  ``SUBMISSION_FAILED``): the driver pod of a run kubeflow submitted but never wrote. kubeflow's
  spark-submit makes the pod (labelled with a fresh submission id) before the operator writes the run
  into the status, so an operator stopped in between leaves the state it submitted from and a running
  pod that no status names. That pod is the next run's: it is planned as any next run is, adopting the
  pod instead of waiting for its name to be free (which it would be only after the run had ended
  unwatched, and then run again).

``apps_controller.decide`` acts on the answer (``take_over``): the first pass of such an app records the
run and, for a pod to adopt, creates that run's SparkDriver with ``spec.adoptDriverPod`` (the pod's name
and uid: the run's record keeps it too, ``adoptedPod``, so that a create retried after a crash says the
same); ``driver_controller.adoption`` claims the pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from sparkop.api.models import ApplicationState, SparkApplicationStatus
from sparkop.apps_controller.observed import ForeignDriver
from sparkop.apps_controller.status import PLANNING_STATES, TERMINAL_STATES, state

# States in which the other operator's current run may still have its driver pod.
LIVE_RUN_STATES: Final = frozenset({ApplicationState.SUBMITTED, ApplicationState.RUNNING, ApplicationState.UNKNOWN})


@dataclass(frozen=True)
class Takeover:
    run: int  # the run the other operator was at: status.lastRun from this pass on
    adopt: ForeignDriver | None  # the current run's driver pod, to be claimed by that run's SparkDriver
    submitted: ForeignDriver | None = None  # the driver pod of the next run, which kubeflow never wrote


def takeover(
    status: SparkApplicationStatus,
    *,
    app_uid: str,
    submission_id: str | None,
    driver_pod_name: str,
    pods: Sequence[ForeignDriver],
) -> Takeover | None:
    """What to take over of a status another operator left (module docstring); None: nothing.

    ``submission_id`` is the status's ``submissionID`` (None when it has none), ``driver_pod_name`` the
    name kubeflow gives each run's driver pod (the app's ``spec.driver.podName``, else ``<app>-driver``;
    a live run's ``status.driverInfo.podName`` comes first), ``pods`` the foreign driver pods of the app's
    namespace that carry the app's name."""
    current = state(status)
    if status.lastRun > 0 or status.currentDriver is not None:
        return None
    if current in TERMINAL_STATES:
        return None
    run = status.executionAttempts
    if current in PLANNING_STATES:
        made = [
            pod
            for pod in pods
            if pod.name == driver_pod_name
            and pod.controller_uid == app_uid
            # The pod of the run the status names (its id) is the previous run's, on its way out.
            and (submission_id is None or pod.submission_id != submission_id)
        ]
        if made:
            return Takeover(run=run, adopt=None, submitted=made[0])
        if current is ApplicationState.NEW:
            return None  # never run: submitted as usual
    if current not in LIVE_RUN_STATES:
        return Takeover(run=run, adopt=None)
    named = (status.driverInfo.podName if status.driverInfo else None) or driver_pod_name
    ours = [
        pod
        for pod in pods
        if pod.name == named
        and pod.controller_uid == app_uid
        and (submission_id is None or pod.submission_id == submission_id)
    ]
    # A live run was counted when it was submitted; a status whose count was lost still ran once.
    return Takeover(run=max(run, 1), adopt=ours[0] if ours else None)


__all__ = ["LIVE_RUN_STATES", "ForeignDriver", "Takeover", "takeover"]
