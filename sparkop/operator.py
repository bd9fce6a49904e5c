"""``sparkop run``: the controllers (all, or some) in one process, on informer caches.

Each controller module registers indexes (what it observes, by key) and change handlers that only
enqueue keys, and may add Prometheus collectors to ``runtime.collectors`` (served on /metrics);
:class:`core.caches.Caches` runs one informer per watched selection (server-side label selectors for
everything sparkop owns), and each work queue starts once the caches it reads have listed (the
apps controller does not wait for every pod in the cluster); with leader election
(``core.leader``), only once this replica leads.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sparkop.apps_controller.controller import register as register_apps
from sparkop.connect_controller.controller import register as register_connect
from sparkop.core.caches import Caches
from sparkop.core.kube import Kube, RateLimit, Resource
from sparkop.core.leader import ElectionConfig, Elector, KubeLeaseStore
from sparkop.core.queue import WorkQueue
from sparkop.core.runtime import Options, Register, Runtime, register_namespaces
from sparkop.domain.kinds import SCHEDULED_SPARK_APPLICATIONS, SPARK_APPLICATIONS, SPARK_CONNECTS, SPARK_DRIVERS
from sparkop.driver_controller.controller import register as register_driver
from sparkop.schedule_controller.controller import register as register_scheduled
from sparkop.serving import Health, WhileLeading, serve

log = logging.getLogger(__name__)

CRD_POLL_SECONDS = 0.5
CRD_NAG_SECONDS = 10.0


async def wait_until_served(
    kube: Kube, resources: Sequence[Resource], on_missing: Callable[[list[str]], None] | None = None
) -> None:
    """Start watching only once the CRDs are served. The operator never installs CRDs, and a LIST of
    a kind that is not served yet is a 404 the informers would only retry."""
    waited = 0.0
    groups = {(r.group, r.version): r for r in resources}
    while True:
        answers = await asyncio.gather(*(kube.served_in_group(r) for r in groups.values()))
        served = dict(zip(groups, answers, strict=True))
        missing = [r.plural for r in resources if r.plural not in served[(r.group, r.version)]]
        if on_missing is not None:
            on_missing(missing)
        if not missing:
            return
        if waited % CRD_NAG_SECONDS < CRD_POLL_SECONDS:
            log.warning(
                "waiting for the API server to serve %s; install the CRDs with: kubectl apply --server-side -f crds/",
                ", ".join(missing),
            )
        await asyncio.sleep(CRD_POLL_SECONDS)
        waited += CRD_POLL_SECONDS


DEFAULT_CONTROLLERS: Final = ("apps", "driver", "scheduled", "connect")


def controller_registrations(names: Iterable[str]) -> list[Register]:
    known: dict[str, Register] = {
        "apps": register_apps,
        "driver": register_driver,
        "scheduled": register_scheduled,
        "connect": register_connect,
    }
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"unknown controller(s) {unknown}; choose from {sorted(known)}")
    return [known[name] for name in names]


class LeadershipLost(Exception):
    """The leader could not renew its lease in time (or it was taken): its writes are fenced, its
    queues stopped, and the process exits non-zero to be restarted as a standby."""


@dataclass(frozen=True)
class Serving:
    """Where to serve the probes and the metrics (``sparkop.serving``): /healthz and /readyz on
    ``port``, the metrics at ``endpoint`` (None: none), their names behind ``prefix``."""

    port: int
    address: str = "127.0.0.1"
    endpoint: str | None = "/metrics"
    prefix: str = ""


async def run_operator(
    *,
    kubeconfig: str | None,
    context: str | None = None,
    namespaces: Sequence[str] = (),
    controllers: Sequence[str] = DEFAULT_CONTROLLERS,
    options: Options | None = None,
    stop_flag: asyncio.Event | None = None,
    ready_flag: asyncio.Event | None = None,
    election: ElectionConfig | None = None,
    serving: Serving | None = None,
) -> None:
    """Run until ``stop_flag`` is set (or SIGTERM/SIGINT when run from the CLI).

    With ``election``, the informers run at once (a standby is warm) and the election too (a queue
    still waits for its own caches), but the work queues start only once this replica leads, every
    write is fenced by the lease, and :class:`LeadershipLost` is raised when the lease is lost; a
    clean stop releases it."""
    kube = await Kube.connect(kubeconfig, context)
    options = options or Options()
    kube.limit = RateLimit(options.kube_api_qps, options.kube_api_burst)
    runtime = Runtime(kube=kube, options=options, namespaces=tuple(namespaces))
    register_namespaces(runtime)
    for register in controller_registrations(controllers):
        register(runtime)
    elector: Elector | None = None
    if election is not None:
        elector = Elector(election, KubeLeaseStore(kube, election.namespace, election.name))
        kube.fence = elector.fence
        # The audit log tells the replicas' requests apart.
        kube.api.user_agent = f"{kube.api.user_agent} ({election.identity})"
    health = Health(runtime.caches, elector)
    server = None
    try:
        if serving is not None:
            collectors = runtime.collectors
            if elector is not None:
                leading = elector.fence
                collectors = [WhileLeading(c, leading) for c in collectors]
            server = await serve(
                serving.address, serving.port, health, collectors, endpoint=serving.endpoint, prefix=serving.prefix
            )
        served = (
            SPARK_APPLICATIONS,
            SPARK_DRIVERS,
            *((SCHEDULED_SPARK_APPLICATIONS,) if "scheduled" in controllers else ()),
            *((SPARK_CONNECTS,) if "connect" in controllers else ()),
        )
        await wait_until_served(kube, served, on_missing=health_unserved(health))
        log.info("sparkop starting: controllers=%s namespaces=%s", ",".join(controllers), list(namespaces) or "all")
        cancelled = False
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(runtime.caches.run(later=runtime.listed_later), name="caches")]
            health.caches_task = tasks[0]
            tasks.append(group.create_task(report_synced(runtime.caches, health), name="synced"))
            stop = stop_flag or asyncio.Event()
            queues: list[asyncio.Task[None]] = []
            try:
                if elector is not None:
                    tasks.append(group.create_task(elector.run(), name="leader-election"))
                    await first_of(stop.wait(), elector.leading_event.wait(), elector.lost.wait())
                if not stop.is_set() and not (elector is not None and elector.lost.is_set()):
                    # Each queue starts once its own caches have listed: on a busy cluster the apps
                    # controller need not wait for every pod, ConfigMap and Service to be listed.
                    queues = [
                        group.create_task(run_when_synced(runtime, queue), name=f"queue:{queue.name}")
                        for queue in runtime.queues
                    ]
                    if ready_flag is not None:
                        await first_of(stop.wait(), runtime.caches.wait_synced())
                        ready_flag.set()
                    await first_of(stop.wait(), *([elector.lost.wait()] if elector is not None else []))
            except asyncio.CancelledError:
                cancelled = True  # SIGTERM: stopped in order below, then cancelled for the caller
            # The work stops first, while the election goes on renewing the lease: however long the
            # queues take to wind down, the lease is still validly held when it is released below.
            for task in queues:
                task.cancel()
            if queues:
                await asyncio.wait(queues)
            for task in tasks:
                task.cancel()
        if elector is not None and elector.lost_reason is not None:
            raise LeadershipLost(elector.lost_reason)
        if cancelled:
            raise asyncio.CancelledError
    finally:
        # Every queue has stopped (the task group waited for them): only now may a successor start.
        if elector is not None:
            await elector.release()
        if server is not None:
            await server.cleanup()
        await kube.close()
        log.info("sparkop stopped")


def health_unserved(health: Health) -> Callable[[list[str]], None]:
    def record(missing: list[str]) -> None:
        health.unserved = tuple(missing)

    return record


async def first_of(*waits: Coroutine[Any, Any, Any]) -> None:
    """Until the first of ``waits`` is done; the others are cancelled."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


