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

from devcluster.testing import ClusterHandle, RealNodeClusters
from tests.support.spark_e2e import SparkNamespace, spark_namespace, with_crds

# Where driver logs go when SPARKOP_E2E_RESULTS names a file: one JSON line per test (the
# table in docs/spark-conformance.md is made from it).
RESULTS_ENV = "SPARKOP_E2E_RESULTS"


@pytest.fixture
def e2e_cluster(real_node_clusters: RealNodeClusters) -> ClusterHandle:
    """The session's real-node cluster with sparkop's CRDs (installed once per cluster: another
    test may stop the shared cluster and the next `get()` starts a fresh one)."""
    return with_crds(real_node_clusters.get())


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
    with spark_namespace(
        e2e_cluster,
        tmp_path,
        labels=labelled.args[0] if labelled is not None else None,
        operator_args=list(flags.args) if flags is not None else (),
    ) as env:
        try:
            yield env
        finally:
            _record_result(request.node.nodeid, env, request.node.stash.get(_PASSED, False))
