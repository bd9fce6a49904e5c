"""Apache Airflow's Kubernetes provider driving sparkop, as its users run it: the pinned
``apache-airflow-providers-cncf-kubernetes`` and its Airflow from PyPI in a venv of their own
(tests/support/airflow_venv.py), unchanged, each task run by that venv's interpreter
(tests/clients/airflow_task.py) against real Spark on the real nodes.

- ``SparkKubernetesOperator.execute()`` with a kubeflow ``v1beta2`` manifest as users keep it, and
  with the same manifest in ``sparkop.io``: it returns for a SparkPi that succeeds, with the driver's
  ``Pi is roughly 3.1`` in what it logged (``get_logs=True``); it raises for an app that fails; and
  either way it deletes its SparkApplication (Airflow finds the driver pod as ``<app>-driver``, and
  deletes the app named after that pod).
- ``SparkKubernetesSensor`` sees COMPLETED (returns) and FAILED (raises), with the driver's log.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.testing import wait_for
from tests.support.airflow_venv import RESULT_MARK, TASK_SCRIPT, ensure_airflow_venv
from tests.support.spark_e2e import JOBS_DIR, OLDEST_VERSION, SPARK_SERVICE_ACCOUNT, SparkNamespace, examples_jar

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode, pytest.mark.needs_build("airflow")]

ROOT = Path(__file__).resolve().parents[2]
KUBEFLOW_CRDS = ROOT / "crds" / "kubeflow"
KUBEFLOW_API_VERSION = "sparkoperator.k8s.io/v1beta2"
SPARKOP_API_VERSION = "sparkop.io/v1alpha1"
GROUPS = {"kubeflow": KUBEFLOW_API_VERSION, "sparkop": SPARKOP_API_VERSION}
# Airflow polls a SUBMITTED app every 10 s, then follows its driver pod; three JVMs start on two busy cores.
TASK_S = 600.0
VERSION = OLDEST_VERSION
# The failing app runs a while before it fails: Airflow polls the app every 10 s while it is SUBMITTED
# and raises without clean-up when its poll already finds it FAILED (kubeflow's too). An app that has
# run for a poll is followed through its pod, as a real job that fails mid-run is.
FAILING_JOB = """\
import sys
import time

