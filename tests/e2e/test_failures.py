"""A Spark application that fails for real: its exit code and Spark's message reach the
SparkDriver and the SparkApplication, and OnFailure retries it."""

from __future__ import annotations

import pytest

from tests.support.spark_e2e import JOBS_DIR, SparkNamespace, jobs_volume, python_application, spark_versions

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

# Three driver JVMs in a row, one second apart (measured ~7 s each).
THREE_ATTEMPTS_S = 300.0
# spark-submit exits with the Python script's own exit code (PythonRunner's SparkUserAppException).
FAILING_JOB = """\
import sys

sys.stderr.write("e2e job: the input table is missing\\n")
sys.exit(3)
"""
# Spark writes no /dev/termination-log: the driver container's log tail is the only message,
# and only with this policy (spark-submit leaves the default, File).
LOG_TAIL_AS_MESSAGE = {
    "spec": {"containers": [{"name": "spark-kubernetes-driver", "terminationMessagePolicy": "FallbackToLogsOnError"}]}
}


@pytest.mark.parametrize("version", spark_versions())
def test_a_failing_app_reports_its_exit_code_and_is_retried_on_failure(spark: SparkNamespace, version: str) -> None:
    spark.jobs({"fail.py": FAILING_JOB})
    manifest = python_application(
        "failing",
        version,
        f"local://{JOBS_DIR}/fail.py",
        restartPolicy={"type": "OnFailure", "onFailureRetries": 2, "onFailureRetryInterval": 1},
        **jobs_volume(driver={"template": LOG_TAIL_AS_MESSAGE}),
    )
    spark.apply(manifest)
    app = spark.wait_app("failing", ["FAILED"], timeout=THREE_ATTEMPTS_S)
    status = app["status"]
    assert status["executionAttempts"] == 3
    assert [(a["run"], a["outcome"]) for a in status["attempts"]] == [(run, "Failed") for run in (1, 2, 3)]
    for attempt in status["attempts"]:
        assert attempt["message"].startswith("exit code 3: ") and "the input table is missing" in attempt["message"]
    assert "the input table is missing" in status["applicationState"]["errorMessage"]
    driver = spark.get("sparkdriver", status["currentDriver"])
    assert driver["status"]["phase"] == "Failed"
    assert driver["status"]["termination"]["exitCode"] == 3
    assert "e2e job: the input table is missing" in driver["status"]["termination"]["message"]
    assert "e2e job: the input table is missing" in spark.driver_log("failing")
