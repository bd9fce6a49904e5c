"""SparkPi (Scala) under sparkop on real nodes: a real driver creates real executors, sparkop
owns them from their creation, the job prints its answer and the exit code reaches the status."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.testing import wait_for
from sparkop.api import spark_lines
from sparkop.api.spark_lines import Feature
from sparkop.domain import labels, naming
from sparkop.driver_controller.submission import DRIVER_CONTAINER, EXECUTOR_CONTAINER
from tests.support.spark_e2e import PodWatch, SeenPod, SparkNamespace, smoke_versions, spark_pi

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

# Measured ~25 s on 2 cores (three JVMs start); room for a loaded machine.
SPARK_PI_S = 240.0


@pytest.mark.parametrize("version", smoke_versions())
def test_spark_pi_completes_with_executors_owned_by_its_sparkdriver(spark: SparkNamespace, version: str) -> None:
    executors = spark.watch("spark-role=executor")
    policies = spark.watch(labels.DRIVER, resource="networkpolicies")
    spark.apply(spark_pi("spark-pi", version, slices=4))

    app = spark.wait_app("spark-pi", ["COMPLETED"], timeout=SPARK_PI_S)
    driver_name = app["status"]["currentDriver"]
    driver = spark.get("sparkdriver", driver_name)
    assert driver["status"]["phase"] == "Succeeded"
    assert driver["status"]["termination"]["exitCode"] == 0
    assert [(a["outcome"], a["message"]) for a in app["status"]["attempts"]] == [("Succeeded", "exit code 0")]
    assert "Pi is roughly 3.1" in spark.driver_log("spark-pi")

    seen = executors.snapshot()
    assert len(seen) == 2, sorted(seen)
    for pod in seen.values():
        # Spark's driver created it controlled by the driver pod and owned by the SparkDriver (the
        # executor template's reference), and nothing changed that: no write of sparkop's on it.
        driver_pod = driver["status"]["driverPod"]["name"]
        assert pod.born_owned_by == {("Pod", driver_pod, True), ("SparkDriver", driver_name, False)}, pod.first_owners
        assert pod.owners_seen == {("Pod", driver_pod)}, pod.owners_seen
        assert "fabric8-kubernetes-client" in {f["manager"] for f in pod.pod["metadata"]["managedFields"]}
    _the_simulator_left_it_alone(spark)
    _what_the_line_adds(spark, version, driver, seen, policies)


def _the_simulator_left_it_alone(spark: SparkNamespace) -> None:
    """The devcluster's Spark-driver simulator runs here too: a real driver on a real node is not its
    to simulate, so it created no executor in the namespace."""
    cluster = spark.cluster.cluster
    assert cluster is not None
    log = (cluster.directory / "sparksim.log").read_text()
    assert cluster.state.processes.get("sparksim") is not None, "the simulator is not running"
    assert f"created executor {spark.ns}/" not in log


def _what_the_line_adds(
    spark: SparkNamespace, version: str, driver: dict[str, Any], executors: dict[str, SeenPod], policies: PodWatch
) -> None:
    """What the app's Spark line adds (api/spark_lines.py), on the objects real Spark ran with: the
    connect port on the driver's Service (4.1+), the executors' NetworkPolicy selecting the executors the
    real driver created, gone once the driver ended (4.2+), and no privilege escalation for the driver
    and for the executors real Spark built (4.3)."""
    release = spark_lines.release(version)
    service = spark.get("service", naming.driver_service_name(driver["metadata"]["name"], 1))
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert ("spark-connect" in ports) is release.has(Feature.CONNECT_PORT), ports
    if not release.has(Feature.EXECUTOR_NETWORK_POLICY):
        assert policies.snapshot() == {}
    else:
        seen = policies.snapshot()
        assert list(seen) == [naming.network_policy_name(driver["metadata"]["name"], 1)], sorted(seen)
        (policy,) = seen.values()
        wanted = policy.pod["spec"]["podSelector"]["matchLabels"]
        for executor in executors.values():
            assert wanted.items() <= executor.pod["metadata"]["labels"].items(), (wanted, executor.name)
        wait_for(
            lambda: policy.deleted_at is not None, timeout=60, message="the NetworkPolicy deleted once the driver ended"
        )
    if release.has(Feature.ALLOW_PRIVILEGE_ESCALATION):
        driver_pod = spark.get("pod", driver["status"]["driverPod"]["name"])
        pods = [(driver_pod, DRIVER_CONTAINER), *((e.pod, EXECUTOR_CONTAINER) for e in executors.values())]
        for pod, name in pods:
            container = next(c for c in pod["spec"]["containers"] if c["name"] == name)
            context = container.get("securityContext") or {}
            assert context.get("allowPrivilegeEscalation") is False, (pod["metadata"]["name"], context)
