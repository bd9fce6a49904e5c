"""Every file in examples/ applied to a cluster installed with the chart (a release named sparkop, as
docs/operations.md installs it, watching one job namespace): each reaches its expected end, its driver
running as the chart's drivers' ServiceAccount `sparkop-spark`.

The cluster has two real nodes (kubelet, containerd; the operator's pod runs there) and kwok nodes with
the Spark-driver simulator. Where the driver's own rights matter, real Spark runs: spark-pi.yaml
(Scala) and python-pi.yaml (PySpark) on the real nodes, their drivers creating and deleting their
executors with the chart's Role, and printing "Pi is roughly 3.1"; and pod-template.yaml (its driver
template asks for ephemeral storage, which kwok nodes do not have) and history-server.yaml (its driver
logs to a claim that only the real nodes' volumes bind; its history server runs there too). An
example's documents (a claim, a history server, the app) are applied at once, as `kubectl apply -f`
does. The others run on the kwok nodes
(their sim.sparkop.io annotations; the API server still refuses a driver pod whose ServiceAccount is
missing): their point is what the operator does with them (retries, a schedule, a Connect server,
volumes), and dynamic-allocation (up to 5 executors of 1 CPU) and spark-connect (three 1 GiB JVMs)
would not fit on two cores.
Each manifest is applied as it is but for a node selector that picks the real or the kwok nodes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import images, nodes
from devcluster.cluster import Cluster
from devcluster.testing import REAL_SESSION_PREFIX, ClusterHandle, RealNodeClusters, wait_for
from sparkop.domain import labels
from sparkop.history_controller.build import CONTAINER as HISTORY_CONTAINER
from tests.support.helm import CHART, Release, install, wait_ready
from tests.support.operator import release_driver_pods

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RELEASE = "sparkop"  # the name docs/operations.md installs under: its drivers' account is sparkop-spark
RELEASE_NAMESPACE = "sparkop-system"
JOBS = "spark-jobs"
REAL = dict([nodes.NODE_TYPE_LABEL])
KWOK = {"type": "kwok"}
# Real Spark on two busy cores, one app at a time; a simulated app, or the schedule's first run
# (@every 3m), well within it.
REAL_S = 420.0
SPARK_KINDS = ("SparkApplication", "ScheduledSparkApplication", "SparkConnect", "SparkDriver")
SIMULATED_S = 300.0


@dataclass(frozen=True)
class Expected:
    real: bool  # real Spark on the real nodes, else the simulator on kwok nodes
    kind: str
    end: str  # the state (app), phase (SparkDriver) or state (SparkConnect) it reaches


EXPECTED: dict[str, Expected] = {
    "spark-pi.yaml": Expected(True, "SparkApplication", "COMPLETED"),
    "python-pi.yaml": Expected(True, "SparkApplication", "COMPLETED"),
    "spark-pi-4.3.yaml": Expected(False, "SparkApplication", "COMPLETED"),
    "python-pi-4.3.yaml": Expected(False, "SparkApplication", "COMPLETED"),
    "dynamic-allocation.yaml": Expected(False, "SparkApplication", "COMPLETED"),
    # Real: its driver template limits ephemeral-storage, which kwok nodes do not have.
    "pod-template.yaml": Expected(True, "SparkApplication", "COMPLETED"),
    "volumes-configmaps.yaml": Expected(False, "SparkApplication", "COMPLETED"),
    # Its simulated driver fails: three retries, then FAILED after four runs.
    "restart-on-failure.yaml": Expected(False, "SparkApplication", "FAILED"),
    # Its first run (an app of its own) COMPLETED.
    "scheduled-spark-pi.yaml": Expected(False, "ScheduledSparkApplication", "COMPLETED"),
    "spark-connect.yaml": Expected(False, "SparkConnect", "Ready"),
    "sparkdriver-by-hand.yaml": Expected(False, "SparkDriver", "Succeeded"),
    # Its simulated driver's image pull fails: each of its two runs (one infrastructure retry) times
    # out after 45 s, then FAILED.
    "app-timeout.yaml": Expected(False, "SparkApplication", "FAILED"),
    # Real: its driver writes its event log to a claim, which only the real nodes' volumes can bind.
    "history-server.yaml": Expected(True, "SparkApplication", "COMPLETED"),
}


def pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The driver (or Connect server) and executor parts of a manifest, where a node selector goes."""
    spec = manifest["spec"]
    if manifest["kind"] == "ScheduledSparkApplication":
        spec = spec["template"]
    first = "server" if manifest["kind"] == "SparkConnect" else "driver"
    return [spec.setdefault(first, {}), spec.setdefault("executor", {})]


