"""``sparkop connect NAME``: where a SparkConnect serves, and with ``--port-forward`` a local port that
reaches its server through the API server (pods/portforward), for a client outside the cluster.

Unlike ``kubectl port-forward``, which stays with the pod it resolved when it started, each new
connection goes to the pod serving when it arrives (``status.server.podName``, read again per
connection): a client that reconnects after its server pod was replaced reaches the new one, through
the same local port. What to print is decided by pure functions, testable without a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from typing import Any, Final, TextIO

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from sparkop import daily_cli
from sparkop.api import connect as connect_api
from sparkop.core import kube as k8s
from sparkop.core.jsontypes import JSON
from sparkop.daily_cli import Target, Unavailable
from sparkop.domain import kinds

DEFAULT_ADDRESS: Final = "127.0.0.1"
CHUNK: Final = 64 * 1024
# v4.channel.k8s.io cannot tell the pod that the client stopped sending (no half-close): after the
# client's EOF the pod's answer still in flight is relayed this long before the tunnel is closed.
LINGER_SECONDS: Final = 5.0


# ---------------------------------------------------------------------------------------------
# pure: what a SparkConnect says


def state_of(connect: JSON) -> str | None:
    state = (connect.get("status") or {}).get("state")
    return str(state) if state else None


def is_ready(connect: JSON) -> bool:
    return state_of(connect) == connect_api.ConnectState.READY


def grpc_port(connect: JSON) -> int:
    """The server's gRPC port; the default when sparkConf's is not a port (the CRD refuses that)."""
    return connect_api.port_of((connect.get("spec") or {}).get("sparkConf")) or connect_api.DEFAULT_PORT


def server_pod(connect: JSON) -> str | None:
    pod = ((connect.get("status") or {}).get("server") or {}).get("podName")
    return str(pod) if pod else None


def _executors(counts: JSON) -> str:
    parts = [f"{counts.get('running', 0)} running", f"{counts.get('pending', 0)} pending"]
    parts += [f"{counts[phase]} {phase}" for phase in ("succeeded", "failed", "unknown") if counts.get(phase)]
    return ", ".join(parts)


def describe(connect: JSON) -> list[str]:
    """``sparkop connect NAME``'s lines, without --port-forward."""
    meta, status = connect["metadata"], connect.get("status") or {}
    namespace, name = meta.get("namespace", ""), meta["name"]
    state = state_of(connect) or "Unknown (no status yet: has the operator's connect controller seen it?)"
    endpoint = status.get("endpoint")
    outside = f"from outside: sparkop connect {name} -n {namespace} --port-forward"
    lines = [
        f"SparkConnect {namespace}/{name}: {state}",
        f"  Endpoint: {endpoint} (in the cluster; {outside})" if endpoint else "  Endpoint: none yet",
    ]
    server = status.get("server") or {}
    if server.get("podName") or server.get("driver"):
        incarnation = server.get("incarnation")
        lines.append(
            f"  Server: pod {server.get('podName') or '-'}, IP {server.get('podIp') or '-'}, "
            f"SparkDriver {server.get('driver') or '-'}, incarnation {incarnation if incarnation else '-'}"
        )
    else:
        lines.append("  Server: none yet")
    lines.append(f"  Executors: {_executors(status.get('executors') or {})}")
    lines.append(f"  Restarts: {status.get('restarts', 0)}")
    error = status.get("lastError") or {}
    if error.get("reason") or error.get("message"):
        text = f"{error.get('reason') or 'Error'}: {error['message']}" if error.get("message") else error["reason"]
        lines.append(f"  Last error: {' '.join(str(text).split())}")
    return lines


def missing(namespace: str, name: str) -> Unavailable:
    return Unavailable(f"no SparkConnect {name!r} in namespace {namespace!r}; kubectl get sparkconnects -n {namespace}")


def local_url(address: str, port: int) -> str:
    """The sc:// URL of a local listener (an IPv6 address in brackets, as URLs write it)."""
    host = f"[{address}]" if ":" in address else address
    return f"sc://{host}:{port}"


def forwarding_line(address: str, port: int, namespace: str, pod: str, grpc: int) -> str:
    return f"Forwarding {local_url(address, port)} -> {namespace}/{pod}:{grpc} (Ctrl-C to stop)"


# ---------------------------------------------------------------------------------------------
# forwarding


