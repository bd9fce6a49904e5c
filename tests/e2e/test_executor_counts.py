"""Real Spark's executors counted as a user reads them (issue 49): SparkPi with two executors on the
real nodes; the SparkDriver's ``status.executors`` and its app's copy count both running within 3 s of
the second executor pod turning Running, and after the driver pod is deleted, the next incarnation's
executors are counted as soon. A real driver asks for its executors seconds after it runs (the
simulator's default delay, devcluster.sparksim, stands for that); each lag is printed, with that delay."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devcluster.testing import wait_for
from sparkop.domain import labels, naming
from tests.support.executor_counts import COUNTED_WITHIN_S, CountWatches, Lags
from tests.support.spark_e2e import OLDEST_VERSION, PodWatch, SparkNamespace, spark_pi, spark_versions

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

# SparkPi long enough (~30 s of tasks on two 1-core executors) to lose its driver pod once counted.
SLICES = 3000
# Three JVMs start (a driver, two executors) on 2 cores, twice, and the job runs twice.
SPARK_S = 300.0


@pytest.fixture
def watches(spark: SparkNamespace) -> Iterator[CountWatches]:
    counts = CountWatches(spark.cluster, spark.ns)
    yield counts
    counts.stop()


def counted(watches: CountWatches, app: str, driver: str, incarnation: int) -> Lags:
    def seen() -> Lags | None:
        return watches.lags(app, driver, incarnation, 2)

    lags: Lags = wait_for(seen, timeout=SPARK_S, interval=0.5, message=f"incarnation {incarnation}'s executors counted")
    return lags


def asked_after(drivers: PodWatch, watches: CountWatches, driver: str, incarnation: int) -> str:
    """From the driver pod's Running to its first executor's creation, and to the second's Running, as
    the watches saw them: how long a real driver takes to ask for its executors, and to have them."""
    # Every incarnation's driver pod has the one name (kubeflow's <app>-driver): told apart by its label.
    running = next(
        (
            at
            for at, _, p in drivers.events()
            if p["metadata"]["labels"].get(labels.DRIVER) == naming.label_value(driver)
            and p["metadata"]["labels"].get(labels.INCARNATION) == str(incarnation)
            and p["status"].get("phase") == "Running"
        ),
        None,
    )
    created = next(
        (
            at
            for at, kind, p in watches.executors.events()
            if kind == "ADDED" and p["metadata"]["labels"].get(labels.INCARNATION) == str(incarnation)
        ),
        None,
    )
    both = watches.running_at(driver, incarnation, 2)
    if running is None or created is None or both is None:
        return "driver Running -> executors: not seen"
    return f"driver Running -> first executor created {created - running:+.1f}s, both Running {both - running:+.1f}s"


@pytest.mark.parametrize("version", spark_versions(ci=(OLDEST_VERSION,)))
def test_real_executors_are_counted_within_seconds_also_after_the_driver_pod_is_lost(
    spark: SparkNamespace, watches: CountWatches, version: str
) -> None:
    drivers = spark.watch(f"{labels.SPARK_ROLE}={labels.ROLE_DRIVER}")
    spark.apply(spark_pi("counted", version, slices=SLICES))
    app = spark.wait_app("counted", ["RUNNING"], timeout=SPARK_S)
    driver = app["status"]["currentDriver"]

    first = counted(watches, "counted", driver, 1)
    print(f"\nincarnation 1: {asked_after(drivers, watches, driver, 1)}; counted: {first}")
    assert first.driver <= COUNTED_WITHIN_S and first.app <= COUNTED_WITHIN_S, first

    first_pod = spark.get("sparkdriver", driver)["status"]["driverPod"]["name"]
    assert "Pi is roughly" not in spark.logs(first_pod), "the job ended before its driver pod could be lost"
    spark.kubectl("delete", "pod", first_pod, "--wait=false")
    second = counted(watches, "counted", driver, 2)
    print(f"incarnation 2: {asked_after(drivers, watches, driver, 2)}; counted: {second}")
    assert second.driver <= COUNTED_WITHIN_S and second.app <= COUNTED_WITHIN_S, second

    done = spark.wait_app("counted", ["COMPLETED"], timeout=SPARK_S)
    assert done["status"]["driverIncarnations"] == 2 and done["status"]["executionAttempts"] == 1
    assert "Pi is roughly 3.1" in spark.driver_log("counted")
