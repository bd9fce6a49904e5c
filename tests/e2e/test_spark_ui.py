"""The Spark UI of a running job answers at the Service status.driverInfo names (the driver's own, as no
sparkUIOptions ask for one of its own), from inside the cluster."""

from __future__ import annotations

import json

import pytest

from tests.support.spark_e2e import (
    BASE_IMAGE,
    JOBS_DIR,
    STAGES_JOB,
    SparkNamespace,
    jobs_volume,
    python_application,
    spark_versions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

UI_S = 240.0
# Long enough for a client pod to start while the driver still serves its UI.
JOB_ARGS = ["4", "5", "2", "0.5"]


@pytest.mark.parametrize("version", spark_versions())
def test_the_ui_service_answers_the_rest_api_while_the_job_runs(spark: SparkNamespace, version: str) -> None:
    spark.jobs({"stages.py": STAGES_JOB})
    spark.apply(python_application("ui", version, f"local://{JOBS_DIR}/stages.py", arguments=JOB_ARGS, **jobs_volume()))
    app = spark.wait_app("ui", ["RUNNING"], timeout=UI_S)
    service = app["status"]["driverInfo"]["webUIServiceName"]
    port = app["status"]["driverInfo"]["webUIPort"]
    spark.wait_pod(lambda: "round 1/" in spark.logs(app["status"]["driverInfo"]["podName"]), UI_S, "the first stage")
    url = f"http://{service}.{spark.ns}.svc:{port}/api/v1/applications"
    client = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ui-client"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "curl",
                    "image": BASE_IMAGE,
                    "imagePullPolicy": "Never",
                    # Retries cover the Service's endpoints catching up with the driver pod.
                    "command": ["curl", "-sf", "--retry", "10", "--retry-all-errors", "--retry-delay", "1", url],
                }
            ],
        },
    }
    spark.apply(client)
    spark.wait_pod(
        lambda: spark.get("pod", "ui-client")["status"].get("phase") in ("Succeeded", "Failed"),
        UI_S,
        "the curl pod to finish",
    )
    answer = spark.logs("ui-client")
    assert spark.get("pod", "ui-client")["status"]["phase"] == "Succeeded", answer
    assert spark.app_state("ui") == "RUNNING", "the UI was asked after the job ended"
    applications = json.loads(answer)
    app_id = spark.get("sparkapplication", "ui")["status"]["sparkApplicationId"]
    assert [(a["id"], a["name"]) for a in applications] == [(app_id, "e2e-stages")]
    spark.wait_app("ui", ["COMPLETED"], timeout=UI_S)
    spark.driver_log("ui")
