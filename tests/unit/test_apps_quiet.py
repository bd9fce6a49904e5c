"""When the apps controller must write nothing: a finished app (its status is frozen, whatever its
SparkDrivers and their executors do afterwards) and an app whose namespace is being deleted. And the
objects it finds by ownership rather than by status or labels (Spark UI objects, SparkDrivers)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkop.api.models import Condition, DriverPhase
from sparkop.apps_controller import events
from sparkop.apps_controller import status as apps_status
from sparkop.apps_controller.decide import decide as reconcile
from sparkop.apps_controller.observed import DriverView, OwnedObject, owner_keys
from sparkop.core.plan import Create as CreateDriver
from sparkop.core.plan import Delete as DeleteObject
from sparkop.core.plan import Ensure as EnsureObject
from tests.support.simulation import SimCluster
from tests.support.specs import PYTHON_PI_SPEC

SPEC: dict[str, Any] = {**PYTHON_PI_SPEC, "restartPolicy": {"type": "Never"}}
# sparkUIOptions asks for the Spark UI Service of its own (without it the UI is the driver Service's).
UI_SPEC: dict[str, Any] = {**SPEC, "sparkUIOptions": {"serviceType": "ClusterIP"}}
APP_REF = {"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkApplication", "name": "pi", "uid": "app-uid"}


def finished_app(phase: DriverPhase, **spec: Any) -> SimCluster:
    c = SimCluster(spec={**SPEC, **spec}, name="pi")
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.set_phase("pi-1", phase, "Completed" if phase is DriverPhase.SUCCEEDED else "Error", 0)
    c.run_until_quiet()
    assert c.state in ("COMPLETED", "FAILED")
    return c


# What a SparkDriver may report after its app finished: executors going, a recount, another incarnation.
driver_changes = st.fixed_dictionaries(
    {
        "phase": st.sampled_from([None, *DriverPhase]),
        "executors": st.dictionaries(
            st.sampled_from(["pending", "running", "succeeded", "failed", "unknown"]), st.integers(0, 5)
        ),
        "incarnation": st.integers(0, 5),
        "pod_name": st.one_of(st.none(), st.sampled_from(["pi-1-1-driver", "pi-1-2-driver"])),
        "spark_application_id": st.one_of(st.none(), st.sampled_from(["spark-a", "spark-b"])),
        "web_ui_address": st.one_of(st.none(), st.just("10.0.0.1:4040")),
        "deleting": st.booleans(),
        "exit_code": st.one_of(st.none(), st.integers(0, 137)),
        "reason": st.one_of(st.none(), st.sampled_from(["Completed", "Error", "OOMKilled"])),
        "stuck": st.one_of(
            st.none(), st.just(Condition(type="Stuck", status="True", reason="ImagePullBackOff", message="no image"))
        ),
    }
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    phase=st.sampled_from([DriverPhase.SUCCEEDED, DriverPhase.FAILED]),
    change=driver_changes,
    gone=st.booleans(),
    extra_runs=st.lists(st.integers(1, 4), max_size=2),
    later=st.floats(0, 3600),
    ui_leftover=st.booleans(),
)
def test_a_finished_app_writes_no_status_whatever_its_drivers_do(
    phase: DriverPhase,
    change: dict[str, Any],
    gone: bool,
    extra_runs: list[int],
    later: float,
    ui_leftover: bool,
) -> None:
    c = finished_app(phase, timeToLiveSeconds=600)
    observed, _ = c.observed()
    (last,) = observed.drivers
    drivers = [] if gone else [replace(last, **change)]
    drivers += [replace(last, name=f"pi-{run + 1}", uid=f"other-{run}", run=run + 1) for run in extra_runs]
    ui_objects = (
        [OwnedObject(api_version="v1", kind="Service", name="pi-ui-svc", uid="svc-uid", owner_uid="app-uid")]
        if ui_leftover
        else []
    )
    plan = reconcile(
        replace(observed, drivers=tuple(drivers), ui_objects=tuple(ui_objects)), c.now + timedelta(seconds=later)
    )
    assert plan.status == observed.status
    assert all(e.reason == events.Reason.EXPIRED for e in plan.events)
    assert not any(isinstance(a, CreateDriver | EnsureObject) for a in plan.actions)
    if ui_leftover:
        assert DeleteObject("v1", "Service", "pi-ui-svc", "svc-uid") in plan.actions


def test_a_finished_app_keeps_no_executor_counts_and_stays_quiet_as_its_executors_go() -> None:
    c = finished_app(DriverPhase.SUCCEEDED)
    assert "executors" not in c.status  # nothing of a finished app runs
    writes = c.writes
    c.drivers["pi-1"].phase = DriverPhase.SUCCEEDED
    c.run_until_quiet()
    assert c.writes == writes


def test_a_ui_service_status_never_recorded_is_still_deleted() -> None:
    """The operator died between creating the Spark UI Service and writing status: the Service is
    found by its controller owner in the watch index and deleted when the app no longer runs."""
    c = SimCluster(spec=UI_SPEC, name="pi")
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    assert ("Service", "pi-ui-svc") in c.ui_objects
    c.status["driverInfo"] = {"podName": "pi-1-1-driver"}  # the write that named it was lost
    c.set_phase("pi-1", DriverPhase.SUCCEEDED, "Completed", 0)
    c.run_until_quiet()
    assert c.state == "COMPLETED" and not c.ui_objects


def test_decide_deletes_observed_ui_objects_of_this_app_only() -> None:
    c = finished_app(DriverPhase.SUCCEEDED)
    observed, _ = c.observed()
    assert not observed.status.driverInfo.webUIServiceName
    ours = OwnedObject(api_version="v1", kind="Service", name="pi-ui-svc", uid="svc-uid", owner_uid="app-uid")
    ingress = OwnedObject(
        api_version="networking.k8s.io/v1", kind="Ingress", name="pi-ui-ingress", uid="ing-uid", owner_uid="app-uid"
    )
    theirs = OwnedObject(
        api_version="v1", kind="Service", name="pi-ui-svc", uid="old-svc-uid", owner_uid="an-older-app-of-this-name"
    )
    gone = OwnedObject(api_version="v1", kind="Service", name="x", uid="x-uid", owner_uid="app-uid", deleting=True)
    plan = reconcile(replace(observed, ui_objects=(ours, ingress, theirs, gone)), c.now)
    deletes = [a for a in plan.actions if isinstance(a, DeleteObject)]
    assert sorted(deletes, key=lambda d: d.kind) == [
        DeleteObject("networking.k8s.io/v1", "Ingress", "pi-ui-ingress", "ing-uid"),
        DeleteObject("v1", "Service", "pi-ui-svc", "svc-uid"),
    ]
    assert plan.status == observed.status


def running_app(spec: dict[str, Any] = SPEC) -> SimCluster:
    c = SimCluster(spec=spec, name="pi")
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    assert c.state == "RUNNING"
    return c


def test_an_app_in_a_terminating_namespace_plans_nothing() -> None:
    """Its SparkDriver vanishing with the namespace is not a lost run: no status, no create, no event."""
    c = running_app()
    observed, _ = c.observed()
    for drivers in ((), observed.drivers):
        quiet = replace(observed, drivers=drivers, namespace_terminating=True)
        plan = reconcile(quiet, c.now + timedelta(seconds=60))
        assert plan.status == observed.status
        assert (plan.actions, plan.events, plan.requeue_after) == ((), (), None)
    # the same observation outside a terminating namespace is a lost run: FAILING, and FAILED in the
    # same pass (restartPolicy Never), one event saying both
    lost = reconcile(replace(observed, drivers=()), c.now)
    assert apps_status.state(lost.status).value == "FAILED"
    ((reason, message),) = [(e.reason, e.message) for e in lost.events]
    assert (reason, message) == ("SparkApplicationFailed", "SparkDriver pi-1 was deleted before it finished")


def driver_body(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {"name": "pi-1", "namespace": "ns", "uid": "d1", "labels": {"sparkop.io/run": "1"}, **meta},
        "status": {"phase": "Running"},
    }


def test_the_drivers_index_follows_the_controller_owner_not_the_app_label() -> None:
    owned = driver_body(ownerReferences=[{**APP_REF, "controller": True}])  # no sparkop.io/app label
    assert owner_keys(owned) == [("ns", "pi")]
    view = DriverView.from_body(owned)
    assert (view.owner_uid, view.run, view.phase) == ("app-uid", 1, DriverPhase.RUNNING)
    labelled_only = driver_body(labels={"sparkop.io/app": "pi", "sparkop.io/run": "1"})
    assert owner_keys(labelled_only) == []
    assert owner_keys(driver_body(ownerReferences=[{**APP_REF, "controller": False}])) == []


def test_the_ui_index_finds_services_and_ingresses_by_their_controller_owner() -> None:
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "pi-ui-svc",
            "namespace": "ns",
            "uid": "s1",
            "ownerReferences": [{**APP_REF, "controller": True}],
        },
    }
    assert owner_keys(svc) == [("ns", "pi")]
    assert OwnedObject.from_body(svc) == OwnedObject(
        api_version="v1", kind="Service", name="pi-ui-svc", uid="s1", owner_uid="app-uid"
    )
    svc["metadata"]["ownerReferences"] = []
    assert owner_keys(svc) == []


def test_observed_ui_objects_of_a_running_app_are_kept() -> None:
    c = running_app(UI_SPEC)
    observed, _ = c.observed()
    assert [o.name for o in observed.owned_ui] == ["pi-ui-svc"]
    assert not [a for a in reconcile(observed, c.now).actions if isinstance(a, DeleteObject)]
