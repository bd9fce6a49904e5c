"""Timeouts on the test cluster (KWOK nodes, the Spark-driver simulator), with the real operator
SIGKILLed in the middle of each wait: a driver whose image cannot be pulled fails each run at its
driver-start timeout (DriverStartTimedOut), is retried by the infrastructure budget and ends FAILED; a
run past its deadline is stopped, its pods deleted (DeadlineExceeded). Each end is within SLACK_S of
the deadline status recorded: the kill neither reset nor doubled it. Real Spark's are tests/e2e's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from sparkop.core.times import parse_time
from tests.support.cluster_apps import app_manifest, get, wait_state
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

# A wait reset by the kill would end at the restart plus the whole limit (>= half of it late), a doubled
# one a whole limit late: SLACK_S, the restart's own delay on a busy machine, is well below either.
SLACK_S = 7.0
DOWN_S = 2.0


@pytest.fixture
def operator_(crds: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    with OperatorProcess(crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path) as proc:
        yield proc


def _time(value: Any) -> datetime:
    parsed = parse_time(value)
    assert parsed is not None, value
    return parsed


def driver_status(cluster: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    return (get(cluster, namespace, "sparkdriver", name) or {}).get("status") or {}


def kill_at(operator: OperatorProcess, moment: datetime) -> None:
    """SIGKILL the operator at ``moment`` (a time the cluster recorded), start it DOWN_S later."""
    wait = (moment - datetime.now(UTC)).total_seconds()
    if wait > 0:
        time.sleep(wait)  # the fault's moment, not a condition
    operator.kill()
    time.sleep(DOWN_S)
    operator.start()


def test_a_driver_that_cannot_pull_its_image_times_out_each_run_across_a_kill(
    crds: ClusterHandle, namespace: str, operator_: OperatorProcess
) -> None:
    limit = 20
    manifest = app_manifest(
        "pull",
        {"type": "Never", "onInfrastructureFailureRetries": 1, "onInfrastructureFailureRetryInterval": 1},
        timeouts={"driverStartSeconds": limit},
    )
    manifest["spec"]["driver"]["annotations"] = {"sim.sparkop.io/waiting-reason": "ImagePullBackOff"}
    crds.apply(manifest, namespace=namespace)
    pending = wait_for(
        lambda: (s := driver_status(crds, namespace, "pull-1")).get("nextTimeout") and s,
        timeout=60,
        interval=0.2,
        message="pull-1's start timeout pending",
    )
    assert pending["nextTimeout"]["reason"] == "DriverStartTimedOut"
    created = _time(pending["driverPod"]["createdTime"])
    assert _time(pending["nextTimeout"]["time"]) == created + timedelta(seconds=limit)
    kill_at(operator_, created + timedelta(seconds=limit / 2))
    status = wait_state(crds, namespace, "pull", "FAILED", timeout=90)
    assert [a["reason"] for a in status["attempts"]] == ["DriverStartTimedOut", "DriverStartTimedOut"]
    assert status["infrastructureFailures"] == 2 and status["executionAttempts"] == 0
    first = driver_status(crds, namespace, "pull-1")
    waited = (_time(first["completionTime"]) - _time(first["driverPod"]["createdTime"])).total_seconds()
    print(
        f"pull-1: DriverStartTimedOut {waited:.1f}s after its pod's creation (limit {limit}s, killed at {limit / 2}s)"
    )
    assert limit <= waited <= limit + SLACK_S, waited
    assert "ImagePullBackOff" in first["termination"]["message"]
    wait_for(
        lambda: not crds.kubectl_json("get", "pods", "-n", namespace, "-l", "spark-role=driver")["items"],
        timeout=60,
        message="the timed-out driver pods deleted",
    )


def test_a_run_past_its_deadline_is_stopped_across_a_kill(
    crds: ClusterHandle, namespace: str, operator_: OperatorProcess
) -> None:
    deadline = 24
    crds.apply(app_manifest("long", run_seconds=600, activeDeadlineSeconds=deadline), namespace=namespace)
    wait_state(crds, namespace, "long", "RUNNING", timeout=60)
    driver = get(crds, namespace, "sparkdriver", "long-1")
    assert driver is not None
    created = _time(driver["metadata"]["creationTimestamp"])
    kill_at(operator_, created + timedelta(seconds=deadline / 2))
    status = wait_state(crds, namespace, "long", "FAILED", timeout=60)
    assert [a["reason"] for a in status["attempts"]] == ["DeadlineExceeded"]
    ended = driver_status(crds, namespace, "long-1")
    waited = (_time(ended["completionTime"]) - created).total_seconds()
    print(
        f"long-1: DeadlineExceeded {waited:.1f}s after its creation (deadline {deadline}s, killed at {deadline / 2}s)"
    )
    assert deadline <= waited <= deadline + SLACK_S, waited
    wait_for(
        lambda: not crds.kubectl_json("get", "pods", "-n", namespace, "-l", "sparkop.io/driver=long-1")["items"],
        timeout=60,
        message="long-1's driver and executors deleted",
    )
