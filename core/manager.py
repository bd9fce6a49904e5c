"""The manager: runs declared controllers in one process on shared informer caches, as
controller-runtime's Manager does for every controller in its binary.

Each controller's ``register(runtime)`` adds its caches, change handlers and work queue (``core.controller.start``)
and may add Prometheus collectors to ``runtime.collectors`` (served on /metrics), and returns its
declaration; the manager waits for the API server to serve the kinds the declarations name, runs one
informer per watched selection (:class:`core.caches.Caches`: server-side label selectors for everything
owned), and starts each work queue once the caches it reads have listed (the apps controller does not
wait for every pod in the cluster); with leader election (``core.leader``), only once this replica leads.
/metrics, /healthz and /readyz are served by ``core.serving``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sparkop.core.caches import Caches
from sparkop.core.controller import Controller
from sparkop.core.kube import Kube, RateLimit
from sparkop.core.leader import ElectionConfig, Elector, KubeLeaseStore
from sparkop.core.queue import WorkQueue
from sparkop.core.resources import Resource
from sparkop.core.runtime import Options, Runtime, register_namespaces
from sparkop.core.serving import Health, WhileLeading, serve

log = logging.getLogger(__name__)

Register = Callable[[Runtime], Sequence[Controller[Any, Any]]]
"""A controller's ``register(runtime)``: registers it on the runtime and returns its declarations (one for
each API group it serves its kind in)."""

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
        missing = [f"{r.plural}.{r.group}" for r in resources if r.plural not in served[(r.group, r.version)]]
        if on_missing is not None:
            on_missing(missing)
        if not missing:
            return
        if waited % CRD_NAG_SECONDS < CRD_POLL_SECONDS:
            log.warning(
                "waiting for the API server to serve %s; install the CRDs with: kubectl apply --server-side -f crds/"
                " (and, for kubeflow's group with --kubeflow-api, -f crds/kubeflow/)",
                ", ".join(missing),
            )
        await asyncio.sleep(CRD_POLL_SECONDS)
        waited += CRD_POLL_SECONDS


class LeadershipLost(Exception):
    """The leader could not renew its lease in time (or it was taken): its writes are fenced, its
    queues stopped, and the process exits non-zero to be restarted as a standby."""


@dataclass(frozen=True)
class Serving:
    """Where to serve the probes and the metrics (``core.serving``): /healthz and /readyz on ``port``, the
    metrics at ``endpoint`` (None: none), their names behind ``prefix``."""

    port: int
    address: str = "127.0.0.1"
    endpoint: str | None = "/metrics"
    prefix: str = ""


async def run_operator(
    registrations: Sequence[Register],
    *,
    kubeconfig: str | None,
    context: str | None = None,
    namespaces: Sequence[str] = (),
    options: Options | None = None,
    stop_flag: asyncio.Event | None = None,
    ready_flag: asyncio.Event | None = None,
    election: ElectionConfig | None = None,
    serving: Serving | None = None,
) -> None:
    """Run the controllers ``registrations`` declare until ``stop_flag`` is set (or SIGTERM/SIGINT when run
    from the CLI). It waits for the API server to serve the kinds they are declared for (:func:`served_kinds`).

    With ``election``, the informers run at once (a standby is warm) and the election too (a queue
    still waits for its own caches), but the work queues start only once this replica leads, every
    write is fenced by the lease, and :class:`LeadershipLost` is raised when the lease is lost; a
    clean stop releases it."""
    kube = await Kube.connect(kubeconfig, context)
    options = options or Options()
    if options.namespace_selector is not None:
        # The selection is by the namespaces' labels, which change: every namespace is watched, and a pass
        # looks at its namespace's labels (Runtime.namespace_selected); the listed ones are selected too.
        options = replace(options, listed_namespaces=frozenset(namespaces))
        namespaces = ()
    kube.limit = RateLimit(options.kube_api_qps, options.kube_api_burst)
    runtime = Runtime(kube=kube, options=options, namespaces=tuple(namespaces))
    register_namespaces(runtime)
    controllers = [controller for register in registrations for controller in register(runtime)]
    elector = _elector(kube, election) if election is not None else None
    health = Health(runtime.caches, elector)
    server = None
    try:
        if serving is not None:
            collectors = runtime.collectors
            if elector is not None:
                collectors = [WhileLeading(c, elector.fence) for c in collectors]
            server = await serve(
                serving.address, serving.port, health, collectors, endpoint=serving.endpoint, prefix=serving.prefix
            )
        await wait_until_served(kube, served_kinds(controllers), on_missing=health_unserved(health))
        names = ",".join(c.name for c in controllers)
        selector = options.namespace_selector
        scope = f"{sorted(options.listed_namespaces)} and those selected by {selector!s}" if selector else None
        log.info("sparkop starting: controllers=%s namespaces=%s", names, scope or list(namespaces) or "all")
        cancelled = await _run(runtime, health, elector, stop_flag or asyncio.Event(), ready_flag)
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


def _elector(kube: Kube, election: ElectionConfig) -> Elector:
    """The election, and every write of ``kube`` fenced by it."""
    elector = Elector(election, KubeLeaseStore(kube, election.namespace, election.name))
    kube.fence = elector.fence
    # The audit log tells the replicas' requests apart.
    kube.api.user_agent = f"{kube.api.user_agent} ({election.identity})"
    return elector


async def _run(
    runtime: Runtime, health: Health, elector: Elector | None, stop: asyncio.Event, ready_flag: asyncio.Event | None
) -> bool:
    """The caches, the election, and once this replica leads the work queues, until ``stop`` (or the lease
    is lost); whether it was cancelled (SIGTERM) meanwhile."""
    cancelled = False
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(runtime.caches.run(later=runtime.listed_later), name="caches")]
        health.caches_task = tasks[0]
        tasks.append(group.create_task(report_synced(runtime.caches, health), name="synced"))
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
    return cancelled


def served_kinds(controllers: Sequence[Controller[Any, Any]]) -> tuple[Resource, ...]:
    """The kinds to wait for before watching anything: each controller's own, and those it owns in the
    group of one of them (installed with them: a run's SparkDriver beside its SparkApplication). What else
    a controller owns is the cluster's own (pods, Services), or optional (``Resource.optional``)."""
    own = [c.own.resource for c in controllers]
    groups = {r.group for r in own}
    owned = [s.resource for c in controllers for s in c.owned if s.resource.group in groups and not s.resource.optional]
    return tuple(dict.fromkeys([*own, *owned]))


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
