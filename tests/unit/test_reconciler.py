"""core.reconciler's Applier without a cluster: the fixed apply order, 409 on create (ours: fine; not
ours: a refusal), a refusal remembered and seen by the next pure pass, a status Conflict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from core import kube
from core.reconciler import Applier, ApplyFailed, Create, Delete, Ensure, Event, Learned, Learnt, Patch, Plan

KEY = ("ns", "owner")


def body(status: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {"name": "owner", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}
    return {"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkDriver", "metadata": meta, "status": status or {}}


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": {}}


class Client:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.create_errors: dict[str, BaseException] = {}
        self.existing: set[str] = set()
        self.status_error: BaseException | None = None

    async def create(self, manifest: dict[str, Any]) -> bool:
        name = manifest["metadata"]["name"]
        self.calls.append(f"create {name}")
        if name in self.create_errors:
            raise self.create_errors[name]
        return name not in self.existing

    async def patch(self, resource: Any, namespace: str | None, name: str, patch: Any) -> Any:
        self.calls.append(f"patch {name}")
        return {}

    async def delete(self, resource: Any, namespace: str | None, name: str, *, uid: str | None = None) -> bool:
        self.calls.append(f"delete {name} uid={uid}")
        return True

    async def patch_status(
        self, resource: Any, namespace: str, name: str, *, old: Any, new: Any, resource_version: str
    ) -> Any:
        self.calls.append(f"status rv={resource_version}")
        if self.status_error is not None:
            raise self.status_error
        return {"metadata": {"resourceVersion": "8"}, "status": new}

    async def event(self, regarding: Any, *, type_: str, reason: str, message: str) -> None:
        self.calls.append(f"event {reason} rv={regarding['metadata']['resourceVersion']}")


def applier(client: Client) -> Applier[tuple[str, str]]:
    return Applier(client, kube.Rules(), lambda obj, what, reason: None)


def same(status: dict[str, Any]) -> dict[str, Any]:
    return status


PLAN: Plan[dict[str, Any]] = Plan(
    status={"phase": "Running"},
    before_status=(Create(cm("a")), Ensure(cm("b"))),
    events=(Event("Normal", "Started", "started"),),
    after_status=(Patch("v1", "Pod", "p", {"metadata": {}}, "3"), Delete("v1", "Pod", "old", "old-uid")),
)


async def test_the_order_is_before_status_then_status_then_events_then_after_status() -> None:
    client = Client()
    client.existing.add("b")  # an Ensure of an existing object patches it to the manifest
    await applier(client).apply(KEY, body(), PLAN, same, namespace="ns")
    assert client.calls == [
        "create a", "create b", "patch b", "status rv=7", "event Started rv=8", "patch p", "delete old uid=old-uid",
    ]  # fmt: skip


async def test_a_status_conflict_ends_the_pass_before_events_and_after_status() -> None:
    client = Client()
    client.status_error = kube.Conflict("stale")
    with pytest.raises(kube.Conflict):
        await applier(client).apply(KEY, body(), PLAN, same, namespace="ns")
    assert client.calls == ["create a", "create b", "status rv=7"]


async def test_nothing_is_written_when_the_status_is_unchanged_and_nothing_follows() -> None:
    client = Client()
    await applier(client).apply(
        KEY, body({"phase": "Running"}), Plan(status={"phase": "Running"}), same, namespace="ns"
    )
    assert client.calls == []


async def test_a_409_on_our_own_object_is_a_retried_create() -> None:
    client = Client()
    client.existing.add("a")  # kube.create returned False: the existing object's controller is ours
    applied = await applier(client).apply(KEY, body(), PLAN, same, namespace="ns")
    assert not applied.gone and "status rv=7" in client.calls


def decide(learnt: Learnt) -> Plan[dict[str, Any]]:
    """A pure pass: create ConfigMap a, unless the API server refused it."""
    refusal = learnt.refusals.get("ConfigMap/a")
    if refusal is not None:
        return Plan(status={"phase": "SubmissionFailed", "reason": refusal.reason, "message": refusal.message})
    return Plan(status={"phase": "Pending"}, before_status=(Create(cm("a")),))


@pytest.mark.parametrize(
    "refused",
    [kube.Taken("ConfigMap", "a", "its controller is Deployment x, uid 9"), kube.Refused(403, "Forbidden", "quota")],
)
async def test_a_refusal_is_remembered_and_decided_by_the_next_pass(refused: kube.Refused) -> None:
    client = Client()
    client.create_errors["a"] = refused
    app = applier(client)
    with pytest.raises(Learned):
        await app.apply(KEY, body(), decide(app.learnt(KEY, "u1")), same, namespace="ns")
    assert client.calls == ["create a"]  # nothing written on the pass that met it
    learnt = app.learnt(KEY, "u1")
    assert learnt.refusals["ConfigMap/a"].code == refused.status
    assert app.learnt(KEY, "another-uid").refusals == {}  # a new object of the same name starts afresh
    await app.apply(KEY, body(), decide(learnt), same, namespace="ns")
    assert client.calls[-1] == "status rv=7"  # the second pass records it and creates nothing


async def test_a_transient_error_is_remembered_until_a_pass_that_saw_it_gets_through() -> None:
    client = Client()
    client.create_errors["a"] = TimeoutError()
    app = applier(client)
    with pytest.raises(ApplyFailed, match="creating ConfigMap a"):
        await app.apply(KEY, body(), decide(Learnt()), same, namespace="ns")
    learnt = app.learnt(KEY, "u1")
    assert learnt.transient is not None and learnt.transient["reason"] == "Timeout"
    del client.create_errors["a"]
    await app.apply(KEY, body(), decide(learnt), same, namespace="ns", seen=learnt)
    assert app.learnt(KEY, "u1").transient is None


async def test_no_create_for_an_owner_no_longer_current() -> None:
    class Gone(Exception):
        pass

    def owner_current() -> None:
        raise Gone

    client = Client()
    with pytest.raises(Gone):  # raised as it is: the queue looks again on a fresh view
        await applier(client).apply(KEY, body(), PLAN, same, namespace="ns", owner_current=owner_current)
    assert client.calls == []


def test_actions_compare_by_what_they_do_not_why() -> None:
    assert Delete("v1", "Service", "ui", "u", "SparkUIRemoved") == Delete("v1", "Service", "ui", "u")
    assert Plan[Mapping[str, Any]](before_status=(Create(cm("a")),)).creates == (Create(cm("a")),)
