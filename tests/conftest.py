"""Shared fixtures. Reusable logic lives in devcluster.testing; keep this file thin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devcluster.testing import ClusterHandle, session_cluster, temporary_namespace


@pytest.fixture(scope="session")
def cluster() -> Iterator[ClusterHandle]:
    """A real control plane for the whole session (or `$SPARKOP_KUBECONFIG`'s cluster).

    Attributes: kubeconfig (Path), kubectl(*args, input=, check=), kubectl_json(*args),
    apply(manifest, namespace=), restart_apiserver(), restart_etcd(), restart("all"), can_restart.
    """
    with session_cluster() as handle:
        yield handle


@pytest.fixture
def namespace(cluster: ClusterHandle) -> Iterator[str]:
    """A fresh namespace (its default service account ready), deleted after the test."""
    with temporary_namespace(cluster) as name:
        yield name
