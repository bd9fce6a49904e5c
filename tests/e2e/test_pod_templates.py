"""Pod templates and volumes on real pods: a driver template's sidecar and toleration, an
executor template's label, and a ConfigMap mounted through spec.volumes that the job reads."""

from __future__ import annotations

import json

import pytest

from tests.support.spark_e2e import (
    BASE_IMAGE,
    JOBS_DIR,
    SparkNamespace,
    jobs_volume,
    owners_of,
    python_application,
    spark_versions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

TEMPLATES_S = 240.0
SETTINGS_DIR = "/mnt/settings"
READ_SETTINGS_JOB = f"""\
import json
import time

from pyspark.sql import SparkSession


def greeting(_):
    with open("{SETTINGS_DIR}/greeting") as f:
        return f.read().strip()


spark = SparkSession.builder.getOrCreate()
on_executors = sorted(set(spark.sparkContext.parallelize(range(2), 2).map(greeting).collect()))
print("E2E " + json.dumps({{"driver": greeting(0), "executors": on_executors}}), flush=True)
time.sleep(3)
spark.stop()
"""
TOLERATION = {"key": "example.com/dedicated", "operator": "Exists", "effect": "NoSchedule"}
SIDECAR = {
    "name": "sidecar",
    "image": BASE_IMAGE,
    "imagePullPolicy": "Never",
    # A sidecar that never ends: the run must still end with the Spark container.
    "command": ["sleep", "infinity"],
}


@pytest.mark.parametrize("version", spark_versions())
def test_pod_templates_and_a_mounted_configmap_reach_the_real_pods(spark: SparkNamespace, version: str) -> None:
    spark.jobs({"read_settings.py": READ_SETTINGS_JOB})
    spark.configmap("settings", {"greeting": "hello-from-a-configmap"})
    settings = {"name": "settings", "mountPath": SETTINGS_DIR}
    manifest = python_application(
        "templates",
        version,
        f"local://{JOBS_DIR}/read_settings.py",
        **jobs_volume(
            volumes=[{"name": "settings", "configMap": {"name": "settings"}}],
            driver={
                "volumeMounts": [settings],
                # Spark takes the template's first container as its own unless one is named
                # spark-kubernetes-driver: a lone sidecar would become the driver.
                "template": {
                    "spec": {
                        "containers": [{"name": "spark-kubernetes-driver"}, SIDECAR],
                        "tolerations": [TOLERATION],
                    }
                },
            },
            executor={
                "volumeMounts": [settings],
                "template": {"metadata": {"labels": {"e2e-template": "executor"}}},
            },
        ),
    )
    executors = spark.watch("spark-role=executor")
    spark.apply(manifest)
    app = spark.wait_app("templates", ["RUNNING", "COMPLETED"], timeout=TEMPLATES_S)
    driver_name = app["status"]["currentDriver"]
    running = spark.wait_pod(
        lambda: spark.executors_of(executors, driver_name, 2), TEMPLATES_S, "two running executors"
    )
    driver_pod = spark.driver_pods("templates")[0]
    assert "sidecar" in [c["name"] for c in driver_pod["spec"]["containers"]]
    assert TOLERATION in driver_pod["spec"]["tolerations"]
    sidecar_status = [s for s in driver_pod["status"]["containerStatuses"] if s["name"] == "sidecar"]
    assert sidecar_status and "running" in sidecar_status[0]["state"], driver_pod["status"]
    for pod in running:
        assert pod.pod["metadata"]["labels"]["e2e-template"] == "executor"
        assert ("SparkDriver", driver_name) in owners_of(pod.pod)  # the template's reference, kept by Spark

    spark.wait_app("templates", ["COMPLETED"], timeout=TEMPLATES_S)
    log = spark.driver_log("templates")
    (reported,) = [json.loads(line[4:]) for line in log.splitlines() if line.startswith("E2E ")]
    assert reported == {"driver": "hello-from-a-configmap", "executors": ["hello-from-a-configmap"]}
