"""The Spark UI Service and Ingress are compared with what sparkop wants in every pass of a running
app: a deleted one is created again, one edited in a field sparkop sets is patched back, and one as
wanted (whatever the API server defaulted or others added) costs no write."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from sparkop.api.models import DriverPhase
from sparkop.apps_controller.decide import decide
from sparkop.apps_controller.observed import Observed, OwnedObject, UIConfig
from sparkop.apps_controller.ui import UI_RESTORED
from sparkop.core.plan import Ensure, Patch
from tests.support.simulation import SimCluster
from tests.support.specs import PYTHON_PI_SPEC

SPEC: dict[str, Any] = {**PYTHON_PI_SPEC, "restartPolicy": {"type": "Never"}}
UI = UIConfig(ingress_url_format="{{$appName}}.{{$appNamespace}}.example.com")
SERVICE = ("Service", "pi-ui-svc")
INGRESS = ("Ingress", "pi-ui-ingress")


def running_app_with_ui() -> SimCluster:
    c = SimCluster(spec=SPEC, name="pi", ui=UI)
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    assert c.state == "RUNNING" and set(c.ui_objects) == {SERVICE, INGRESS}
    return c


def as_served(manifest: dict[str, Any], resource_version: str) -> OwnedObject:
    """A UI object as the API server returns it: with what it defaults, and what others add."""
    body = copy.deepcopy(manifest)
    meta = body["metadata"]
    meta.update(uid=f"uid-{body['kind']}", resourceVersion=resource_version)
    meta["labels"]["team.example.com/owner"] = "data"
    meta.setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    spec = body["spec"]
    if body["kind"] == "Service":
        spec.update(
            clusterIP="10.0.0.17",
            clusterIPs=["10.0.0.17"],
            sessionAffinity="None",
            ipFamilies=["IPv4"],
            ipFamilyPolicy="SingleStack",
            internalTrafficPolicy="Cluster",
        )
    else:
        spec["ingressClassName"] = "nginx"  # the DefaultIngressClass admission plugin sets it
    return OwnedObject.from_body(body)


def observed_with(c: SimCluster, **edits: OwnedObject | None) -> Observed:
    """The running app's observation, its UI objects as served, ``edits`` replacing them by kind
    (None: deleted)."""
    observed, _ = c.observed()
    served = {"Service": as_served(c.ui_objects[SERVICE], "41"), "Ingress": as_served(c.ui_objects[INGRESS], "42")}
    served.update(edits)
    return replace(observed, ui_objects=tuple(o for o in served.values() if o is not None))


def served(c: SimCluster, kind: str) -> OwnedObject:
    return as_served(c.ui_objects[SERVICE if kind == "Service" else INGRESS], "41" if kind == "Service" else "42")


def test_a_ui_as_wanted_costs_no_write_whatever_the_api_server_defaulted() -> None:
    c = running_app_with_ui()
    observed = observed_with(c)
    plan = decide(observed, c.now)
    assert plan.status == observed.status
    assert (plan.before_status, plan.after_status, plan.events) == ((), (), ())


def test_a_deleted_ui_service_is_created_again() -> None:
    c = running_app_with_ui()
    plan = decide(observed_with(c, Service=None), c.now)
    assert plan.before_status == (Ensure(c.ui_objects[SERVICE]),)


def test_a_deleted_ui_ingress_is_created_again() -> None:
    c = running_app_with_ui()
    plan = decide(observed_with(c, Ingress=None), c.now)
    assert plan.before_status == (Ensure(c.ui_objects[INGRESS]),)


def the_patch(plan_actions: tuple[Any, ...], kind: str) -> Patch:
    (patch,) = plan_actions
    assert isinstance(patch, Patch) and patch.kind == kind and patch.reason == UI_RESTORED
    return patch


def test_an_edited_selector_is_patched_back_only_where_it_was_seen() -> None:
    c = running_app_with_ui()
    svc = served(c, "Service")
    wanted = dict(svc.spec["selector"])
    edited = {**wanted, "spark-app-selector": "someone-elses", "extra": "key"}
    plan = decide(observed_with(c, Service=replace(svc, spec={**svc.spec, "selector": edited})), c.now)
    patch = the_patch(plan.before_status, "Service")
    assert patch.resource_version == "41"  # a newer edit is looked at again rather than overwritten
    assert patch.body["spec"]["selector"] == {**wanted, "extra": None}  # the added key removed too


def test_an_edited_port_is_patched_back() -> None:
    c = running_app_with_ui()
    svc = served(c, "Service")
    ports = [{**svc.spec["ports"][0], "targetPort": 8080}]
    plan = decide(observed_with(c, Service=replace(svc, spec={**svc.spec, "ports": ports})), c.now)
    assert the_patch(plan.before_status, "Service").body["spec"]["ports"] == c.ui_objects[SERVICE]["spec"]["ports"]


def test_an_edited_or_removed_label_is_patched_back() -> None:
    c = running_app_with_ui()
    svc = served(c, "Service")
    for labels in ({**svc.labels, "sparkop.io/component": "not-ui"}, {"team.example.com/owner": "data"}):
        plan = decide(observed_with(c, Service=replace(svc, labels=labels)), c.now)
        patch = the_patch(plan.before_status, "Service")
        assert patch.body["metadata"]["labels"] == c.ui_objects[SERVICE]["metadata"]["labels"]


def test_an_edited_ingress_host_is_patched_back() -> None:
    c = running_app_with_ui()
    ing = served(c, "Ingress")
    rules = copy.deepcopy(list(ing.spec["rules"]))
    rules[0]["host"] = "elsewhere.example.com"
    plan = decide(observed_with(c, Ingress=replace(ing, spec={**ing.spec, "rules": rules})), c.now)
    patch = the_patch(plan.before_status, "Ingress")
    assert patch.body["spec"]["rules"][0]["host"] == "pi.ns.example.com" and patch.resource_version == "42"


def test_a_ui_object_on_its_way_out_is_left_to_go() -> None:
    """Its deletion brings the app back to a pass that creates it anew."""
    c = running_app_with_ui()
    svc = served(c, "Service")
    gone = replace(svc, deleting=True, spec={**svc.spec, "selector": {}})
    assert decide(observed_with(c, Service=gone), c.now).before_status == ()


def test_edits_and_deletes_are_undone_by_the_next_passes() -> None:
    """Through the real Applier against the in-memory API server (merge patches)."""
    c = running_app_with_ui()
    wanted = copy.deepcopy(c.ui_objects)
    c.ui_objects[SERVICE]["spec"]["selector"]["spark-role"] = "executor"
    c.ui_objects[SERVICE]["spec"]["selector"]["extra"] = "key"
    c.ui_objects[SERVICE]["metadata"]["labels"].pop("sparkop.io/component")
    c.ui_objects[INGRESS]["spec"]["rules"][0]["host"] = "elsewhere.example.com"
    c.reconcile()
    assert c.ui_objects == wanted
    del c.ui_objects[SERVICE]
    c.reconcile()
    assert c.ui_objects == wanted
    writes = c.writes
    plan = c.reconcile()
    assert plan is not None and plan.actions == () and c.writes == writes
