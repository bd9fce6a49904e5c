"""Leader election (core/leader.py): the pure state machine on a fake clock, the elector's loop on
an in-memory Lease with the API server's optimistic concurrency, and the write fence of core/kube.py."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from sparkop.core.kube import Fenced, Kube
from sparkop.core.leader import Election, ElectionConfig, Elector, LeaseConflict, LeaseRecord
from sparkop.domain.kinds import SPARK_APPLICATIONS

WALL = datetime(2025, 1, 1, tzinfo=UTC)


def config(identity: str = "a", **durations: float) -> ElectionConfig:
    return ElectionConfig(namespace="ns", name="lease", identity=identity, **durations)


def written(intent_record: LeaseRecord, version: int) -> LeaseRecord:
    return dataclasses.replace(intent_record, resource_version=str(version))


def test_a_missing_lease_is_created_and_held_until_the_renew_deadline() -> None:
    election = Election(config())
    election.observe(None, now=100.0)
    intent = election.intent(100.0, WALL)
    assert intent is not None and intent.create
    assert intent.record.holder == "a" and intent.record.transitions == 0 and intent.record.lease_duration_seconds == 15
    election.wrote(written(intent.record, 1), sent_at=100.0, now=100.2)
    assert election.leading(100.2) and election.leading(109.99)
    # Fenced from the renew deadline on, counted from when the write was sent, not answered.
    assert not election.leading(110.0)
    assert election.lost(110.0)
    assert election.intent(110.0, WALL) is None, "a leader past its deadline never renews: it has lost"


def test_a_valid_lease_of_another_is_waited_for_by_our_clock_not_its_timestamps() -> None:
    election = Election(config("b"))
    # A renewTime far in the past (its holder's clock is behind ours) does not make it expired.
    theirs = LeaseRecord("a", 15, WALL.replace(year=2000), WALL.replace(year=2000), 3, "7")
    election.observe(theirs, now=50.0)
    assert election.intent(50.0, WALL) is None
    assert election.intent(64.9, WALL) is None
    # Renewed by its holder: the wait starts again from when we saw the change.
    election.observe(dataclasses.replace(theirs, renew_time=WALL, resource_version="8"), now=60.0)
    assert election.intent(74.9, WALL) is None
    assert election.expires_in(74.5) == 0.5, "when a standby tries next, at the latest"
    # The same record seen again is no change.
    election.observe(dataclasses.replace(theirs, renew_time=WALL, resource_version="8"), now=70.0)
    intent = election.intent(75.0, WALL)
    assert intent is not None and not intent.create
    assert intent.record.holder == "b" and intent.record.transitions == 4
    assert intent.record.resource_version == "8", "the take-over is conditional on the version we judged"
    assert not election.leading(75.0), "nobody leads before its write succeeded"


def test_the_holders_lease_duration_counts_not_ours() -> None:
    election = Election(config("b", lease_duration=15))
    election.observe(LeaseRecord("a", 60, WALL, WALL, 0, "1"), now=0.0)
    assert election.intent(59.0, WALL) is None
    assert election.intent(60.0, WALL) is not None


def test_a_released_lease_is_taken_at_once_and_counts_a_transition() -> None:
    election = Election(config("b"))
    election.observe(LeaseRecord(None, 1, WALL, WALL, 2, "9"), now=0.0)
    intent = election.intent(0.0, WALL)
    assert intent is not None and intent.record.holder == "b" and intent.record.transitions == 3


def test_renewal_keeps_acquire_time_and_transitions_and_extends_the_fence() -> None:
    election = Election(config())
    acquired = LeaseRecord("a", 15, WALL, WALL, 5, "3")
    election.wrote(acquired, sent_at=0.0, now=0.1)
    election.observe(acquired, now=2.0)
    later = WALL.replace(minute=1)
    intent = election.intent(2.0, later)
    assert intent is not None and not intent.create
    assert (intent.record.acquire_time, intent.record.renew_time, intent.record.transitions) == (WALL, later, 5)
    assert intent.record.resource_version == "3"
    election.wrote(written(intent.record, 4), sent_at=2.0, now=2.1)
    assert election.leading(11.9) and not election.leading(12.0)


def test_a_leader_that_sees_another_holder_has_lost_at_once() -> None:
    election = Election(config())
    election.wrote(LeaseRecord("a", 15, WALL, WALL, 0, "1"), sent_at=0.0, now=0.0)
    election.observe(LeaseRecord("b", 15, WALL, WALL, 1, "2"), now=1.0)
    assert not election.leading(1.0) and election.lost(1.0)


def test_release_clears_the_holder_only_when_held() -> None:
    election = Election(config())
    assert election.release(WALL) is None
    election.wrote(LeaseRecord("a", 15, WALL, WALL, 1, "1"), sent_at=0.0, now=0.0)
    released = election.release(WALL)
    assert released is not None
    assert released.holder is None and released.transitions == 1 and released.resource_version == "1"


@pytest.mark.parametrize(
    ("durations", "fix"),
    [
        ({"lease_duration": 10, "renew_deadline": 10}, "shorter than --leader-elect-lease-duration"),
        ({"renew_deadline": 2, "retry_period": 2}, "must exceed 1.2 x --leader-elect-retry-period"),
        ({"retry_period": 0}, "must be positive"),
    ],
)
def test_durations_that_would_break_fencing_are_refused(durations: dict[str, float], fix: str) -> None:
    with pytest.raises(ValueError, match=fix):
        config(**durations)


class MemoryLeases:
    """A Lease with the API server's rules: create fails if it exists, replace needs the current
    resourceVersion. ``down`` makes every request fail like a lost connection."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.down = False
        self.writes: list[str | None] = []

    def _check(self) -> None:
        if self.down:
            raise ConnectionError("the API server is unreachable")

    def _store(self, record: LeaseRecord) -> LeaseRecord:
        self.version += 1
        self.record = dataclasses.replace(record, resource_version=str(self.version))
        self.writes.append(record.holder)
        return self.record

    async def get(self) -> LeaseRecord | None:
        self._check()
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is not None:
            raise LeaseConflict("exists")
        return self._store(record)

    async def replace(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is None or record.resource_version != self.record.resource_version:
            raise LeaseConflict("changed")
        return self._store(record)


FAST: dict[str, float] = {"lease_duration": 1.5, "renew_deadline": 1.0, "retry_period": 0.1}


async def wait_until(condition: Any, within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110 - the conditions are plain state, nothing to wait on
            await asyncio.sleep(0.01)


async def test_two_electors_one_leads_and_a_release_hands_over_at_once() -> None:
    leases = MemoryLeases()
    first, second = Elector(config("a", **FAST), leases), Elector(config("b", **FAST), leases)
    tasks = [asyncio.create_task(first.run()), asyncio.create_task(second.run())]
    await wait_until(lambda: first.fence() or second.fence())
    leader, standby = (first, second) if first.fence() else (second, first)
    await asyncio.sleep(0.3)  # a few renewals: the standby stays a standby
    assert leader.fence() and not standby.fence() and standby.leader == leader.config.identity
    tasks[[first, second].index(leader)].cancel()
    assert await leader.release()
    await wait_until(standby.fence, within=0.5)  # well within the 1.5 s lease duration
    assert leases.record is not None and leases.record.transitions == 1
    for task in tasks:
        task.cancel()


async def stopped_leader(leases: MemoryLeases) -> Elector:
    """An elector that leads on ``leases`` and whose loop the stop has cancelled, its release to come."""
    leader = Elector(config("a", **FAST), leases)
    running = asyncio.create_task(leader.run())
    await wait_until(leader.fence)
    running.cancel()
    assert leases.record is not None
    return leader


async def test_a_renewal_written_but_never_answered_does_not_stop_the_release() -> None:
    """A renewal cut short by the stop may have reached the server: the release finds the Lease moved on
    under its own name, and gives that version up."""
    leases = MemoryLeases()
    leader = await stopped_leader(leases)
    assert leases.record is not None
    leases._store(leases.record)  # the unanswered renewal: our name, a newer resourceVersion
    assert await leader.release()
    assert leases.record.holder is None


async def test_a_release_leaves_alone_a_lease_another_candidate_took_meanwhile() -> None:
    leases = MemoryLeases()
    leader = await stopped_leader(leases)
    assert leases.record is not None
    leases._store(dataclasses.replace(leases.record, holder="b"))
    assert not await leader.release()
    assert leases.record.holder == "b"


async def test_a_leader_that_cannot_renew_is_fenced_at_its_deadline_before_anyone_may_take_over() -> None:
    leases = MemoryLeases()
    clock = [0.0]
    leader = Elector(config("a", **FAST), leases, clock=lambda: clock[0])
    running = asyncio.create_task(leader.run())
    await wait_until(leader.fence)
    leases.down = True
    await wait_until(lambda: leader.last_error is not None)  # it tried to renew, and goes on trying
    clock[0] += 0.99
    assert leader.fence()
    clock[0] += 0.02
    assert not leader.fence(), "no write after the renew deadline, whatever the loop is doing"
    await wait_until(leader.lost.is_set)
    assert leader.lost_reason is not None and "renew deadline of 1s" in leader.lost_reason
    assert "last renewed 1.0s ago" in leader.lost_reason and "ConnectionError" in leader.lost_reason
    leases.down = False
    assert not await leader.release(), "a lost leader does not touch the lease"
    assert leases.writes == ["a"]
    await running


async def test_the_kube_fence_refuses_every_write_and_lets_reads_through() -> None:
    calls: list[str] = []

    class Answer:
        status = 200

        async def read(self) -> bytes:
            return b"{}"

        def release(self) -> None:
            pass

    class Recorded(Kube):
        async def request(self, method: str, path: str, *_: Any, **__: Any) -> Answer:  # type: ignore[override]
            calls.append(method)
            return Answer()

    kube = Recorded(None)  # type: ignore[arg-type]
    kube.fence = lambda: False
    await kube.get(SPARK_APPLICATIONS, "ns", "x")
    with pytest.raises(Fenced, match="does not hold a valid leader lease"):
        await kube.create({"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkApplication", "metadata": {"name": "x"}})
    with pytest.raises(Fenced):
        await kube.delete(SPARK_APPLICATIONS, "ns", "x")
    with pytest.raises(Fenced):
        await kube.patch(SPARK_APPLICATIONS, "ns", "x", {})
    assert calls == ["GET"]
    kube.fence = lambda: True
    await kube.delete(SPARK_APPLICATIONS, "ns", "x")
    assert calls == ["GET", "DELETE"]
