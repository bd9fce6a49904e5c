"""Gang scheduling by a real batch scheduler on a devcluster of its own (issue 26:
tests/integration/test_volcano.py, test_coscheduling.py): the cluster, and two apps whose gangs do not
fit together applied at once. One runs whole, the other waits whole (its driver pod unbound, no executor
pod) and starts only once the first has ended; both COMPLETED in one attempt. The PodGroups' phases are
watched as the scheduler's controller writes them; each test asserts what its scheduler says."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.testing import SESSION_PREFIX, ClusterHandle, temporary_namespace, wait_for
from sparkop.domain import labels, naming
from tests.support.cluster_apps import app_manifest, status, wait_state
from tests.support.crds import install_crds
from tests.support.operator import OperatorProcess
from tests.support.watches import KubectlWatch

Obj = dict[str, Any]
# What the simulated driver runs before it succeeds: long enough to see the other gang wait.
RUN_SECONDS = 8


@contextmanager
def scheduler_cluster(scheduler: str, node_cpu: int, name: str = "") -> Iterator[ClusterHandle]:
    """A cluster of one kwok node of ``node_cpu`` CPUs and 64 GiB, the simulated drivers, ``up
    --schedulers <scheduler>`` and sparkop's CRDs; down when the block ends."""
    cluster = Cluster.up(
        f"{SESSION_PREFIX}{name or scheduler}-{os.getpid()}",
        nodes=1,
        node_cpu=str(node_cpu),
        node_memory="64Gi",
        schedulers=(scheduler,),
        die_with_parent=True,
    )
    handle = ClusterHandle(cluster.kubeconfig, cluster.kubectl, cluster)
    try:
        install_crds(handle)
        yield handle
    finally:
        cluster.down()


