"""Gang scheduling with the real Volcano scheduler (issue 26): `python -m devcluster up --schedulers
volcano` runs Volcano's scheduler and controller manager, built from its Go module, beside
kube-scheduler. sparkop's PodGroup (minMember 1, minResources the driver's and the initial executors'
requests) is what Volcano's enqueue action reads: two apps whose gangs do not fit together are
applied at once; one runs, the other waits Pending as a whole (its PodGroup Pending, its driver
unbound, no executor) and starts when the first has ended. Both COMPLETED. Once where the node is the
limit (the default queue), once where a Queue's capability is (the node has room for both).

The cluster is this module's own (a kwok node of 8 CPUs, the simulated drivers); the PodGroup phases
are watched as Volcano writes them (tests/support/gangs.py, shared with test_coscheduling.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.testing import ClusterHandle
from tests.support import gangs
from tests.support.gangs import Waiting, gang_app, group, run_one_after_the_other
from tests.support.operator import OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.needs_build("volcano")]

NODE_CPU = 8
QUEUE = "one-gang"

gang_cluster, namespace, operator = gangs.fixtures("volcano", node_cpu=NODE_CPU)


def volcano_says_the_group_waits(waiting: Waiting) -> None:
    # The second gang waits whole: its PodGroup Pending.
    assert waiting.phase == "Pending", waiting.pod_group
    # Volcano says why on the driver pod: its group cannot start yet.
    assert "pod group is not ready" in waiting.scheduled["message"], waiting.scheduled


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
    gang_cluster: ClusterHandle, namespace: str, operator: OperatorProcess, limit: str, executors: int
) -> None:
    options: dict[str, Any] = {}
    if limit == "queue":
        queue: dict[str, Any] = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": f"{QUEUE}-{namespace}"},
            "spec": {"weight": 1, "reclaimable": False, "capability": {"cpu": "4", "memory": "32Gi"}},
        }
        gang_cluster.apply(queue)
        options["batchSchedulerOptions"] = {"queue": queue["metadata"]["name"]}
    apps = [gang_app(name, executors, "volcano", **options) for name in ("gang-a", "gang-b")]
    run = run_one_after_the_other(
        gang_cluster, namespace, apps, executors, "podgroups.scheduling.volcano.sh", volcano_says_the_group_waits
    )
    # Volcano writes a group's phase once per scheduling cycle: Inqueue and Running may be one write.
    for name in (run.first, run.second):
        assert "Running" in run.phases[group(name)], run.phases
    assert run.phases[group(run.second)][0] == "Pending", run.phases


def test_volcano_loaded_its_conf_once_however_busy_the_cluster_directory(gang_cluster: ClusterHandle) -> None:
    # vc-scheduler loads its conf again on every event in the conf's directory: next to the cluster's
    # logs, that was thousands of times a second, a whole core for the life of the cluster.
    assert gang_cluster.cluster is not None
    log = (gang_cluster.cluster.directory / "vc-scheduler.log").read_text(errors="replace")
    loads = log.count("Successfully loaded Scheduler conf")
    assert 1 <= loads <= 3, f"vc-scheduler loaded its conf {loads} times"
