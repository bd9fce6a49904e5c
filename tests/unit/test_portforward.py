"""Port-forwarding through the API server (core.kube.Kube.port_forward) and ``sparkop connect
--port-forward``, against a local aiohttp server that speaks the API server's side: a SparkConnect to
GET, and pods/portforward WebSockets in Kubernetes' v4.channel.k8s.io framing (each channel opened by
the port number, data on channel 0 echoed by the "pod", the kubelet's error on channel 1).

The Kube under test comes from a kubeconfig, as the command's does, so the WebSocket is checked to
carry the same credentials and TLS settings (CA, client certificate) as every other request."""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import ssl
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from devcluster import certs
from sparkop import connect_cli
from sparkop.core.kube import Kube
from sparkop.core.portforward import PORT_FORWARD_PROTOCOL, PortForwardError
from sparkop.domain import kinds

pytestmark = pytest.mark.asyncio

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "t0ken"
NAMESPACE = "jobs"
NAME = "analytics"
GRPC_PORT = 15002
# What the kubelet writes on the error channel when nothing listens on the pod's port.
REFUSED = (
    "error forwarding port 15002 to pod 0123, uid : failed to execute portforward in network namespace "
    '"/var/run/netns/cni-1": failed to connect to localhost:15002 inside namespace "0123", IPv4: dial tcp4 '
    "127.0.0.1:15002: connect: connection refused"
)


def spark_connect(pod: str | None, *, state: str = "Ready", port: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"sparkVersion": "4.0.1", "image": "apache/spark:4.0.1"}
    if port is not None:
        spec["sparkConf"] = {"spark.connect.grpc.binding.port": str(port)}
    server = {"podName": pod, "podIp": "10.244.1.7", "serviceName": f"{NAME}-server", "driver": f"{NAME}-server-1"}
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkConnect",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": spec,
        "status": {"state": state, "server": server if pod else {}},
    }


@dataclass
class Forwarded:
    pod: str
    port: int
    protocol: str
    authorization: str
    peer_certificate: bool