def placed(manifest: dict[str, Any], selector: dict[str, str]) -> dict[str, Any]:
    pinned = copy.deepcopy(manifest)
    if pinned["kind"] == "SparkHistoryServer":  # on the nodes of the app whose log directory it makes
        pod = pinned["spec"].setdefault("template", {}).setdefault("spec", {})
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **selector}
        pod.setdefault("containers", [{"name": HISTORY_CONTAINER}])  # the API server's PodSpec needs one
        return pinned
    if pinned["kind"] not in SPARK_KINDS:  # what the example's app needs (a claim)
        return pinned
    for part in pod_specs(pinned):
        part["nodeSelector"] = {**(part.get("nodeSelector") or {}), **selector}
    if (
        pinned["kind"] == "ScheduledSparkApplication"
    ):  # the simulator ends its runs (kubeflow's sample has no annotations)
        driver = pinned["spec"]["template"]["driver"]
        driver["annotations"] = {**(driver.get("annotations") or {}), "sim.sparkop.io/run-seconds": "5"}
    return pinned


def documents(name: str) -> list[dict[str, Any]]:
    return [dict(doc) for doc in yaml.safe_load_all((EXAMPLES / name).read_text()) if doc]


def example(name: str) -> dict[str, Any]:
    """The example's own object: its last document (those before it are what it needs: a claim, a
    history server)."""
    return documents(name)[-1]


def apply_example(cluster: ClusterHandle, name: str, selector: dict[str, str]) -> None:
    """All its documents in one apply, as `kubectl apply -f examples/<name>` does: history-server.yaml's
    app starts beside its claim and server, not after them (its driver mounts its event-log directory,
    which the kubelet makes, api.history.driver_mount)."""
    cluster.apply(yaml.safe_dump_all([placed(manifest, selector) for manifest in documents(name)]), JOBS)


def test_every_example_has_an_expected_end_and_names_the_charts_driver_account() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in EXAMPLES.glob("*.yaml"))
    for name in EXPECTED:
        (first, _) = pod_specs(example(name))
        assert first.get("serviceAccount") == f"{RELEASE}-spark", name


@pytest.fixture
def chart_cluster(real_node_clusters: RealNodeClusters) -> Iterator[ClusterHandle]:
    """Two real nodes and two kwok nodes, the chart installed with its defaults but for the image
    (built here, never pulled), the job namespace, and the operator's pod on a real node."""
    real_node_clusters.stop()
    cluster = Cluster.up(
        f"{REAL_SESSION_PREFIX}examples", nodes=2, node_cpu="64", simulator=True, real_nodes=2, die_with_parent=True
    )
    handle = ClusterHandle(cluster.kubeconfig, cluster.kubectl, cluster)
    release = Release(handle, RELEASE, RELEASE_NAMESPACE)
    try:
        operator_image = images.ensure_operator_image(lambda line: None)
        cluster.import_images([operator_image])
        handle.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
        for namespace in (RELEASE_NAMESPACE, JOBS):
            handle.kubectl("create", "namespace", namespace)
            wait_for(
                lambda ns=namespace: handle.kubectl("get", "sa", "default", "-n", ns, check=False).returncode == 0,
                timeout=60,
                message=f"namespace {namespace} ready",
            )
        values = {
            "image": {"tag": operator_image.key, "pullPolicy": "Never"},
            "spark": {"jobNamespaces": [JOBS]},
            "controller": {"nodeSelector": REAL, "logEncoder": "console"},
        }
        install(release, values)
        wait_ready(release, RELEASE)
        yield handle
    finally:
        release_driver_pods(handle, JOBS)
        release.helm_run("uninstall", release.name, "--wait", "--timeout", "2m", check=False)
        cluster.down()


