"""Shared fixtures. Reusable logic lives in devcluster.testing; keep this file thin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.testing import ClusterHandle, RealNodeClusters, session_cluster, temporary_namespace
from sparkop import demo
from tests.support.operator import OperatorProcess


def install_crds(cluster: ClusterHandle) -> None:
    demo.install_crds(cluster.kubectl_binary, cluster.kubeconfig)
    demo.wait_for_crds(cluster.kubectl_binary, cluster.kubeconfig)


@pytest.fixture(scope="session")
def cluster() -> Iterator[ClusterHandle]:
    """A real control plane for the whole session (or `$SPARKOP_KUBECONFIG`'s cluster).

    Attributes: kubeconfig (Path), kubectl(*args, input=, check=), kubectl_json(*args),
    apply(manifest, namespace=), restart_apiserver(), restart_etcd(), restart("all"), can_restart.
    """
    with session_cluster() as handle:
        yield handle


@pytest.fixture(scope="session")
def real_node_clusters() -> Iterator[RealNodeClusters]:
    """The session's real-node cluster, started on first use and torn down at the end."""
    clusters = RealNodeClusters()
    try:
        yield clusters
    finally:
        clusters.stop()


@pytest.fixture
def real_cluster(real_node_clusters: RealNodeClusters) -> ClusterHandle:
    """A cluster whose two nodes are real (kubelet + containerd), with cluster DNS and
    kube-proxy, and the images of devcluster/images.py imported; no kwok nodes."""
    return real_node_clusters.get()


@pytest.fixture
def real_namespace(real_cluster: ClusterHandle) -> Iterator[str]:
    with temporary_namespace(real_cluster) as name:
        yield name


@pytest.fixture
def namespace(cluster: ClusterHandle) -> Iterator[str]:
    """A fresh namespace (its default service account ready), deleted after the test."""
    with temporary_namespace(cluster) as name:
        yield name


@pytest.fixture(scope="session")
def crds(cluster: ClusterHandle) -> ClusterHandle:
    """The cluster with sparkop's committed CRDs installed and Established."""
    install_crds(cluster)
    return cluster


@pytest.fixture
def operator(crds: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    """The real operator (`sparkop run`, both controllers) watching the test's namespace."""
    with OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path) as proc:
        yield proc