@dataclass
class FakeApiServer:
    """The API server's side of the requests ``sparkop connect`` makes. Pods echo what they get;
    "line-" pods echo each line prefixed with their name (so a test sees which pod answered);
    "refusing" pods answer with the kubelet's error; "closing" pods answer one frame, then close."""

    connect: dict[str, Any] | None = field(default_factory=lambda: spark_connect("line-a"))
    forbidden: set[str] = field(default_factory=set)
    forwarded: list[Forwarded] = field(default_factory=list)
    url: str = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/apis/sparkop.io/v1alpha1/namespaces/{ns}/sparkconnects/{name}", self._get_connect)
        app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/portforward", self._portforward)
        return app

    def _authorized(self, request: web.Request) -> bool:
        return bool(request.headers.get("Authorization") == f"Bearer {TOKEN}")

    async def _get_connect(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return web.json_response({"kind": "Status", "reason": "Unauthorized"}, status=401)
        found = self.connect
        if found is None or request.match_info["name"] != NAME or request.match_info["ns"] != NAMESPACE:
            return web.json_response({"kind": "Status", "reason": "NotFound", "code": 404}, status=404)
        return web.json_response(found)

    async def _portforward(self, request: web.Request) -> web.StreamResponse:
        pod = request.match_info["pod"]
        if pod in self.forbidden:
            status = {"kind": "Status", "reason": "Forbidden", "code": 403, "message": "cannot create pods/portforward"}
            return web.json_response(status, status=403)
        if pod == "gone":
            return web.json_response({"kind": "Status", "reason": "NotFound", "code": 404}, status=404)
        ws = web.WebSocketResponse(protocols=(PORT_FORWARD_PROTOCOL,))
        await ws.prepare(request)
        port = int(request.query["ports"])
        self.forwarded.append(
            Forwarded(
                pod,
                port,
                ws.ws_protocol or "",
                request.headers.get("Authorization", ""),
                bool(request.transport and request.transport.get_extra_info("peercert")),
            )
        )
        opening = port.to_bytes(2, "little")
        await ws.send_bytes(b"\x00" + opening)
        await ws.send_bytes(b"\x01" + opening)
        if pod == "refusing":
            await ws.send_bytes(b"\x01" + REFUSED.encode())
            await ws.close()
            return ws
        pending = b""
        async for message in ws:
            assert message.type is aiohttp.WSMsgType.BINARY
            assert message.data[:1] == b"\x00", "the client writes data on channel 0"
            data = message.data[1:]
            if pod.startswith("line-"):
                pending += data
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    await ws.send_bytes(b"\x00" + pod.encode() + b":" + line + b"\n")
            else:
                await ws.send_bytes(b"\x00" + data)
            if pod == "closing":
                await ws.close()
        return ws


def kubeconfig_text(server: str, tls: certs.CertPaths | None = None) -> str:
    cluster = f"server: {server}"
    user = f"token: {TOKEN}"
    if tls is not None:
        cluster += f"\n    certificate-authority: {tls.ca_cert}"
        user += f"\n    client-certificate: {tls.admin_cert}\n    client-key: {tls.admin_key}"
    return f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    {cluster}
users:
- name: u
  user:
    {user}
contexts:
- name: x
  context: {{cluster: c, user: u, namespace: {NAMESPACE}}}
current-context: x
"""


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    yield


async def _serve(api: FakeApiServer, ssl_context: ssl.SSLContext | None = None) -> web.AppRunner:
    runner = web.AppRunner(api.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    port = runner.addresses[0][1]
    api.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
    return runner


@pytest.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    fake = FakeApiServer()
    runner = await _serve(fake)
    yield fake
    await runner.cleanup()


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig_text(api.url))
    return str(path)


@pytest.fixture
async def kube(kubeconfig: str) -> AsyncIterator[Kube]:
    client = await Kube.connect(kubeconfig)
    yield client
    await client.close()


# ---------------------------------------------------------------------------------------------
# Kube.port_forward: the protocol


async def test_data_goes_to_the_pod_and_back_without_the_port_prefix(kube: Kube, api: FakeApiServer) -> None:
    async with await kube.port_forward(NAMESPACE, "echo", GRPC_PORT) as stream:
        await stream.write(b"hello")
        assert await stream.read() == b"hello"
        await stream.write(b"\x00\x01binary")
        assert await stream.read() == b"\x00\x01binary"
    assert stream.closed
    assert api.forwarded == [Forwarded("echo", GRPC_PORT, PORT_FORWARD_PROTOCOL, f"Bearer {TOKEN}", False)]


async def test_a_large_write_arrives_whole_and_in_order(kube: Kube) -> None:
    payload = os.urandom(1 << 20)
    async with await kube.port_forward(NAMESPACE, "echo", GRPC_PORT) as stream:
        for at in range(0, len(payload), 50_000):
            await stream.write(payload[at : at + 50_000])
        received = b""
        while len(received) < len(payload):
            received += await stream.read()
    assert received == payload


async def test_the_pod_closing_is_the_end_of_the_data(kube: Kube) -> None:
    async with await kube.port_forward(NAMESPACE, "closing", GRPC_PORT) as stream:
        await stream.write(b"last")
        assert await stream.read() == b"last"
        assert await stream.read() == b""


async def test_the_kubelets_error_is_raised_with_its_message(kube: Kube) -> None:
    async with await kube.port_forward(NAMESPACE, "refusing", GRPC_PORT) as stream:
        with pytest.raises(PortForwardError) as raised:
            await stream.read()
    assert raised.value.status == 0
    assert str(raised.value) == f"forwarding to {NAMESPACE}/refusing:{GRPC_PORT}: {REFUSED}"


@pytest.mark.parametrize(
    ("pod", "status", "says"),
    [
        ("locked", 403, "403 Forbidden (port-forwarding needs the get and create verbs on pods/portforward)"),
        ("gone", 404, "404 Not Found (no pod 'gone' in namespace 'jobs')"),
    ],
)
async def test_a_refusal_names_the_target_and_the_status(
    kube: Kube, api: FakeApiServer, pod: str, status: int, says: str
) -> None:
    api.forbidden.add("locked")
    with pytest.raises(PortForwardError) as raised:
        await kube.port_forward(NAMESPACE, pod, GRPC_PORT)
    assert raised.value.status == status
    assert str(raised.value) == f"the API server refused to forward {NAMESPACE}/{pod}:{GRPC_PORT}: {says}"


async def test_the_websocket_takes_the_clients_tls_settings(tmp_path: Path) -> None:
    """CA and client certificate from the kubeconfig, as on every request: a server that requires a
    client certificate signed by its CA accepts the WebSocket."""
    pki = certs.write_pki(tmp_path / "pki")
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
    server_tls.load_cert_chain(pki.serving_cert, pki.serving_key)
    server_tls.verify_mode = ssl.CERT_REQUIRED
    fake = FakeApiServer()
    runner = await _serve(fake, server_tls)
    try:
        path = tmp_path / "kubeconfig"
        path.write_text(kubeconfig_text(fake.url, pki))
        kube = await Kube.connect(str(path))
        try:
            assert (await kube.get(kinds.SPARK_CONNECTS, NAMESPACE, NAME)) is not None
            async with await kube.port_forward(NAMESPACE, "echo", GRPC_PORT) as stream:
                await stream.write(b"over tls")
                assert await stream.read() == b"over tls"
        finally:
            await kube.close()
    finally:
        await runner.cleanup()
    assert [(f.pod, f.peer_certificate) for f in fake.forwarded] == [("echo", True)]


# ---------------------------------------------------------------------------------------------
# the listener of `sparkop connect --port-forward`


FORWARDING = re.compile(
    r"Forwarding sc://127\.0\.0\.1:(?P<port>\d+) -> (?P<ns>[^/]+)/(?P<pod>\S+):(?P<grpc>\d+) \(Ctrl-C to stop\)"
)


@dataclass
class Listening:
    port: int
    line: str
    log: io.StringIO
    stop: asyncio.Event
    task: asyncio.Task[None]


@pytest.fixture
async def listening(kube: Kube) -> AsyncIterator[Listening]:
    lines: list[str] = []
    log = io.StringIO()
    stop = asyncio.Event()
    announced = asyncio.Event()

    def announce(line: str) -> None:
        lines.append(line)
        announced.set()

    task = asyncio.create_task(
        connect_cli.forward(kube, NAMESPACE, NAME, port=0, stop=stop, announce=announce, log=log)
    )
    await asyncio.wait_for(announced.wait(), 10)
    match = FORWARDING.fullmatch(lines[0])
    assert match, lines
    yield Listening(int(match["port"]), lines[0], log, stop, task)
    stop.set()
    await asyncio.wait_for(task, 10)


async def _ask(port: int, line: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(line)
        await writer.drain()
        return await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()
        await writer.wait_closed()


async def test_the_listener_names_the_pod_and_port_it_forwards_to(listening: Listening) -> None:
    assert listening.port != GRPC_PORT
    assert listening.line == (
        f"Forwarding sc://127.0.0.1:{listening.port} -> {NAMESPACE}/line-a:{GRPC_PORT} (Ctrl-C to stop)"
    )


async def test_each_connection_is_forwarded_to_the_server_pod_of_that_moment(
    listening: Listening, api: FakeApiServer
) -> None:
    assert await _ask(listening.port, b"one\n") == b"line-a:one\n"
    # The server pod was replaced, and its gRPC port moved with a spec change.
    api.connect = spark_connect("line-b", port=15010)
    assert await _ask(listening.port, b"two\n") == b"line-b:two\n"
    assert [(f.pod, f.port) for f in api.forwarded] == [("line-a", GRPC_PORT), ("line-b", 15010)]
    assert f"new connections go to {NAMESPACE}/line-b:15010 (was line-a)" in listening.log.getvalue()


async def test_connections_at_once_are_forwarded_each_on_its_own(listening: Listening) -> None:
    answers = await asyncio.gather(*(_ask(listening.port, f"c{i}\n".encode()) for i in range(8)))
    assert answers == [f"line-a:c{i}\n".encode() for i in range(8)]


async def test_the_answer_in_flight_after_the_clients_eof_still_arrives(
    listening: Listening, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connect_cli, "LINGER_SECONDS", 0.3)
    api.connect = spark_connect("echo")
    reader, writer = await asyncio.open_connection("127.0.0.1", listening.port)
    writer.write(b"request")
    writer.write_eof()
    # The tunnel cannot carry the half-close; it is closed after the linger, the answer delivered.
    assert await asyncio.wait_for(reader.read(), 10) == b"request"
    writer.close()


async def test_a_connection_that_cannot_be_forwarded_is_closed_and_said_why(
    listening: Listening, api: FakeApiServer
) -> None:
    api.connect = spark_connect("refusing")
    assert await _ask(listening.port, b"x\n") == b""
    api.connect = spark_connect(None, state="Provisioning")
    assert await _ask(listening.port, b"x\n") == b""
    api.connect = spark_connect("line-a")
    assert await _ask(listening.port, b"back\n") == b"line-a:back\n"
    log = listening.log.getvalue()
    assert f"sparkop connect: connection closed: forwarding to {NAMESPACE}/refusing:{GRPC_PORT}: {REFUSED}" in log
    assert (
        f"sparkop connect: connection closed: SparkConnect {NAMESPACE}/{NAME} has no server pod now "
        f"(state Provisioning); sparkop connect {NAME} -n {NAMESPACE} says more"
    ) in log


async def test_no_server_pod_means_no_listener(kube: Kube, api: FakeApiServer) -> None:
    api.connect = spark_connect(None, state="Provisioning")
    with pytest.raises(connect_cli.Unavailable, match="has no server pod now"):
        await connect_cli.forward(kube, NAMESPACE, NAME, port=0, stop=asyncio.Event(), announce=print)
    api.connect = None
    with pytest.raises(connect_cli.Unavailable, match=f"no SparkConnect '{NAME}' in namespace '{NAMESPACE}'"):
        await connect_cli.forward(kube, NAMESPACE, NAME, port=0, stop=asyncio.Event(), announce=print)


async def test_a_port_in_use_is_one_clear_error(kube: Kube) -> None:
    taken = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = int(taken.sockets[0].getsockname()[1])
    try:
        with pytest.raises(
            connect_cli.Unavailable, match=rf"cannot listen on sc://127\.0\.0\.1:{port}: .*any free port"
        ):
            await connect_cli.forward(kube, NAMESPACE, NAME, port=port, stop=asyncio.Event(), announce=print)
    finally:
        taken.close()
        await taken.wait_closed()


# ---------------------------------------------------------------------------------------------
# the command, as a user runs it


async def _sparkop(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sparkop",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_sparkop_connect_port_forward_runs_until_sigint(kubeconfig: str, api: FakeApiServer) -> None:
    process = await _sparkop("connect", NAME, "-n", NAMESPACE, "--kubeconfig", kubeconfig, "--port-forward", "0")
    assert process.stdout is not None and process.stderr is not None
    try:
        first = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        match = FORWARDING.fullmatch(first.rstrip("\n"))
        assert match, (first, await process.stderr.read())
        assert await _ask(int(match["port"]), b"via the command\n") == b"line-a:via the command\n"
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(process.wait(), 30) == 0
    assert await process.stdout.read() == b""  # one line, no more
    assert (await process.stderr.read()).decode() == ""


async def test_sparkop_connect_prints_the_status_and_exits_0_when_ready(kubeconfig: str, api: FakeApiServer) -> None:
    process = await _sparkop("connect", NAME, "--kubeconfig", kubeconfig)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err
    assert out.decode().splitlines()[0] == f"SparkConnect {NAMESPACE}/{NAME}: Ready"


async def test_sparkop_connect_of_no_such_object_is_one_line_exit_1(kubeconfig: str, api: FakeApiServer) -> None:
    process = await _sparkop("connect", "nope", "-n", "other", "--kubeconfig", kubeconfig, "--port-forward")
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert (process.returncode, out) == (1, b"")
    assert err.decode() == (
        "sparkop connect: no SparkConnect 'nope' in namespace 'other'; kubectl get sparkconnects -n other\n"
    )
