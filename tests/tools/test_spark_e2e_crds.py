"""with_crds installs sparkop's CRDs on each cluster it is given once, and again on a cluster started
afresh under the same name (the shared real-node cluster, after a test stopped it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle
from tests.support import spark_e2e


def test_a_restarted_cluster_at_the_same_kubeconfig_gets_the_crds_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    installed: list[object] = []
    monkeypatch.setattr(spark_e2e, "install_crds", lambda handle: installed.append(handle.cluster))
    monkeypatch.setattr(spark_e2e, "_CRDS_INSTALLED", {})
    kubeconfig, kubectl = tmp_path / "kubeconfig", tmp_path / "kubectl"
    first: Any = object()
    restarted: Any = object()

    spark_e2e.with_crds(ClusterHandle(kubeconfig, kubectl, first))
    spark_e2e.with_crds(ClusterHandle(kubeconfig, kubectl, first))
    assert installed == [first]

    spark_e2e.with_crds(ClusterHandle(kubeconfig, kubectl, restarted))
    assert installed == [first, restarted]


def test_an_external_cluster_gets_the_crds_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    installed: list[Path] = []
    monkeypatch.setattr(spark_e2e, "install_crds", lambda handle: installed.append(handle.kubeconfig))
    monkeypatch.setattr(spark_e2e, "_CRDS_INSTALLED", {})
    handle = ClusterHandle(tmp_path / "kubeconfig", tmp_path / "kubectl")
    spark_e2e.with_crds(handle)
    spark_e2e.with_crds(handle)
    assert installed == [handle.kubeconfig]
