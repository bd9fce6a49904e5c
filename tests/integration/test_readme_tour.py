"""The README's five-minute tour, run step by step as a newcomer would type it, on the test cluster.

The tour works in the `default` namespace (as a newcomer's kubeconfig does), so this test runs its own
operator watching `default` and removes the tour's app afterwards.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.testing import ClusterHandle, wait_for
from sparkop import demo
from sparkop.domain import labels
from tests.support.operator import OperatorProcess, release_driver_pods
from tests.support.readme import ROOT, tour_steps

pytestmark = pytest.mark.cluster

TOUR_APP = "spark-pi"
DRAIN_STEP = "kubectl delete pod -l spark-role=driver"


@pytest.fixture
def tour_operator(crds: ClusterHandle, tmp_path: Path) -> Iterator[OperatorProcess]:
    # What `sparkop demo` (and the chart, in each job namespace) gives the examples' drivers.
    demo.create_driver_account(crds.kubectl_binary, crds.kubeconfig, "default")
    with OperatorProcess(crds.kubeconfig, namespaces=["default"], log_dir=tmp_path) as proc:
        yield proc
        # While the operator runs: it lets the driver pods go (its finalizer) as their app goes.
        crds.kubectl("delete", "sparkapplication", TOUR_APP, "-n", "default", "--ignore-not-found", "--wait=true")
        wait_for(lambda: not _held_pods(crds), timeout=60, message="the operator to let the tour's driver pods go")
    release_driver_pods(crds, "default")  # only if the wait above failed: leave the session's nodes free


def _held_pods(cluster: ClusterHandle) -> list[str]:
    pods = cluster.kubectl_json("get", "pods", "-n", "default")["items"]
    return [
        p["metadata"]["name"]
        for p in pods
        if labels.DRIVER_OUTCOME_FINALIZER in (p["metadata"].get("finalizers") or ())
    ]


def _run(step: str, cluster: ClusterHandle) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["KUBECONFIG"] = str(cluster.kubeconfig)
    env["PATH"] = f"{Path(cluster.kubectl_binary).parent}{os.pathsep}{env['PATH']}"
    command = step.replace(".venv/bin/sparkop", f"{shlex.quote(sys.executable)} -m sparkop")
    return subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _driver(cluster: ClusterHandle) -> dict[str, object]:
    found: dict[str, object] = cluster.kubectl_json("get", "sparkdriver", f"{TOUR_APP}-1", "-n", "default")
    return found


def _driver_pod_running(cluster: ClusterHandle) -> bool:
    pods = cluster.kubectl_json("get", "pods", "-n", "default", "-l", "spark-role=driver")["items"]
    return any(pod.get("status", {}).get("phase") == "Running" for pod in pods)


def test_every_tour_step_works_and_the_drain_gives_a_new_incarnation(
    crds: ClusterHandle, tour_operator: OperatorProcess
) -> None:
    steps = tour_steps()
    assert steps[0].startswith("export KUBECONFIG="), steps
    assert DRAIN_STEP in steps, steps
    for step in steps[1:]:
        if step == DRAIN_STEP:
            # What the reader sees in the step before: a running driver pod.
            wait_for(lambda: _driver_pod_running(crds), timeout=90, message="the tour's driver pod running")
        result = _run(step, crds)
        assert result.returncode == 0, f"{step}\n{result.stdout}\n{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        if step == DRAIN_STEP:
            assert "deleted" in result.stdout, result.stdout
            wait_for(
                lambda: _driver(crds).get("status", {}).get("incarnation") == 2,  # type: ignore[union-attr]
                timeout=60,
                message="a second driver incarnation after the drain",
            )
            # The app reaches RUNNING (on a loaded machine its controller may not have seen the first
            # incarnation run before the drain; then it sees the second run) within the same attempt.
            wait_for(
                lambda: _app_state(crds) == "RUNNING",
                timeout=90,
                message="the app RUNNING after the drain",
            )
            app = crds.kubectl_json("get", "sparkapplication", TOUR_APP, "-n", "default")
            assert app["status"]["executionAttempts"] == 1, app["status"]
        if step.endswith(f"sparkop status {TOUR_APP}"):
            assert "incarnation 2" in result.stdout, result.stdout
    assert tour_operator.alive()


def _app_state(crds: ClusterHandle) -> str | None:
    app = crds.kubectl_json("get", "sparkapplication", TOUR_APP, "-n", "default")
    return str(((app.get("status") or {}).get("applicationState") or {}).get("state") or "") or None
