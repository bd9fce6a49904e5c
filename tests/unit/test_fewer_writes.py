"""What keeps an app's API writes few (issue 28), each fact still where a user reads it: progress
held a moment and written once, events posted by one controller, the Spark UI at the driver's own
Service unless something is to reach a Service of its own."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from sparkop.api.models import ApplicationState, DriverPhase, DriverPodInfo, ExecutorCounts, SparkDriverStatus
from sparkop.apps_controller import status as apps_status
from sparkop.apps_controller import ui
from sparkop.apps_controller.decide import decide as reconcile
from sparkop.apps_controller.observed import AppView, UIConfig
from sparkop.core.specs import lenient
from sparkop.domain.status_waits import SETTLE_SECONDS
from sparkop.driver_controller.observed import Observed
from sparkop.driver_controller.status import first_pod_only, status_wait
from sparkop.driver_controller.summaries import PodSummary, summarize_pod
from tests.support.driver_objects import NOW, decided, driver, objects, running, terminated
from tests.support.simulation import SimCluster
from tests.support.specs import PYTHON_PI_SPEC

APP_OWNER = {"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkApplication", "name": "pi", "uid": "app-uid",
             "controller": True}  # fmt: skip


def app_controlled(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "metadata": {**body["metadata"], "ownerReferences": [APP_OWNER]}}


def plan_for(body: dict[str, Any], pods: list[dict[str, Any]] = ()) -> Any:  # type: ignore[assignment]
    _, cms, svcs = objects()
    return decided(Observed.of(body, [summarize_pod(p) for p in pods], cms if pods else [], svcs if pods else []), NOW)


# -- events: one controller states each fact --------------------------------------------------------


def test_a_driver_an_app_controls_leaves_the_facts_the_app_states_to_the_app() -> None:
    direct = plan_for(driver())
    assert [e.reason for e in direct.events] == ["DriverPodCreated"]
    owned = plan_for(app_controlled(driver()))
    assert owned.events == () and owned.status == direct.status  # SparkApplicationSubmitted says it
    pod, _, _ = objects()
    st = direct.status.to_json()
    assert [e.reason for e in plan_for(driver(st), [terminated(pod, 1)]).events] == ["DriverFailed"]
    ended = plan_for(app_controlled(driver(st)), [terminated(pod, 1)])
    assert ended.status is not None and ended.status.phase == "Failed" and ended.events == ()


def test_what_only_the_driver_knows_is_still_posted_on_it() -> None:
    """A lost driver pod's why (DriverPodLost) is the SparkDriver's to say; the app says it was replaced."""
    pod, _, _ = objects()
    st = (plan_for(driver()).status).to_json()
    gone = {**running(pod), "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T11:59:30Z"}}
    plan = plan_for(app_controlled(driver({**st, "driverPod": {"name": "pi-driver", "uid": "pod-1"}})), [gone])
    assert [e.reason for e in plan.events] == ["DriverPodLost"]


# -- progress that can wait, and for how long (domain.status_waits) --------------------------------


def pod_at(phase: str = "Pending", *, created: str, scheduled: str | None = None) -> PodSummary:
    """The driver pod (or an executor) in ``phase``, created and scheduled at the times given (RFC 3339)."""
    pod, _, _ = objects()
    bound = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}] if scheduled else []
    meta = {**pod["metadata"], "creationTimestamp": created}
    return summarize_pod({**pod, "metadata": meta, "status": {"phase": phase, "conditions": bound}})


PENDING = lenient(SparkDriverStatus, {"phase": "Pending", "incarnation": 1, "driverPod": {"name": "pi-1-driver"}})
SCHEDULED = PENDING.model_copy(update={"driverPod": DriverPodInfo(name="pi-1-driver", uid="u", nodeName="n")})
RUNNING = SCHEDULED.model_copy(update={"phase": DriverPhase.RUNNING})
READY = RUNNING.model_copy(update={"driverPod": DriverPodInfo(name="pi-1-driver", uid="u", nodeName="n", ready=True)})
COUNTED = RUNNING.model_copy(update={"executors": ExecutorCounts(running=2)})
ASKED = RUNNING.model_copy(update={"executors": ExecutorCounts(pending=2)})


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


# (old, new, driver pod, executors) -> seconds the write may still wait
WAITS = [
    # the same pod's progress in the same phase: 30 s from its last step
    (PENDING, SCHEDULED, pod_at(created=ago(5)), [], 25.0),
    (PENDING, SCHEDULED, pod_at(created=ago(40), scheduled=ago(2)), [], 28.0),
    (PENDING, SCHEDULED, pod_at(created=ago(40)), [], 0.0),  # its last step long ago: at once
    (PENDING, SCHEDULED, None, [], 30.0),  # the pod this pass creates: from now
    (PENDING, SCHEDULED, pod_at(created=ago(-5)), [], 0.0),  # a clock ahead of ours holds nothing
    # a phase, readiness, a new pod, an outcome, a generation: at once
    (SCHEDULED, RUNNING, pod_at(created=ago(1)), [], 0.0),
    (RUNNING, READY, pod_at(created=ago(1)), [], 0.0),
    (PENDING.model_copy(update={"driverPod": None}), PENDING, None, [], 0.0),
    (RUNNING, RUNNING.model_copy(update={"phase": DriverPhase.SUCCEEDED}), None, [], 0.0),
    (COUNTED, COUNTED.model_copy(update={"incarnation": 2}), None, [], 0.0),
    (RUNNING, COUNTED.model_copy(update={"observedGeneration": 2}), None, [], 0.0),
    # executors running, ended or gone: written by the pass that sees them
    (RUNNING, COUNTED, None, [pod_at("Running", created=ago(1))] * 2, 0.0),
    (ASKED, COUNTED, None, [pod_at("Running", created=ago(1))] * 2, 0.0),
    (COUNTED, RUNNING, None, [], 0.0),
    # executors asked for, not running yet: 3 s from the oldest one's creation
    (RUNNING, ASKED, None, [pod_at(created=ago(1)), pod_at(created=ago(0))], 2.0),
    (RUNNING, ASKED, None, [pod_at(created=ago(4)), pod_at(created=ago(0))], 0.0),
    (
        COUNTED,
        COUNTED.model_copy(update={"executors": ExecutorCounts(running=1, pending=1)}),
        None,
        [pod_at(created=ago(0))],
        0.0,
    ),
]


@pytest.mark.parametrize(("old", "new", "driver_pod", "executors", "seconds"), WAITS)
def test_what_a_sparkdriver_may_hold_back_and_for_how_long(
    old: SparkDriverStatus, new: SparkDriverStatus, driver_pod: PodSummary | None, executors: list[PodSummary],
    seconds: float,
) -> None:  # fmt: skip
    assert status_wait(old, new, NOW, driver_pod, executors, announced=False) == seconds


def test_the_first_pods_acceptance_can_wait_and_the_next_pass_derives_it_again() -> None:
    """The pass that creates an app's first driver pod may hold its status (Pending, incarnation 1,
    the pod named): the pass the pod's watch event brings, with that status still unwritten, arrives
    at the same status, start time included; the pod's Running is written at once and carries it."""
    created = plan_for(app_controlled(driver()))
    assert [a.kind for a in created.before_status][-1] == "Pod"
    # The pod this pass creates is not in the cache yet: counted from now.
    assert created.status is not None and created.status_wait == SETTLE_SECONDS and created.events == ()
    pod, _, _ = objects()
    pod = {**pod, "metadata": {**pod["metadata"], "creationTimestamp": ago(2)}}
    again = plan_for(app_controlled(driver()), [pod])
    assert again.status is not None and again.status_wait == SETTLE_SECONDS - 2 and again.before_status == ()
    first = created.status.to_json()
    assert {k: v for k, v in again.status.to_json().items() if k != "driverPod"} == {
        k: v for k, v in first.items() if k != "driverPod"
    }
    assert again.status.driverPod is not None and again.status.driverPod.name == first["driverPod"]["name"]
    up = plan_for(app_controlled(driver()), [running(pod)])
    assert up.status is not None and up.status.phase is DriverPhase.RUNNING and up.status_wait == 0
    assert up.status.startTime == created.status.startTime
    # A SparkDriver created directly has its DriverPodCreated event, which goes out with the write: at once.
    direct = plan_for(driver())
    assert [e.reason for e in direct.events] == ["DriverPodCreated"] and direct.status_wait == 0
    # Only over a status no pass has written: a replacement's new incarnation is written at once.
    replaced = lenient(SparkDriverStatus, {**first, "incarnation": 1}).model_copy(update={"incarnation": 2})
    assert not first_pod_only(lenient(SparkDriverStatus, first), replaced)


