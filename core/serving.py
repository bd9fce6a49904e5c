"""The operator's HTTP endpoints, on ``--metrics-port``, served from the operator's own event loop
(so that a blocked loop fails the probes, and collectors may read the caches safely):

``/metrics``
    Prometheus text: the default registry (the work queues' metrics, process metrics) and the
    collectors controllers added to ``Runtime.collectors``.
``/healthz`` (liveness: restart me if this fails)
    200 while the process and its watches are alive: the loop answers, the informers' task is
    running, and every informer made progress (a list, a watch, an event, a bookmark or even a
    failed request it will retry) within :func:`stall_seconds` of its settings. 500 with the reason
    otherwise. Waiting for the CRDs is alive: a restart would not help.
``/readyz`` (readiness: I am doing my job, or ready to take it over)
    200 once the CRDs are served, every cache has listed, and the replica either runs its
    controllers (without leader election, or as the leader) or is a standby that read the Lease
    within the lease duration (it can take over). 503 with the reason otherwise.

Each answer is one line of text: ``ok: <state>`` or the reason it is not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from sparkop.core.caches import Caches
from sparkop.core.informer import Informer
from sparkop.core.leader import Elector

# Slack over the longest an informer may legitimately stay silent, beyond its own timeouts.
STALL_MARGIN_SECONDS = 60.0


def stall_seconds(informer: Informer) -> float:
    """How long an informer may make no progress at all before it is stuck: the API server ends a
    watch after at most 1.2x its timeout, a silent connection is given up 30 s after that, and a
    retry waits at most 1.2x the maximal backoff."""
    return 1.2 * informer.watch_timeout_seconds + 30 + 1.2 * informer.max_backoff_seconds + STALL_MARGIN_SECONDS


def _progress(informer: Informer) -> tuple[int, ...]:
    stats = informer.stats
    return (stats.lists, stats.watches, stats.events, stats.bookmarks, stats.errors)


@dataclass
class Health:
    """What the probes report, kept up to date by ``core.manager.run_operator``."""

    caches: Caches
    elector: Elector | None = None
    unserved: Sequence[str] = ("the CRDs (not checked yet)",)
    caches_task: asyncio.Task[None] | None = None
    synced: bool = False
    clock: Callable[[], float] = time.monotonic
    _seen: dict[int, tuple[tuple[int, ...], float]] = field(default_factory=dict)

    def live(self) -> tuple[bool, str]:
        if self.caches_task is None:
            return True, "ok: waiting for " + ", ".join(self.unserved)
        if self.caches_task.done():
            error = None if self.caches_task.cancelled() else self.caches_task.exception()
            return False, f"the informers stopped: {error!r}"
        now = self.clock()
        for informer in self.caches.all():
            progress = _progress(informer)
            seen, since = self._seen.get(id(informer), (None, now))
            if seen != progress:
                self._seen[id(informer)] = (progress, now)
            elif now - since > stall_seconds(informer):
                return False, f"informer {informer.name} made no progress for {now - since:.0f}s"
        return True, f"ok: {len(self.caches.all())} informers running"

    def ready(self) -> tuple[bool, str]:
        if self.unserved:
            return False, "the API server does not serve " + ", ".join(self.unserved) + " (install the CRDs)"
        if not self.synced:
            waiting = [i.name for i in self.caches.all() if not i.has_synced()]
            return False, "caches not synced: " + (", ".join(waiting) or "starting")
        elector = self.elector
        if elector is None:
            return True, "ok: running"
        if elector.fence():
            return True, f"ok: leader ({elector.config.identity})"
        config = elector.config
        if elector.last_read_at is None or self.clock() - elector.last_read_at > config.lease_duration:
            error = elector.last_error or "no answer yet"
            return False, f"standby cannot read lease {config.namespace}/{config.name}: {error}"
        return True, f"ok: standby ({config.identity}; the leader is {elector.leader or 'nobody'})"


class WhileLeading(Collector):
    """A collector whose metrics only the leader exports: a standby's caches hold the same objects,
    and its gauges would double every sum() on a dashboard (its counters never move anyway)."""

    def __init__(self, inner: Collector, leading: Callable[[], bool]) -> None:
        self.inner = inner
        self.leading = leading

    def collect(self) -> Iterable[Metric]:
        if self.leading():
            yield from self.inner.collect()


class _Collectors(CollectorRegistry):
    def __init__(self, collectors: Sequence[Collector]) -> None:
        super().__init__(auto_describe=False)
        for collector in collectors:
            self.register(collector)


class Prefixed(Collector):
    """A collector whose metric names start with ``prefix`` (kubeflow's --metrics-prefix)."""

    def __init__(self, inner: Collector, prefix: str) -> None:
        self.inner = inner
        self.prefix = prefix

    def collect(self) -> Iterable[Metric]:
        for metric in self.inner.collect():
            renamed = Metric(self.prefix + metric.name, metric.documentation, metric.type, metric.unit)
            renamed.samples = [sample._replace(name=self.prefix + sample.name) for sample in metric.samples]
            yield renamed


async def serve(
    address: str,
    port: int,
    health: Health,
    collectors: Sequence[Collector] = (),
    *,
    endpoint: str | None = "/metrics",
    prefix: str = "",
) -> web.AppRunner:
    """Start serving: the probes, and the metrics at ``endpoint`` unless it is None, the names of
    ``collectors``' metrics (the application, executor and SparkConnect ones) behind ``prefix``. Stop
    with ``await runner.cleanup()``."""
    own = _Collectors([Prefixed(c, prefix) for c in collectors] if prefix else collectors)

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(REGISTRY) + generate_latest(own)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def probe(check: Callable[[], tuple[bool, str]], failing: int) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def answer(_: web.Request) -> web.Response:
            ok, text = check()
            return web.Response(status=200 if ok else failing, text=text + "\n")

        return answer

    app = web.Application()
    if endpoint is not None:
        app.router.add_get(endpoint, metrics)
    app.router.add_get("/healthz", probe(health.live, 500))
    app.router.add_get("/readyz", probe(health.ready, 503))
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    return runner
