"""Shared fixtures. Reusable logic lives in devcluster.testing; keep this file thin."""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, RealNodeClusters, session_cluster, temporary_namespace
from sparkop.core.applier import Applier
from tests.support import background_builds
from tests.support.background_builds import last_by_build
from tests.support.crds import install_crds, install_kubeflow_crds
from tests.support.operator import OperatorProcess, release_driver_pods


@pytest.fixture(scope="session")
def cluster() -> Iterator[ClusterHandle]:
    """A real control plane for the whole session (or `$SPARKOP_KUBECONFIG`'s cluster).

    Attributes: kubeconfig (Path), kubectl(*args, input=, check=), kubectl_json(*args),
    apply(manifest, namespace=), restart_apiserver(), restart_etcd(), restart("all"), can_restart.
    """
    with session_cluster() as handle:
        yield handle


@pytest.fixture(scope="session")
def real_node_clusters() -> Iterator[RealNodeClusters]:
    """The session's real-node cluster, started on first use and torn down at the end."""
    clusters = RealNodeClusters()
    try:
        yield clusters
    finally:
        clusters.stop()


@pytest.fixture
def real_cluster(real_node_clusters: RealNodeClusters) -> ClusterHandle:
    """A cluster whose two nodes are real (kubelet + containerd), with cluster DNS and
    kube-proxy, and the images of devcluster/images.py imported; no kwok nodes."""
    return real_node_clusters.get()


@pytest.fixture
def real_namespace(real_cluster: ClusterHandle) -> Iterator[str]:
    with temporary_namespace(real_cluster) as name:
        yield name


@pytest.fixture
def namespace(cluster: ClusterHandle) -> Iterator[str]:
    """A fresh namespace (its default service account ready), deleted after the test. The test's
    operator has stopped by then, so the driver pods still holding its finalizer are let go first, as
    a running operator lets them go when their namespace is deleted: left behind, they would hold
    their nodes' CPU for the rest of the session."""
    with temporary_namespace(cluster) as name:
        yield name
        release_driver_pods(cluster, name)


@pytest.fixture(scope="session")
def crds(cluster: ClusterHandle) -> ClusterHandle:
    """The cluster with sparkop's committed CRDs installed and Established."""
    install_crds(cluster)
    return cluster


@pytest.fixture(scope="session")
def kubeflow_crds(crds: ClusterHandle) -> ClusterHandle:
    """The cluster with kubeflow's group's CRDs too (crds/kubeflow/: what `sparkop run --kubeflow-api`
    serves), Established."""
    install_kubeflow_crds(crds)
    return crds


@pytest.fixture
def operator(crds: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    """The real operator (`sparkop run`, both controllers) watching the test's namespace."""
    with OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path) as proc:
        yield proc


