"""core.controller.Loop without a cluster: a pass decides again on what its own status write
returned, so the watch event of that write asks for no pass, and every other change still does."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import pytest

from sparkop.core.controller import Controller, Loop, Own, Source, _ours
from sparkop.core.expectations import Expectations
from sparkop.core.jsontypes import JSON
from sparkop.core.plan import Plan
from sparkop.core.resources import PODS
from sparkop.core.runtime import Runtime
from sparkop.core.specs import Model
from sparkop.domain import kinds
from tests.support.fake_index import FakeIndex

KEY = ("ns", "pi")
INDEX = "toys"


def toy(step: int, version: str) -> dict[str, Any]:
    meta = {"name": "pi", "namespace": "ns", "uid": "u1", "resourceVersion": version}
    return {"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkApplication", "metadata": meta, "status": {"step": step}}


class FakeKube:
    """Answers a status write as the API server does: the object at the next resourceVersion."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, Any]] = []

    async def patch_status(
        self, resource: Any, namespace: str, name: str, *, old: Any, new: Any, resource_version: str
    ) -> Any:
        self.writes.append((resource_version, new))
        return {"metadata": {"resourceVersion": str(int(resource_version) + 1)}, "status": new}

    async def event(self, regarding: Any, *, type_: str, reason: str, message: str) -> None:
        pass


class FakeRuntime:
    def __init__(self, fake: FakeKube, cached: dict[str, Any]) -> None:
        self.kube = fake
        self.cached = cached

    def index(self, name: str) -> FakeIndex:
        return FakeIndex({KEY: [dict(self.cached)]})

    def namespace_terminating(self, namespace: str) -> bool:
        return False

    ensure_holds = Runtime.ensure_holds
    filed = Runtime.filed  # the real reading of an index, on these


def loop(
    fake: FakeKube, cached: dict[str, Any], last_step: int, dumped: list[Any] | None = None, settles: bool = False
) -> tuple[Loop[Any, Any], list[int]]:
    """A controller that moves status.step up by one per decision, until ``last_step``; the steps it
    decided from are listed."""
    decided: list[int] = []

    class Toy(Model):
        step: int = 0

        def to_json(self) -> JSON:
            if dumped is not None:
                dumped.append(self.model_dump())
            return super().to_json()

    def observe(own: Own[Toy]) -> int:
        return own.status.step

    def decide(step: int, now: datetime) -> Plan[Toy]:
        decided.append(step)
        return Plan(status=Toy(step=min(step + 1, last_step)), settled=settles)

    own = Source(INDEX, kinds.SPARK_APPLICATIONS, lambda obj: [KEY], lambda obj: obj)
    controller: Controller[int, Toy] = Controller(
        "toy",
        own,
        (),
        observe,
        decide,
        Toy,
        logging.getLogger("toy"),
        unchanged=lambda step, status: status == Toy(step=step),
    )
    return Loop(FakeRuntime(fake, cached), controller), decided  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_pass_decides_again_on_what_its_status_write_returned_and_its_echo_asks_for_no_pass() -> None:
    fake = FakeKube()
    toys, decided = loop(fake, toy(0, "7"), last_step=2)
    result = await toys.reconcile(KEY)
    assert decided == [0, 1, 2]  # the second and third decisions were on the writes' answers, not the cache
    assert [version for version, _ in fake.writes] == ["7", "8"]
    assert result.requeue_after is None
    assert toys.echo("MODIFIED", toy(2, "9"), [KEY])  # our last write's own watch event
    assert not toys.echo("MODIFIED", toy(2, "10"), [KEY])  # a change made after it (someone else's)
    assert not toys.echo("MODIFIED", {**toy(2, "9"), "metadata": {**toy(2, "9")["metadata"], "uid": "u2"}}, [KEY])
    assert not toys.echo("ADDED", toy(2, "9"), [KEY])  # a re-list's or a new object's arrival


@pytest.mark.asyncio
async def test_a_pass_that_keeps_writing_ends_and_is_run_again() -> None:
    fake = FakeKube()
    toys, decided = loop(fake, toy(0, "7"), last_step=100)
    result = await toys.reconcile(KEY)
    assert len(decided) == len(fake.writes) == 4 and result.requeue_after == 0.0


@pytest.mark.asyncio
async def test_a_write_that_made_no_new_version_leaves_its_event_to_ask_for_a_pass() -> None:
    class Unchanged(FakeKube):
        async def patch_status(self, resource: Any, namespace: str, name: str, **kw: Any) -> Any:
            await super().patch_status(resource, namespace, name, **kw)
            return {"metadata": {"resourceVersion": kw["resource_version"]}, "status": kw["new"]}

    fake = Unchanged()
    toys, decided = loop(fake, toy(0, "7"), last_step=1)
    await toys.reconcile(KEY)
    assert decided == [0] and not toys.echo("MODIFIED", toy(1, "7"), [KEY])


@pytest.mark.asyncio
async def test_a_status_equal_to_the_one_decided_from_is_neither_written_nor_made_into_json() -> None:
    fake, dumped = FakeKube(), []
    toys, decided = loop(fake, toy(3, "7"), last_step=3, dumped=dumped)
    result = await toys.reconcile(KEY)
    assert decided == [3] and fake.writes == [] and dumped == [] and result.requeue_after is None


@pytest.mark.asyncio
async def test_a_plan_settled_by_its_write_ends_the_pass_there_and_its_echo_still_asks_for_no_pass() -> None:
    fake = FakeKube()
    toys, decided = loop(fake, toy(0, "7"), last_step=1, settles=True)
    result = await toys.reconcile(KEY)
    assert decided == [0]  # not decided again on what the write returned
    assert [version for version, _ in fake.writes] == ["7"]
    assert result.requeue_after is None
    assert toys.echo("MODIFIED", toy(1, "8"), [KEY])  # the write's own watch event
    assert not toys.echo("MODIFIED", toy(1, "9"), [KEY])  # anything after it asks for a pass


def test_the_echo_of_our_own_patch_or_delete_of_an_owned_object_asks_for_no_pass_where_the_source_says_so() -> None:
    expectations: Expectations[Any] = Expectations()
    expectations.patched(KEY, "u1", "Pod/pi-driver", "20", "21")

    def pod(version: str) -> dict[str, Any]:
        return {"metadata": {"name": "pi-driver", "namespace": "ns", "resourceVersion": version}}

    settled = _ours(expectations, Source("pods", PODS, lambda obj: [KEY], lambda obj: obj, own_changes_settle=True))
    assert settled("MODIFIED", pod("21"), [KEY])  # exactly what our patch left
    assert not settled("MODIFIED", pod("22"), [KEY])  # anything after it
    assert not settled("DELETED", pod("21"), [KEY])  # a deletion always asks for a pass
    plain = _ours(expectations, Source("pods", PODS, lambda obj: [KEY], lambda obj: obj))
    assert not plain("MODIFIED", pod("21"), [KEY])  # a source that does not say so: every change asks
