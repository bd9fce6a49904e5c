"""core.kube's client set-up: what the environment says about proxies is read once, at connect."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.kube import Kube

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