# A test that asks for one of these gets a cluster with real nodes, marked or not.
REAL_NODE_FIXTURES = frozenset({"real_node_clusters", "real_cluster", "real_namespace", "e2e_cluster", "spark"})


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that gets a cluster with real nodes is marked `realnode`: `make test` runs those in a
    process of their own (tests/run_suite.py), since the machine holds one such cluster at a time. The
    tests marked `needs_build` go last."""
    for item in items:
        if REAL_NODE_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("realnode"):
            item.add_marker(pytest.mark.realnode)
    # The tests that need what `make test` builds beside the suite (tests/support/background_builds.py)
    # run last, in the order it builds, so that the build is normally done when they start.
    try:
        items[:] = last_by_build(items, _needed_builds, background_builds.step_names())
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None


def _needed_builds(item: pytest.Item) -> tuple[str, ...]:
    return tuple(name for marker in item.iter_markers("needs_build") for name in marker.args)


# When a cluster test fails, what the cluster was doing is usually the whole story, and CI keeps
# only the end of the output: a few lines per failure go into the terminal summary, right above
# the short test summary. They travel in the report (a section).
DIAGNOSIS_SECTION = "cluster diagnosis"
DIAGNOSIS_LINES = 8
COSCHEDULING_LOG = "scheduler-plugins-scheduler.log"  # devcluster's name for scheduler-plugins' scheduler


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and call.when == "call":
        diagnosis = _diagnose(item)
        if diagnosis:
            report.sections.append((DIAGNOSIS_SECTION, diagnosis))
    return report


def _diagnose(item: pytest.Item) -> str:
    funcargs: dict[str, object] = getattr(item, "funcargs", {})
    handle = next((value for value in funcargs.values() if isinstance(value, ClusterHandle)), None)
    if handle is None:
        return ""
    parts: list[str] = []
    # The test's namespace: the fixture named so, or one named for what it is (real_namespace, swap_namespace).
    namespace = next((v for k, v in funcargs.items() if k.endswith("namespace") and isinstance(v, str)), None)
    if isinstance(namespace, str):
        pods = handle.kubectl("get", "pods", "-n", namespace, "-o", "wide", "--no-headers", check=False, timeout=20)
        parts.append(f"pods in {namespace}:\n{_tail(pods.stdout or pods.stderr)}")
        events = handle.kubectl(
            "get", "events", "-n", namespace, "--sort-by=.lastTimestamp", "--no-headers", check=False, timeout=20
        )
        parts.append(f"events in {namespace}:\n{_tail(events.stdout or events.stderr)}")
    nodes = handle.kubectl("get", "nodes", "--no-headers", check=False, timeout=20)
    parts.append(f"nodes:\n{_tail(nodes.stdout or nodes.stderr)}")
    if handle.cluster is not None:
        directory = handle.cluster.directory
        if (directory / "kueue-manager.log").exists() and isinstance(namespace, str):
            # Whether Kueue admitted what the operator queued: its Workloads say.
            workloads = handle.kubectl(
                "get",
                "workloads.kueue.x-k8s.io",
                "-n",
                namespace,
                "-o",
                "wide",
                "--no-headers",
                check=False,
                timeout=20,
            )
            parts.append(f"Kueue's Workloads in {namespace}:\n{_tail(workloads.stdout or workloads.stderr)}")
        if (directory / COSCHEDULING_LOG).exists() and isinstance(namespace, str):
            # Why Coscheduling holds a gang: its PodGroups, with when each manager last wrote them (a
            # gang it rejected is retried on a pod added or a PodGroup changed, else only by the
            # scheduler's periodic retry), and below the scheduler's lines naming the namespace.
            groups = handle.kubectl(
                "get",
                "podgroups.scheduling.x-k8s.io",
                "-n",
                namespace,
                "-o",
                "custom-columns=NAME:.metadata.name,PHASE:.status.phase,SCHEDULED:.status.scheduled,"
                "RUNNING:.status.running,SUCCEEDED:.status.succeeded,WRITTEN:.metadata.managedFields[*].time",
                check=False,
                timeout=20,
            )
            parts.append(f"PodGroups in {namespace}:\n{_tail(groups.stdout or groups.stderr)}")
        for log in ("sparksim.log", "kueue-manager.log"):
            if (directory / log).exists():
                parts.append(f"{log}:\n{_tail((directory / log).read_text(errors='replace'))}")
        if isinstance(namespace, str):
            # Why a real node did not start a pod is often only in its kubelet's log; why a gang was not
            # bound, in Coscheduling's scheduler's.
            for log_file in [*sorted(directory.glob("kubelet-*.log")), *directory.glob(COSCHEDULING_LOG)]:
                lines = [line for line in log_file.read_text(errors="replace").splitlines() if namespace in line]
                parts.append(f"{log_file.name}, lines naming {namespace}:\n{_tail(chr(10).join(lines))}")
    for value in funcargs.values():
        if isinstance(value, OperatorProcess):
            parts.append(f"operator log:\n{_tail(value.logs())}")
    return "\n".join(parts)


def _tail(text: str) -> str:
    return "\n".join("  " + line[:200] for line in text.strip().splitlines()[-DIAGNOSIS_LINES:])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    diagnoses = [
        (report.nodeid, text)
        for report in terminalreporter.stats.get("failed", [])
        for name, text in getattr(report, "sections", ())
        if name == DIAGNOSIS_SECTION
    ]
    if diagnoses:
        terminalreporter.section("cluster diagnosis of the failed tests")
        for nodeid, text in diagnoses:
            terminalreporter.write_line(f"{nodeid}\n{text}")


# SPARKOP_WRITE_LOG=PATH records every write an Applier sends (create, patch, delete, status,
# event) as one JSON line, in the order sent: run the unit tests under one hypothesis seed before
# and after a change to the controllers, and the two logs are byte-identical when the change kept
# their behaviour.
WRITE_LOG_ENV = "SPARKOP_WRITE_LOG"


class _RecordingClient:
    def __init__(self, client: Any, log: Any) -> None:
        self._client = client
        self._log = log

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._client, name)
        if name not in ("create", "patch", "delete", "patch_status", "event"):
            return target

        async def recorded(*args: Any, **kwargs: Any) -> Any:
            line = {"write": name, "args": args, "kwargs": kwargs}
            self._log.write(json.dumps(line, sort_keys=True, default=repr) + "\n")
            return await target(*args, **kwargs)

        return recorded


@pytest.fixture(autouse=True, scope="session")
def _write_log() -> Iterator[None]:
    path = os.environ.get(WRITE_LOG_ENV)
    if not path:
        yield
        return
    original = Applier.__init__
    with Path(path).open("w") as log:

        def recording_init(self: Applier[Any], client: Any, *args: Any, **kwargs: Any) -> None:
            original(self, _RecordingClient(client, log), *args, **kwargs)

        Applier.__init__ = recording_init  # type: ignore[method-assign]
        try:
            yield
        finally:
            Applier.__init__ = original  # type: ignore[method-assign]
