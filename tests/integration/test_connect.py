"""SparkConnect on the test cluster (KWOK nodes, the Spark-driver simulator): Ready behind its stable
Service, a lost server pod replaced behind the same Service, kubeflow's own sample, a roll on a spec
change, exits restarted up to the policy, suspend and resume, and an operator killed at every step.
Real Spark Connect with a real client is tests/e2e/test_spark_connect.py's."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.cluster import Cluster
from devcluster.components import NODE_MONITOR_GRACE_SECONDS
from devcluster.ports import free_ports
from devcluster.testing import ClusterHandle, temporary_namespace, wait_for
from tests.support.cluster_apps import get
from tests.support.crds import install_crds
from tests.support.executor_counts import COUNTED_WITHIN_S, wait_running
from tests.support.faults import FAULT_EXIT_CODE, FAULT_EXIT_ENV, FAULT_KINDS_ENV
from tests.support.faults import MODULE as FAULT_MODULE
from tests.support.metrics_scrape import ready, scrape, value
from tests.support.operator import OperatorProcess
from tests.support.watches import CreationWatch

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
CONTROLLERS = ("connect", "driver")
KUBEFLOW_SAMPLE = Path(__file__).resolve().parents[1] / "support" / "kubeflow_spark_connect.yaml"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def connect_manifest(name: str = "sc", **spec: Any) -> Obj:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkConnect",
        "metadata": {"name": name},
        "spec": {
            "sparkVersion": "4.0.5",
            "image": "sparkop/spark:4.0.5",
            "server": {"cores": 1, "memory": "512m"},
            "executor": {"instances": 2, "cores": 1, "memory": "512m"},
            **spec,
        },
    }


KUBEFLOW_CONNECTS = "sparkconnects.sparkoperator.k8s.io"


def connect_status(cluster: ClusterHandle, namespace: str, name: str, resource: str = "sparkconnect") -> Obj:
    return (get(cluster, namespace, resource, name) or {}).get("status") or {}


def wait_connect(
    cluster: ClusterHandle,
    namespace: str,
    name: str,
    state: str,
    timeout: float = 60,
    resource: str = "sparkconnect",
    **more: Any,
) -> Obj:
    def reached() -> Obj | None:
        s = connect_status(cluster, namespace, name, resource)
        if s.get("state") != state:
            return None
        server = s.get("server") or {}
        return s if all(server.get(k) == v or s.get(k) == v for k, v in more.items()) else None

    found: Obj = wait_for(reached, timeout=timeout, interval=0.1, message=f"{name} {state} {more}")
    return found


def pods(cluster: ClusterHandle, namespace: str, selector: str) -> list[Obj]:
    listed = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", selector)
    return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]


def service(cluster: ClusterHandle, namespace: str, name: str) -> Obj:
    found = get(cluster, namespace, "service", name)
    assert found is not None, f"Service {name}"
    return found


@pytest.fixture
def connect_operator(crds: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    with OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, controllers=CONTROLLERS) as proc:
        yield proc


def test_ready_behind_its_service_and_a_lost_server_pod_comes_back_behind_the_same_service(
    crds: ClusterHandle, namespace: str, connect_operator: OperatorProcess
) -> None:
    crds.apply(connect_manifest(), namespace=namespace)
    ready = wait_connect(crds, namespace, "sc", "Ready")
    assert ready["endpoint"] == f"sc://sc-server.{namespace}.svc:15002"
    assert ready["server"] == {
        "podName": "sc-server-1-driver",  # the server run's (its incarnations share it; a new run rolls in beside)
        "podIp": ready["server"]["podIp"],
        "serviceName": "sc-server",
        "driver": "sc-server-1",
        "incarnation": 1,
    }
    condition = next(c for c in ready["conditions"] if c["type"] == "ServerPodReady")
    assert condition["status"] == "True"
    svc = service(crds, namespace, "sc-server")
    assert svc["spec"]["selector"]["sparkop.io/driver"] == "sc-server-1"
    assert {p["name"]: p["port"] for p in svc["spec"]["ports"]} == {"spark-connect": 15002, "spark-ui": 4040}
    (server_pod,) = pods(crds, namespace, "spark-role=driver,sparkop.io/connect=sc")
    container = next(c for c in server_pod["spec"]["containers"] if c["name"] == "spark-kubernetes-driver")
    assert container["readinessProbe"]["tcpSocket"]["port"] == 15002
    assert "org.apache.spark.sql.connect.service.SparkConnectServer" in container["args"]
    headless = service(crds, namespace, "sc-server-1-1-driver-svc")
    assert headless["spec"]["publishNotReadyAddresses"] is True  # the executors reach a server not Ready yet
    # The SparkDriver counts its executors within seconds of their Running, and the server's status copies them.
    wait_running(crds, namespace, "spark-role=executor", 2)
    wait_for(
        lambda: connect_status(crds, namespace, "sc").get("executors", {}).get("running") == 2,
        timeout=COUNTED_WITHIN_S,
        message="two executors",
    )

    deleted = time.monotonic()
    crds.kubectl("delete", "pod", "sc-server-1-driver", "-n", namespace, "--wait=false")
    again = wait_connect(crds, namespace, "sc", "Ready", incarnation=2)  # a pod of the same name, once it is gone
    assert again["server"]["podName"] == "sc-server-1-driver"
    took = time.monotonic() - deleted
    assert again["server"]["driver"] == "sc-server-1" and again["server"]["incarnation"] == 2
    assert again["restarts"] == 0 and again["lastRun"] == 1
    assert service(crds, namespace, "sc-server")["metadata"]["uid"] == svc["metadata"]["uid"]
    print(f"\nserver pod deleted -> Ready again behind sc-server: {took:.2f}s")


def test_kubeflows_own_sample_with_only_its_api_version_changed_becomes_ready(
    crds: ClusterHandle, namespace: str, connect_operator: OperatorProcess
) -> None:
    sample = yaml.safe_load(KUBEFLOW_SAMPLE.read_text())
    sample["apiVersion"] = "sparkop.io/v1alpha1"
    del sample["metadata"]["namespace"]
    crds.kubectl("create", "serviceaccount", "spark-operator-spark", "-n", namespace)
    # kubectl's own validation is strict: every field of the sample is one the CRD declares.
    crds.kubectl("apply", "--validate=strict", "-n", namespace, "-f", "-", input=yaml.safe_dump(sample))
    ready = wait_connect(crds, namespace, "spark-connect", "Ready")
    (server_pod,) = pods(crds, namespace, "spark-role=driver,sparkop.io/connect=spark-connect")
    assert server_pod["metadata"]["labels"]["key1"] == "value1"
    container = next(c for c in server_pod["spec"]["containers"] if c["name"] == "spark-kubernetes-driver")
    assert container["image"] == "docker.io/apache/spark:4.0.4"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert ready["server"]["serviceName"] == "spark-connect-server"


@pytest.fixture
def kubeflow_connect_operator(
    kubeflow_crds: ClusterHandle, namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    with OperatorProcess(
        kubeflow_crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, controllers=CONTROLLERS,
        extra_args=["--kubeflow-api"],
    ) as proc:  # fmt: skip
        yield proc


def test_kubeflows_sample_in_its_own_group_has_kubeflows_server_pod_name_and_labels_and_is_replaced_on_a_change(
    kubeflow_crds: ClusterHandle, namespace: str, kubeflow_connect_operator: OperatorProcess
) -> None:
    """What kubeflow's own e2e spec reads (its server pod ``<name>-server`` Ready, its executors by
    ``connect-name``, the Service ``<name>-server``), then a spec change: one pod of that name at a time."""
    cluster = kubeflow_crds
    sample = yaml.safe_load(KUBEFLOW_SAMPLE.read_text())
    del sample["metadata"]["namespace"]
    cluster.kubectl("create", "serviceaccount", "spark-operator-spark", "-n", namespace)
    server_pods = CreationWatch(cluster, namespace, "pods")
    try:
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(sample))
        ready = wait_connect(
            cluster, namespace, "spark-connect", "Ready", resource=KUBEFLOW_CONNECTS, driver="spark-connect-server-1-kf"
        )
        assert ready["server"]["podName"] == "spark-connect-server"
        (server_pod,) = pods(cluster, namespace, "sparkoperator.k8s.io/connect-name=spark-connect,spark-role=driver")
        assert server_pod["metadata"]["name"] == "spark-connect-server"
        assert server_pod["metadata"]["labels"]["sparkoperator.k8s.io/launched-by-spark-operator"] == "true"
        executors = ",".join(
            ("sparkoperator.k8s.io/launched-by-spark-operator=true", "sparkoperator.k8s.io/connect-name=spark-connect",
             "spark-role=executor")
        )  # fmt: skip
        wait_running(cluster, namespace, executors, 2)
        service(cluster, namespace, "spark-connect-server")

        sample["spec"]["sparkConf"] = {"spark.sql.shuffle.partitions": "8"}
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(sample))
        replaced = wait_connect(
            cluster, namespace, "spark-connect", "Ready", resource=KUBEFLOW_CONNECTS, driver="spark-connect-server-2-kf"
        )
        assert replaced["server"]["podName"] == "spark-connect-server" and replaced["restarts"] == 0
        outcomes = {r["run"]: r["outcome"] for r in replaced["runs"]}
        assert outcomes == {1: "Replaced", 2: "Running"}
        wait_running(cluster, namespace, executors, 2)
    finally:
        server_pods.stop()
    # Two servers, each its own pod of the one name, the second made after the first was gone.
    first, second = sorted(server_pods.uids["spark-connect-server"], key=server_pods.first_seen.__getitem__)
    assert server_pods.deleted[first] <= server_pods.first_seen[second]


def test_a_spec_change_rolls_the_server_one_serving_at_a_time(
    crds: ClusterHandle, namespace: str, connect_operator: OperatorProcess
) -> None:
    crds.apply(connect_manifest(), namespace=namespace)
    wait_connect(crds, namespace, "sc", "Ready")
    changed = connect_manifest(sparkConf={"spark.sql.shuffle.partitions": "8"})
    crds.apply(changed, namespace=namespace)
    rolled = wait_connect(crds, namespace, "sc", "Ready", driver="sc-server-2")
    assert rolled["restarts"] == 0
    assert service(crds, namespace, "sc-server")["spec"]["selector"]["sparkop.io/driver"] == "sc-server-2"
    wait_for(lambda: get(crds, namespace, "sparkdriver", "sc-server-1") is None, timeout=30, message="old server gone")
    outcomes = {r["run"]: r["outcome"] for r in connect_status(crds, namespace, "sc")["runs"]}
    assert outcomes == {1: "Replaced", 2: "Running"}


def test_a_server_that_exits_is_restarted_until_the_policy_is_used_up_then_failed_and_frozen(
    crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    operator = OperatorProcess(
        crds.kubeconfig,
        namespaces=[namespace],
        log_dir=tmp_path,
        controllers=CONTROLLERS,
        extra_args=["--metrics-port", str(port)],
    )
    exits = {"annotations": {"sim.sparkop.io/outcome": "Failed", "sim.sparkop.io/run-seconds": "1"}}
    manifest = connect_manifest(
        server={"cores": 1, "memory": "512m", **exits},
        restartPolicy={"onFailureRetries": 2, "onFailureRetryInterval": 1},
    )
    with operator:
        wait_for(lambda: ready(port), timeout=60, message="the operator ready")
        crds.apply(manifest, namespace=namespace)
        failed = wait_connect(crds, namespace, "sc", "Failed", timeout=90)
        assert failed["restarts"] == 3 and failed["failuresInARow"] == 3 and failed["lastRun"] == 3
        assert [r["outcome"] for r in failed["runs"]] == ["Exited"] * 3
        assert failed["lastError"]["reason"] == "RetriesExhausted"
        version = get(crds, namespace, "sparkconnect", "sc")["metadata"]["resourceVersion"]  # type: ignore[index]
        wait_for(
            lambda: get(crds, namespace, "sparkdriver", "sc-server-3") is None, timeout=30, message="last run gone"
        )
        assert get(crds, namespace, "sparkconnect", "sc")["metadata"]["resourceVersion"] == version  # type: ignore[index]

        def counted() -> dict[str, float] | None:
            samples = scrape(port) or {}
            found = {
                "restarts": value(
                    samples, "sparkop_connect_server_restarts_total", namespace=namespace, reason="Exited"
                ),
                "failed": value(samples, "sparkop_connect_servers", namespace=namespace, state="Failed"),
            }
            return found if found == {"restarts": 3.0, "failed": 1.0} else None

        wait_for(counted, timeout=30, message="the restarts counted and the Failed gauge")


def test_suspend_stops_the_server_and_resume_starts_it_again(
    crds: ClusterHandle, namespace: str, connect_operator: OperatorProcess
) -> None:
    crds.apply(connect_manifest(), namespace=namespace)
    wait_connect(crds, namespace, "sc", "Ready")
    crds.apply(connect_manifest(suspend=True), namespace=namespace)
    wait_connect(crds, namespace, "sc", "Suspended")
    wait_for(lambda: not pods(crds, namespace, "sparkop.io/connect=sc"), timeout=30, message="server pods gone")
    crds.apply(connect_manifest(suspend=False), namespace=namespace)
    resumed = wait_connect(crds, namespace, "sc", "Ready", driver="sc-server-2")
    assert resumed["restarts"] == 0
    assert service(crds, namespace, "sc-server")["spec"]["selector"]["sparkop.io/driver"] == "sc-server-2"


def test_an_operator_killed_after_every_step_of_creation_makes_one_server_and_no_orphan(
    crds: ClusterHandle, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator dies right after each status write that takes a SparkConnect or its SparkDriver a
    step further (before that pass's events and creates) and is started again, until Ready: one
    SparkDriver, one server pod, its executors owned by it, ever."""
    drivers = CreationWatch(crds, namespace, "sparkdrivers")
    server_pods = CreationWatch(crds, namespace, "pods")
    monkeypatch.setenv(FAULT_EXIT_ENV, "1")
    monkeypatch.setenv(FAULT_KINDS_ENV, "SparkConnect,SparkDriver")
    proc = OperatorProcess(
        crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, module=FAULT_MODULE, controllers=CONTROLLERS
    )
    crds.apply(connect_manifest(), namespace=namespace)
    crashes = 0
    try:
        proc.start()
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and connect_status(crds, namespace, "sc").get("state") != "Ready":
            if not proc.alive():
                assert proc.proc is not None and proc.proc.returncode == FAULT_EXIT_CODE, proc.logs()[-3000:]
                crashes += 1
                proc.start()
            time.sleep(0.05)
        ready = wait_connect(crds, namespace, "sc", "Ready", timeout=30)
    finally:
        proc.stop()
        drivers.stop()
        server_pods.stop()
    assert crashes >= 3, crashes  # run 1 recorded, the incarnation and its pod, Running (Ready ends the loop)
    assert ready["lastRun"] == 1 and ready["restarts"] == 0
    assert drivers.uids.keys() == {"sc-server-1"}, drivers.story()
    assert len(drivers.uids["sc-server-1"]) == 1, drivers.uids
    servers = {n: u for n, u in server_pods.uids.items() if n.startswith("sc-server") and "-exec-" not in n}
    assert list(servers) == ["sc-server-1-driver"] and len(servers["sc-server-1-driver"]) == 1

    # The server is Ready before its executors start (3 s after it, on the simulator): waited for.
    def started() -> list[Obj] | None:
        found = pods(crds, namespace, "spark-role=executor")
        return found if len(found) >= 2 else None

    live = wait_for(started, timeout=30, message="the server's two executors")
    server_pod = pods(crds, namespace, "spark-role=driver")[0]["metadata"]["uid"]
    (driver_uid,) = drivers.uids["sc-server-1"]

    def owners(pod: Obj) -> set[tuple[str, str, bool]]:
        return {(r["kind"], r["uid"], bool(r.get("controller"))) for r in pod["metadata"]["ownerReferences"]}

    # Owned by the SparkDriver from their creation (the executor template's reference), controlled by
    # the server pod that created them.
    assert len(live) == 2 and all(
        owners(p) == {("SparkDriver", driver_uid, False), ("Pod", server_pod, True)} for p in live
    ), json.dumps([p["metadata"].get("ownerReferences") for p in live])
    print(f"\nthe operator died after each of {crashes} steps; 1 SparkDriver, 1 server pod, {len(live)} executors")


