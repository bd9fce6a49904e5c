"""Batch schedulers, Kueue's label and driverIngressOptions on a real control plane (issue 15), with the real
operator and the devcluster's simulated Spark drivers.

The schedulers' own CRDs (Volcano's and scheduler-plugins' PodGroup, from their upstream Go modules at
the versions in devcluster/gobuild/versions.env) are installed by a session fixture, so the API server
checks every PodGroup against the real schema; a structural schema prunes unknown fields, so a stored
spec equal to the one sent shows every field is one the scheduler defines. No Volcano or YuniKorn
scheduler runs here: a pod for them stays Pending until the test binds it to a node, as that
scheduler would, and the simulated driver then creates its executors from the executor template.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import scheduler_crds
from devcluster.sparksim import DEFAULT_EXECUTOR_DELAY_S
from devcluster.testing import ClusterHandle, wait_for
from tests.support.batch_schedulers import bind, parse_task_groups
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
VOLCANO_PG = "podgroups.scheduling.volcano.sh"
COSCHEDULING_PG = "podgroups.scheduling.x-k8s.io"


@pytest.fixture(scope="session")
def scheduler_cluster(crds: ClusterHandle) -> ClusterHandle:
    """The session's cluster with sparkop's CRDs and the schedulers' PodGroup CRDs."""
    scheduler_crds.install(crds.kubectl_binary, crds.kubeconfig)
    return crds


@pytest.fixture
def op(scheduler_cluster: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    with OperatorProcess(scheduler_cluster.kubeconfig, namespaces=[namespace], log_dir=tmp_path) as proc:
        yield proc


# Long enough for the executors to start: the simulator's driver asks for them a moment after it runs.
RUN_SECONDS = DEFAULT_EXECUTOR_DELAY_S + 3


def manifest(name: str, *, run_seconds: float = RUN_SECONDS, labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkApplication",
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": {
            "type": "Scala",
            "image": "apache/spark:3.5.7",
            "sparkVersion": "3.5.7",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples_2.12-3.5.7.jar",
            "driver": {
                "cores": 1,
                "memory": "512m",
                "annotations": {"sim.sparkop.io/outcome": "Succeeded", "sim.sparkop.io/run-seconds": str(run_seconds)},
            },
            "executor": {"instances": 2, "cores": 1, "memory": "512m"},
            **spec,
        },
    }


def get(cluster: ClusterHandle, namespace: str, kind: str, name: str) -> Obj | None:
    out = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found").stdout
    return json.loads(out) if out.strip() else None


def wait_get(cluster: ClusterHandle, namespace: str, kind: str, name: str, timeout: float = 30) -> Obj:
    found: Obj = wait_for(lambda: get(cluster, namespace, kind, name), timeout=timeout, message=f"{kind} {name}")
    return found


def app_state(cluster: ClusterHandle, namespace: str, name: str) -> str | None:
    app = get(cluster, namespace, "sparkapplication", name) or {}
    return ((app.get("status") or {}).get("applicationState") or {}).get("state")


def wait_state(cluster: ClusterHandle, namespace: str, name: str, *states: str, timeout: float = 60) -> None:
    wait_for(lambda: app_state(cluster, namespace, name) in states, timeout=timeout, message=f"{name} in {states}")


def executors(cluster: ClusterHandle, namespace: str, driver: str, count: int) -> list[Obj]:
    def listed() -> list[Obj] | None:
        selector = f"spark-role=executor,sparkop.io/driver={driver}"
        items: list[Obj] = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", selector)["items"]
        return items if len(items) >= count else None

    found: list[Obj] = wait_for(listed, timeout=30, message=f"{count} executors of {driver}")
    return found


def assert_owned_by_driver(cluster: ClusterHandle, namespace: str, obj: Obj, driver: str) -> None:
    spark_driver = wait_get(cluster, namespace, "sparkdriver", driver)
    [owner] = obj["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "SparkDriver",
        driver,
        spark_driver["metadata"]["uid"],
        True,
    )


