"""Spark's own history server under sparkop on the real nodes: a SparkHistoryServer over a claim becomes
Ready; a real SparkPi and a failing PySpark app write their event logs there; once both have ended and
their driver pods are gone, the history server's REST API shows each (completed, with its jobs), each
app's status links to its page, and `sparkop ui` forwards a local port to it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from typing import Any

import pytest

from tests.support.spark_e2e import (
    JOBS_DIR,
    OLDEST_VERSION,
    SparkNamespace,
    jobs_volume,
    python_application,
    spark_pi,
    spark_versions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

VERSIONS = spark_versions(ci=(OLDEST_VERSION,), versions=(OLDEST_VERSION,))
# A job that runs, then fails: its event log holds a completed job, and the app ends FAILED.
FAILING_AFTER_A_JOB = """\
import sys

from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
print("counted", spark.range(1000).count(), flush=True)
sys.stderr.write("e2e job: the output table is missing\\n")
sys.exit(3)
"""


def history_server(version: str) -> list[dict[str, Any]]:
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "spark-events"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    server = {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkHistoryServer",
        "metadata": {"name": "history"},
        "spec": {
            "image": f"apache/spark:{version}",
            "imagePullPolicy": "IfNotPresent",
            "logDirectory": {"persistentVolumeClaim": {"claimName": "spark-events", "path": "events"}},
            "sparkConf": {"spark.history.fs.update.interval": "2s"},
            "memory": "512m",
            "resources": {"cpu": "100m"},
        },
    }
    return [claim, server]


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


@pytest.mark.parametrize("version", VERSIONS)
def test_finished_apps_are_served_by_the_history_server_after_their_drivers_are_gone(
    spark: SparkNamespace, version: str
) -> None:
    for manifest in history_server(version):
        spark.apply(manifest)
    spark.jobs({"fail.py": FAILING_AFTER_A_JOB})
    logging = {"historyServer": {"name": "history"}}
    spark.apply(spark_pi("pi", version, slices=4, executor={"instances": 1}, **logging))
    failing = python_application(
        "failing", version, f"local://{JOBS_DIR}/fail.py", **logging, **jobs_volume(executor={"instances": 1})
    )
    spark.apply(failing)
    server = spark.wait_pod(
        lambda: (s := spark.get("sparkhistoryserver", "history").get("status") or {}).get("state") == "Ready" and s,
        timeout=300,
        message="the history server Ready",
    )
    assert server["url"] == f"http://history-history.{spark.ns}.svc:18080"
    assert server["eventLogDirectory"] == "file:///mnt/spark-history/events"
    ended = {"pi": spark.wait_app("pi", ["COMPLETED"], timeout=300)}
    ended["failing"] = spark.wait_app("failing", ["FAILED"], timeout=300)
    # The drivers go (sparkop keeps a finished driver pod for its log): the pages stay.
    spark.kubectl("delete", "pods", "-l", "spark-role=driver", "--wait=true")
    spark.wait_pod(lambda: not spark.pods("spark-role"), timeout=120, message="every Spark pod gone")
    (pod,) = spark.pods("sparkop.io/history-server=history")
    api = f"http://{pod['status']['podIP']}:18080/api/v1/applications"
    for name, app in ended.items():
        (attempt,) = app["status"]["attempts"]
        app_id = attempt["sparkApplicationId"]
        assert attempt["historyURL"] == f"{server['url']}/history/{app_id}/"
        shown = spark.wait_pod(
            lambda app_id=app_id: _completed(f"{api}/{app_id}"), timeout=120, message=f"{name} in the history server"
        )
        jobs = get_json(f"{api}/{app_id}/jobs")
        print(f"{name}: {app_id} completed={shown['attempts'][0]['completed']}, {len(jobs)} job(s): {shown['name']}")
        assert jobs and all(job["status"] == "SUCCEEDED" for job in jobs)
    page = _through_sparkop_ui(spark, "pi")
    assert ended["pi"]["status"]["attempts"][0]["sparkApplicationId"] in page


def _completed(url: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = get_json(url)
    except OSError:
        return None
    return found if found.get("attempts") and found["attempts"][0].get("completed") else None


def _through_sparkop_ui(spark: SparkNamespace, app: str) -> str:
    """The app's history page fetched through `sparkop ui APP --port 0`."""
    argv = [sys.executable, "-m", "sparkop", "ui", app, "-n", spark.ns, "--kubeconfig", str(spark.cluster.kubeconfig)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.match(r"Forwarding (http://\S+) -> ", line)
        assert found, f"{line!r} {proc.stderr.read() if proc.poll() is not None and proc.stderr else ''}"
        with urllib.request.urlopen(found.group(1), timeout=30) as answer:
            return str(answer.read().decode(errors="replace"))
    finally:
        proc.terminate()
        proc.wait(10)
