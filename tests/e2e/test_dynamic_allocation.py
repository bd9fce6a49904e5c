"""Dynamic allocation with shuffle tracking under real Spark: the driver asks for more executors
while tasks queue, releases idle ones, and sparkop owns each while it lives."""

from __future__ import annotations

import pytest

from tests.support.spark_e2e import (
    JOBS_DIR,
    STAGES_JOB,
    SparkNamespace,
    jobs_volume,
    python_application,
    spark_versions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

DYNAMIC_S = 300.0
MAX_EXECUTORS = 3
# One stage of 12 tasks of 3 s (a queue for one executor), then 25 s idle: past the 5 s idle
# timeout, so Spark releases executors down to minExecutors before the job ends.
JOB_ARGS = ["1", "25", "12", "3"]


@pytest.mark.parametrize("version", spark_versions())
def test_executors_scale_up_and_back_down(spark: SparkNamespace, version: str) -> None:
    spark.jobs({"stages.py": STAGES_JOB})
    manifest = python_application(
        "dynamic",
        version,
        f"local://{JOBS_DIR}/stages.py",
        arguments=JOB_ARGS,
        dynamicAllocation={
            "enabled": True,
            "initialExecutors": 1,
            "minExecutors": 1,
            "maxExecutors": MAX_EXECUTORS,
            "shuffleTrackingTimeout": 5000,
        },
        sparkConf={
            "spark.dynamicAllocation.executorIdleTimeout": "5s",
            "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
        },
        **jobs_volume(),
    )
    del manifest["spec"]["executor"]["instances"]  # dynamic allocation decides
    executors = spark.watch("spark-role=executor")
    spark.apply(manifest)
    app = spark.wait_app("dynamic", ["RUNNING"], timeout=DYNAMIC_S)
    driver_name = app["status"]["currentDriver"]

    spark.wait_pod(
        lambda: executors.max_alive_at_once() >= MAX_EXECUTORS, DYNAMIC_S, f"{MAX_EXECUTORS} executors at once"
    )
    # Back down while the driver still runs: released executors are deleted by Spark's driver.
    spark.wait_pod(
        lambda: len(executors.alive()) <= 1 and spark.app_state("dynamic") == "RUNNING",
        DYNAMIC_S,
        "idle executors to be released while the job runs",
    )
    app = spark.wait_app("dynamic", ["COMPLETED"], timeout=DYNAMIC_S)
    assert "stages result" in spark.driver_log("dynamic")
    seen = executors.snapshot()
    assert len(seen) >= MAX_EXECUTORS
    assert executors.max_alive_at_once() <= MAX_EXECUTORS
    for pod in seen.values():
        assert ("SparkDriver", driver_name, False) in pod.born_owned_by, (pod.name, pod.first_owners)