SYNC_NAG_SECONDS = 30.0


async def report_synced(caches: Caches, health: Health) -> None:
    """Until every cache has listed once (then /readyz may say ready), saying so in the log."""
    started = time.monotonic()
    await wait_synced(caches)
    health.synced = True
    log.info("caches synced in %.2fs: %s", time.monotonic() - started, caches.sizes())


async def run_when_synced(runtime: Runtime, queue: WorkQueue[Any]) -> None:
    """Run ``queue`` once the caches it is enqueued from have listed."""
    started = time.monotonic()
    await runtime.caches.wait_synced(runtime.sources.get(queue.name, ()))
    log.info("%s: its caches listed in %.2fs; reconciling", queue.name, time.monotonic() - started)
    await queue.run()


async def wait_synced(caches: Caches) -> None:
    """Until every cache has listed once, saying every SYNC_NAG_SECONDS which ones have not."""
    while True:
        try:
            async with asyncio.timeout(SYNC_NAG_SECONDS):
                await caches.wait_synced()
            return
        except TimeoutError:
            waiting = [i.name for i in caches.all() if not i.has_synced()]
            log.warning("still listing %s (see the warnings above for why)", ", ".join(waiting))


# CPython collects its young generation whenever container allocations outrun frees by 700. The
# operator decodes every watch event and API answer into dicts and lists by the dozen, nearly all
# freed by reference counting within the pass; at 1,000 apps at once (bench/throughput.py) that
# default made 1,400 young and 140 older collections, a tenth of the operator's CPU (1.8 of 18.9
# CPU-s). Ten times the allotment: 55 collections, 0.3 CPU-s. What it may leave uncollected a while
# longer is cyclic garbage of a few thousand objects.
YOUNG_COLLECTION_ALLOTMENT: Final = 7_000


def settle_collector() -> None:
    """Set Python's cyclic garbage collector for a long-running process: what is loaded by now
    (modules, classes, functions: about 90,000 objects that live as long as the process) is frozen,
    so no full collection traverses it again, and young collections run a tenth as often."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_ALLOTMENT, middle, old)


def run_blocking(**kwargs: Any) -> None:
    """Run the operator in this thread until SIGTERM or SIGINT: either cancels it, at any instant of
    its start or its work (the informers and queues hold nothing that a restart does not rebuild)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        running = asyncio.current_task()
        assert running is not None

        def stop(signum: signal.Signals) -> None:
            log.info("%s received: stopping", signum.name)
            running.cancel()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop, sig)
        with contextlib.suppress(asyncio.CancelledError):
            await run_operator(**kwargs)

    settle_collector()
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(main())


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's loop where it is installed: the event loop and its TLS transport in C (at 1,000 apps
    at once, 4 % less CPU per app and 20 MiB less memory than asyncio's own). It is an optional
    dependency (a platform where it does not build still gets the whole CLI), so without it the
    operator runs on asyncio's loop and says so once."""
    try:
        import uvloop
    except ImportError:
        log.info("uvloop is not installed: running on asyncio's event loop")
        return asyncio.new_event_loop
    return uvloop.new_event_loop
