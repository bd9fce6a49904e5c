"""sparkop's CRDs installed on a test's cluster, as `sparkop demo` installs them, and waited for until
they are served (tests/conftest.py's `crds` fixture, tests/e2e/conftest.py's `e2e_cluster`)."""

from __future__ import annotations

from devcluster.testing import ClusterHandle
from sparkop import demo


def install_crds(cluster: ClusterHandle) -> None:
    demo.install_crds(cluster.kubectl_binary, cluster.kubeconfig)
    demo.wait_for_crds(cluster.kubectl_binary, cluster.kubeconfig)
