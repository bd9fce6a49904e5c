"""Two `sparkop run --leader-elect` processes on a real API server: one reconciles, the other waits
warm; a SIGKILLed leader is replaced once its lease expires, a SIGTERMed one hands over at once, and
a paused leader writes nothing once its renew deadline has passed (checked in the API server's audit
log, where each replica's requests carry its identity in the user agent)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, KubectlError, wait_for
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

LEASE_DURATION = 15.0
RETRY_PERIOD = 2.0
JITTER = 1.2


def elected(cluster: ClusterHandle, namespace: str, identity: str, tmp_path: Path) -> OperatorProcess:
    args = ["--leader-elect", "--leader-elect-namespace", namespace, "--leader-elect-identity", identity]
    return OperatorProcess(cluster.kubeconfig, namespaces=[namespace], log_dir=tmp_path / identity, extra_args=args)


@contextmanager
def operators(cluster: ClusterHandle, namespace: str, tmp_path: Path, *names: str) -> Iterator[list[OperatorProcess]]:
    procs = [elected(cluster, namespace, name, tmp_path) for name in names]
    for proc in procs:
        proc.log_dir.mkdir(parents=True, exist_ok=True)
    try:
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def lease(cluster: ClusterHandle, namespace: str) -> dict[str, Any]:
    try:
        spec: dict[str, Any] = cluster.kubectl_json("get", "lease", "sparkop-leader", "-n", namespace)["spec"]
    except KubectlError:
        return {}
    return spec


def holder(cluster: ClusterHandle, namespace: str) -> str | None:
    return lease(cluster, namespace).get("holderIdentity")


def standby_ready(proc: OperatorProcess) -> bool:
    return "is a candidate for lease" in proc.logs()


def app(name: str, run_seconds: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "sparkVersion": "3.5.9",
            "image": "apache/spark:3.5.9",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples_2.12-3.5.9.jar",
            "restartPolicy": {"type": "Never"},
            "driver": {
                "cores": 1,
                "memory": "512m",
                "annotations": {
                    "sim.sparkop.io/run-seconds": str(run_seconds),
                    "sim.sparkop.io/outcome": "Succeeded",
                },
            },
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        },
    }


def drivers(cluster: ClusterHandle, namespace: str) -> set[str]:
    items = cluster.kubectl_json("get", "sparkdrivers", "-n", namespace)["items"]
    return {d["metadata"]["name"] for d in items}


def state(cluster: ClusterHandle, namespace: str, name: str) -> str | None:
    got = cluster.kubectl_json("get", "sparkapplication", name, "-n", namespace)
    return ((got.get("status") or {}).get("applicationState") or {}).get("state")


def writes_by(cluster: ClusterHandle, namespace: str, identity: str) -> list[dict[str, Any]]:
    """The audited writes (create, update, patch, delete) that replica ``identity`` made in ``namespace``."""
    assert cluster.cluster is not None
    found = []
    for line in cluster.cluster.audit_log.read_text(errors="replace").splitlines():
        entry = json.loads(line)
        ref = entry.get("objectRef") or {}
        if (
            entry.get("verb") in ("create", "update", "patch", "delete")
            and ref.get("namespace") == namespace
            and f"({identity})" in (entry.get("userAgent") or "")
        ):
            found.append(entry)
    return found


def received(entry: dict[str, Any]) -> float:
    return datetime.fromisoformat(entry["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()


def succeeded(entry: dict[str, Any]) -> bool:
    return int((entry.get("responseStatus") or {}).get("code") or 0) < 400


def describe(entry: dict[str, Any]) -> str:
    ref = entry["objectRef"]
    code = (entry.get("responseStatus") or {}).get("code")
    return f"{entry['verb']} {ref.get('resource')}/{ref.get('name')} -> {code}"


@pytest.fixture
def audited(crds: ClusterHandle) -> ClusterHandle:
    if crds.cluster is None:
        pytest.skip("an external cluster's audit log is not readable here")
    return crds


def test_one_leader_reconciles_and_a_sigkilled_leader_is_replaced_within_the_lease_duration(
    audited: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    cluster = audited
    with operators(cluster, namespace, tmp_path, "kill-a", "kill-b") as (first, second):
        first.start()
        wait_for(lambda: holder(cluster, namespace) == "kill-a", timeout=60, message="kill-a to lead")
        second.start()
        wait_for(lambda: standby_ready(second), timeout=60, message="kill-b to stand by")
        cluster.apply(app("before", run_seconds=20), namespace)
        wait_for(lambda: "before-1" in drivers(cluster, namespace), timeout=60, message="the leader to make a driver")
        assert writes_by(cluster, namespace, "kill-b") == [], "the standby writes nothing, not even the lease"
        assert any(e["objectRef"]["resource"] == "sparkdrivers" for e in writes_by(cluster, namespace, "kill-a"))

        first.kill()
        killed = time.time()
        wait_for(lambda: holder(cluster, namespace) == "kill-b", timeout=60, message="kill-b to take over")
        spec = lease(cluster, namespace)
        acquired = datetime.fromisoformat(spec["acquireTime"].replace("Z", "+00:00")).timestamp()
        handover = acquired - killed
        print(f"\nSIGKILL handover: {handover:.2f}s (lease duration {LEASE_DURATION:g}s)")
        # The standby counts the lease duration from when it saw the leader's last renewal, which
        # it learns up to one retry period late: never sooner than allowed, at most that much later.
        assert 0 < handover <= LEASE_DURATION + RETRY_PERIOD * JITTER, handover
        assert spec["leaseTransitions"] == 1

        cluster.apply(app("after"), namespace)
        wait_for(lambda: "after-1" in drivers(cluster, namespace), timeout=60, message="the new leader to reconcile")
        for name in ("before", "after"):
            wait_for(lambda n=name: state(cluster, namespace, n) == "COMPLETED", timeout=90, message=f"{name} done")
        assert drivers(cluster, namespace) == {"before-1", "after-1"}, "one run each, no duplicate"


def test_a_sigtermed_leader_releases_its_lease_and_the_standby_takes_over_at_once(
    audited: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    cluster = audited
    with operators(cluster, namespace, tmp_path, "term-a", "term-b") as (first, second):
        first.start()
        wait_for(lambda: holder(cluster, namespace) == "term-a", timeout=60, message="term-a to lead")
        second.start()
        wait_for(lambda: standby_ready(second), timeout=60, message="term-b to stand by")

        stopping = time.time()
        assert first.stop() == 0, first.logs()
        assert "released lease" in first.logs()
        wait_for(lambda: holder(cluster, namespace) == "term-b", timeout=30, message="term-b to take over")
        spec = lease(cluster, namespace)
        acquired = datetime.fromisoformat(spec["acquireTime"].replace("Z", "+00:00")).timestamp()
        handover = acquired - stopping
        print(f"\nSIGTERM handover: {handover:.2f}s (one retry period is {RETRY_PERIOD:g}s)")
        assert handover < RETRY_PERIOD * JITTER + 2, handover
        assert spec["leaseTransitions"] == 1, "created by term-a, then one change of holder"

        cluster.apply(app("after-term"), namespace)
        wait_for(lambda: state(cluster, namespace, "after-term") == "COMPLETED", timeout=90, message="the app done")


def test_a_paused_leader_writes_nothing_after_its_renew_deadline_and_exits(
    audited: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    """SIGSTOP the leader (a frozen VM, a partition): the standby takes over once the lease expires.
    On SIGCONT the old leader finds itself past its renew deadline: it neither renews nor reconciles
    what happened meanwhile, and exits non-zero to come back as a standby."""
    cluster = audited
    with operators(cluster, namespace, tmp_path, "fence-a", "fence-b") as (first, second):
        first.start()
        wait_for(lambda: holder(cluster, namespace) == "fence-a", timeout=60, message="fence-a to lead")
        second.start()
        wait_for(lambda: standby_ready(second), timeout=60, message="fence-b to stand by")
        cluster.apply(app("first", run_seconds=30), namespace)
        wait_for(lambda: "first-1" in drivers(cluster, namespace), timeout=60, message="the leader to make a driver")

        first.signal(signal.SIGSTOP)
        wait_for(lambda: holder(cluster, namespace) == "fence-b", timeout=60, message="fence-b to take over")
        # Work the old leader's watches deliver the moment it resumes: a new app, and a change to one it ran.
        cluster.apply(app("second"), namespace)
        cluster.kubectl("annotate", "sparkapplication", "first", "-n", namespace, "poke=1")
        wait_for(lambda: "second-1" in drivers(cluster, namespace), timeout=60, message="the new leader to reconcile")

        resumed = time.time()
        first.signal(signal.SIGCONT)
        assert first.wait(30) == 1, first.logs()
        assert "lost lease" in first.logs() and "not renewed within the renew deadline" in first.logs()

        before = [e for e in writes_by(cluster, namespace, "fence-a") if received(e) < resumed]
        after = [e for e in writes_by(cluster, namespace, "fence-a") if received(e) >= resumed]
        assert any(e["objectRef"]["resource"] == "leases" for e in before), "the audit log shows its writes"
        # A request that had passed the fence just before the pause may arrive after it; the API
        # server refuses it (the lease and the objects changed): nothing of it takes effect.
        assert [describe(e) for e in after if succeeded(e)] == []
        print(f"\nwrites by the paused leader after SIGCONT: {[describe(e) for e in after]}")
        wait_for(lambda: state(cluster, namespace, "second") == "COMPLETED", timeout=90, message="second done")
