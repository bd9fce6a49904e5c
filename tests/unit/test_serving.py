"""What /healthz and /readyz answer (core/serving.py), state by state, on a fake clock."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

from sparkop.core.caches import Caches
from sparkop.core.leader import ElectionConfig, Elector, LeaseRecord
from sparkop.core.resources import PODS
from sparkop.core.serving import Health, serve, stall_seconds
from sparkop.domain.kinds import SPARK_APPLICATIONS


class NoApi:
    async def request(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("probes make no requests")


def caches() -> Caches:
    made = Caches(NoApi(), ["ns"])
    made.informers(PODS)
    made.informers(SPARK_APPLICATIONS)
    return made


def test_waiting_for_crds_is_alive_and_not_ready() -> None:
    health = Health(caches())
    health.unserved = ("sparkapplications", "sparkdrivers")
    assert health.live() == (True, "ok: waiting for sparkapplications, sparkdrivers")
    ok, why = health.ready()
    assert not ok and why == "the API server does not serve sparkapplications, sparkdrivers (install the CRDs)"


async def test_syncing_names_the_caches_still_listing_and_a_stuck_informer_fails_liveness() -> None:
    clock = [0.0]
    made = caches()
    health = Health(made, unserved=(), clock=lambda: clock[0])
    health.caches_task = asyncio.create_task(asyncio.sleep(3600))
    try:
        assert health.ready() == (False, "caches not synced: Pod@ns, SparkApplication@ns")
        assert health.live() == (True, "ok: 2 informers running")
        pods = made.all()[0]
        clock[0] += stall_seconds(pods) - 1
        pods.stats.errors += 1  # a failed request it will retry is progress: still alive
        made.all()[1].stats.watches += 1
        assert health.live()[0]
        clock[0] += stall_seconds(pods) + 1
        ok, why = health.live()
        assert not ok and why.startswith("informer Pod@ns made no progress for ")
    finally:
        health.caches_task.cancel()


async def test_a_crashed_informer_task_fails_liveness() -> None:
    async def crash() -> None:
        raise RuntimeError("boom")

    health = Health(caches(), unserved=())
    health.caches_task = asyncio.create_task(crash())
    await asyncio.wait([health.caches_task])
    assert health.live() == (False, "the informers stopped: RuntimeError('boom')")


class Leases:
    def __init__(self, record: LeaseRecord | None) -> None:
        self.record = record

    async def get(self) -> LeaseRecord | None:
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        raise AssertionError

    async def replace(self, record: LeaseRecord) -> LeaseRecord:
        raise AssertionError


def test_leader_and_standby_are_ready_and_a_standby_that_cannot_read_the_lease_is_not() -> None:
    clock = [100.0]
    config = ElectionConfig("ns", "lease", "b")
    elector = Elector(config, Leases(None), clock=lambda: clock[0])
    health = Health(caches(), elector, unserved=(), synced=True, clock=lambda: clock[0])
    assert health.ready() == (False, "standby cannot read lease ns/lease: no answer yet")
    elector.election.observe(LeaseRecord("a", 15, None, None, 0, "1"), clock[0])
    elector.last_read_at = clock[0]
    assert health.ready() == (True, "ok: standby (b; the leader is a)")
    clock[0] += 15.1
    elector.last_error = "ConnectionError: refused"
    assert health.ready() == (False, "standby cannot read lease ns/lease: ConnectionError: refused")
    elector.election.wrote(LeaseRecord("b", 15, None, None, 1, "2"), sent_at=clock[0], now=clock[0])
    assert health.ready() == (True, "ok: leader (b)")
    assert Health(caches(), unserved=(), synced=True).ready() == (True, "ok: running")


class AppCount:
    """An application collector as the controllers register one."""

    def collect(self) -> Any:
        count = CounterMetricFamily("spark_application_count", "apps", labels=["app_type"])
        count.add_metric(["Scala"], 3)
        yield count
        yield HistogramMetricFamily("spark_application_start_latency_seconds_histogram", "h", [("30.0", 1)], 3.0)


async def scrape(runner_port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{runner_port}{path}") as answer:
        return answer.status, await answer.text()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_the_metrics_endpoint_and_prefix_are_kubeflows_flags() -> None:
    """--metrics-endpoint serves them elsewhere, --metrics-prefix renames every application metric
    (its samples too); the process metrics keep their names; the probes stay where they are."""
    port = free_port()
    runner = await serve("127.0.0.1", port, Health(caches()), [AppCount()], endpoint="/custom", prefix="team_")
    try:
        assert (await scrape(port, "/metrics"))[0] == 404
        status, text = await scrape(port, "/custom")
        assert status == 200
        assert 'team_spark_application_count_total{app_type="Scala"} 3.0' in text
        assert 'team_spark_application_start_latency_seconds_histogram_bucket{le="30.0"} 1.0' in text
        assert "\nspark_application" not in text
        assert "\nprocess_cpu_seconds_total" in text or "python_info" in text
        assert (await scrape(port, "/healthz"))[0] in (200, 500)
    finally:
        await runner.cleanup()


async def test_without_metrics_only_the_probes_are_served() -> None:
    port = free_port()
    runner = await serve("127.0.0.1", port, Health(caches()), [AppCount()], endpoint=None)
    try:
        assert (await scrape(port, "/metrics"))[0] == 404
        assert (await scrape(port, "/readyz"))[0] == 503
    finally:
        await runner.cleanup()
