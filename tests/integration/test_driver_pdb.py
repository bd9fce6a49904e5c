"""A driver PodDisruptionBudget on the test cluster: `kubectl drain` of the node under a running
driver whose spec asks for one is refused by the API server's eviction (the disruption controller
keeps the budget at 0 disruptions allowed), the app then completes with its one driver pod; the
operator's --driver-pod-disruption-budget default gives one to a spec that does not say, never to one
that says false."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster.testing import ClusterHandle, wait_for
from tests.support.cluster_apps import Obj, app_manifest, get, wait_state
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def budget(cluster: ClusterHandle, namespace: str, driver: str) -> Obj | None:
    return get(cluster, namespace, "poddisruptionbudget", f"{driver}-driver-pdb")


def test_a_drain_waits_for_a_driver_with_a_budget_and_the_operator_default_fills_in(
    crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    operator = OperatorProcess(
        crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, extra_args=["--driver-pod-disruption-budget"]
    )
    with operator:
        crds.apply(app_manifest("guarded", run_seconds=15), namespace=namespace)
        crds.apply(app_manifest("unguarded", run_seconds=1, driverPodDisruptionBudget=False), namespace=namespace)
        wait_state(crds, namespace, "guarded", "RUNNING")

        def protecting() -> Obj | None:
            pdb = budget(crds, namespace, "guarded-1")
            status = (pdb or {}).get("status") or {}
            return pdb if status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0 else None

        pdb: Obj = wait_for(protecting, timeout=30, message="the disruption controller to count the driver")
        (owner,) = pdb["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("SparkDriver", "guarded-1", True)
        node = get(crds, namespace, "pod", "guarded-driver")["spec"]["nodeName"]  # type: ignore[index]
        drained = crds.kubectl(
            "drain", node, "--pod-selector=sparkop.io/driver=guarded-1", "--ignore-daemonsets",
            "--delete-emptydir-data", "--timeout=5s", check=False,
        )  # fmt: skip
        try:
            assert drained.returncode != 0, drained.stdout
            assert "disruption budget" in drained.stderr, drained.stderr
        finally:
            crds.kubectl("uncordon", node)
        done = wait_state(crds, namespace, "guarded", "COMPLETED", timeout=60)
        assert done["driverIncarnations"] == 1 and done["executionAttempts"] == 1
        wait_state(crds, namespace, "unguarded", "COMPLETED", timeout=60)
        assert budget(crds, namespace, "unguarded-1") is None
