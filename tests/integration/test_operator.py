"""`sparkop run` as a process: it starts against a real API server and stops cleanly on SIGTERM."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster.testing import ClusterHandle, wait_for
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def test_sigterm_stops_the_operator_cleanly(crds: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    proc = OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path).start()
    wait_for(lambda: "sparkop starting" in proc.logs(), timeout=60, message="operator start")
    assert proc.stop() == 0, proc.logs()
    assert "sparkop stopped" in proc.logs()