def test_kubectl_get_explain_and_the_spark_category_show_a_sparkconnect(
    crds: ClusterHandle, namespace: str, connect_operator: OperatorProcess
) -> None:
    crds.apply(connect_manifest(), namespace=namespace)
    wait_connect(crds, namespace, "sc", "Ready")
    listed = crds.kubectl("get", "sparkconnect", "sc", "-n", namespace).stdout
    header, row = listed.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "STATE", "SERVER", "ENDPOINT", "EXECUTORS"]
    assert row.split()[:4] == ["sc", "Ready", "sc-server-1-driver", f"sc://sc-server.{namespace}.svc:15002"]
    explained = crds.kubectl("explain", "sparkconnect.spec.server.service").stdout
    assert "stable Service" in explained
    spark = crds.kubectl("get", "spark", "-n", namespace).stdout
    assert "sparkconnect.sparkop.io/sc" in spark


@pytest.fixture
def watched_nodes_cluster() -> Iterator[ClusterHandle]:
    """A cluster of one fake node watched by the node-lifecycle controller, as a cluster with real
    nodes watches its fake ones, with sparkop's CRDs."""
    cluster = Cluster.up(f"pytest-lifecycle-{os.getpid()}", nodes=1, node_lifecycle=True, die_with_parent=True)
    try:
        handle = ClusterHandle(cluster.kubeconfig, cluster.kubectl, cluster)
        install_crds(handle)
        yield handle
    finally:
        cluster.down()