def status_of(cluster: ClusterHandle, kind: str, name: str) -> dict[str, Any]:
    found = cluster.kubectl("get", kind.lower(), name, "-n", JOBS, "-o", "json", check=False)
    return dict((yaml.safe_load(found.stdout) or {}).get("status") or {}) if found.returncode == 0 else {}


def reached(cluster: ClusterHandle, name: str, want: Expected) -> str:
    """What the example has reached: its app's state, its SparkDriver's phase, its Connect's state;
    for the schedule, the state of its first run's app."""
    manifest = example(name)
    meta_name = manifest["metadata"]["name"]
    if want.kind == "ScheduledSparkApplication":
        selector = f"{labels.SCHEDULED_APP}={meta_name}"
        runs = cluster.kubectl_json("get", "sparkapplications", "-n", JOBS, "-l", selector)
        states = [(a.get("status") or {}).get("applicationState", {}).get("state", "") for a in runs["items"]]
        return "COMPLETED" if "COMPLETED" in states else ",".join(states)
    status = status_of(cluster, want.kind, meta_name)
    if want.kind == "SparkApplication":
        return str((status.get("applicationState") or {}).get("state", ""))
    if want.kind == "SparkDriver":
        return str(status.get("phase", ""))
    return str(status.get("state", ""))


def test_each_example_reaches_its_expected_end_on_a_chart_install(chart_cluster: ClusterHandle) -> None:
    cluster = chart_cluster
    simulated = [name for name, want in EXPECTED.items() if not want.real]
    for name in simulated:
        apply_example(cluster, name, KWOK)
    ends: dict[str, str] = {}
    for name in [n for n, want in EXPECTED.items() if want.real]:  # one at a time: two cores
        apply_example(cluster, name, REAL)
        app = example(name)["metadata"]["name"]
        try:
            ends[name] = wait_for(
                lambda n=name: s if (s := reached(cluster, n, EXPECTED[n])) in ("COMPLETED", "FAILED") else None,
                timeout=REAL_S,
                interval=2.0,
                message=f"{name} to end",
            )
        except TimeoutError as err:
            listing = cluster.kubectl("get", "sparkapplications,pods", "-n", JOBS, "-o", "wide").stdout
            raise AssertionError(f"{err}\n{listing}") from None
        status = status_of(cluster, "SparkApplication", app)
        assert ends[name] == "COMPLETED", status
        pod = status["driverInfo"]["podName"]
        spec = cluster.kubectl_json("get", "pod", pod, "-n", JOBS)["spec"]
        assert spec["serviceAccountName"] == f"{RELEASE}-spark" and spec["nodeSelector"] == REAL
        log = cluster.kubectl("logs", pod, "-n", JOBS, "-c", "spark-kubernetes-driver").stdout
        assert "Pi is roughly 3.1" in log, log[-2000:]
        print(f"{name}: COMPLETED on real nodes: {next(line for line in log.splitlines() if 'Pi is roughly' in line)}")
    for name in simulated:
        want = EXPECTED[name]
        try:
            ends[name] = wait_for(
                lambda n=name, w=want: s if (s := reached(cluster, n, w)) == w.end else None,
                timeout=SIMULATED_S,
                interval=2.0,
                message=f"{name} to reach {want.end}",
            )
        except TimeoutError as err:
            listing = cluster.kubectl("get", "sparkapplications,sparkdrivers,sparkconnects,pods", "-n", JOBS).stdout
            raise AssertionError(f"{err}; it reached {reached(cluster, name, want)!r}\n{listing}") from None
        print(f"{name}: {ends[name]} (simulated)")
    retried = status_of(cluster, "SparkApplication", example("restart-on-failure.yaml")["metadata"]["name"])
    assert retried["executionAttempts"] == 4, retried  # onFailureRetries: 3
    assert ends == {name: want.end for name, want in EXPECTED.items()}