def test_an_apps_first_sight_of_its_sparkdriver_can_wait_and_its_counts_cannot() -> None:
    c = SimCluster(spec={**PYTHON_PI_SPEC, "restartPolicy": {"type": "Never"}}, name="pi")
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.PENDING)
    c.run_until_quiet()
    accepted = c.app_status
    assert accepted.executionAttempts == 1
    observed, _ = c.observed()
    drv = replace(observed.drivers[0], phase=DriverPhase.RUNNING)
    plan = reconcile(replace(observed, drivers=(drv,)), c.now)
    assert plan.status is not None and apps_status.state(plan.status) is ApplicationState.RUNNING
    # A state, with its event and its start latency: at once.
    assert plan.status_wait == 0 and [e.reason for e in plan.events] == ["SparkApplicationRunning"]
    running_ = replace(observed, status=plan.status)
    counted = reconcile(replace(running_, drivers=(replace(drv, executors={"running": 2}),)), c.now)
    # The counts its SparkDriver reported: at once (the SparkDriver held what could wait).
    assert counted.status is not None and counted.status.executors.running == 2
    assert counted.status_wait == 0 and counted.events == ()
    # That the run's SparkDriver exists (its name, and its uid as the run's submission id, which kubeflow
    # writes with SUBMITTED): until 30 s after its creation, or with the first thing it reports.
    assert accepted.currentDriver == drv.name and accepted.submissionID == drv.uid
    unseen = accepted.model_copy(update={"currentDriver": None, "submissionID": None})
    created = drv.created
    assert created is not None
    assert apps_status.status_wait(unseen, accepted, created + timedelta(seconds=10), created) == 20.0
    assert apps_status.status_wait(unseen, accepted, created + timedelta(seconds=31), created) == 0.0
    more = accepted.model_copy(update={"executors": ExecutorCounts(running=1)})
    assert apps_status.status_wait(unseen, more, created, created) == 0.0
    ended = replace(observed.drivers[0], phase=DriverPhase.SUCCEEDED, exit_code=0)
    done = reconcile(replace(observed, drivers=(ended,)), c.now + timedelta(seconds=1))
    # The run's end and the policy's final word in one write.
    assert done.status is not None and apps_status.state(done.status) is ApplicationState.COMPLETED
    assert done.status_wait == 0
    # SUCCEEDING is never shown: one event for the transition a user sees, saying both.
    assert [(e.reason, e.message) for e in done.events] == [
        ("SparkApplicationCompleted", "driver pi-1 succeeded; completed after 1 execution attempt(s)")
    ]


