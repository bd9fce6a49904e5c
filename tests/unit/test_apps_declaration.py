"""The shell of the apps controller without a cluster: key mapping, index snapshots, and the
order in which a plan is applied (status first, creates only after a successful write)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from sparkop.api.models import DriverPhase
from sparkop.apps_controller import status as apps_status
from sparkop.apps_controller.controller import apps_controller
from sparkop.apps_controller.decide import decide as reconcile
from sparkop.apps_controller.observed import AppView, DriverView, Observed, SpecErrors, app_snapshot, owner_keys
from sparkop.core import kube
from sparkop.core.applier import CreateRefused
from sparkop.core.caches import NotCurrent
from sparkop.core.controller import Loop
from sparkop.core.plan import Plan
from sparkop.core.runtime import Runtime
from sparkop.domain import kinds
from tests.support.fake_index import FakeIndex
from tests.support.simulation import EPOCH
from tests.support.specs import PYTHON_PI_SPEC

SPEC = PYTHON_PI_SPEC


def app_body(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkApplication",
        "metadata": {"name": "pi", "namespace": "ns", "uid": "u1", "generation": 1, "resourceVersion": "7"},
        "spec": SPEC,
        "status": status or {},
    }


class FakeKube:
    def __init__(self, conflict: bool = False, create_error: Exception | None = None) -> None:
        self.calls: list[str] = []
        self.conflict = conflict
        self.create_error = create_error

    async def patch_status(
        self, resource: Any, namespace: str, name: str, *, old: Any, new: Any, resource_version: str
    ) -> Any:
        self.calls.append(f"status rv={resource_version}")
        if self.conflict:
            raise kube.Conflict("stale")
        return {"metadata": {"resourceVersion": "8"}, "status": new}

    async def create(self, body: dict[str, Any]) -> bool:
        self.calls.append(f"create {body['kind']} {body['metadata']['name']}")
        if self.create_error is not None:
            raise self.create_error
        return True

    async def delete(self, resource: Any, namespace: str, name: str, *, uid: str | None = None) -> bool:
        self.calls.append(f"delete {resource.kind} {name}")
        return True

    async def patch(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("patch")
        return {}

    async def event(self, regarding: Any, *, type_: str, reason: str, message: str) -> None:
        self.calls.append(f"event {reason}")


class FakeRuntime:
    """The caches as the shell reads them: the app index holds ``cached`` (the app by default)."""

    def __init__(self, fake: FakeKube, cached: list[dict[str, Any]] | None = None) -> None:
        self.kube = fake
        self.cached = [app_body()] if cached is None else cached

    def index(self, name: str) -> FakeIndex:
        assert name == "apps_sparkapplications", name
        return FakeIndex({("ns", "pi"): [app_snapshot(app) for app in self.cached]})

    ensure_holds = Runtime.ensure_holds  # the real check, on these caches
    filed = Runtime.filed  # the real reading of an index, on these


def controller(fake: FakeKube, cached: list[dict[str, Any]] | None = None) -> Loop[Observed, Any]:
    runtime = FakeRuntime(fake, cached)
    return Loop(runtime, apps_controller(runtime))  # type: ignore[arg-type]


async def apply(loop: Loop[Observed, Any], plan: Plan[Any], body: dict[str, Any]) -> bool:
    """The plan applied as a pass applies it; False when the app vanished at its status write."""
    return not (await loop.apply(("ns", "pi"), body, plan)).gone


def refusals(loop: Loop[Observed, Any], uid: str) -> dict[str, Any]:
    return dict(loop.applier.expectations.learnt(("ns", "pi"), uid).refusals)


def test_owner_key_follows_the_controller_reference_of_our_group_only() -> None:
    ref = {"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkApplication", "name": "pi", "controller": True}
    body = {"metadata": {"namespace": "ns", "ownerReferences": [ref]}}
    assert owner_keys(body) == [("ns", "pi")]
    other = {**ref, "apiVersion": "sparkoperator.k8s.io/v1beta2"}
    assert owner_keys({"metadata": {"namespace": "ns", "ownerReferences": [other]}}) == []
    plain = {**ref, "controller": False}
    assert owner_keys({"metadata": {"namespace": "ns", "ownerReferences": [plain]}}) == []


def test_app_snapshot_is_a_copy() -> None:
    body = app_body({"lastRun": 1})
    snap = app_snapshot(body)
    body["spec"]["driver"]["cores"] = 9
    assert snap["spec"]["driver"]["cores"] == 1 and snap["metadata"]["resourceVersion"] == "7"


def test_invalid_spec_is_reported_once_per_generation() -> None:
    spec_error = SpecErrors()
    bad = app_body()
    bad["spec"] = {**SPEC, "type": "Cobol"}
    error = spec_error(bad)
    assert error is not None and "spec.type" in error.message and error.unknown == ()
    assert spec_error(app_body() | {"metadata": {**bad["metadata"], "uid": "u2"}}) is None


def test_fields_only_a_newer_crd_has_are_told_apart_from_a_bad_spec() -> None:
    spec_error = SpecErrors()
    newer = app_body()
    newer["spec"] = {**SPEC, "upgradeNote": "x", "driver": {**SPEC.get("driver", {}), "newKnob": 1}}
    error = spec_error(newer)
    assert error is not None and set(error.unknown) == {"spec.upgradeNote", "spec.driver.newKnob"}
    both = app_body() | {"metadata": {**newer["metadata"], "uid": "u3"}}
    both["spec"] = {**SPEC, "upgradeNote": "x", "type": "Cobol"}
    error = spec_error(both)
    assert error is not None and error.unknown == () and "spec.type" in error.message


@pytest.mark.asyncio
async def test_status_is_written_before_the_create_and_events_after_the_write() -> None:
    fake = FakeKube()
    body = app_body()
    observed = Observed(AppView.from_body(body), apps_status.read_status(body["status"]))
    plan = reconcile(observed, EPOCH)
    ctl = controller(fake)
    assert await apply(ctl, plan, body)
    # The create waits for the status write that records the run (the state stays NEW: no event yet).
    assert fake.calls == ["status rv=7", "create SparkDriver pi-1"]
    assert body["metadata"]["resourceVersion"] == "8"
    # Its driver pod accepted: SUBMITTED, whose event waits for the status write that says so.
    accepted = DriverView(
        name="pi-1", uid="d1", owner_uid="u1", run=1, spec_hash=None, app_generation=1,
        phase=DriverPhase.PENDING, pod_name="pi-driver", incarnation=1,
    )  # fmt: skip
    observed = Observed(AppView.from_body(body), apps_status.read_status(body["status"]), drivers=(accepted,))
    fake.calls.clear()
    assert await apply(ctl, reconcile(observed, EPOCH + timedelta(seconds=1)), body)
    assert fake.calls == ["status rv=8", "event SparkApplicationSubmitted"]


@pytest.mark.asyncio
@pytest.mark.parametrize("cached", [[], [{**app_body(), "metadata": {**app_body()["metadata"], "uid": "u0"}}]])
async def test_nothing_is_created_for_an_app_the_cache_no_longer_holds(cached: list[dict[str, Any]]) -> None:
    """Gone from the cache (deleted during a watch gap), or there under another uid (deleted and
    applied again): the pass stops before its create, and the queue looks again on a fresh view."""
    fake = FakeKube()
    body = app_body()
    observed = Observed(AppView.from_body(body), apps_status.read_status(body["status"]))
    with pytest.raises(NotCurrent):
        await apply(controller(fake, cached), reconcile(observed, EPOCH), body)
    assert not [call for call in fake.calls if call.startswith("create")], fake.calls


@pytest.mark.asyncio
async def test_a_conflicting_status_write_creates_nothing() -> None:
    fake = FakeKube(conflict=True)
    body = app_body()
    observed = Observed(AppView.from_body(body), apps_status.read_status(body["status"]))
    with pytest.raises(kube.Conflict):
        await apply(controller(fake), reconcile(observed, EPOCH), body)
    assert fake.calls == ["status rv=7"]


@pytest.mark.asyncio
async def test_nothing_is_written_when_nothing_changed() -> None:
    fake = FakeKube()
    body = app_body()
    observed = Observed(AppView.from_body(body), apps_status.read_status(body["status"]))
    plan = reconcile(observed, EPOCH)
    suspended = app_body(plan.status.to_json())
    suspended["status"]["applicationState"] = {"state": "SUSPENDED"}  # NEW was written as no state
    suspended["spec"] = {**SPEC, "suspend": True}
    observed = Observed(AppView.from_body(suspended), apps_status.read_status(suspended["status"]))
    settled = app_body(reconcile(observed, EPOCH).status.to_json())  # its conditions now say so
    settled["spec"] = suspended["spec"]
    observed = Observed(AppView.from_body(settled), apps_status.read_status(settled["status"]))
    again = reconcile(observed, EPOCH + timedelta(seconds=30))
    assert await apply(controller(fake), again, settled)
    assert fake.calls == []


@pytest.mark.asyncio
async def test_a_refused_create_is_remembered_and_decided_by_the_next_pass() -> None:
    refused = kube.Refused(403, "Forbidden", 'sparkdrivers.sparkop.io "pi-1" is forbidden: exceeded quota')
    fake = FakeKube(create_error=refused)
    ctl = controller(fake)
    body = app_body()
    observed = Observed(AppView.from_body(body), apps_status.read_status(body["status"]))
    with pytest.raises(CreateRefused):
        await apply(ctl, reconcile(observed, EPOCH), body)
    assert fake.calls == ["status rv=7", "create SparkDriver pi-1"]  # the run recorded, then its create
    known = refusals(ctl, "u1")
    assert list(known) == ["SparkDriver/pi-1"] and known["SparkDriver/pi-1"].code == 403
    assert refusals(ctl, "another-uid") == {}  # a new app of the same name starts afresh
    again = Observed(AppView.from_body(body), apps_status.read_status(body["status"]), refusals=known)
    plan = reconcile(again, EPOCH)
    assert apps_status.state(plan.status).value == "SUBMISSION_FAILED" and not plan.after_status
    assert "exceeded quota" in (apps_status.error_message(plan.status) or "")


@pytest.mark.asyncio
async def test_a_transient_create_error_is_left_to_the_queues_backoff() -> None:
    fake = FakeKube(create_error=RuntimeError("503 Service Unavailable"))
    ctl = controller(fake)
    body = app_body()
    observed = Observed(AppView.from_body(body), apps_status.read_status(body["status"]))
    with pytest.raises(RuntimeError):
        await apply(ctl, reconcile(observed, EPOCH), body)
    assert refusals(ctl, "u1") == {}


def test_each_groups_apps_controller_has_indexes_of_its_own() -> None:
    """With --kubeflow-api both groups' apps controllers start on one runtime: an index name they shared
    (the history servers' was) stops the operator at start with "already registered"."""
    runtime: Any = FakeRuntime(FakeKube())
    names = []
    for api in kinds.served_apis(kubeflow=True):
        declared = apps_controller(runtime, api=api)
        names.append({source.index for source in (declared.own, *declared.owned, *declared.reads)})
    sparkop_names, kubeflow_names = names
    assert "apps_history_servers" in sparkop_names
    assert not sparkop_names & kubeflow_names


def test_the_apps_controllers_indexes_keep_the_names_its_doc_gives() -> None:
    """core.controller.Names spells them (<controller>_<what>); kubeflow's group's end in _kubeflow."""
    runtime: Any = FakeRuntime(FakeKube())
    for api, suffix in ((kinds.SPARKOP_API, ""), (kinds.KUBEFLOW_API, "_kubeflow")):
        declared = apps_controller(runtime, api=api)
        assert declared.name == "apps" + suffix
        assert [declared.own.index, *(source.index for source in declared.owned)] == [
            f"apps_{what}{suffix}"
            for what in ("sparkapplications", "sparkdrivers", "ui_services", "ui_ingresses", "ui_routes")
        ]
