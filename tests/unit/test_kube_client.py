"""core.kube's client set-up: what the environment says about proxies is read once, at connect."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from sparkop.core import kube as kube_module
from sparkop.core.kube import Kube, RateLimit

pytestmark = pytest.mark.asyncio

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.1.2.3:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u, namespace: jobs}
current-context: x
"""


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    return str(path)


async def test_the_session_does_not_read_the_environment_per_request(kubeconfig: str) -> None:
    kube = await Kube.connect(kubeconfig)
    try:
        assert kube.namespace == "jobs"
        assert kube.api.rest_client.pool_manager.trust_env is False
        assert not kube.api.rest_client.proxy
    finally:
        await kube.close()


async def test_a_proxy_from_the_environment_is_pinned_once(kubeconfig: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://someone:secret@proxy.example:3128")
    kube = await Kube.connect(kubeconfig)
    try:
        rest = kube.api.rest_client
        assert rest.proxy == "http://proxy.example:3128"
        assert rest.proxy_headers["Proxy-Authorization"].startswith("Basic ")
        assert rest.pool_manager.trust_env is False
    finally:
        await kube.close()


async def test_no_proxy_for_the_api_server_is_honoured(kubeconfig: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "10.1.2.3")
    kube = await Kube.connect(kubeconfig)
    try:
        assert not kube.api.rest_client.proxy
    finally:
        await kube.close()


async def test_the_rate_limit_lets_a_burst_through_then_paces_requests_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))

    monkeypatch.setattr(kube_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(kube_module.asyncio, "sleep", sleep)
    limit = RateLimit(qps=10, burst=3)
    for _ in range(3):
        await limit.take()
    assert slept == []  # the burst
    for _ in range(3):
        await limit.take()
    assert slept == [0.1, 0.2, 0.3]  # each later request waits for its own token, in turn
    clock[0] += 10  # idle: the bucket refills, but never beyond the burst
    slept.clear()
    for _ in range(4):
        await limit.take()
    assert slept == [0.1]


async def test_no_rate_limit_at_qps_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    async def sleep(seconds: float) -> None:
        raise AssertionError("qps 0 never waits")

    monkeypatch.setattr(kube_module.asyncio, "sleep", sleep)
    limit = RateLimit(qps=0, burst=1)
    for _ in range(1000):
        await limit.take()


async def test_what_the_session_swap_needs_of_the_client_libraries_is_still_there(kubeconfig: str) -> None:
    """core.kube._read_the_environment_once is the one place that reaches past kubernetes_asyncio's and
    aiohttp's public API (their sessions take ``trust_env`` only at construction): the attributes it
    reads and sets must mean what they meant, or this fails before the operator does."""
    kube = await Kube.connect(kubeconfig)
    try:
        session = kube.api.rest_client.pool_manager
        assert isinstance(session, aiohttp.ClientSession)
        assert isinstance(session._read_bufsize, int) and session._read_bufsize > 0
        assert session._connector_owner is True  # the swapped-in session owns the connector
        assert session.connector is not None and not session.connector.closed
    finally:
        await kube.close()
    assert session.closed and session.connector is None
