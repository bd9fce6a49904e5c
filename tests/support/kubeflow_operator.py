"""kubeflow's spark-operator for tests, run the one way this repository runs it: bench/peer.py's
``KubeflowOperator`` (``spark-operator controller start`` as a local process watching one namespace,
no webhook, real ``spark-submit`` from the cached pyspark with the machine's Java 17), built from its
Go module (``KUBEFLOW_SPARK_OPERATOR_VERSION``) into the binary cache.

Built with ``python -m tests.support.kubeflow_operator`` (minutes on 2 cores the first time, cached
afterwards); ``make test`` builds it beside the suite (tests/support/background_builds.py) for the live
swap, its only test, which runs last in its part and waits for it.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devcluster import build, scheduler_crds
from devcluster.cluster import Cluster
from devcluster.testing import ClusterHandle

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import peer  # noqa: E402  (bench/peer.py: the kubeflow operator's build and runner)

KUBEFLOW_API_VERSION = peer.KUBEFLOW_APPS.api_version
KUBEFLOW_APP_LABEL = peer.KUBEFLOW_APP_LABEL


@dataclass(frozen=True)
class _OnCluster:
    """What KubeflowOperator reads of a benchmark's cluster: its devcluster."""

    cluster: Cluster


def binary_dir() -> Path:
    """Where the build puts the binary (the background builder's key for it)."""
    return build.set_dir(peer.kubeflow_binaries(peer.kubeflow_version()))


def ensure_binary() -> Path:
    return peer.ensure_kubeflow_operator()


def install_crds(handle: ClusterHandle) -> None:
    """kubeflow's CRDs from its module's chart, as its chart installs them (and leaves them behind)."""
    module = scheduler_crds.module_dir(peer.KUBEFLOW_MODULE, peer.kubeflow_version())
    files = sorted((module / peer.KUBEFLOW_CRDS_DIR).glob("*.yaml"))
    scheduler_crds.install(handle.kubectl_binary, handle.kubeconfig, files=files)


def start(handle: ClusterHandle, namespace: str) -> Any:
    """kubeflow's operator watching ``namespace``, ready (its workers started); stop() uninstalls it."""
    assert handle.cluster is not None, "kubeflow's operator runs beside a devcluster this session started"
    workdir = Path(tempfile.mkdtemp(prefix=f"{handle.cluster.name}-kubeflow-"))
    operator = peer.kubeflow_processes(_OnCluster(handle.cluster), ensure_binary(), namespace, workdir).start()  # type: ignore[arg-type]
    try:
        operator.wait_ready()
    except BaseException:
        operator.stop()
        raise
    return operator


if __name__ == "__main__":
    print(ensure_binary())
