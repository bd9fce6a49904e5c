"""How soon the executor counts a user reads follow the executor pods (issue 49): watches of a
namespace's executor pods, SparkDrivers and SparkApplications, each event stamped as it arrived, and
from what they saw: when the n-th executor of a driver incarnation turned Running, and how long after
that its SparkDriver's status, and its app's copy, first counted that many running. The simulator's
tests (tests/integration/test_executor_counts.py) and real Spark's (tests/e2e) read the same figures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from devcluster.testing import ClusterHandle, wait_for
from sparkop.domain import labels, naming
from tests.support.spark_e2e import PodWatch

Obj = dict[str, Any]

# The promise: what the executor pods show, a SparkDriver's status and its app's copy count
# within 3 s (the operator takes one pass of the SparkDriver, within
# domain.status_waits.EXECUTOR_CHANGE_SECONDS of the pods' change, then one of its owner).
COUNTED_WITHIN_S: Final = 3.0


def wait_running(cluster: ClusterHandle, namespace: str, selector: str, count: int, timeout: float = 60) -> list[Obj]:
    """Until ``count`` pods of ``selector`` are Running at once; those pods."""

    def running() -> list[Obj] | None:
        items: list[Obj] = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", selector)["items"]
        up = [p for p in items if (p.get("status") or {}).get("phase") == "Running"]
        return up if len(up) >= count else None

    found: list[Obj] = wait_for(running, timeout=timeout, interval=0.1, message=f"{count} Running pods of {selector}")
    return found


@dataclass(frozen=True)
class Lags:
    """Seconds from the watch's sight of the n-th executor Running to the first sight of each status
    counting them (a status seen first, by a watch that ran ahead of the pods' one, is a lag at or
    below 0)."""

    driver: float
    app: float

    def __str__(self) -> str:
        return f"SparkDriver {self.driver:+.2f}s, SparkApplication {self.app:+.2f}s"


class CountWatches:
    """The three watches of ``namespace``, from now on."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        self.executors = PodWatch(cluster, namespace, f"{labels.SPARK_ROLE}={labels.ROLE_EXECUTOR}")
        self.drivers = PodWatch(cluster, namespace, None, "sparkdrivers")
        self.apps = PodWatch(cluster, namespace, None, "sparkapplications")

    def running_at(self, driver: str, incarnation: int, count: int) -> float | None:
        """When the watch saw ``count`` executor pods of the SparkDriver's ``incarnation`` Running at once."""
        phases: dict[str, str] = {}
        for at, kind, pod in self.executors.events():
            pod_labels = pod["metadata"].get("labels") or {}
            if pod_labels.get(labels.DRIVER) != naming.label_value(driver):
                continue
            if pod_labels.get(labels.INCARNATION) != str(incarnation):
                continue
            phases[pod["metadata"]["name"]] = "" if kind == "DELETED" else (pod.get("status") or {}).get("phase", "")
            if sum(phase == "Running" for phase in phases.values()) >= count:
                return at
        return None

    def lags(self, app: str, driver: str, incarnation: int, count: int) -> Lags | None:
        """The lags of ``count`` running executors of the SparkDriver's ``incarnation``, once both
        statuses have counted them (None until then)."""
        running = self.running_at(driver, incarnation, count)
        if running is None:
            return None

        def driver_counts(status: Obj) -> bool:
            return status.get("incarnation") == incarnation and _running(status) >= count

        def app_counts(status: Obj) -> bool:
            return status.get("driverIncarnations") == incarnation and _running(status) >= count

        on_driver = _first(self.drivers, driver, driver_counts)
        on_app = _first(self.apps, app, app_counts)
        if on_driver is None or on_app is None:
            return None
        return Lags(driver=on_driver - running, app=on_app - running)

    def stop(self) -> None:
        for watch in (self.executors, self.drivers, self.apps):
            watch.stop()


def _running(status: Obj) -> int:
    return int((status.get("executors") or {}).get("running") or 0)


def _first(watch: PodWatch, name: str, holds: Callable[[Obj], bool]) -> float | None:
    """When the watch first saw ``name`` with a status for which ``holds``."""
    for at, kind, obj in watch.events():
        if kind != "DELETED" and obj["metadata"]["name"] == name and holds(obj.get("status") or {}):
            return at
    return None
