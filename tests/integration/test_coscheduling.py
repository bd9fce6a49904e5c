"""Gang scheduling with scheduler-plugins' Coscheduling (issue 26): `python -m devcluster up
--schedulers coscheduling` runs scheduler-plugins' scheduler (kube-scheduler built with the
Coscheduling plugin, schedulerName components.COSCHEDULING_SCHEDULER_NAME) and its controller (the
PodGroups' status), built from their Go module, beside kube-scheduler.

An app with `batchScheduler: kube-scheduler` gets sparkop's `scheduling.x-k8s.io/v1alpha1` PodGroup
(minMember 1, minResources the driver's and the initial executors' requests) and its pods the group's
label; they name the second scheduler themselves (driver/executor.schedulerName). Coscheduling lets a
group's first pod through only while the cluster's free resources, less what the group's own pods
hold, cover the group's minResources (PreFilter). The kwok node has the CPUs of exactly one gang
(driver + 4 executors of 1 CPU): once one app's driver is bound, the other's cannot pass until that
app has ended, so the two run one after the other, each whole, whichever the scheduler takes first.

The cluster is this module's own (the simulated drivers); the PodGroup phases are watched as
scheduler-plugins' controller writes them (tests/support/gangs.py, shared with test_volcano.py).
"""

from __future__ import annotations

import pytest

from devcluster.components import COSCHEDULING_SCHEDULER_NAME
from devcluster.testing import ClusterHandle
from tests.support import gangs
from tests.support.gangs import Waiting, gang_app, group, run_one_after_the_other
from tests.support.operator import OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.needs_build("coscheduling")]

EXECUTORS = 4
NODE_CPU = 1 + EXECUTORS  # one gang's CPUs, not two

gang_cluster, namespace, operator = gangs.fixtures("coscheduling", node_cpu=NODE_CPU)


def coscheduling_says_the_group_waits(waiting: Waiting) -> None:
    # The controller's phase of a group whose pods exist (minMember 1) but none of which runs.
    assert waiting.phase == "Scheduling", waiting.pod_group
    assert not waiting.pod_group["status"].get("running"), waiting.pod_group
    # Coscheduling says why on the driver pod: the node's free CPUs are short of the group's minResources.
    assert "resource gap" in waiting.scheduled["message"], waiting.scheduled


def test_two_gangs_that_do_not_fit_together_run_one_after_the_other(
    gang_cluster: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    apps = [gang_app(name, EXECUTORS, "kube-scheduler", COSCHEDULING_SCHEDULER_NAME) for name in ("gang-a", "gang-b")]
    run = run_one_after_the_other(
        gang_cluster,
        namespace,
        apps,
        EXECUTORS,
        "podgroups.scheduling.x-k8s.io",
        coscheduling_says_the_group_waits,
        final_phase="Finished",
    )
    # Every phase the controller writes, in its order: Pending (no pod yet), Scheduling (its pods
    # exist), Running (minMember of them run), Finished (minMember succeeded).
    lifecycle = ["Pending", "Scheduling", "Running", "Finished"]
    assert {name: run.phases[group(name)] for name in (run.first, run.second)} == {
        run.first: lifecycle,
        run.second: lifecycle,
    }, run.phases
