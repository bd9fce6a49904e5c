"""The chaos suite on real nodes: real PySpark apps long enough to be hit, while the operator is
SIGKILLed at random intervals (and started again), driver and executor pods are deleted and the API
server restarts once. Afterwards every app is COMPLETED with 1 attempt, one SparkDriver per app, one
driver pod per incarnation (every pod ever created is audited by a watch), the driver's own result
line in its log, and nothing orphaned: no executor alive, and no Service, ConfigMap or NetworkPolicy
but the final incarnation's of an existing SparkDriver.

SPARKOP_CHAOS=long runs the long profile (more apps, more kills, for longer); the short one runs in
CI. The random schedule is seeded (SPARKOP_CHAOS_SEED, else a new seed, printed) so a failure can be
replayed.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, RealNodeClusters, wait_for
from sparkop.domain import labels
from tests.support.spark_e2e import (
    JOBS_DIR,
    OLDEST_VERSION,
    STAGES_JOB,
    SparkNamespace,
    jobs_volume,
    python_application,
    spark_namespace,
    with_crds,
)
from tests.support.watches import CreationWatch

pytestmark = [pytest.mark.chaos, pytest.mark.cluster, pytest.mark.realnode]

PROFILE_ENV = "SPARKOP_CHAOS"
SEED_ENV = "SPARKOP_CHAOS_SEED"


@dataclass(frozen=True)
class Profile:
    apps: int
    job_args: tuple[str, ...]  # STAGES_JOB: rounds, pause_s, tasks, task_s
    kill_every: tuple[float, float]  # seconds between operator kills, uniform in this range
    down_for: tuple[float, float]  # seconds the operator stays dead
    driver_deletions: int
    executor_deletions: int
    timeout: float


PROFILES = {
    # Two apps of ~40 s of stages each on two 2-CPU nodes.
    "short": Profile(2, ("10", "3", "2", "0.5"), (4.0, 9.0), (0.2, 2.0), 1, 1, 420.0),
    "long": Profile(4, ("20", "3", "2", "0.5"), (3.0, 8.0), (0.2, 3.0), 3, 3, 900.0),
}
PROFILE = PROFILES[os.environ.get(PROFILE_ENV, "short")]
RESULT_LINE = "stages result"


@pytest.fixture
def spark(real_node_clusters: RealNodeClusters, tmp_path: Path) -> Iterator[SparkNamespace]:
    with spark_namespace(with_crds(real_node_clusters.get()), tmp_path) as env:
        yield env


# Spark's own settings for a control plane that restarts under it (docs/operations.md): after an API
# server restart Spark 3.5's driver no longer watches its executors ("Kubernetes client has been closed")
# and sees them only by polling; and an executor it asked for and never saw (deleted at once) counts as
# pending until the allocation timeout (default 600 s), blocking its replacement that long.
RESILIENT_CONF = {
    "spark.kubernetes.executor.apiPollingInterval": "5s",
    "spark.kubernetes.allocation.executor.timeout": "30s",
}


def app(name: str) -> dict[str, Any]:
    manifest = python_application(
        name, OLDEST_VERSION, f"local://{JOBS_DIR}/stages.py", arguments=list(PROFILE.job_args), **jobs_volume()
    )
    manifest["spec"]["sparkConf"] = {**(manifest["spec"].get("sparkConf") or {}), **RESILIENT_CONF}
    return manifest


def running_pods(spark: SparkNamespace, role: str) -> list[dict[str, Any]]:
    return [
        p
        for p in spark.pods(f"{labels.SPARK_ROLE}={role}")
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def states(spark: SparkNamespace, names: list[str]) -> dict[str, str]:
    found = {}
    for name in names:
        body = spark.find("sparkapplication", name) or {}
        found[name] = ((body.get("status") or {}).get("applicationState") or {}).get("state", "")
    return found


def test_apps_survive_operator_kills_pod_deletions_and_an_api_server_restart(spark: SparkNamespace) -> None:
    seed = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(1 << 30))
    rng = random.Random(seed)
    cluster: ClusterHandle = spark.cluster
    names = [f"chaos-{i}" for i in range(PROFILE.apps)]
    spark.jobs({"stages.py": STAGES_JOB})
    pods = CreationWatch(cluster, spark.ns, "pods")
    drivers = CreationWatch(cluster, spark.ns, "sparkdrivers")
    for name in names:
        spark.apply(app(name))

    kills = driver_deletions = executor_deletions = api_restarts = 0
    started = time.monotonic()
    next_kill = started + rng.uniform(*PROFILE.kill_every)
    deadline = started + PROFILE.timeout
    try:
        while time.monotonic() < deadline:
            now_states = states(spark, names)
            if all(s in ("COMPLETED", "FAILED") for s in now_states.values()):
                break
            now = time.monotonic()
            if now >= next_kill:
                spark.operator.kill()
                kills += 1
                time.sleep(rng.uniform(*PROFILE.down_for))
                spark.operator.start()
                next_kill = time.monotonic() + rng.uniform(*PROFILE.kill_every)
            executors = running_pods(spark, labels.ROLE_EXECUTOR)
            if executors and driver_deletions < PROFILE.driver_deletions and rng.random() < 0.3:
                victim = rng.choice(running_pods(spark, labels.ROLE_DRIVER) or [None])
                if victim is not None:
                    spark.kubectl("delete", "pod", victim["metadata"]["name"], "--wait=false")
                    driver_deletions += 1
            elif executors and executor_deletions < PROFILE.executor_deletions and rng.random() < 0.3:
                spark.kubectl("delete", "pod", rng.choice(executors)["metadata"]["name"], "--wait=false")
                executor_deletions += 1
            elif executors and api_restarts == 0 and now - started > 20:
                cluster.restart_apiserver()
                api_restarts += 1
            time.sleep(0.5)
        if not spark.operator.alive():
            spark.operator.start()
        finals = {name: spark.wait_app(name, ["COMPLETED", "FAILED"], timeout=PROFILE.timeout) for name in names}
        wait_for(lambda: not spark.pods(f"{labels.SPARK_ROLE}={labels.ROLE_EXECUTOR}"), 120, message="executors gone")
    finally:
        pods.stop()
        drivers.stop()

    took = time.monotonic() - started
    incarnations = {name: finals[name]["status"].get("driverIncarnations") for name in names}
    print(
        f"\nchaos seed {seed} ({os.environ.get(PROFILE_ENV, 'short')}): {len(names)} apps in {took:.0f}s; "
        f"operator killed {kills}x, driver pods deleted {driver_deletions}, executor pods deleted "
        f"{executor_deletions}, API server restarted {api_restarts}x; driver incarnations {incarnations}"
    )
    for name in names:
        status = finals[name]["status"]
        if status["applicationState"]["state"] != "COMPLETED":
            # The whole driver log: its termination message in status holds only the last 2 KB.
            pytest.fail(f"{name}: {status}\n{spark.driver_log_tail(name, lines=400)}")
        assert status["executionAttempts"] == 1 and len(status["attempts"]) == 1, (name, status["attempts"])
        assert RESULT_LINE in spark.logs(status["driverInfo"]["podName"], container="spark-kubernetes-driver")
    # One SparkDriver per app, ever; one driver pod per incarnation, ever: every incarnation's pod has the
    # app's one name (kubeflow's <app>-driver), so the watch counts the distinct pods (uids) made with it.
    assert {n: len(u) for n, u in drivers.uids.items()} == {f"{name}-1": 1 for name in names}
    for name in names:
        driver_pods = {n: u for n, u in pods.uids.items() if n.startswith(f"{name}-") and n.endswith("-driver")}
        assert set(driver_pods) == {f"{name}-driver"}, (name, sorted(driver_pods))
        assert len(driver_pods[f"{name}-driver"]) == incarnations[name], (name, driver_pods, incarnations)
    # Nothing orphaned: what a SparkDriver's label names is its final incarnation's.
    current = {
        d["metadata"]["name"]: str(d["status"]["incarnation"])
        for d in spark.cluster.kubectl_json("get", "sparkdrivers", "-n", spark.ns)["items"]
    }
    for kind in ("services", "configmaps", "networkpolicies"):
        for obj in spark.cluster.kubectl_json("get", kind, "-n", spark.ns, "-l", labels.DRIVER)["items"]:
            meta = obj["metadata"]
            owner = meta["labels"][labels.DRIVER]
            assert current.get(owner) == meta["labels"].get(labels.INCARNATION), (kind, meta["name"], current)
    assert kills >= 3 and driver_deletions >= 1 and api_restarts == 1, (kills, driver_deletions, api_restarts)
