"""Real SparkPi under the real batch schedulers on real nodes (issue 26): the session's real-node
cluster runs Volcano and Kueue beside kube-scheduler, started on it by this module's ``e2e_cluster``
(`make test` builds them beside the suite and runs this module last in its part: ``needs_build``).

* Volcano: the driver pod and the executors real Spark creates from sparkop's executor template are
  all placed by Volcano, in the run's PodGroup, which Volcano moves to Running and sparkop's run
  completes with Pi.
* Kueue: the run's Workload is admitted from a LocalQueue, its pods go where the ResourceFlavor says
  (a node label of the real nodes, a toleration), and the Workload ends Finished, Succeeded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from devcluster.procs import log_tail
from devcluster.testing import ClusterHandle, RealNodeClusters, wait_for
from sparkop.domain import labels, naming
from tests.support.spark_e2e import SparkNamespace, spark_pi, with_crds

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode, pytest.mark.needs_build("volcano", "kueue")]

VERSION = "3.5.9"
# Measured ~25 s for SparkPi on 2 cores; room for a loaded machine and a scheduler's cycles.
SPARK_PI_S = 240.0
KUEUE = "kueue.x-k8s.io/v1beta2"


@pytest.fixture
def e2e_cluster(real_node_clusters: RealNodeClusters) -> ClusterHandle:
    """The session's real-node cluster with sparkop's CRDs, and Volcano and Kueue running on it (each
    schedules only the pods that name it, or the Workloads of its queues): started before the ``spark``
    fixture's operator, which finds Kueue's Workloads served."""
    handle = with_crds(real_node_clusters.get())
    if handle.cluster is None:
        pytest.skip("an external cluster: no batch scheduler to start")
    handle.cluster.start_schedulers(("volcano", "kueue"))
    return handle


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == kind), {})


def test_spark_pi_under_volcano(spark: SparkNamespace) -> None:
    pods = spark.watch(labels.DRIVER)
    groups = spark.watch(labels.DRIVER, resource="podgroups.scheduling.volcano.sh")
    spark.apply(spark_pi("pi-volcano", VERSION, batchScheduler="volcano"))

    app = spark.wait_app("pi-volcano", ["COMPLETED"], timeout=SPARK_PI_S)
    assert "Pi is roughly 3.1" in spark.driver_log("pi-volcano")
    group = naming.pod_group_name(app["status"]["currentDriver"])
    seen = pods.snapshot()
    executors = [p for p in seen.values() if p.pod["metadata"]["labels"].get(labels.SPARK_ROLE) == labels.ROLE_EXECUTOR]
    assert len(executors) == 2, sorted(seen)
    for pod in seen.values():
        # Every pod of the run, the driver's and those real Spark made, is Volcano's, in the group.
        assert pod.pod["spec"]["schedulerName"] == "volcano", (pod.name, pod.pod["spec"])
        assert pod.pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group, pod.name
        assert pod.pod["spec"].get("nodeName"), pod.name
    (pod_group,) = groups.snapshot().values()
    phase = pod_group.pod["status"].get("phase")
    assert phase in ("Running", "Completed"), pod_group.pod["status"]
    print(f"\nPodGroup {group}: {phase}; pods on {sorted({p.pod['spec']['nodeName'] for p in seen.values()})}")


def test_spark_pi_under_kueue(spark: SparkNamespace) -> None:
    cluster = spark.cluster
    flavor, cluster_queue = f"real-{spark.ns}", f"real-{spark.ns}"
    toleration = {"key": "sparkop.io/batch", "operator": "Exists", "effect": "NoSchedule"}
    # The real nodes' own label: where the flavor's pods must go.
    node_label = ("kubernetes.io/os", "linux")
    quota = [{"name": "cpu", "nominalQuota": "4"}, {"name": "memory", "nominalQuota": "8Gi"}]
    queues: list[dict[str, Any]] = [
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": dict([node_label]), "tolerations": [toleration]},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {"coveredResources": ["cpu", "memory"], "flavors": [{"name": flavor, "resources": quota}]}
                ],
            },
        },
    ]
    for obj in queues:
        cluster.apply(obj)
    try:
        _run_spark_pi_in_kueue(spark, cluster_queue, toleration, node_label)
    finally:
        for obj in reversed(queues):
            kind = f"{obj['kind'].lower()}s.v1beta2.kueue.x-k8s.io"
            spark.kubectl("delete", kind, obj["metadata"]["name"], "--ignore-not-found", "--wait=false")


def _kueue_state(spark: SparkNamespace, cluster_queue: str) -> str:
    """The queues' and Workloads' conditions and the tail of Kueue's log, for a run that was not
    admitted in time (a failure must say whether Kueue held the Workload back, and why)."""
    lines: list[str] = []
    reads = (
        ("workloads.v1beta2.kueue.x-k8s.io", ("-n", spark.ns)),
        ("localqueues.v1beta2.kueue.x-k8s.io", ("-n", spark.ns)),
        (f"clusterqueues.v1beta2.kueue.x-k8s.io/{cluster_queue}", ()),
    )
    for what, where in reads:
        done = spark.cluster.kubectl("get", what, *where, "-o", "json", check=False)
        if done.returncode != 0:
            lines.append(f"{what}: {done.stderr.strip()}")
            continue
        listed = json.loads(done.stdout)
        for obj in listed.get("items", [listed]):
            status = obj.get("status") or {}
            conditions = [
                (c["type"], c["status"], c.get("reason"), c.get("message")) for c in status.get("conditions", [])
            ]
            lines.append(f"{obj['kind']} {obj['metadata']['name']}: {conditions} {status.get('admission') or ''}")
    manager = spark.cluster.cluster.state.processes.get("kueue-manager") if spark.cluster.cluster else None
    if manager is not None:
        lines += ["kueue-manager log tail:", log_tail(Path(manager.log), 8000)]
    return "\n".join(lines)


def _run_spark_pi_in_kueue(
    spark: SparkNamespace, cluster_queue: str, toleration: dict[str, str], node_label: tuple[str, str]
) -> None:
    local = {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "spark"},
        "spec": {"clusterQueue": cluster_queue},
    }
    spark.apply(local)
    pods = spark.watch(labels.DRIVER)
    app = spark_pi("pi-kueue", VERSION)
    app["metadata"]["labels"] = {labels.KUEUE_QUEUE_NAME: "spark"}
    spark.apply(app)

    try:
        done = spark.wait_app("pi-kueue", ["COMPLETED"], timeout=SPARK_PI_S)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\nwhere Kueue stood:\n{_kueue_state(spark, cluster_queue)}") from exc
    assert "Pi is roughly 3.1" in spark.driver_log("pi-kueue")
    workload_name = naming.workload_name(done["status"]["currentDriver"])

    def finished() -> dict[str, Any] | None:
        wl = spark.get("workloads.v1beta2.kueue.x-k8s.io", workload_name)
        return wl if condition(wl, "Finished").get("status") == "True" else None

    workload = wait_for(finished, timeout=30, interval=0.2, message=f"Workload {workload_name} Finished")
    assert (
        condition(workload, "Admitted")["status"] == "True" and condition(workload, "Finished")["reason"] == "Succeeded"
    )
    assert workload["status"]["admission"]["clusterQueue"] == cluster_queue, workload["status"]
    seen = pods.snapshot()
    driver = next(p for p in seen.values() if p.pod["metadata"]["labels"].get(labels.SPARK_ROLE) == labels.ROLE_DRIVER)
    assert driver.pod["spec"]["nodeSelector"][node_label[0]] == node_label[1], driver.pod["spec"]
    assert toleration in driver.pod["spec"]["tolerations"], driver.pod["spec"]["tolerations"]
    executors = [p for p in seen.values() if p.pod["metadata"]["labels"].get(labels.SPARK_ROLE) == labels.ROLE_EXECUTOR]
    assert len(executors) == 2 and all(
        p.pod["spec"]["nodeSelector"].get(node_label[0]) == node_label[1] for p in executors
    ), [p.pod["spec"] for p in executors]
    summary = [(c["type"], c["status"], c["reason"]) for c in workload["status"]["conditions"]]
    print(f"\nWorkload {workload_name}: {summary}")
