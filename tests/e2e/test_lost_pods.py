"""Pods lost mid-run under real Spark: a lost driver pod is replaced by a new incarnation whose
real driver finishes the run; a lost executor is replaced by Spark, owned by the SparkDriver from its creation."""

from __future__ import annotations

import pytest

from tests.support.spark_e2e import (
    OLDEST_VERSION,
    STAGES_JOB,
    SparkNamespace,
    long_job,
    spark_versions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

# Two driver incarnations of a ~30 s job, each starting three JVMs.
DRIVER_LOST_S = 300.0
EXECUTOR_LOST_S = 240.0


@pytest.mark.parametrize("version", spark_versions(ci=(OLDEST_VERSION,)))
def test_a_lost_driver_pod_is_replaced_and_the_new_driver_completes(spark: SparkNamespace, version: str) -> None:
    spark.jobs({"stages.py": STAGES_JOB})
    executors = spark.watch("spark-role=executor")
    spark.apply(long_job("driver-lost", version))
    app = spark.wait_app("driver-lost", ["RUNNING"], timeout=DRIVER_LOST_S)
    driver_name = app["status"]["currentDriver"]
    first = spark.wait_pod(
        lambda: spark.executors_of(executors, driver_name, 2), DRIVER_LOST_S, "two running executors"
    )
    first_info = spark.get("sparkdriver", driver_name)["status"]["driverPod"]
    first_pod = first_info["name"]
    assert "stages result" not in spark.logs(first_pod), "the job ended before its driver could be lost"
    spark.kubectl("delete", "pod", first_pod, "--wait=false")

    app = spark.wait_app("driver-lost", ["COMPLETED"], timeout=DRIVER_LOST_S)
    status = app["status"]
    assert status["executionAttempts"] == 1 and len(status["attempts"]) == 1
    assert status["driverIncarnations"] == 2
    driver = spark.get("sparkdriver", driver_name)
    assert [i["outcome"] for i in driver["status"]["incarnations"]] == ["Lost", "Succeeded"]
    assert driver["status"]["termination"]["exitCode"] == 0
    # The same name (kubeflow's <app>-driver, every incarnation's), another pod.
    second_pod = driver["status"]["driverPod"]["name"]
    assert second_pod == first_pod and driver["status"]["driverPod"]["uid"] != first_info["uid"]
    assert "stages result" in spark.driver_log("driver-lost")

    seen = executors.snapshot()
    old = {p.name for p in first}
    assert all(seen[name].deleted_at is not None for name in old), {n: seen[n].pod["status"] for n in old}
    new = [p for name, p in seen.items() if name not in old]
    assert new, "the second driver started no executor"
    for pod in new:
        assert ("Pod", second_pod) in pod.owners_seen and ("SparkDriver", driver_name, False) in pod.born_owned_by


@pytest.mark.parametrize("version", spark_versions())
def test_a_lost_executor_is_replaced_by_spark_and_owned_by_the_sparkdriver(spark: SparkNamespace, version: str) -> None:
    spark.jobs({"stages.py": STAGES_JOB})
    executors = spark.watch("spark-role=executor")
    spark.apply(long_job("executor-lost", version))
    app = spark.wait_app("executor-lost", ["RUNNING"], timeout=EXECUTOR_LOST_S)
    driver_name = app["status"]["currentDriver"]
    running = spark.wait_pod(
        lambda: spark.executors_of(executors, driver_name, 2), EXECUTOR_LOST_S, "two running executors"
    )
    victim = running[0].name
    spark.kubectl("delete", "pod", victim, "--wait=false")

    def replacement() -> list[str]:
        owned = spark.executors_of(executors, driver_name, 2)
        return [p.name for p in owned if p.name not in {r.name for r in running}]

    (new,) = spark.wait_pod(replacement, EXECUTOR_LOST_S, "Spark's replacement executor")
    app = spark.wait_app("executor-lost", ["COMPLETED"], timeout=EXECUTOR_LOST_S)
    assert app["status"]["driverIncarnations"] == 1 and app["status"]["executionAttempts"] == 1
    assert "stages result" in spark.driver_log("executor-lost")
    replaced = executors.snapshot()[new]
    driver_pod = spark.get("sparkdriver", driver_name)["status"]["driverPod"]["name"]
    assert ("Pod", driver_pod) in replaced.owners_seen  # Spark's driver created it
    # ... owned by the SparkDriver from its creation (the executor template's reference)
    assert ("SparkDriver", driver_name, False) in replaced.born_owned_by, replaced.first_owners
