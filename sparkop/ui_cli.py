"""``sparkop ui NAME``: the Spark UI of a SparkApplication, from this machine. While a run is active its
live UI (the driver pod's UI port); once it has ended, its page in the history server it logged to
(``status.attempts[].historyURL``). An address reachable from here (a route's or Ingress's host) is
printed (and opened with ``--open``); one inside the cluster is reached through a local port forwarded
through the API server (pods/portforward), to the pod serving when each connection arrives: the
current driver pod, or a Ready pod of the history server.

What to show is decided by pure functions (:func:`choose`), testable without a cluster.
"""

from __future__ import annotations

import asyncio
import signal
import webbrowser
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from sparkop import daily_cli
from sparkop.api import history
from sparkop.connect_cli import Forwarder
from sparkop.core import kube as k8s
from sparkop.core.jsonread import mapping
from sparkop.core.jsontypes import JSON
from sparkop.daily_cli import Target, Unavailable
from sparkop.domain import kinds, labels, naming

DEFAULT_ADDRESS: Final = "127.0.0.1"
LIVE_STATES: Final = frozenset({"SUBMITTED", "RUNNING", "UNKNOWN"})
DEFAULT_UI_PORT: Final = 4040


@dataclass(frozen=True)
class Live:
    """The live UI: the driver pod's UI port."""

    pod: str
    port: int


@dataclass(frozen=True)
class History:
    """A run's page in a history server: ``url`` as status links it; ``service``/``port`` when that is a
    Service in the cluster (forwarded to one of its pods), else None (reachable as it is)."""

    url: str
    server: str | None
    namespace: str
    port: int
    path: str


def _ui_port(app: JSON) -> int:
    value = str(mapping(mapping(app.get("spec")).get("sparkConf")).get("spark.ui.port") or "").strip()
    return int(value) if value.isdigit() and 1 <= int(value) <= 65535 else DEFAULT_UI_PORT


def _last_history_url(status: Mapping[str, Any]) -> str | None:
    for record in reversed(status.get("attempts") or []):
        if isinstance(record, Mapping) and record.get("historyURL"):
            return str(record["historyURL"])
    return None


def in_cluster(url: str) -> tuple[str, str, int, str] | None:
    """(service, namespace, port, path) of an address inside the cluster (``<svc>.<ns>.svc:<port>``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    names = host.split(".")
    if len(names) < 3 or names[2] != "svc":
        return None
    return names[0], names[1], parts.port or 80, parts.path or "/"


def _run_planned(status: Mapping[str, Any]) -> bool:
    """Whether the current run is under way before its driver pod is accepted: the state is still the one
    it was planned from (SUBMITTED says the pod exists), its record not finished."""
    last = status.get("lastRun")
    current = next((mapping(r) for r in status.get("attempts") or () if mapping(r).get("run") == last), None)
    return current is not None and current.get("outcome") == "Running"


def choose(app: JSON) -> Live | History:
    """Where ``app``'s UI is now: its live UI while a run is active, else its last run's history page.
    Unavailable (with what to do) when it has neither."""
    meta, status = mapping(app.get("metadata")), mapping(app.get("status"))
    name = str(meta.get("name") or "")
    state = str(mapping(status.get("applicationState")).get("state") or "NEW")
    pod = mapping(status.get("driverInfo")).get("podName")
    if state in LIVE_STATES and pod:
        return Live(str(pod), _ui_port(app))
    url = _last_history_url(status)
    if url is None:
        hint = (
            "its driver pod is not running yet"
            if state in LIVE_STATES or _run_planned(status)
            else "it logs to no history server: set spec.historyServer (docs/history-server.md)"
        )
        raise Unavailable(f"SparkApplication {name} ({state}) has no Spark UI to show: {hint}")
    found = in_cluster(url)
    if found is None:
        parts = urlsplit(url)
        return History(url, None, "", parts.port or 80, parts.path)
    service, namespace, port, path = found
    return History(url, service, namespace, port, path)


class _UIForwarder(Forwarder):
    """Each connection goes to the pod serving the UI as it arrives: the app's current driver pod (the
    live UI), or a Ready pod of its history server."""

    command = "ui"

    def local_url(self, address: str, port: int) -> str:
        return f"http://{address}:{port}"

    async def target(self) -> tuple[str, int]:
        app = await self.kube.get(kinds.SPARK_APPLICATIONS, self.namespace, self.name)
        if app is None:
            raise Unavailable(f"no SparkApplication {self.name!r} in namespace {self.namespace!r}")
        where = choose(app)
        if isinstance(where, Live):
            return where.pod, where.port
        if where.server is None:
            raise Unavailable(f"the history page is at {where.url}, not in the cluster")
        return await _history_pod(self.kube, where.namespace, where.server)


def _port_named(pod: JSON, name: str, default: int) -> int:
    for container in mapping(pod.get("spec")).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == name and isinstance(port.get("containerPort"), int):
                return int(port["containerPort"])
    return default


async def _history_pod(kube: k8s.Kube, namespace: str, service: str) -> tuple[str, int]:
    """A Ready pod of the history server behind ``service`` (sparkop names both after the server), and
    the port its UI listens on."""
    server = service.removesuffix("-history")
    selector = f"{labels.HISTORY_SERVER}={naming.label_value(server)}"
    for pod in await kube.list(k8s.PODS, namespace, selector=selector):
        conditions = mapping(pod.get("status")).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return str(pod["metadata"]["name"]), _port_named(pod, history.PORT_NAME, history.DEFAULT_PORT)
    raise Unavailable(
        f"no Ready pod of history server {namespace}/{server}: kubectl get sparkhistoryservers -n {namespace}"
    )


async def _ui(kube: k8s.Kube, target: Target, name: str, *, address: str, port: int, forward: bool, open_: bool) -> int:
    namespace = target.namespace or kube.namespace
    app = await kube.get(kinds.SPARK_APPLICATIONS, namespace, name)
    if app is None:
        raise Unavailable(
            f"no SparkApplication {name!r} in namespace {namespace!r}; kubectl get sparkapp -n {namespace}"
        )
    where = choose(app)
    if isinstance(where, History) and where.server is None:
        print(f"History of {namespace}/{name}: {where.url}", flush=True)
        if open_:
            webbrowser.open(where.url)
        return 0
    if not forward:
        text = f"live Spark UI: pod {where.pod}:{where.port}" if isinstance(where, Live) else f"history: {where.url}"
        print(f"{namespace}/{name}: {text} (in the cluster; without --no-forward sparkop ui forwards a local port)")
        return 0
    forwarder = _UIForwarder(kube, namespace, name)
    bound = await forwarder.bind(address, port)
    path = where.path if isinstance(where, History) else "/"
    local = f"http://{address}:{bound}{path}"
    what = "live Spark UI of the running driver" if isinstance(where, Live) else f"history page ({where.url})"
    print(f"Forwarding {local} -> the {what} (Ctrl-C to stop)", flush=True)
    if open_:
        webbrowser.open(local)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await forwarder.close()
    return 0


def main(target: Target, name: str, *, port: int, address: str | None, forward: bool, open_: bool) -> int:
    """``sparkop ui``: the app's live UI while a run is active, its history page after."""
    listen_on = address or DEFAULT_ADDRESS
    return daily_cli.run_command(
        "ui", target, lambda kube: _ui(kube, target, name, address=listen_on, port=port, forward=forward, open_=open_)
    )
