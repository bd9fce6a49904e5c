"""Real Spark under sparkop: fixtures and helpers of the end-to-end tests (issue 12).

Each test gets a namespace on the session's real-node cluster (devcluster/nodes.py) with the
ServiceAccount `spark` Spark's driver needs to create its executors, and the real operator
(`sparkop run`) watching that namespace. The smoke tests (SparkPi, PySpark: `smoke_versions()`) run
on every pinned Spark version (SPARK_IMAGE_VERSIONS, one release per Spark line), in CI too; every
other scenario runs on FULL_MATRIX_VERSIONS, the oldest and the newest pinned release, and only with
`SPARKOP_E2E=all` unless the test names it a CI version.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.testing import ClusterHandle, RealNodeClusters, temporary_namespace, wait_for
from tests.support.crds import install_crds
from tests.support.operator import OperatorProcess
from tests.support.spark_e2e import SPARK_SERVICE_ACCOUNT, SparkNamespace

# Where driver logs go when SPARKOP_E2E_RESULTS names a file: one JSON line per test (the
# table in docs/spark-conformance.md is made from it).
RESULTS_ENV = "SPARKOP_E2E_RESULTS"
# Stopping a namespace's pods: Spark's executors get 30 s of grace unless the driver deleted them.
TEARDOWN_S = 90.0


_CRDS_INSTALLED: set[Path] = set()


@pytest.fixture
def e2e_cluster(real_node_clusters: RealNodeClusters) -> ClusterHandle:
    """The session's real-node cluster with sparkop's CRDs (installed once per cluster: another
    test may stop the shared cluster and the next `get()` starts a fresh one)."""
    handle = real_node_clusters.get()
    if handle.kubeconfig not in _CRDS_INSTALLED:
        install_crds(handle)
        _CRDS_INSTALLED.add(handle.kubeconfig)
    return handle


def _grant_spark_service_account(cluster: ClusterHandle, ns: str) -> None:
    """What Spark's driver needs (as the Spark on Kubernetes docs grant it): its executors,
    their ConfigMaps, Services and PVCs."""
    cluster.kubectl("create", "serviceaccount", SPARK_SERVICE_ACCOUNT, "-n", ns)
    cluster.kubectl(
        "create", "role", "spark", "-n", ns, "--verb=*",
        "--resource=pods,services,configmaps,persistentvolumeclaims",
    )  # fmt: skip
    cluster.kubectl(
        "create", "rolebinding", "spark", "-n", ns, "--role=spark", f"--serviceaccount={ns}:{SPARK_SERVICE_ACCOUNT}"
    )


def _drain(cluster: ClusterHandle, ns: str) -> None:
    """Delete the apps while the operator still runs (it removes the driver pods' finalizer),
    then wait for the pods, so the next test has the nodes' CPUs to itself."""
    # Owners first: a SparkConnect whose server SparkDriver is deleted starts another one.
    kinds = "sparkconnects,scheduledsparkapplications,sparkapplications,sparkdrivers"
    cluster.kubectl("delete", kinds, "--all", "-n", ns, "--wait=false", check=False)
    cluster.kubectl("delete", "pods", "--all", "-n", ns, "--wait=false", "--grace-period=2", check=False)

    def no_pods() -> bool:
        done = cluster.kubectl("get", "pods", "-n", ns, "-o", "name", check=False)
        return done.returncode == 0 and not done.stdout.strip()

    try:
        wait_for(no_pods, timeout=TEARDOWN_S, interval=1.0, message=f"the pods of {ns} to be gone")
    except TimeoutError:
        left = cluster.kubectl("get", "pods", "-n", ns, "-o", "wide", check=False).stdout
        print(f"pods still in {ns} after {TEARDOWN_S:.0f}s:\n{left}")


def _record_result(nodeid: str, env: SparkNamespace, passed: bool) -> None:
    path = os.environ.get(RESULTS_ENV)
    if path:
        line = {"test": nodeid, "passed": passed, "seconds": round(time.monotonic() - env.started, 1)}
        with Path(path).open("a") as out:
            out.write(json.dumps(line | {"driver_last_line": env.last_driver_line}) + "\n")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.when == "call":
        item.stash[_PASSED] = report.passed
    return report


_PASSED = pytest.StashKey[bool]()


@pytest.fixture
def spark(e2e_cluster: ClusterHandle, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SparkNamespace]:
    """A namespace with the `spark` ServiceAccount and the operator watching it; on the way out
    the operator's log tail is printed (pytest shows it when the test failed). A test's
    ``namespace_labels`` and ``operator_args`` markers label the namespace and add operator flags."""
    labelled = request.node.get_closest_marker("namespace_labels")
    flags = request.node.get_closest_marker("operator_args")
    with temporary_namespace(e2e_cluster, prefix="e2e") as ns:
        if labelled is not None:
            pairs = [f"{k}={v}" for k, v in labelled.args[0].items()]
            e2e_cluster.kubectl("label", "namespace", ns, *pairs, "--overwrite")
        _grant_spark_service_account(e2e_cluster, ns)
        controllers = ("apps", "driver", "connect")
        with OperatorProcess(
            e2e_cluster.kubeconfig,
            namespaces=[ns],
            log_dir=tmp_path,
            controllers=controllers,
            extra_args=list(flags.args) if flags is not None else (),
        ) as operator:
            env = SparkNamespace(e2e_cluster, ns, operator)
            try:
                yield env
            finally:
                env.close()
                _record_result(request.node.nodeid, env, request.node.stash.get(_PASSED, False))
                print("--- operator log tail ---\n" + "\n".join(operator.logs().splitlines()[-60:]))
                _drain(e2e_cluster, ns)
