"""A SparkApplication's runs on the in-memory cluster (tests/support/simulation.py): the spec and the
restart policies the apps controller's unit tests start from, and each run driven to an outcome
(tests/unit/test_apps_reconcile.py, test_app_metrics.py)."""

from __future__ import annotations

from typing import Any

from sparkop.api.models import DriverPhase
from tests.support.simulation import SimCluster

BASE_SPEC: dict[str, Any] = {
    "type": "Scala",
    "sparkVersion": "3.5.3",
    "image": "spark:3.5.3",
    "mainClass": "org.apache.spark.examples.SparkPi",
    "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
    "driver": {"cores": 1, "memory": "512m", "annotations": {"sim.sparkop.io/run-seconds": "1"}},
    "executor": {"instances": 1, "cores": 1, "memory": "512m"},
}


POLICIES: dict[str, dict[str, Any]] = {
    "Never": {"type": "Never"},
    "OnFailure": {
        "type": "OnFailure",
        "onFailureRetries": 2,
        "onFailureRetryInterval": 3,
        "onSubmissionFailureRetries": 1,
        "onSubmissionFailureRetryInterval": 2,
    },
    "Always": {"type": "Always", "onFailureRetryInterval": 3, "onSubmissionFailureRetryInterval": 2},
}


def live(c: SimCluster) -> str:
    (name,) = (d.name for d in c.unfinished())
    return name


def finish(c: SimCluster, name: str, phase: DriverPhase, reason: str | None = None) -> None:
    if phase is not DriverPhase.SUBMISSION_FAILED:
        c.set_phase(name, DriverPhase.RUNNING)
        c.run_until_quiet()
    c.set_phase(name, phase, reason, None if phase is not DriverPhase.FAILED else 1)


def drive(c: SimCluster, phase: DriverPhase, reason: str | None, max_runs: int, tick: float = 0.25) -> None:
    """Every run ends with ``phase``; time moves in ``tick`` steps while waiting for the next run."""
    c.run_until_quiet()
    for _ in range(200):
        if len(c.created) > max_runs or c.state in ("COMPLETED", "FAILED"):
            return
        if c.unfinished():
            finish(c, live(c), phase, reason)
        c.run_until_quiet()
        if not c.unfinished():
            c.advance(tick)
    raise AssertionError("did not settle")
