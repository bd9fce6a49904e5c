"""One Airflow task, run as its users run it: Apache Airflow's own SparkKubernetesOperator or
SparkKubernetesSensor, unchanged, from the pinned provider in the Airflow venv
(tests/support/airflow_venv.py). Run by that venv's interpreter, never imported by the test suite:

    <airflow venv>/bin/python tests/clients/airflow_task.py REQUEST.json

REQUEST names the task (``operator`` or ``sensor``), the kubeconfig, the namespace and either the
manifest file (operator) or the app and its API group/version (sensor). The cluster is reached as an
Airflow connection given in the environment (``AIRFLOW_CONN_KUBERNETES_DEFAULT``), one of the ways
Airflow documents; no metadata database is used: ``execute()`` gets a small context object holding
what the operators read from it (the task instance's ids, ``run_id``, ``dag``, an XCom push).

Airflow's task SDK logs through structlog to standard output, as a task's log shows it; the
standard library's loggers (the Kubernetes client's) are collected too. The last line printed is
the request's ``result_mark`` and a JSON object: ``outcome`` (``returned`` or ``raised``), the exception, the task's
final name, the XComs it pushed, and the standard library's log lines.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


@dataclass
class TaskInstance:
    """What the operators read of the running task instance."""

    dag_id: str
    task_id: str
    try_number: int = 1
    map_index: int = -1
    start_date: datetime = field(default_factory=lambda: datetime.now(UTC))
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any, **_: Any) -> None:
        self.xcoms[key] = value


@dataclass
class Dag:
    dag_id: str


class Collected(logging.Handler):
    """Every record Airflow's loggers emit, as the task log would show it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = f"{record.levelname} {record.name}: {record.getMessage()}"
        self.lines.append(line)
        print(line, file=sys.stderr, flush=True)


def context_for(task_id: str, run_id: str) -> dict[str, Any]:
    ti = TaskInstance(dag_id="sparkop_clients", task_id=task_id)
    return {"ti": ti, "task_instance": ti, "run_id": run_id, "dag": Dag(ti.dag_id)}


def run(request: dict[str, Any]) -> dict[str, Any]:
    # Imported late: the environment (AIRFLOW_HOME, the connection) is set before Airflow loads.
    from airflow.providers.cncf.kubernetes.operators.spark_kubernetes import SparkKubernetesOperator
    from airflow.providers.cncf.kubernetes.sensors.spark_kubernetes import SparkKubernetesSensor

    context = context_for(request["task_id"], request.get("run_id", "manual__sparkop"))
    task: Any
    if request["task"] == "operator":
        task = SparkKubernetesOperator(
            task_id=request["task_id"],
            namespace=request["namespace"],
            application_file=request["manifest"],
            get_logs=True,
            startup_timeout_seconds=request.get("startup_timeout_seconds", 600),
        )
    else:
        task = SparkKubernetesSensor(
            task_id=request["task_id"],
            namespace=request["namespace"],
            application_name=request["app"],
            api_group=request["api_group"],
            api_version=request["api_version"],
            attach_log=True,
        )
    result: dict[str, Any] = {"task": request["task"]}
    try:
        if request["task"] == "operator":
            result["returned"] = repr(task.execute(context))
        else:
            result["returned"] = task.poke(context)
        result["outcome"] = "returned"
    except Exception as error:  # the test asserts on what Airflow raised
        result.update(outcome="raised", error_type=type(error).__name__, error=str(error))
        result["traceback"] = traceback.format_exc()
    result["name"] = getattr(task, "name", None)
    result["xcoms"] = context["ti"].xcoms
    return result


def main() -> int:
    request = json.loads(Path(sys.argv[1]).read_text())
    os.environ.setdefault("AIRFLOW_HOME", request["airflow_home"])
    os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(
        {
            "conn_type": "kubernetes",
            "extra": {"kube_config_path": request["kubeconfig"], "namespace": request["namespace"]},
        }
    )
    # Airflow sets up its logging when it is first imported: the handler goes on after that.
    import airflow.providers.cncf.kubernetes.operators.spark_kubernetes  # noqa: F401

    collected = Collected()
    logging.getLogger().addHandler(collected)
    logging.getLogger().setLevel(logging.INFO)
    result = run(request)
    result["log"] = collected.lines
    print(request["result_mark"] + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
