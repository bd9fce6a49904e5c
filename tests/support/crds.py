"""sparkop's CRDs installed on a test's cluster, as `sparkop demo` installs them, and waited for until
they are served (tests/conftest.py's `crds` fixture, tests/e2e/conftest.py's `e2e_cluster`); and the
kubeflow group's CRDs sparkop serves with --kubeflow-api (`kubeflow_crds`). With both installed,
kubectl still reads `sparkapplication` and `sparkapp` as sparkop's (kubectl orders the two groups,
of equal priority, by name), so the other tests' commands mean what they meant."""

from __future__ import annotations

import json
from pathlib import Path

from devcluster.testing import ClusterHandle, wait_for
from sparkop import demo

KUBEFLOW_CRDS = Path(__file__).resolve().parents[2] / "crds" / "kubeflow"
KUBEFLOW_CRD_NAMES = (
    "sparkapplications.sparkoperator.k8s.io",
    "scheduledsparkapplications.sparkoperator.k8s.io",
    "sparkconnects.sparkoperator.k8s.io",
)


def install_crds(cluster: ClusterHandle) -> None:
    demo.install_crds(cluster.kubectl_binary, cluster.kubeconfig)
    demo.wait_for_crds(cluster.kubectl_binary, cluster.kubeconfig)


def install_kubeflow_crds(cluster: ClusterHandle) -> None:
    """crds/kubeflow/ applied and Established."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(KUBEFLOW_CRDS), timeout=120)

    def established() -> bool:
        listed = json.loads(cluster.kubectl("get", "-o", "json", *(f"crd/{n}" for n in KUBEFLOW_CRD_NAMES)).stdout)
        ready = {
            crd["metadata"]["name"]
            for crd in listed.get("items", [])
            for cond in (crd.get("status") or {}).get("conditions") or []
            if cond.get("type") == "Established" and cond.get("status") == "True"
        }
        return ready >= set(KUBEFLOW_CRD_NAMES)

    wait_for(established, timeout=60, interval=0.2, message="kubeflow's CRDs Established")
