"""What keeps an app's API writes few (issue 28), each fact still where a user reads it: progress
held a moment and written once, events posted by one controller, the Spark UI at the driver's own
Service unless something is to reach a Service of its own."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from sparkop.api.models import ApplicationState, DriverPhase, DriverPodInfo, ExecutorCounts, SparkDriverStatus
from sparkop.apps_controller import status as apps_status
from sparkop.apps_controller import ui
from sparkop.apps_controller.decide import decide as reconcile
from sparkop.apps_controller.observed import AppView, UIConfig
from sparkop.core.specs import lenient
from sparkop.driver_controller.decide import decide
from sparkop.driver_controller.observed import Observed, summarize_pod
from sparkop.driver_controller.status import first_pod_only, progress_only
from tests.support.driver_objects import NOW, driver, objects, running, terminated
from tests.support.simulation import SimCluster
from tests.support.specs import PYTHON_PI_SPEC

APP_OWNER = {"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkApplication", "name": "pi", "uid": "app-uid",
             "controller": True}  # fmt: skip


def app_controlled(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "metadata": {**body["metadata"], "ownerReferences": [APP_OWNER]}}


def plan_for(body: dict[str, Any], pods: list[dict[str, Any]] = ()) -> Any:  # type: ignore[assignment]
    _, cms, svcs = objects()
    return decide(Observed.of(body, [summarize_pod(p) for p in pods], cms if pods else [], svcs if pods else []), NOW)


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
    plan = plan_for(app_controlled(driver({**st, "driverPod": {"name": "pi-1-driver", "uid": "pod-1"}})), [gone])
    assert [e.reason for e in plan.events] == ["DriverPodLost"]


# -- progress that can wait ---------------------------------------------------------------------------


def test_only_progress_of_the_same_pod_can_wait() -> None:
    pending = lenient(SparkDriverStatus, {"phase": "Pending", "incarnation": 1, "driverPod": {"name": "pi-1-driver"}})
    scheduled = pending.model_copy(update={"driverPod": DriverPodInfo(name="pi-1-driver", uid="u", nodeName="n")})
    assert progress_only(pending, scheduled)
    running_ = scheduled.model_copy(update={"phase": DriverPhase.RUNNING})
    assert not progress_only(scheduled, running_)  # a phase: written at once
    counted = running_.model_copy(update={"executors": ExecutorCounts(running=2)})
    assert progress_only(running_, counted)
    assert not progress_only(running_, counted.model_copy(update={"incarnation": 2}))
    assert not progress_only(running_, running_.model_copy(update={"phase": DriverPhase.SUCCEEDED}))
    assert not progress_only(pending.model_copy(update={"driverPod": None}), pending)  # the pod named: at once
    assert not progress_only(running_, counted.model_copy(update={"observedGeneration": 2}))


def test_the_first_pods_acceptance_can_wait_and_the_next_pass_derives_it_again() -> None:
    """The pass that creates an app's first driver pod may hold its status (Pending, incarnation 1,
    the pod named): the pass the pod's watch event brings, with that status still unwritten, arrives
    at the same status, start time included; the pod's Running is written at once and carries it."""
    created = plan_for(app_controlled(driver()))
    assert [a.kind for a in created.before_status][-1] == "Pod"
    assert created.status is not None and created.status_can_wait and created.events == ()
    pod, _, _ = objects()
    again = plan_for(app_controlled(driver()), [pod])
    assert again.status is not None and again.status_can_wait and again.before_status == ()
    first = created.status.to_json()
    assert {k: v for k, v in again.status.to_json().items() if k != "driverPod"} == {
        k: v for k, v in first.items() if k != "driverPod"
    }
    assert again.status.driverPod is not None and again.status.driverPod.name == first["driverPod"]["name"]
    up = plan_for(app_controlled(driver()), [running(pod)])
    assert up.status is not None and up.status.phase is DriverPhase.RUNNING and not up.status_can_wait
    assert up.status.startTime == created.status.startTime
    # A SparkDriver created directly has its DriverPodCreated event, which goes out with the write: at once.
    direct = plan_for(driver())
    assert [e.reason for e in direct.events] == ["DriverPodCreated"] and not direct.status_can_wait
    # Only over a status no pass has written: a replacement's new incarnation is written at once.
    replaced = lenient(SparkDriverStatus, {**first, "incarnation": 1}).model_copy(update={"incarnation": 2})
    assert not first_pod_only(lenient(SparkDriverStatus, first), replaced)


def test_an_apps_progress_can_wait_and_its_counting_cannot() -> None:
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
    assert not plan.status_can_wait and [e.reason for e in plan.events] == ["SparkApplicationRunning"]
    running = replace(observed, status=plan.status)
    counted = reconcile(replace(running, drivers=(replace(drv, executors={"running": 2}),)), c.now)
    assert counted.status is not None and counted.status.executors.running == 2
    assert counted.status_can_wait and counted.events == ()
    before = replace(observed, status=accepted.model_copy(update={"executionAttempts": 0, "attempts": []}))
    assert not apps_status.progress_only(before.status, accepted)
    ended = replace(observed.drivers[0], phase=DriverPhase.SUCCEEDED, exit_code=0)
    done = reconcile(replace(observed, drivers=(ended,)), c.now + timedelta(seconds=1))
    # The run's end and the policy's final word in one write.
    assert done.status is not None and apps_status.state(done.status) is ApplicationState.COMPLETED
    assert not done.status_can_wait
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
