"""The demo's scenario on the test cluster, then `sparkop status` on what it left behind."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from devcluster import procs
from devcluster.cluster import Cluster, remove_cluster
from devcluster.testing import ClusterHandle, unique_name
from sparkop.demo import OPERATOR, run_scenario
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def sparkop_status(cluster: ClusterHandle, namespace: str, name: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "sparkop", "status", name, "-n", namespace, "--kubeconfig", str(cluster.kubeconfig)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout


def test_demo_scenario_ends_as_promised_and_status_tells_the_story(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    lines: list[str] = []
    rows = run_scenario(crds.kubectl_binary, crds.kubeconfig, namespace, time.monotonic(), out=lines.append)
    table = "\n".join(lines)

    assert rows["pi-succeeds"].state == "COMPLETED", table
    assert rows["etl-retries"].state == "FAILED", table
    assert rows["etl-retries"].attempts == 3, table  # the first run and onFailureRetries: 2
    assert rows["stream-recovers"].state == "COMPLETED", table
    assert rows["stream-recovers"].attempts == 1, table  # a lost driver pod is not an app failure
    assert rows["stream-recovers"].incarnations == 2, table
    assert "deleting driver pod stream-recovers-driver" in table

    recovered = sparkop_status(crds, namespace, "stream-recovers")
    assert f"SparkApplication {namespace}/stream-recovers: COMPLETED" in recovered
    assert "incarnation 1: Lost" in recovered, recovered
    assert "SparkDriver stream-recovers-1 (Succeeded), pod stream-recovers-driver, incarnation 2" in recovered

    retried = sparkop_status(crds, namespace, "etl-retries")
    assert f"SparkApplication {namespace}/etl-retries: FAILED" in retried
    assert "OnFailure (2 retries, every 2s)" in retried
    for run in (1, 2, 3):
        assert f"etl-retries-{run}" in retried, retried
    assert "exit code 1" in retried, retried
    assert "ValueError: input path does not exist" in retried, retried
    assert operator.alive()


def test_status_of_a_missing_app_says_so(crds: ClusterHandle, namespace: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sparkop", "status", "nope", "-n", namespace, "--kubeconfig", str(crds.kubeconfig)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1
    # It names the app, the namespace it looked in, and the command that lists what is there.
    assert f"no SparkApplication 'nope' in namespace '{namespace}'; sparkop list -n {namespace}" in result.stderr


def operators_on(kubeconfig: Path) -> list[int]:
    """The pids of every `sparkop run` process on this machine working on ``kubeconfig``'s cluster."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue  # gone meanwhile, or not a process
        if "sparkop" in argv and "run" in argv and str(kubeconfig) in argv:
            found.append(int(proc.name))
    return found


def test_demo_keep_then_devcluster_down_leaves_no_operator_running() -> None:
    """issue 49: `make demo DEMO_ARGS=--keep` says the cluster and the operator stay up until
    `python -m devcluster down --name <name>`; that command stops the operator too (it is one of the
    cluster's recorded processes), and no `sparkop run` is left behind."""
    name = unique_name("demo-keep")
    try:
        demo = subprocess.run(
            [sys.executable, "-m", "sparkop", "demo", "--keep", "--name", name],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert f"stop them with: python -m devcluster down --name {name}" in demo.stdout, demo.stdout
        cluster = Cluster.load(name)
        operator = cluster.state.processes[OPERATOR].pid
        assert operators_on(cluster.kubeconfig) == [operator]  # kept: up, and the one the state records

        down = subprocess.run(
            [sys.executable, "-m", "devcluster", "down", "--name", name],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert not procs.is_alive(operator)
        assert operators_on(cluster.kubeconfig) == []
    finally:
        remove_cluster(name)
