"""``sparkop run``: both controllers (or either) in one process, on informer caches.

Each controller module registers indexes (what it observes, by key) and change handlers that only
enqueue keys; :class:`core.caches.Caches` runs one informer per watched selection (server-side label
selectors for everything sparkop owns), and once every cache has listed, the work queues start.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from core.caches import CacheIndex, Caches, IndexKey
from core.informer import EventType, Obj
from sparkop.controller import Reconcile, WorkQueue
from sparkop.kube import NAMESPACES, SPARK_APPLICATIONS, SPARK_DRIVERS, Kube, Resource

log = logging.getLogger(__name__)

V = TypeVar("V")
Enqueue = Callable[[Obj], Iterable[Any]]
"""The keys an object's change asks to reconcile (its own key, or its owner's)."""


@dataclass(frozen=True)
class Options:
    """Operator-wide settings, from flags."""

    ingress_url_format: str | None = None
    ingress_class_name: str | None = None
    unschedulable_timeout_seconds: float = 300.0
    workers: int = 8


@dataclass
class Runtime:
    """What the handlers and reconcilers of a running operator share."""

    kube: Kube
    options: Options = field(default_factory=Options)
    namespaces: Sequence[str] = ()
    queues: list[WorkQueue[Any]] = field(default_factory=list)
    # Namespaces being deleted: the controllers leave everything in them alone (their objects are
    # going, and a driver vanishing with its namespace is not a failure). Kept by a Namespace watch,
    # and by the API server's 403 NamespaceTerminating for the moment before the watch says so.
    terminating_namespaces: set[str] = field(default_factory=set)
    indexes: dict[str, CacheIndex[Any]] = field(default_factory=dict)

    @functools.cached_property
    def caches(self) -> Caches:
        return Caches(self.kube.api, self.namespaces)

    def index(self, name: str) -> CacheIndex[Any]:
        """A registered index by name: ``index(name).get(key)`` is the list of values filed under
        ``key`` (None if none); it raises ``core.caches.NotCurrent`` while a cache is re-listing."""
        return self.indexes[name]

    def add_index(
        self,
        name: str,
        resource: Resource,
        keys: Callable[[Obj], Iterable[IndexKey]],
        value: Callable[[Obj], V],
        *,
        selector: str | None = None,
    ) -> CacheIndex[V]:
        """Observe ``resource`` (narrowed on the server by the label ``selector``), filed by ``keys``."""
        if name in self.indexes:
            raise ValueError(f"index {name!r} is already registered")
        index = self.caches.index(name, resource, keys, value, label_selector=selector)
        self.indexes[name] = index
        return index

    def enqueue_on_change(
        self, resource: Resource, queue: WorkQueue[Any], keys: Enqueue, *, selector: str | None = None
    ) -> None:
        """On every change of the selection, enqueue the keys of the object before and after it."""

        def handler(_: EventType, obj: Obj, old: Obj | None) -> None:
            for key in {*keys(obj), *(keys(old) if old is not None else ())}:
                queue.enqueue(key)

        self.caches.on_change(resource, handler, label_selector=selector)

    def queue(self, name: str, reconcile: Reconcile[Any]) -> WorkQueue[Any]:
        queue: WorkQueue[Any] = WorkQueue(
            name,
            reconcile,
            workers=self.options.workers,
            on_namespace_terminating=lambda namespace: self.namespace_going(namespace, "a create was refused"),
        )
        self.queues.append(queue)
        return queue

    def namespace_terminating(self, namespace: str) -> bool:
        return namespace in self.terminating_namespaces

    def namespace_going(self, name: str, seen: str) -> None:
        if name not in self.terminating_namespaces:
            log.info("namespace %s is being deleted (%s): the controllers leave what is in it alone", name, seen)
            self.terminating_namespaces.add(name)

    def observe_namespace(self, name: str, body: Mapping[str, Any] | None) -> None:
        """Track a Namespace from its watch events (``body`` None: it is gone)."""
        meta = (body or {}).get("metadata") or {}
        phase = ((body or {}).get("status") or {}).get("phase")
        if body is not None and (meta.get("deletionTimestamp") or phase == "Terminating"):
            self.namespace_going(name, "its watch")
        else:
            self.terminating_namespaces.discard(name)


def register_namespaces(runtime: Runtime) -> None:
    """Watch Namespaces (only the served ones when the operator serves some), for
    ``Runtime.terminating_namespaces``."""

    def on_namespace(type_: EventType, body: Obj, _: Obj | None) -> None:
        name = str((body.get("metadata") or {}).get("name") or "")
        runtime.observe_namespace(name, None if type_ == "DELETED" else body)

    runtime.caches.on_change(NAMESPACES, on_namespace)


Register = Callable[[Runtime], None]

CRD_POLL_SECONDS = 0.5
CRD_NAG_SECONDS = 10.0


async def wait_until_served(kube: Kube, resources: Sequence[Resource]) -> None:
    """Start watching only once the CRDs are served. The operator never installs CRDs, and a LIST of
    a kind that is not served yet is a 404 the informers would only retry."""
    waited = 0.0
    while True:
        missing = [r.plural for r in resources if not await kube.served(r)]
        if not missing:
            return
        if waited % CRD_NAG_SECONDS < CRD_POLL_SECONDS:
            log.warning(
                "waiting for the API server to serve %s; install the CRDs with: kubectl apply --server-side -f crds/",
                ", ".join(missing),
            )
        await asyncio.sleep(CRD_POLL_SECONDS)
        waited += CRD_POLL_SECONDS


def controller_registrations(names: Iterable[str]) -> list[Register]:
    from apps_controller.handlers import register as register_apps
    from driver_controller.handlers import register as register_driver

    known: dict[str, Register] = {"apps": register_apps, "driver": register_driver}
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"unknown controller(s) {unknown}; choose from {sorted(known)}")
    return [known[name] for name in names]


async def run_operator(
    *,
    kubeconfig: str | None,
    context: str | None = None,
    namespaces: Sequence[str] = (),
    controllers: Sequence[str] = ("apps", "driver"),
    options: Options | None = None,
    stop_flag: asyncio.Event | None = None,
    ready_flag: asyncio.Event | None = None,
) -> None:
    """Run until ``stop_flag`` is set (or SIGTERM/SIGINT when run from the CLI)."""
    kube = await Kube.connect(kubeconfig, context)
    runtime = Runtime(kube=kube, options=options or Options(), namespaces=tuple(namespaces))
    register_namespaces(runtime)
    for register in controller_registrations(controllers):
        register(runtime)
    try:
        await wait_until_served(kube, (SPARK_APPLICATIONS, SPARK_DRIVERS))
        log.info("sparkop starting: controllers=%s namespaces=%s", ",".join(controllers), list(namespaces) or "all")
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(runtime.caches.run(), name="caches")]
            started = time.monotonic()
            await wait_synced(runtime.caches)
            log.info("caches synced in %.2fs: %s", time.monotonic() - started, runtime.caches.sizes())
            tasks += [group.create_task(q.run(), name=f"queue:{q.name}") for q in runtime.queues]
            if ready_flag is not None:
                ready_flag.set()
            await (stop_flag or asyncio.Event()).wait()
            for task in tasks:
                task.cancel()
    finally:
        await kube.close()
        log.info("sparkop stopped")


SYNC_NAG_SECONDS = 30.0


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


def run_blocking(**kwargs: Any) -> None:
    """Run the operator in this thread until SIGTERM or SIGINT: either cancels it, at any instant of
    its start or its work (the informers and queues hold nothing that a restart does not rebuild)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        running = asyncio.current_task()
        assert running is not None
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, running.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await run_operator(**kwargs)

    asyncio.run(main())
