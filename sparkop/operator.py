"""``sparkop run``: both controllers (or either) in one kopf operator.

kopf does the watching, the initial listing and the indexes; each controller module registers a
few handlers that enqueue keys, and a reconcile function that its WorkQueue runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kopf
from kopf._core.engines.indexing import OperatorIndexers  # public in spirit: kopf.operator() takes it

from sparkop.controller import Reconcile, WorkQueue
from sparkop.kube import SPARK_APPLICATIONS, SPARK_DRIVERS, Kube, Resource

log = logging.getLogger(__name__)


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
    indexers: OperatorIndexers = field(default_factory=OperatorIndexers)
    queues: list[WorkQueue[Any]] = field(default_factory=list)
    # Namespaces being deleted: the controllers leave everything in them alone (their objects are
    # going, and a driver vanishing with its namespace is not a failure). Kept by a Namespace watch,
    # and by the API server's 403 NamespaceTerminating for the moment before the watch says so.
    terminating_namespaces: set[str] = field(default_factory=set)

    def index(self, name: str) -> kopf.Index[Any, Any]:
        """A kopf index by its handler id (the indexing function's name)."""
        return self.indexers.indices[name]

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


def register_namespaces(registry: kopf.OperatorRegistry, runtime: Runtime) -> None:
    """Watch Namespaces (cluster-scoped, also when the operator serves only some namespaces), for
    ``Runtime.terminating_namespaces``."""

    @kopf.on.event("", "v1", "namespaces", id="sparkop_namespaces", registry=registry)
    async def sparkop_namespaces(name: str, body: kopf.Body, type: str | None, **_: Any) -> None:
        runtime.observe_namespace(name, None if type == "DELETED" else body)


Register = Callable[[kopf.OperatorRegistry, Runtime], None]

CRD_POLL_SECONDS = 0.5
CRD_NAG_SECONDS = 10.0


async def wait_until_served(kube: Kube, resources: Sequence[Resource]) -> None:
    """Start watching only once the CRDs are served. The operator never installs CRDs, and kopf
    does not reliably pick up a kind whose CRD appears after it has started."""
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


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # sparkop posts its own Events with stable reasons; kopf's own would duplicate them.
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 30
    return settings


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
    runtime = Runtime(kube=kube, options=options or Options())
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kube.connection_info()

    register_namespaces(registry, runtime)
    for register in controller_registrations(controllers):
        register(registry, runtime)

    try:
        await wait_until_served(kube, (SPARK_APPLICATIONS, SPARK_DRIVERS))
        log.info("sparkop starting: controllers=%s namespaces=%s", ",".join(controllers), list(namespaces) or "all")
        async with asyncio.TaskGroup() as group:
            workers = [group.create_task(q.run(), name=f"queue:{q.name}") for q in runtime.queues]
            # Let the queues spawn their worker tasks before kopf starts: kopf takes every task born
            # after its start for one of its own and waits 5 s for it at shutdown.
            await asyncio.sleep(0)
            try:
                await kopf.operator(
                    registry=registry,
                    settings=operator_settings(),
                    indexers=runtime.indexers,
                    standalone=True,
                    clusterwide=not namespaces,
                    namespaces=list(namespaces),
                    stop_flag=stop_flag,
                    ready_flag=ready_flag,
                )
            finally:
                for task in workers:
                    task.cancel()
    finally:
        await kube.close()
        log.info("sparkop stopped")


def run_blocking(**kwargs: Any) -> None:
    """Run the operator in this thread until SIGTERM or SIGINT.

    Until kopf installs its own handlers for both signals, ours cancel the start-up, so a stop
    at any instant is clean. (A stop flag of ours next to kopf's handlers would never be set, and
    kopf would wait out its 5-second grace period for the task watching it.)"""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        starting = asyncio.current_task()
        assert starting is not None
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, starting.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await run_operator(**kwargs)

    asyncio.run(main())
