"""The chart installed with helm on the devcluster: a release of charts/sparkop in a namespace, its
pods and what to print when it is not Ready (tests/integration/test_helm_install.py, test_ha_failover.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from devcluster.build import helm_binary
from devcluster.testing import ClusterHandle, wait_for

CHART = Path(__file__).resolve().parents[2] / "charts" / "sparkop"


# A pod start, image already on the node, CRD wait and informer sync: seconds; room for a busy machine.
READY_S = 180.0


class Release:
    """One helm release of the chart on the test's cluster."""

    def __init__(self, cluster: ClusterHandle, name: str, namespace: str) -> None:
        self.cluster, self.name, self.namespace = cluster, name, namespace
        self.helm = helm_binary(lambda line: None)

    def helm_run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(self.helm), f"--kubeconfig={self.cluster.kubeconfig}", "-n", self.namespace, *args]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed: {result.stderr}")
        return result

    def pods(self) -> list[dict[str, Any]]:
        listed = self.cluster.kubectl_json(
            "get", "pods", "-n", self.namespace, "-l", f"app.kubernetes.io/instance={self.name}"
        )
        return list(listed["items"])

    def diagnostics(self) -> str:
        pods = self.pods()
        logs = [
            self.cluster.kubectl("logs", p["metadata"]["name"], "-n", self.namespace, "--tail=40", check=False).stdout
            for p in pods
        ]
        return json.dumps([p.get("status", {}) for p in pods], indent=1)[-3000:] + "\n" + "\n".join(logs)[-4000:]


def install(
    release: Release, values: dict[str, Any], *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """`helm install` of the chart with ``values`` (after any ``-f FILE`` among ``args``, so they win);
    its output holds the rendered NOTES.txt."""
    argv = [str(release.helm), f"--kubeconfig={release.cluster.kubeconfig}", "-n", release.namespace]
    result = subprocess.run(
        [*argv, "install", release.name, str(CHART), *args, "--values", "-"],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def wait_ready(release: Release, deployment: str, replicas: int = 1) -> None:
    """Until the release's Deployment has ``replicas`` pods passing /readyz."""
    try:
        wait_for(
            lambda: (
                release.cluster.kubectl_json("get", f"deployment/{deployment}", "-n", release.namespace)
                .get("status", {})
                .get("readyReplicas")
                == replicas
            ),
            timeout=READY_S,
            interval=1.0,
            message=f"{replicas} pod(s) of {deployment} to pass /readyz",
        )
    except TimeoutError as err:
        raise AssertionError(f"{err}\n{release.diagnostics()}") from None