async def relay(stream: k8s.PortForward, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy a local connection's bytes to the pod and the pod's back, until the pod side ends (or the
    client's, plus LINGER_SECONDS for the answer in flight). The kubelet's error (PortForwardError) is
    raised; a client that went away is no error."""

    async def upstream() -> None:
        while data := await reader.read(CHUNK):
            await stream.write(data)

    async def downstream() -> None:
        while data := await stream.read():
            writer.write(data)
            await writer.drain()

    up, down = asyncio.create_task(upstream()), asyncio.create_task(downstream())
    try:
        await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
        if up.done() and not up.cancelled() and up.exception() is None and not down.done():
            await asyncio.wait((down,), timeout=LINGER_SECONDS)
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)
    error = down.exception() if down.done() and not down.cancelled() else None
    if isinstance(error, k8s.PortForwardError):
        raise error


class Forwarder:
    """A local listener whose every accepted connection is forwarded to the port of the SparkConnect's
    current server pod, looked up as the connection arrives (a subclass looks up another pod:
    :meth:`target`; ``command`` names it in what it says)."""

    command: str = "connect"

    def __init__(self, kube: k8s.Kube, namespace: str, name: str, *, log: TextIO | None = None) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.log = log
        self.pod: str | None = None  # where the last connection went
        self._connections: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None

    async def target(self) -> tuple[str, int]:
        """The server pod and gRPC port to forward to now. Unavailable when there is none."""
        connect = await self.kube.get(kinds.SPARK_CONNECTS, self.namespace, self.name)
        if connect is None:
            raise missing(self.namespace, self.name)
        pod = server_pod(connect)
        if pod is None:
            raise Unavailable(
                f"SparkConnect {self.namespace}/{self.name} has no server pod now (state {state_of(connect) or '-'}); "
                f"sparkop connect {self.name} -n {self.namespace} says more"
            )
        return pod, grpc_port(connect)

    async def listen(self, address: str, port: int | None) -> str:
        """Start listening on ``address``:``port`` (None: the server's gRPC port, 0: any free port);
        the line that says where, and to which pod."""
        pod, grpc = await self.target()
        self.pod = pod
        bound = await self.bind(address, grpc if port is None else port)
        return forwarding_line(address, bound, self.namespace, pod, grpc)

    def local_url(self, address: str, port: int) -> str:
        return local_url(address, port)

    async def bind(self, address: str, port: int) -> int:
        """Listen on ``address``:``port`` (0: any free port); the port bound."""
        try:
            self._server = await asyncio.start_server(self._accepted, address, port)
        except OSError as exc:
            raise Unavailable(
                f"cannot listen on {self.local_url(address, port)}: {exc.strerror or exc}; "
                "--port-forward 0 takes any free port"
            ) from None
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _say(self, text: str) -> None:
        print(f"sparkop {self.command}: {text}", file=self.log or sys.stderr, flush=True)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._forward(reader, writer)
        except asyncio.CancelledError:
            # Cancelled by close(): the end of the connection, not an error. (Python 3.11's stream
            # server logs a traceback for a connection task that ends cancelled.)
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            pod, port = await self.target()
            if pod != self.pod:
                self._say(f"new connections go to {self.namespace}/{pod}:{port} (was {self.pod})")
                self.pod = pod
            async with await self.kube.port_forward(self.namespace, pod, port) as stream:
                await relay(stream, reader, writer)
        except (Unavailable, k8s.PortForwardError) as exc:
            self._say(f"connection closed: {exc}")
        except ApiException as exc:
            self._say(f"connection closed: the API server refused: {daily_cli._api_message(exc)}")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            self._say(f"connection closed: cannot reach the API server: {exc or type(exc).__name__}")


async def forward(
    kube: k8s.Kube,
    namespace: str,
    name: str,
    *,
    address: str = DEFAULT_ADDRESS,
    port: int | None = None,
    stop: asyncio.Event,
    announce: Callable[[str], None],
    log: TextIO | None = None,
) -> None:
    """Forward until ``stop`` is set; ``announce`` gets the Forwarding line once listening."""
    forwarder = Forwarder(kube, namespace, name, log=log)
    try:
        announce(await forwarder.listen(address, port))
        await stop.wait()
    finally:
        await forwarder.close()


# ---------------------------------------------------------------------------------------------
# the command


async def _show(kube: k8s.Kube, target: Target, name: str) -> int:
    namespace = target.namespace or kube.namespace
    connect = await kube.get(kinds.SPARK_CONNECTS, namespace, name)
    if connect is None:
        raise missing(namespace, name)
    print("\n".join(describe(connect)))
    return 0 if is_ready(connect) else 1


async def _forward(kube: k8s.Kube, target: Target, name: str, *, address: str, port: int | None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    stopping = (signal.SIGINT, signal.SIGTERM)
    for signum in stopping:
        loop.add_signal_handler(signum, stop.set)
    try:
        await forward(
            kube,
            target.namespace or kube.namespace,
            name,
            address=address,
            port=port,
            stop=stop,
            announce=lambda line: print(line, flush=True),
        )
    finally:
        for signum in stopping:
            loop.remove_signal_handler(signum)
    return 0


def main(target: Target, name: str, *, port_forward: bool, local_port: int | None, address: str | None) -> int:
    """``sparkop connect``: without ``port_forward`` the SparkConnect in words (exit 0 when Ready);
    with it, forward ``address``:``local_port`` (None: the server's port) until SIGINT or SIGTERM."""
    if not port_forward:
        if address is not None:
            print("sparkop connect: --address is for --port-forward", file=sys.stderr)
            return 2
        return daily_cli.run_command("connect", target, lambda kube: _show(kube, target, name))
    listen_on = address or DEFAULT_ADDRESS
    return daily_cli.run_command(
        "connect", target, lambda kube: _forward(kube, target, name, address=listen_on, port=local_port)
    )
