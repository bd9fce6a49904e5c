"""SparkPi (Scala) under sparkop on real nodes: a real driver creates real executors, sparkop
adopts them, the job prints its answer and the exit code reaches the status."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import SparkNamespace, spark_pi, spark_versions

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

# Measured ~25 s on 2 cores (three JVMs start); room for a loaded machine.
SPARK_PI_S = 240.0


@pytest.mark.parametrize("version", spark_versions(ci=("3.5.9", "4.0.5")))
def test_spark_pi_completes_with_executors_owned_by_its_sparkdriver(spark: SparkNamespace, version: str) -> None:
    executors = spark.watch("spark-role=executor")
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
        # Spark's driver created it (owned by the driver pod), then sparkop made itself controller.
        assert ("Pod", driver["status"]["driverPod"]["name"]) in pod.owners_seen, pod.owners_seen
        assert ("SparkDriver", driver_name) in pod.owners_seen, pod.owners_seen
        assert "fabric8-kubernetes-client" in {f["manager"] for f in pod.pod["metadata"]["managedFields"]}