def _cluster_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_a_server_on_a_fake_node_stays_ready_while_the_node_lifecycle_controller_watches_the_node(
    watched_nodes_cluster: ClusterHandle, tmp_path: Path
) -> None:
    """examples/spark-connect.yaml on a fake node of a cluster that runs the node-lifecycle controller
    (every cluster with real nodes does): its server stays Ready past the controller's grace period.
    kwok used to renew no Lease, so 50 s after start the controller turned the node Unknown and marked
    its pods Ready=False, which no kwok stage undoes: the server pod showed 1/1 Running (its containers
    ready) while the SparkConnect stayed NotReady (CI's examples-on-a-chart test)."""
    cluster = watched_nodes_cluster
    manifest = yaml.safe_load((EXAMPLES / "spark-connect.yaml").read_text())
    for part in ("server", "executor"):
        manifest["spec"][part]["nodeSelector"] = {"type": "kwok"}
    account = manifest["spec"]["server"]["serviceAccount"]
    name = manifest["metadata"]["name"]
    with temporary_namespace(cluster) as namespace:
        cluster.kubectl("create", "serviceaccount", account, "-n", namespace)
        with OperatorProcess(cluster.kubeconfig, namespaces=[namespace], log_dir=tmp_path, controllers=CONTROLLERS):
            cluster.apply(manifest, namespace=namespace)
            ready = wait_connect(cluster, namespace, name, "Ready")
            pod_name, node_name = ready["server"]["podName"], "kwok-node-0"
            became_ready = _cluster_time(
                next(c for c in ready["conditions"] if c["type"] == "ServerPodReady")["lastTransitionTime"]
            )
            # Past the grace period and a monitor pass or two of the controller's, by the cluster's clock.
            past_grace = became_ready + timedelta(seconds=NODE_MONITOR_GRACE_SECONDS + 15)

            def pod_ready() -> str:
                pod = get(cluster, namespace, "pod", pod_name) or {}
                conditions = (pod.get("status") or {}).get("conditions") or ()
                return next((c["status"] for c in conditions if c["type"] == "Ready"), "absent")

            def outcome() -> str | None:
                state = connect_status(cluster, namespace, name).get("state")
                if state != "Ready" or pod_ready() != "True":
                    return f"the server's pod Ready={pod_ready()}, the SparkConnect {state}"
                lease = get(cluster, "kube-node-lease", "lease", node_name) or {}
                renewed = (lease.get("spec") or {}).get("renewTime")
                return "renewed past the grace period" if renewed and _cluster_time(renewed) > past_grace else None

            seen = wait_for(
                outcome,
                timeout=NODE_MONITOR_GRACE_SECONDS + 60,
                interval=1.0,
                message=f"the Lease of {node_name} renewed past {past_grace:%H:%M:%S}",
            )
            node = cluster.kubectl_json("get", "node", node_name)
            assert seen == "renewed past the grace period", (seen, node.get("spec"), node.get("status"))
            assert next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
            assert not node["spec"].get("taints"), node["spec"]
            assert connect_status(cluster, namespace, name)["state"] == "Ready"