# -- the Spark UI ---------------------------------------------------------------------------------------


def app_view(**spec: Any) -> AppView:
    body = {"metadata": {"name": "pi", "namespace": "ns", "uid": "u"}, "spec": {**PYTHON_PI_SPEC, **spec}}
    return AppView.from_body(body)


def test_a_ui_service_of_its_own_only_when_something_is_to_reach_it() -> None:
    assert not ui.own_service_wanted(app_view(), UIConfig())
    assert ui.own_service_wanted(app_view(sparkUIOptions={"serviceType": "NodePort"}), UIConfig())
    assert ui.own_service_wanted(app_view(), UIConfig(ingress_url_format="{{$appName}}.example.com"))
    assert not ui.own_service_wanted(app_view(sparkUIOptions={"servicePort": 80}), UIConfig(service=False))
    assert ui.driver_service_ui("pi-1-driver-svc.ns.svc:4040") == ("pi-1-driver-svc", 4040)
    assert ui.driver_service_ui(None) is None and ui.driver_service_ui("nonsense") is None


def test_without_one_the_status_names_the_drivers_own_service() -> None:
    c = SimCluster(spec={**PYTHON_PI_SPEC, "restartPolicy": {"type": "Never"}}, name="pi")
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    observed, _ = c.observed()
    drv = replace(observed.drivers[0], web_ui_address="pi-1-1-driver-svc.ns.svc:4040", spark_application_id="spark-1")
    plan = reconcile(replace(observed, drivers=(drv,)), c.now)
    assert plan.status is not None and plan.creates == ()
    info = apps_status.driver_info(plan.status)
    assert (info.webUIServiceName, info.webUIPort, info.webUIAddress) == (
        "pi-1-1-driver-svc", 4040, "pi-1-1-driver-svc.ns.svc:4040",
    )  # fmt: skip
