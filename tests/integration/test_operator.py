"""`sparkop run` as a process: it starts against a real API server and stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from devcluster.testing import ClusterHandle, wait_for
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]


def test_sigterm_stops_the_operator_cleanly(crds: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    proc = OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path).start()
    wait_for(lambda: "sparkop starting" in proc.logs(), timeout=60, message="operator start")
    assert proc.stop() == 0, proc.logs()
    assert "sparkop stopped" in proc.logs()


def test_an_operator_started_before_its_crds_waits_for_them(tmp_path: Path) -> None:
    """Order of installation must not matter: start the operator on a cluster without the CRDs,
    install them afterwards, and an app still runs."""
    from devcluster.cluster import Cluster
    from sparkop import demo

    cluster = Cluster.up(f"crdorder-{os.getpid()}", nodes=1, die_with_parent=True)
    try:
        proc = OperatorProcess(cluster.kubeconfig, log_dir=tmp_path).start()
        wait_for(lambda: "waiting for the API server to serve" in proc.logs(), timeout=60, message="the wait")
        demo.install_crds(cluster.kubectl, cluster.kubeconfig)
        demo.wait_for_crds(cluster.kubectl, cluster.kubeconfig)
        app = yaml.safe_load((ROOT / "examples" / "demo" / "pi-succeeds.yaml").read_text())
        app["spec"]["driver"]["annotations"]["sim.sparkop.io/run-seconds"] = "1"
        subprocess.run(
            [str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}", "apply", "-n", "default", "-f", "-"],
            input=yaml.safe_dump(app),
            text=True,
            check=True,
            capture_output=True,
        )

        def state() -> str | None:
            got = cluster.api("GET", "/apis/sparkop.io/v1alpha1/namespaces/default/sparkapplications/pi-succeeds")
            body = got.body if isinstance(got.body, dict) else {}
            return ((body.get("status") or {}).get("applicationState") or {}).get("state")

        wait_for(lambda: state() == "COMPLETED", timeout=90, message="the app to complete")
        assert proc.stop() == 0
    finally:
        cluster.down()