def fixtures(scheduler: str, node_cpu: int) -> tuple[Any, Any, Any]:
    """Fixtures for a test module to bind as ``gang_cluster, namespace, operator``: a
    ``scheduler_cluster`` for the module, and for each test a fresh namespace and the operator
    watching it."""

    @pytest.fixture(scope="module")
    def gang_cluster() -> Iterator[ClusterHandle]:
        with scheduler_cluster(scheduler, node_cpu) as handle:
            yield handle

    @pytest.fixture
    def namespace(gang_cluster: ClusterHandle) -> Iterator[str]:
        with temporary_namespace(gang_cluster) as name:
            yield name

    @pytest.fixture
    def operator(gang_cluster: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
        with OperatorProcess(gang_cluster.kubeconfig, namespaces=[namespace], log_dir=tmp_path) as proc:
            yield proc

    return gang_cluster, namespace, operator


def gang_app(name: str, executors: int, batch_scheduler: str, scheduler_name: str | None = None, **spec: Any) -> Obj:
    """A simulated app of 1 + ``executors`` pods of 1 CPU each for ``batch_scheduler``; its driver and
    executor pods name ``scheduler_name`` when given (driver/executor.schedulerName)."""
    executor = {"instances": executors, "cores": 1, "memory": "512m"}
    manifest = app_manifest(name, run_seconds=RUN_SECONDS, batchScheduler=batch_scheduler, executor=executor, **spec)
    if scheduler_name:
        for role_name in ("driver", "executor"):
            manifest["spec"][role_name]["schedulerName"] = scheduler_name
    return manifest


class PodGroupPhases(KubectlWatch):
    """Every phase each PodGroup (of the kind ``resource``, e.g. ``podgroups.scheduling.volcano.sh``)
    of a namespace went through, in order."""

    def __init__(self, cluster: ClusterHandle, namespace: str, resource: str) -> None:
        self.phases: dict[str, list[str]] = {}
        super().__init__(cluster, namespace, [resource], '{.object.metadata.name} {.object.status.phase}{"\\n"}')

    def on_line(self, parts: list[str]) -> None:
        if len(parts) == 2:
            seen = self.phases.setdefault(parts[0], [])
            if not seen or seen[-1] != parts[1]:
                seen.append(parts[1])


def group(app: str) -> str:
    """The PodGroup of the app's first run."""
    return naming.pod_group_name(naming.driver_name(app, 1))


def pods_of(cluster: ClusterHandle, namespace: str, app: str) -> list[Obj]:
    listed = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", f"{labels.APP}={app}")
    return list(listed["items"])


def role(pod: Obj) -> str:
    return str(pod["metadata"]["labels"].get(labels.SPARK_ROLE, ""))


def scheduled_at(pod: Obj) -> str:
    conditions = pod.get("status", {}).get("conditions") or []
    return next(
        (c["lastTransitionTime"] for c in conditions if c["type"] == "PodScheduled" and c["status"] == "True"), ""
    )


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


@dataclass(frozen=True)
class Waiting:
    """The app that waited, as it stood while the other ran: its driver pod and its PodGroup."""

    app: str
    driver: Obj
    pod_group: Obj

    @property
    def phase(self) -> str | None:
        phase = (self.pod_group.get("status") or {}).get("phase")
        return str(phase) if phase else None

    @property
    def scheduled(self) -> Obj:
        """The driver pod's PodScheduled condition: why its scheduler has not bound it."""
        conditions = self.driver["status"].get("conditions") or []
        found: Obj = next(c for c in conditions if c["type"] == "PodScheduled")
        return found


@dataclass(frozen=True)
class GangRun:
    first: str  # the app that ran at once
    second: str  # the app that waited
    phases: dict[str, list[str]]  # every phase each PodGroup went through, by its name


def run_one_after_the_other(
    cluster: ClusterHandle,
    namespace: str,
    apps: list[Obj],
    executors: int,
    pod_groups: str,
    while_waiting: Callable[[Waiting], None],
    final_phase: str | None = None,
) -> GangRun:
    """Apply the two ``apps`` at once and check that they run one after the other, each whole;
    ``while_waiting`` checks what the scheduler says of the waiting one while the other runs. With
    ``final_phase``, the phases are watched until both PodGroups are in it: a group's controller may
    write its last phase after sparkop has seen the app end."""
    names = [app["metadata"]["name"] for app in apps]
    phases = PodGroupPhases(cluster, namespace, pod_groups)
    try:
        for app in apps:
            cluster.apply(app, namespace)

        def one_running() -> str | None:
            running = [
                n for n in names if status(cluster, namespace, n).get("applicationState", {}).get("state") == "RUNNING"
            ]
            executors_running = [
                p for n in running for p in pods_of(cluster, namespace, n)
                if role(p) == labels.ROLE_EXECUTOR and p["status"].get("phase") == "Running"
            ]  # fmt: skip
            return running[0] if len(running) == 1 and len(executors_running) == executors else None

        first = wait_for(one_running, timeout=120, interval=0.2, message="one app running with all its executors")
        (second,) = [n for n in names if n != first]
        # The second gang waits whole: its driver not bound, no executor.
        waiting = pods_of(cluster, namespace, second)
        assert [role(p) for p in waiting] == [labels.ROLE_DRIVER], waiting
        assert not waiting[0]["spec"].get("nodeName"), waiting[0]
        pod_group = cluster.kubectl_json("get", pod_groups, group(second), "-n", namespace)
        held = Waiting(second, waiting[0], pod_group)
        assert (held.scheduled["status"], held.scheduled["reason"]) == ("False", "Unschedulable"), held.scheduled
        while_waiting(held)
        print(f"\n{first} running with {executors} executors; {second} waits: {held.scheduled['message']!r}")
        # sparkop says why on the app, from the PodGroup's status (the Queued condition).
        queued = wait_for(
            lambda: queued_condition(status(cluster, namespace, second), "True"),
            timeout=30,
            interval=0.2,
            message=f"{second}'s Queued condition",
        )
        assert f"PodGroup {group(second)} is {held.phase}" in queued["message"], queued
        print(f"{second}: Queued {queued['reason']}: {queued['message']!r}")

        finals = {n: wait_state(cluster, namespace, n, "COMPLETED", "FAILED", timeout=240) for n in names}
        if final_phase and all(s["applicationState"]["state"] == "COMPLETED" for s in finals.values()):
            wait_for(
                lambda: all(phases.phases.get(group(n), [""])[-1] == final_phase for n in names),
                timeout=30,
                interval=0.2,
                message=f"both PodGroups {final_phase}",
            )
    finally:
        phases.stop()
    assert {n: s["applicationState"]["state"] for n, s in finals.items()} == dict.fromkeys(names, "COMPLETED")
    assert all(s["executionAttempts"] == 1 for s in finals.values()), finals
    # The second started only once the first had ended: in the same second or later, since a pod's
    # PodScheduled time is in whole seconds (terminationTime may have a fraction).
    drivers = {n: next(p for p in pods_of(cluster, namespace, n) if role(p) == labels.ROLE_DRIVER) for n in names}
    ended = finals[first]["terminationTime"]
    assert scheduled_at(drivers[second]) >= f"{ended[:19]}Z", (drivers[second], finals[first])
    for name, driver in drivers.items():
        waited = _seconds(driver["metadata"]["creationTimestamp"], scheduled_at(driver))
        print(f"{name}: driver pod bound {waited:.0f}s after it was created")
    print(f"{second}: driver pod bound at {scheduled_at(drivers[second])}; {first} ended at {ended}")
    print(f"PodGroup phases: {phases.phases}")
    # Once bound, the second's run says its gang got its place.
    run = cluster.kubectl_json("get", "sparkdriver", naming.driver_name(second, 1), "-n", namespace)
    scheduled = queued_condition(run["status"], "False")
    assert scheduled is not None and scheduled["reason"] == "Scheduled", run["status"]
    return GangRun(first, second, phases.phases)


def queued_condition(status_: Obj, truth: str) -> Obj | None:
    """The Queued condition of an app's or a run's status, when its status is ``truth``."""
    found = next((c for c in status_.get("conditions") or () if c["type"] == "Queued"), None)
    return found if found is not None and found["status"] == truth else None