def test_volcano_pod_group_accepted_owned_and_named_on_driver_and_executors(
    op: OperatorProcess, scheduler_cluster: ClusterHandle, namespace: str
) -> None:
    cluster = scheduler_cluster
    options = {"queue": "etl", "priorityClassName": "batch-high"}
    cluster.apply(manifest("vol", batchScheduler="volcano", batchSchedulerOptions=options), namespace=namespace)
    group = wait_get(cluster, namespace, VOLCANO_PG, "vol-1-pg")
    assert group["spec"] == {
        "minMember": 1,
        "minResources": {"cpu": "3", "memory": "2688Mi"},
        "queue": "etl",
        "priorityClassName": "batch-high",
    }
    assert_owned_by_driver(cluster, namespace, group, "vol-1")
    pod = wait_get(cluster, namespace, "pod", "vol-driver")
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "vol-1-pg"
    assert "nodeName" not in pod["spec"]  # nobody but Volcano would schedule it
    bind(cluster, namespace, "vol-driver")
    for executor in executors(cluster, namespace, "vol-1", 2):
        assert executor["spec"]["schedulerName"] == "volcano"
        assert executor["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "vol-1-pg"
    wait_state(cluster, namespace, "vol", "COMPLETED")
    # the group lives as long as its SparkDriver: deleting the app takes both (the garbage collector
    # learns of a CRD installed after it started at its next discovery resync, every 30 s)
    cluster.kubectl("delete", "sparkapplication", "vol", "-n", namespace, "--wait=true")
    wait_for(lambda: get(cluster, namespace, VOLCANO_PG, "vol-1-pg") is None, timeout=90, message="group collected")


def test_coscheduling_pod_group_accepted_owned_and_labelled_on_driver_and_executors(
    op: OperatorProcess, scheduler_cluster: ClusterHandle, namespace: str
) -> None:
    cluster = scheduler_cluster
    cluster.apply(manifest("cos", batchScheduler="kube-scheduler"), namespace=namespace)
    group = wait_get(cluster, namespace, COSCHEDULING_PG, "cos-1-pg")
    assert group["spec"] == {"minMember": 1, "minResources": {"cpu": "3", "memory": "2688Mi"}}
    assert_owned_by_driver(cluster, namespace, group, "cos-1")
    pod = wait_get(cluster, namespace, "pod", "cos-driver")
    assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "cos-1-pg"
    # the cluster's scheduler runs the pods here (it would run the Coscheduling plugin)
    for executor in executors(cluster, namespace, "cos-1", 2):
        assert executor["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "cos-1-pg"
    wait_state(cluster, namespace, "cos", "COMPLETED")


def test_yunikorn_pods_carry_what_yunikorn_reads(
    op: OperatorProcess, scheduler_cluster: ClusterHandle, namespace: str
) -> None:
    cluster = scheduler_cluster
    spec = {"batchScheduler": "yunikorn", "batchSchedulerOptions": {"queue": "root.etl"}}
    cluster.apply(manifest("yk", **spec), namespace=namespace)
    pod = wait_get(cluster, namespace, "pod", "yk-driver")
    groups = parse_task_groups(pod["metadata"]["annotations"])
    assert {g: groups[g]["minMember"] for g in groups} == {"spark-driver": 1, "spark-executor": 2}
    assert pod["spec"]["schedulerName"] == "yunikorn"
    app_id = pod["metadata"]["labels"]["spark-app-selector"]
    bind(cluster, namespace, "yk-driver")
    for p in [pod, *executors(cluster, namespace, "yk-1", 2)]:
        annotations = p["metadata"]["annotations"]
        assert annotations["yunikorn.apache.org/app-id"] == app_id
        assert annotations["yunikorn.apache.org/queue"] == "root.etl" and p["metadata"]["labels"]["queue"] == "root.etl"
        assert annotations["yunikorn.apache.org/task-group-name"] in groups
        assert p["spec"]["schedulerName"] == "yunikorn"
    wait_state(cluster, namespace, "yk", "COMPLETED")


def test_an_unknown_batch_scheduler_is_refused_by_the_api_server(
    scheduler_cluster: ClusterHandle, namespace: str
) -> None:
    result = scheduler_cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(manifest("bad", batchScheduler="slurm")), check=False
    )
    assert result.returncode != 0
    assert "batchScheduler must be one of volcano, yunikorn, kube-scheduler" in result.stderr


def test_a_kueue_label_where_kueue_is_not_installed_fails_the_submission_naming_the_fix(
    op: OperatorProcess, scheduler_cluster: ClusterHandle, namespace: str
) -> None:
    # Real Kueue runs in tests/integration/test_kueue.py; here its Workload kind is not served.
    cluster = scheduler_cluster
    cluster.apply(manifest("queued", labels={"kueue.x-k8s.io/queue-name": "team-a"}), namespace=namespace)
    wait_state(cluster, namespace, "queued", "FAILED")
    state = wait_get(cluster, namespace, "sparkapplication", "queued")["status"]
    # Never retried (restartPolicy Never): FAILED, for the reason its run could not be submitted.
    assert state["applicationState"]["state"] == "FAILED" and state["lastError"]["reason"] == "SubmissionFailed", state
    message = state["applicationState"].get("errorMessage") or ""
    assert "does not serve Kueue's Workloads" in message and "kueue.x-k8s.io/queue-name" in message, state
    run = wait_get(cluster, namespace, "sparkdriver", "queued-1")
    assert run["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"  # the run is what queues
    assert cluster.kubectl_json("get", "pods", "-n", namespace)["items"] == []


def test_driver_ingress_options_create_restore_and_remove_service_and_ingress(
    op: OperatorProcess, scheduler_cluster: ClusterHandle, namespace: str
) -> None:
    cluster = scheduler_cluster
    option = {"servicePort": 8080, "servicePortName": "http", "ingressURLFormat": "{{$appName}}.example.com/api"}
    cluster.apply(manifest("ing", run_seconds=20, driverIngressOptions=[option]), namespace=namespace)
    wait_state(cluster, namespace, "ing", "RUNNING")
    service = wait_get(cluster, namespace, "service", "ing-driver-8080")
    app = wait_get(cluster, namespace, "sparkapplication", "ing")
    assert service["metadata"]["ownerReferences"][0]["uid"] == app["metadata"]["uid"]
    assert service["spec"]["ports"][0] == {"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}
    assert service["spec"]["selector"]["spark-app-selector"] == app["status"]["sparkApplicationId"]
    ingress = wait_get(cluster, namespace, "ingress", "ing-ing-8080")
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "ing.example.com" and rule["http"]["paths"][0]["path"] == "/api(/|$)(.*)"
    # deleted by hand: put back, as the UI's are
    cluster.kubectl("delete", "service", "ing-driver-8080", "-n", namespace, "--wait=true")
    restored = wait_get(cluster, namespace, "service", "ing-driver-8080")
    assert restored["metadata"]["uid"] != service["metadata"]["uid"]
    wait_state(cluster, namespace, "ing", "COMPLETED", timeout=60)
    wait_for(
        lambda: (
            get(cluster, namespace, "service", "ing-driver-8080") is None
            and get(cluster, namespace, "ingress", "ing-ing-8080") is None
        ),
        timeout=30,
        message="driver ingress objects removed after the run",
    )