print("airflow e2e: working", flush=True)
time.sleep(25)
sys.stderr.write("airflow e2e: the input table is missing\\n")
sys.exit(3)
"""


def kubeflow_manifest(name: str, **spec: Any) -> str:
    """A SparkApplication as kubeflow's users keep it in their repositories: YAML, kubeflow's group."""
    manifest = {
        "apiVersion": KUBEFLOW_API_VERSION,
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "image": f"apache/spark:{VERSION}",
            "imagePullPolicy": "IfNotPresent",
            "sparkVersion": VERSION,
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": examples_jar(VERSION),
            "arguments": ["10"],
            "restartPolicy": {"type": "Never"},
            "driver": {"cores": 1, "coreRequest": "250m", "memory": "512m", "serviceAccount": SPARK_SERVICE_ACCOUNT},
            "executor": {"instances": 1, "cores": 1, "coreRequest": "250m", "memory": "512m"},
            **spec,
        },
    }
    manifest["spec"] = {key: value for key, value in manifest["spec"].items() if value is not None}
    return yaml.safe_dump(manifest, sort_keys=False)


def failing_manifest(name: str) -> str:
    mount = {"name": "jobs", "mountPath": JOBS_DIR}
    return kubeflow_manifest(
        name,
        type="Python",
        pythonVersion="3",
        mainClass=None,
        mainApplicationFile=f"local://{JOBS_DIR}/fail.py",
        arguments=[],
        volumes=[{"name": "jobs", "configMap": {"name": "airflow-jobs"}}],
        driver={
            "cores": 1,
            "coreRequest": "250m",
            "memory": "512m",
            "serviceAccount": SPARK_SERVICE_ACCOUNT,
            "volumeMounts": [mount],
        },
        executor={"instances": 1, "cores": 1, "coreRequest": "250m", "memory": "512m", "volumeMounts": [mount]},
    )


def in_group(manifest: str, group: str) -> str:
    """The same manifest in the other group: only the apiVersion differs (docs/migrating-from-kubeflow.md)."""
    return manifest.replace(KUBEFLOW_API_VERSION, GROUPS[group])


@pytest.fixture(scope="module")
def airflow_python() -> Path:
    return ensure_airflow_venv()


@pytest.fixture
def kubeflow_crds(spark: SparkNamespace) -> Iterator[SparkNamespace]:
    spark.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(KUBEFLOW_CRDS))
    yield spark


def run_task(airflow_python: Path, spark: SparkNamespace, tmp_path: Path, **request: Any) -> dict[str, Any]:
    """One Airflow task in the Airflow venv; what it returned or raised, and what it logged."""
    request.update(kubeconfig=str(spark.cluster.kubeconfig), namespace=spark.ns, airflow_home=str(tmp_path))
    request["result_mark"] = RESULT_MARK
    path = tmp_path / f"{request['task_id']}.json"
    path.write_text(json.dumps(request))
    done = subprocess.run(
        [str(airflow_python), str(TASK_SCRIPT), str(path)], capture_output=True, text=True, timeout=TASK_S
    )
    printed, mark, last = done.stdout.rpartition(RESULT_MARK)
    assert done.returncode == 0 and mark, f"the Airflow task did not finish:\n{done.stdout}\n{done.stderr[-6000:]}"
    result: dict[str, Any] = json.loads(last)
    # What the task's log would show: Airflow's structlog lines (standard output), then the rest.
    result["log"] = printed.splitlines() + result["log"]
    return result


def spark_applications(spark: SparkNamespace) -> list[str]:
    """Every SparkApplication left in the namespace, in either group."""
    names = []
    for resource in ("sparkapplications.sparkoperator.k8s.io", "sparkapplications.sparkop.io"):
        names += spark.kubectl("get", resource, "-o", "name").split()
    return names


def none_left(spark: SparkNamespace) -> None:
    wait_for(lambda: not spark_applications(spark), timeout=60, interval=1.0, message="no SparkApplication left")


@pytest.mark.operator_args("--kubeflow-api")
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_spark_kubernetes_operator_returns_for_spark_pi_with_its_driver_log(
    kubeflow_crds: SparkNamespace, airflow_python: Path, tmp_path: Path, group: str
) -> None:
    spark = kubeflow_crds
    manifest = tmp_path / "spark-pi.yaml"
    manifest.write_text(in_group(kubeflow_manifest("spark-pi"), group))
    result = run_task(airflow_python, spark, tmp_path, task="operator", task_id="pi", manifest=str(manifest))
    assert result["outcome"] == "returned", result.get("traceback") or result
    log = "\n".join(result["log"])
    assert "Pi is roughly 3.1" in log, log[-4000:]
    # Airflow named the app itself (a random suffix), waited on the pod <app>-driver, and the driver pod
    # it finds by its own labels is that pod.
    assert f"Found matching driver pod {result['name']}-driver " in log, log[-4000:]
    none_left(spark)


@pytest.mark.operator_args("--kubeflow-api")
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_spark_kubernetes_operator_raises_for_a_failing_app(
    kubeflow_crds: SparkNamespace, airflow_python: Path, tmp_path: Path, group: str
) -> None:
    spark = kubeflow_crds
    spark.configmap("airflow-jobs", {"fail.py": FAILING_JOB})
    manifest = tmp_path / "failing.yaml"
    manifest.write_text(in_group(failing_manifest("failing"), group))
    result = run_task(airflow_python, spark, tmp_path, task="operator", task_id="failing", manifest=str(manifest))
    assert result["outcome"] == "raised", result
    assert result["error_type"] == "AirflowException", result
    log = "\n".join(result["log"])
    assert "airflow e2e: the input table is missing" in log, log[-4000:]
    none_left(spark)


@pytest.mark.operator_args("--kubeflow-api")
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_spark_kubernetes_sensor_sees_completed_and_failed(
    kubeflow_crds: SparkNamespace, airflow_python: Path, tmp_path: Path, group: str
) -> None:
    spark = kubeflow_crds
    spark.configmap("airflow-jobs", {"fail.py": FAILING_JOB})
    spark.apply(yaml.safe_load(in_group(kubeflow_manifest("sensed-pi"), group)))
    spark.apply(yaml.safe_load(in_group(failing_manifest("sensed-failing"), group)))
    api_group, api_version = GROUPS[group].split("/")
    resource = f"sparkapplications.{api_group}"

    def state(name: str) -> str:
        app = json.loads(spark.kubectl("get", resource, name, "-o", "json"))
        return str(app.get("status", {}).get("applicationState", {}).get("state", ""))

    for name, final in (("sensed-pi", "COMPLETED"), ("sensed-failing", "FAILED")):
        wait_for(lambda n=name: state(n) in ("COMPLETED", "FAILED"), timeout=TASK_S, interval=2.0, message=f"{name}")
        assert state(name) == final
    sensed = {
        name: run_task(
            airflow_python,
            spark,
            tmp_path,
            task="sensor",
            task_id=f"sense-{name}",
            app=name,
            api_group=api_group,
            api_version=api_version,
        )
        for name in ("sensed-pi", "sensed-failing")
    }
    completed, failed = sensed["sensed-pi"], sensed["sensed-failing"]
    assert completed["outcome"] == "returned" and completed["returned"] is True, completed
    assert "Pi is roughly 3.1" in "\n".join(completed["log"]), completed["log"][-40:]
    assert failed["outcome"] == "raised" and "failed with state: FAILED" in failed["error"], failed
    assert "airflow e2e: the input table is missing" in "\n".join(failed["log"]), failed["log"][-40:]
