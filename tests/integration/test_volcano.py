"""Gang scheduling with the real Volcano scheduler (issue 26): `python -m devcluster up --schedulers
volcano` runs Volcano's scheduler and controller manager, built from its Go module, beside
kube-scheduler. sparkop's PodGroup (minMember 1, minResources the driver's and the initial executors'
requests) is what Volcano's enqueue action reads: two apps whose gangs do not fit together are
applied at once; one runs, the other waits Pending as a whole (its PodGroup Pending, its driver
unbound, no executor) and starts when the first has ended. Both COMPLETED. Once where the node is the
limit (the default queue), once where a Queue's capability is (the node has room for both).

The cluster is this module's own (a kwok node of 8 CPUs, the simulated drivers); the PodGroup phases
are watched as Volcano writes them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.testing import SESSION_PREFIX, ClusterHandle, temporary_namespace, wait_for
from domain import labels, naming
from tests.support.cluster_apps import app_manifest, status, wait_state
from tests.support.crds import install_crds
from tests.support.operator import OperatorProcess
from tests.support.watches import KubectlWatch

pytestmark = pytest.mark.cluster

NODE_CPU = 8
QUEUE = "one-gang"


@pytest.fixture(scope="module")
def volcano() -> Iterator[ClusterHandle]:
    cluster = Cluster.up(
        f"{SESSION_PREFIX}volcano-{os.getpid()}",
        nodes=1,
        node_cpu=str(NODE_CPU),
        node_memory="64Gi",
        schedulers=("volcano",),
        die_with_parent=True,
    )
    handle = ClusterHandle(cluster.kubeconfig, cluster.kubectl, cluster)
    try:
        install_crds(handle)
        yield handle
    finally:
        cluster.down()


@pytest.fixture
def namespace(volcano: ClusterHandle) -> Iterator[str]:
    with temporary_namespace(volcano) as name:
        yield name


@pytest.fixture
def operator(volcano: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    with OperatorProcess(volcano.kubeconfig, namespaces=[namespace], log_dir=tmp_path) as proc:
        yield proc


class PodGroupPhases(KubectlWatch):
    """Every phase each Volcano PodGroup of a namespace went through, in order."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        self.phases: dict[str, list[str]] = {}
        super().__init__(
            cluster,
            namespace,
            ["podgroups.scheduling.volcano.sh"],
            '{.object.metadata.name} {.object.status.phase}{"\\n"}',
        )

    def on_line(self, parts: list[str]) -> None:
        if len(parts) == 2:
            seen = self.phases.setdefault(parts[0], [])
            if not seen or seen[-1] != parts[1]:
                seen.append(parts[1])


def group(app: str) -> str:
    """The PodGroup of the app's first run."""
    return naming.pod_group_name(naming.driver_name(app, 1))


def gang_app(name: str, executors: int, **spec: Any) -> dict[str, Any]:
    """A simulated app of 1 + ``executors`` pods of 1 CPU each, for Volcano."""
    executor = {"instances": executors, "cores": 1, "memory": "512m"}
    return app_manifest(name, run_seconds=8, batchScheduler="volcano", executor=executor, **spec)


def pods_of(cluster: ClusterHandle, namespace: str, app: str) -> list[dict[str, Any]]:
    listed = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", f"{labels.APP}={app}")
    return list(listed["items"])


def role(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"].get(labels.SPARK_ROLE, ""))


def scheduled_at(pod: dict[str, Any]) -> str:
    conditions = pod.get("status", {}).get("conditions") or []
    return next(
        (c["lastTransitionTime"] for c in conditions if c["type"] == "PodScheduled" and c["status"] == "True"), ""
    )


@pytest.mark.parametrize(
    ("limit", "executors"),
    [
        # The default queue: the node's 8 CPUs hold one gang of 5, not two.
        ("node", 4),
        # A Queue of 4 CPUs: one gang of 3 at a time, on a node with room for both.
        ("queue", 2),
    ],
)
def test_two_gangs_that_do_not_fit_together_run_one_after_the_other(
    volcano: ClusterHandle, namespace: str, operator: OperatorProcess, limit: str, executors: int
) -> None:
    options: dict[str, Any] = {}
    if limit == "queue":
        queue = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": f"{QUEUE}-{namespace}"},
            "spec": {"weight": 1, "reclaimable": False, "capability": {"cpu": "4", "memory": "32Gi"}},
        }
        volcano.apply(queue)
        options["batchSchedulerOptions"] = {"queue": queue["metadata"]["name"]}
    phases = PodGroupPhases(volcano, namespace)
    try:
        names = ["gang-a", "gang-b"]
        for name in names:
            volcano.apply(gang_app(name, executors, **options), namespace)

        def one_running() -> str | None:
            running = [
                n for n in names if status(volcano, namespace, n).get("applicationState", {}).get("state") == "RUNNING"
            ]
            executors_running = [
                p for n in running for p in pods_of(volcano, namespace, n)
                if role(p) == labels.ROLE_EXECUTOR and p["status"].get("phase") == "Running"
            ]  # fmt: skip
            return running[0] if len(running) == 1 and len(executors_running) == executors else None

        first = wait_for(one_running, timeout=120, interval=0.2, message="one app running with all its executors")
        (second,) = [n for n in names if n != first]
        # The second gang waits whole: its PodGroup Pending, its driver not bound, no executor.
        waiting = pods_of(volcano, namespace, second)
        assert [role(p) for p in waiting] == [labels.ROLE_DRIVER], waiting
        assert not waiting[0]["spec"].get("nodeName"), waiting[0]
        second_group = volcano.kubectl_json("get", "podgroups.scheduling.volcano.sh", "-n", namespace)["items"]
        phase_of = {g["metadata"]["name"]: g.get("status", {}).get("phase") for g in second_group}
        assert phase_of[group(second)] == "Pending", phase_of
        # Volcano says why on the driver pod: its group cannot start yet.
        scheduled = next(c for c in waiting[0]["status"].get("conditions") or [] if c["type"] == "PodScheduled")
        assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable"), scheduled
        assert "pod group is not ready" in scheduled["message"], scheduled
        print(f"\n{limit}: {first} running with {executors} executors; {second}: {waiting[0]['status']}")

        finals = {n: wait_state(volcano, namespace, n, "COMPLETED", "FAILED", timeout=240) for n in names}
    finally:
        phases.stop()
    assert {n: s["applicationState"]["state"] for n, s in finals.items()} == dict.fromkeys(names, "COMPLETED")
    assert all(s["executionAttempts"] == 1 for s in finals.values()), finals
    # The second started only once the first had ended.
    driver = next(p for p in pods_of(volcano, namespace, second) if role(p) == labels.ROLE_DRIVER)
    assert scheduled_at(driver) >= finals[first]["terminationTime"], (scheduled_at(driver), finals[first])
    print(f"PodGroup phases: {phases.phases}")
    # Volcano writes a group's phase once per scheduling cycle: Inqueue and Running may be one write.
    for name in names:
        assert "Running" in phases.phases[group(name)], phases.phases
    assert phases.phases[group(second)][0] == "Pending", phases.phases
