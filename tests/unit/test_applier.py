"""core.applier's Applier without a cluster: the fixed apply order, 409 on create (ours: fine; not
ours: a refusal), a refusal remembered and seen by the next pure pass, a status Conflict."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from sparkop.core import kube
from sparkop.core.applier import AWAITING_CACHE_SECONDS, Applier, ApplyFailed, CreateRefused, LogTailRead
from sparkop.core.expectations import CREATED_RECENTLY_SECONDS, Learnt, LogTail
from sparkop.core.plan import Create, Delete, Ensure, Event, Patch, Plan, ReadLog

KEY = ("ns", "owner")


def body(status: dict[str, Any] | None = None, version: str = "7") -> dict[str, Any]:
    meta = {"name": "owner", "namespace": "ns", "uid": "u1", "resourceVersion": version}
    return {"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkDriver", "metadata": meta, "status": status or {}}


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": {}}


class Client:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.create_errors: dict[str, BaseException] = {}
        self.existing: set[str] = set()
        self.status_error: BaseException | None = None
        self.patched_version: str | None = None
        self.deleted_version: str | None = None

    async def create(self, manifest: dict[str, Any]) -> bool:
        name = manifest["metadata"]["name"]
        self.calls.append(f"create {name}")
        if name in self.create_errors:
            raise self.create_errors[name]
        return name not in self.existing

    async def patch(self, resource: Any, namespace: str | None, name: str, patch: Any, **_: Any) -> Any:
        self.calls.append(f"patch {name}")
        return {"metadata": {"resourceVersion": self.patched_version}} if self.patched_version else {}

    async def delete(
        self,
        resource: Any,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        grace_seconds: int | None = None,
    ) -> Any:
        self.calls.append(f"delete {name} uid={uid}" + (f" grace={grace_seconds}" if grace_seconds is not None else ""))
        return {"metadata": {"resourceVersion": self.deleted_version}} if self.deleted_version else {}

    async def patch_status(
        self, resource: Any, namespace: str, name: str, *, old: Any, new: Any, resource_version: str
    ) -> Any:
        self.calls.append(f"status rv={resource_version}")
        if self.status_error is not None:
            raise self.status_error
        return {"metadata": {"resourceVersion": "8"}, "status": new}

    async def event(self, regarding: Any, *, type_: str, reason: str, message: str) -> None:
        self.calls.append(f"event {reason} rv={regarding['metadata']['resourceVersion']}")

    log_error: BaseException | None = None

    async def pod_log_tail(self, namespace: str, name: str, *, container: str | None, lines: int, limit: int) -> str:
        self.calls.append(f"log {name} container={container} lines={lines}")
        if self.log_error is not None:
            raise self.log_error
        return ("Pi is roughly 3.14\n" * 100)[-limit:]  # as core.kube's: the end, within the limit


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
    assert client.calls[:4] == ["create a", "create b", "patch b", "status rv=7"]
    # Events are sent alongside after_status, whose own actions keep their order.
    after = client.calls[4:]
    assert sorted(after) == ["delete old uid=old-uid", "event Started rv=8", "patch p"]
    assert after.index("patch p") < after.index("delete old uid=old-uid")


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
    with pytest.raises(CreateRefused):
        await app.apply(KEY, body(), decide(app.expectations.learnt(KEY, "u1")), same, namespace="ns")
    assert client.calls == ["create a"]  # nothing written on the pass that met it
    learnt = app.expectations.learnt(KEY, "u1")
    assert learnt.refusals["ConfigMap/a"].code == refused.status
    assert app.expectations.learnt(KEY, "another-uid").refusals == {}  # a new object of the same name starts afresh
    await app.apply(KEY, body(), decide(learnt), same, namespace="ns")
    assert client.calls[-1] == "status rv=7"  # the second pass records it and creates nothing


async def test_a_transient_error_is_remembered_until_a_pass_that_saw_it_gets_through() -> None:
    client = Client()
    client.create_errors["a"] = TimeoutError()
    app = applier(client)
    with pytest.raises(ApplyFailed, match="creating ConfigMap a"):
        await app.apply(KEY, body(), decide(Learnt()), same, namespace="ns")
    learnt = app.expectations.learnt(KEY, "u1")
    assert learnt.transient is not None and learnt.transient["reason"] == "Timeout"
    del client.create_errors["a"]
    await app.apply(KEY, body(), decide(learnt), same, namespace="ns", seen=learnt)
    assert app.expectations.learnt(KEY, "u1").transient is None


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


class Gate(Client):
    """Creates of the names in ``together`` each wait until all of them are in flight (sent one after
    another, the first would wait in vain: TimeoutError). Records how many were in flight at each."""

    def __init__(self, together: set[str]) -> None:
        super().__init__()
        self.together = together
        self.started: set[str] = set()
        self.all_in = asyncio.Event()
        self.in_flight = 0
        self.in_flight_at: dict[str, int] = {}

    async def create(self, manifest: dict[str, Any]) -> bool:
        name = manifest["metadata"]["name"]
        self.in_flight += 1
        self.in_flight_at[name] = self.in_flight
        try:
            if name in self.together:
                self.started.add(name)
                if self.started == self.together:
                    self.all_in.set()
                async with asyncio.timeout(1):
                    await self.all_in.wait()
            return await super().create(manifest)
        finally:
            self.in_flight -= 1


async def test_concurrent_actions_next_to_each_other_are_sent_together_and_the_rest_in_order() -> None:
    client = Gate(together={"conf", "template", "service"})
    plan: Plan[dict[str, Any]] = Plan(
        before_status=(
            Create(cm("conf"), concurrent=True),
            Create(cm("template"), concurrent=True),
            Create(cm("service"), concurrent=True),
            Create(cm("pod")),
        ),
    )
    await applier(client).apply(KEY, body(), plan, same, namespace="ns")
    assert sorted(client.calls[:3]) == ["create conf", "create service", "create template"]
    # The pod is sent once all three are done, alone.
    assert client.calls[3:] == ["create pod"] and client.in_flight_at["pod"] == 1


async def test_the_first_error_of_a_concurrent_run_in_plan_order_ends_the_pass_after_all_of_it_ran() -> None:
    client = Client()
    client.create_errors = {"b": kube.Taken("ConfigMap", "b", "its controller is X"), "c": RuntimeError("boom")}
    plan: Plan[dict[str, Any]] = Plan(
        status={"phase": "Running"},
        before_status=tuple(Create(cm(n), concurrent=True) for n in "abcd"),
    )
    with pytest.raises(CreateRefused, match="ConfigMap b"):
        await applier(client).apply(KEY, body(), plan, same, namespace="ns")
    assert sorted(client.calls) == ["create a", "create b", "create c", "create d"]  # no status write


async def test_a_patch_already_made_from_the_same_version_is_not_sent_again() -> None:
    client = Client()
    adopt = Plan[dict[str, Any]](after_status=(Patch("v1", "Pod", "exec-1", {"metadata": {}}, "5"),))
    the_applier = applier(client)
    await the_applier.apply(KEY, body(), adopt, same, namespace="ns")
    # Decided again from a cache that has not seen the patch: nothing is sent, the key comes back soon.
    again = await the_applier.apply(KEY, body(), adopt, same, namespace="ns")
    assert client.calls == ["patch exec-1"] and again.requeue_after is not None
    # From the version the cache shows once it caught up, a new patch is sent.
    newer = Plan[dict[str, Any]](after_status=(Patch("v1", "Pod", "exec-1", {"metadata": {}}, "6"),))
    await the_applier.apply(KEY, body(), newer, same, namespace="ns")
    assert client.calls == ["patch exec-1", "patch exec-1"]


async def test_a_patch_is_not_sent_again_from_an_update_the_cache_shows_that_came_before_ours() -> None:
    client = Client()
    client.patched_version = "9"
    the_applier = applier(client)
    adopt = Plan[dict[str, Any]](after_status=(Patch("v1", "Pod", "exec-1", [{"op": "test"}], "5"),))
    await the_applier.apply(KEY, body(), adopt, same, namespace="ns")
    # The cache shows version 7 (a kubelet update made before our patch, which made 9): the same patch
    # would fail its test; nothing is sent.
    stale = Plan[dict[str, Any]](after_status=(Patch("v1", "Pod", "exec-1", [{"op": "test"}], "7"),))
    again = await the_applier.apply(KEY, body(), stale, same, namespace="ns")
    assert client.calls == ["patch exec-1"] and again.requeue_after is not None
    # At or past 9 the cache has seen our patch: what it still asks for is a new patch.
    caught_up = Plan[dict[str, Any]](after_status=(Patch("v1", "Pod", "exec-1", [{"op": "test"}], "9"),))
    await the_applier.apply(KEY, body(), caught_up, same, namespace="ns")
    assert client.calls == ["patch exec-1", "patch exec-1"]


async def test_a_delete_already_made_is_not_sent_again_from_a_stale_cache() -> None:
    client = Client()
    the_applier = applier(client)
    gone = Plan[dict[str, Any]](after_status=(Delete("v1", "Pod", "exec-1", "exec-uid"),))
    await the_applier.apply(KEY, body(), gone, same, namespace="ns")
    again = await the_applier.apply(KEY, body(), gone, same, namespace="ns")
    assert client.calls == ["delete exec-1 uid=exec-uid"] and again.requeue_after is not None
    # A same-named successor (another uid) is deleted when asked.
    successor = Plan[dict[str, Any]](after_status=(Delete("v1", "Pod", "exec-1", "other-uid"),))
    await the_applier.apply(KEY, body(), successor, same, namespace="ns")
    assert client.calls[-1] == "delete exec-1 uid=other-uid"


async def test_the_version_our_own_patch_or_delete_left_is_known_as_ours_and_no_other() -> None:
    client = Client()
    client.patched_version, client.deleted_version = "9", "12"
    the_applier = applier(client)
    plan = Plan[dict[str, Any]](
        after_status=(Patch("v1", "Pod", "driver", [{"op": "test"}], "5"), Delete("v1", "Pod", "exec-1", "exec-uid"))
    )
    await the_applier.apply(KEY, body(), plan, same, namespace="ns")
    assert the_applier.expectations.own_change(KEY, "Pod", "driver", "9")  # the patch's echo
    assert the_applier.expectations.own_change(KEY, "Pod", "exec-1", "12")  # the graceful delete's echo
    assert not the_applier.expectations.own_change(KEY, "Pod", "driver", "10")  # a change made after ours
    assert not the_applier.expectations.own_change(KEY, "Pod", "exec-2", "12")
    assert not the_applier.expectations.own_change(("ns", "other"), "Pod", "driver", "9")
    # A delete the API server answered with no object (gone already) leaves no echo to expect.
    client.deleted_version = None
    await the_applier.apply(
        KEY, body(), Plan(after_status=(Delete("v1", "Pod", "exec-3", "u3"),)), same, namespace="ns"
    )
    assert not the_applier.expectations.own_change(KEY, "Pod", "exec-3", "")


# -- a status change that can wait -------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def progress(phase: str, wait: float, **extra: Any) -> Plan[dict[str, Any]]:
    return Plan(status={"phase": phase}, status_wait=wait, **extra)


async def test_a_change_that_may_wait_is_held_until_the_deadline_the_plan_names() -> None:
    """The deadline is the plan's (each pass works it out from what it observes, domain.status_waits):
    the Applier holds the write, its events and observations, and asks for the pass again then."""
    client = Client()
    a = applier(client)
    started = Event("Normal", "Running", "running")
    held = await a.apply(KEY, body({"phase": "Pending"}), progress("Running", 2.5, events=(started,)), same,
                         namespace="ns")  # fmt: skip
    assert client.calls == [] and held.requeue_after == 2.5 and held.written is None  # nor its event
    sooner = progress("Running+executors", 2.5, requeue_after=1.0)
    assert (await a.apply(KEY, body({"phase": "Pending"}), sooner, same, namespace="ns")).requeue_after == 1.0
    done = await a.apply(KEY, body({"phase": "Pending"}), progress("Running+executors", 0.0, events=(started,)),
                         same, namespace="ns")  # fmt: skip
    assert client.calls == ["status rv=7", "event Running rv=8"] and done.written is not None


async def test_the_applier_remembers_no_window_a_restart_could_lose() -> None:
    """A new Applier (an operator restarted) holds exactly what the plan says, no longer: nothing of
    the wait lives in the process."""
    for the_applier in (applier(Client()), applier(Client())):
        held = await the_applier.apply(KEY, body({"phase": "Pending"}), progress("Running", 0.7), same,
                                       namespace="ns")  # fmt: skip
        assert held.requeue_after == 0.7


async def test_what_cannot_wait_is_written_at_once_with_what_was_held() -> None:
    client = Client()
    a = applier(client)
    await a.apply(KEY, body({"phase": "Pending"}), progress("Running", 30.0), same, namespace="ns")
    assert client.calls == []
    await a.apply(KEY, body({"phase": "Pending"}), Plan(status={"phase": "Succeeded"}), same, namespace="ns")
    assert client.calls == ["status rv=7"]
    # after_status needs the write first: a plan with any is never held
    release = Patch("v1", "Pod", "p", {"metadata": {}}, "3")
    after = progress("x", 30.0, after_status=(release,))
    await a.apply(KEY, body({"phase": "Succeeded"}, "8"), after, same, namespace="ns")
    assert client.calls[1:] == ["status rv=8", "patch p"]
    # a status as it was holds nothing and writes nothing
    unchanged = await a.apply(KEY, body({"phase": "x"}, "9"), progress("x", 30.0), same, namespace="ns")
    assert client.calls[3:] == [] and unchanged.requeue_after is None


async def test_a_pass_decided_before_our_own_write_was_seen_waits_for_it() -> None:
    """Its write could only meet a Conflict: the watch event of ours brings the key back."""
    client = Client()
    a = applier(client)
    await a.apply(KEY, body({"phase": "Pending"}), Plan(status={"phase": "Running"}), same, namespace="ns")
    assert client.calls == ["status rv=7"]  # the API server made version 8
    stale = await a.apply(KEY, body({"phase": "Pending"}), PLAN, same, namespace="ns")
    assert client.calls == ["status rv=7"] and stale.requeue_after == AWAITING_CACHE_SECONDS
    await a.apply(KEY, body({"phase": "Running"}, "8"), Plan(status={"phase": "Succeeded"}), same, namespace="ns")
    assert client.calls[1:] == ["status rv=8"]


async def test_a_create_of_ours_the_cache_has_yet_to_show_is_not_sent_again() -> None:
    """It could only meet 409 (a pass decided before the create's watch event arrived); once the cache
    shows the object, or after CREATED_RECENTLY_SECONDS, a create is decided on what is observed."""
    client, clock = Client(), Clock()
    a = Applier(client, kube.Rules(), lambda obj, what, reason: None, clock=clock)
    assert not a.expectations.any  # a start: every listed object's arrival is news (the handlers ask no more)
    again = Plan(status={"phase": "Pending"}, before_status=(Create(cm("a")),))
    await a.apply(KEY, body(), again, same, namespace="ns")
    assert client.calls == ["create a", "status rv=7"] and a.expectations.any
    skipped = await a.apply(KEY, body({"phase": "Pending"}, "8"), again, same, namespace="ns")
    assert client.calls[2:] == [] and skipped.requeue_after == AWAITING_CACHE_SECONDS
    assert a.expectations.creation_observed(
        KEY, "ConfigMap", "a"
    )  # the cache showed it (our create's); it was deleted since: created again
    assert not a.expectations.creation_observed(KEY, "ConfigMap", "a") and not a.expectations.creation_observed(
        KEY, "ConfigMap", "b"
    )  # a later sight, or not ours
    await a.apply(KEY, body({"phase": "Pending"}, "8"), again, same, namespace="ns")
    assert client.calls[2:] == ["create a"]
    clock.now += CREATED_RECENTLY_SECONDS  # never shown (deleted before the watch saw it): not forever
    await a.apply(KEY, body({"phase": "Pending"}, "8"), again, same, namespace="ns")
    assert client.calls[3:] == ["create a"]


async def test_a_log_read_is_learnt_by_the_pods_uid_and_decided_on_at_once() -> None:
    """A plan that reads a driver pod's log tail (before recording its outcome): nothing is written, the
    tail (the end kept, within its limit) or why it could not be read is what the next decision is told."""
    client, the_applier = Client(), None
    the_applier = applier(client)
    read = ReadLog("pi-driver", "pod-1", "spark-kubernetes-driver", 50, 40)
    plan: Plan[dict[str, Any]] = Plan(status={"phase": "Succeeded"}, before_status=(read,))
    with pytest.raises(LogTailRead):
        await the_applier.apply(KEY, body(), plan, same, namespace="ns")
    assert client.calls == ["log pi-driver container=spark-kubernetes-driver lines=50"]  # no status write
    assert the_applier.expectations.learnt(KEY, "u1").logs == {"pod-1": LogTail(("Pi is roughly 3.14\n" * 100)[-40:])}
    error = kube.ApiException(status=500, reason="Internal Server Error")
    error.body = '{"message": "no preferred addresses found"}'
    client.log_error = error
    with pytest.raises(LogTailRead):
        await the_applier.apply(KEY, body(), Plan(before_status=(ReadLog("pi-driver", "pod-2", None, 50, 40),)),
                                same, namespace="ns")  # fmt: skip
    tail = the_applier.expectations.learnt(KEY, "u1").logs["pod-2"]
    assert tail.text is None and tail.error == "500 Internal Server Error: no preferred addresses found"


async def test_a_grace_0_delete_is_sent_as_asked() -> None:
    client = Client()
    plan: Plan[dict[str, Any]] = Plan(after_status=(Delete("v1", "Pod", "pi-driver", "pod-1", grace_seconds=0),))
    await applier(client).apply(KEY, body(), plan, same, namespace="ns")
    assert client.calls == ["delete pi-driver uid=pod-1 grace=0"]  # (status None: nothing to write)
