"""The executor counts a user reads follow the executor pods within a couple of seconds (issue 49),
with real Spark's timing: the Spark-driver simulator creates a driver's executors a moment after the
driver runs (its default delay), as a real driver does once its SparkContext is up. The SparkDriver's
``status.executors`` and the app's copy count them within COUNTED_WITHIN_S of the pods' change, also
for the executors of a driver pod's replacement; executors that stay pending are counted within
PENDING_EXECUTORS_SECONDS of their creation (domain.status_waits). Each lag is printed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from sparkop.domain.status_waits import PENDING_EXECUTORS_SECONDS
from tests.support.cluster_apps import app_manifest, status, wait_state
from tests.support.executor_counts import COUNTED_WITHIN_S, CountWatches, Lags
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

# A pending count held to its deadline takes two passes more (the SparkDriver's, then the app's).
PASSES_S = 1.5
# Long enough for both incarnations' executors to start and be counted.
RUN_SECONDS = 40


@pytest.fixture
def watches(crds: ClusterHandle, namespace: str) -> Iterator[CountWatches]:
    counts = CountWatches(crds, namespace)
    yield counts
    counts.stop()


def counted(watches: CountWatches, app: str, incarnation: int, count: int) -> Lags:
    driver = f"{app}-1"

    def seen() -> Lags | None:
        return watches.lags(app, driver, incarnation, count)

    lags: Lags = wait_for(seen, timeout=60, interval=0.2, message=f"{count} running executors of {driver} counted")
    print(f"\nincarnation {incarnation}, {count} executors Running -> counted: {lags}")
    return lags


def test_executors_are_counted_on_the_sparkdriver_and_the_app_within_seconds_of_running(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess, watches: CountWatches
) -> None:
    crds.apply(app_manifest("counted", run_seconds=RUN_SECONDS, executor={"instances": 2}), namespace=namespace)
    first = counted(watches, "counted", 1, 2)
    assert first.driver <= COUNTED_WITHIN_S and first.app <= COUNTED_WITHIN_S, first

    # The driver pod lost (a node drain): the next incarnation's executors are counted as soon. Every run and
    # incarnation of an app has kubeflow's one driver pod name, <app>-driver.
    crds.kubectl("delete", "pod", "counted-driver", "-n", namespace, "--wait=false")
    second = counted(watches, "counted", 2, 2)
    assert second.driver <= COUNTED_WITHIN_S and second.app <= COUNTED_WITHIN_S, second
    assert wait_state(crds, namespace, "counted", "COMPLETED", timeout=RUN_SECONDS + 60)["driverIncarnations"] == 2


def test_executors_that_stay_pending_are_counted_within_their_wait(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess, watches: CountWatches
) -> None:
    """Executors asked for and not running (their image not pulled): a pending count may wait for their
    Running, and no longer than PENDING_EXECUTORS_SECONDS after their creation."""
    manifest = app_manifest("asked", run_seconds=RUN_SECONDS, executor={"instances": 2})
    manifest["spec"]["driver"]["annotations"]["sim.sparkop.io/exec-waiting-reason"] = "ImagePullBackOff"
    crds.apply(manifest, namespace=namespace)

    def created() -> float | None:
        seen = [at for at, kind, _ in watches.executors.events() if kind == "ADDED"]
        return seen[1] if len(seen) >= 2 else None

    second = wait_for(created, timeout=60, interval=0.2, message="two executors created")

    def pending_on_both() -> tuple[float, float] | None:
        on_driver = _first_pending(watches.drivers.events(), "asked-1")
        on_app = _first_pending(watches.apps.events(), "asked")
        return (on_driver, on_app) if on_driver is not None and on_app is not None else None

    on_driver, on_app = wait_for(pending_on_both, timeout=30, interval=0.2, message="two pending executors counted")
    print(
        f"\n2 executors created -> pending counted: SparkDriver {on_driver - second:+.2f}s, app {on_app - second:+.2f}s"
    )
    within = PENDING_EXECUTORS_SECONDS + PASSES_S
    assert on_driver - second <= within and on_app - second <= within
    assert (status(crds, namespace, "asked").get("executors") or {}).get("running", 0) == 0


def _first_pending(events: list[tuple[float, str, dict[str, Any]]], name: str) -> float | None:
    for at, _, obj in events:
        counts = (obj.get("status") or {}).get("executors") or {}
        if obj["metadata"]["name"] == name and counts.get("pending") == 2:
            return at
    return None
