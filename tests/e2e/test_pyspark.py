"""PySpark under sparkop on real nodes: a main script and a `deps.pyFiles` module from mounted
ConfigMaps, with sparkConf, env, labels and annotations reaching the driver and executor pods."""

from __future__ import annotations

import json

import pytest

from tests.support.spark_e2e import JOBS_DIR, SparkNamespace, jobs_volume, python_application, smoke_versions

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

PYSPARK_PI_S = 240.0
LIB_DIR = "/mnt/lib"
# The job imports `helper` on the driver, where only deps.pyFiles puts it on the path (the script
# lives in another directory), and in executor tasks. Real Spark puts a local:// pyFile on the
# driver's PYTHONPATH only (SparkContext.addFile skips local: URIs, "already on every node"), so
# the executors get the same mount and PYTHONPATH, as a user must do.
HELPER = """\
import random

MARKER = "helper-from-pyfiles"


def inside(_):
    x, y = random.random() * 2 - 1, random.random() * 2 - 1
    return 1 if x * x + y * y <= 1 else 0
"""
PI_JOB = """\
import json
import os
from operator import add

from pyspark.sql import SparkSession

import helper

spark = SparkSession.builder.getOrCreate()
sc = spark.sparkContext
n = 4 * 20000
count = sc.parallelize(range(n), 4).map(helper.inside).reduce(add)
seen = sc.parallelize(range(2), 2).map(lambda _: (helper.MARKER, os.environ.get("E2E_EXECUTOR_ENV"))).collect()
print("E2E " + json.dumps({
    "driver_env": os.environ.get("E2E_DRIVER_ENV"),
    "conf": spark.conf.get("spark.e2e.marker"),
    "executor_tasks": sorted(set(map(tuple, seen))),
}), flush=True)
print("Pi is roughly %f" % (4.0 * count / n), flush=True)
spark.stop()
"""


@pytest.mark.parametrize("version", smoke_versions())
def test_pyspark_pi_with_pyfiles_conf_env_labels_and_annotations(spark: SparkNamespace, version: str) -> None:
    spark.jobs({"pi_helper_job.py": PI_JOB})
    spark.configmap("pylib", {"helper.py": HELPER})
    lib = {"name": "pylib", "mountPath": LIB_DIR}
    pod_meta = {"labels": {"e2e-label": "set"}, "annotations": {"e2e.example.com/note": "set"}}
    manifest = python_application(
        "pyspark-pi",
        version,
        f"local://{JOBS_DIR}/pi_helper_job.py",
        deps={"pyFiles": [f"local://{LIB_DIR}/helper.py"]},
        sparkConf={"spark.e2e.marker": "conf-reached-the-driver"},
        **jobs_volume(
            volumes=[{"name": "pylib", "configMap": {"name": "pylib"}}],
            driver={"volumeMounts": [lib], "env": [{"name": "E2E_DRIVER_ENV", "value": "driver-env"}], **pod_meta},
            executor={
                "volumeMounts": [lib],
                "env": [
                    {"name": "E2E_EXECUTOR_ENV", "value": "executor-env"},
                    {"name": "PYTHONPATH", "value": LIB_DIR},
                ],
                **pod_meta,
            },
        ),
    )
    executors = spark.watch("spark-role=executor")
    spark.apply(manifest)
    app = spark.wait_app("pyspark-pi", ["RUNNING", "COMPLETED"], timeout=PYSPARK_PI_S)
    driver_name = app["status"]["currentDriver"]
    running = spark.wait_pod(
        lambda: spark.executors_of(executors, driver_name, 2), PYSPARK_PI_S, "two running executors"
    )
    driver_pod = spark.driver_pods("pyspark-pi")[0]
    for pod in [driver_pod, *(p.pod for p in running)]:
        assert pod["metadata"]["labels"]["e2e-label"] == "set", pod["metadata"]["name"]
        assert pod["metadata"]["annotations"]["e2e.example.com/note"] == "set", pod["metadata"]["name"]
    env_of = {c["name"]: c.get("env", []) for c in driver_pod["spec"]["containers"]}
    assert {"name": "E2E_DRIVER_ENV", "value": "driver-env"} in env_of["spark-kubernetes-driver"]
    for seen in running:
        (container,) = [c for c in seen.pod["spec"]["containers"] if c["name"] == "spark-kubernetes-executor"]
        assert {"name": "E2E_EXECUTOR_ENV", "value": "executor-env"} in container["env"]

    spark.wait_app("pyspark-pi", ["COMPLETED"], timeout=PYSPARK_PI_S)
    log = spark.driver_log("pyspark-pi")
    assert "Pi is roughly 3.1" in log
    (reported,) = [json.loads(line[4:]) for line in log.splitlines() if line.startswith("E2E ")]
    assert reported == {
        "driver_env": "driver-env",
        "conf": "conf-reached-the-driver",
        "executor_tasks": [["helper-from-pyfiles", "executor-env"]],
    }
