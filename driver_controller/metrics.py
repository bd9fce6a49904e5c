"""The driver controller's metrics endpoint part (docs/metrics.md): what the SparkDriver status
writes counted (``driver_controller.transitions``), and ``spark_executor_running_count``, read from
the pod informer cache at scrape time, so it is right at once after a restart.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core import labels
from core.metrics import Transitions, kubeflow_labels, label_name
from core.runtime import Runtime
from driver_controller.transitions import TRANSITIONS

EXECUTOR_RUNNING_COUNT: Final = "spark_executor_running_count"


class DriverCollector(Collector):
    def __init__(self, runtime: Runtime, index: str, transitions: Transitions = TRANSITIONS) -> None:
        self.runtime = runtime
        self.index = index  # the informer index of the objects it counts, filed by the controller
        self.transitions = transitions

    def collect(self) -> Iterator[Metric]:
        yield from self.transitions.collect()
        names = list(self.transitions.label_names)
        running = GaugeMetricFamily(EXECUTOR_RUNNING_COUNT, "Total number of running Spark executors", labels=names)
        by: dict[tuple[str, ...], int] = {}
        index = self.runtime.indexes.get(self.index)
        for informer in index.informers if index is not None else ():
            for pod in informer.store.objects():
                meta = pod.get("metadata") or {}
                pod_labels = meta.get("labels") or {}
                if pod_labels.get(labels.SPARK_ROLE) != labels.ROLE_EXECUTOR:
                    continue
                if (pod.get("status") or {}).get("phase") != "Running" or meta.get("deletionTimestamp"):
                    continue
                key = kubeflow_labels(names, str(meta.get("namespace", "")), pod_labels)
                by[key] = by.get(key, 0) + 1
        for key, count in sorted(by.items()):
            running.add_metric(list(key), count)
        yield running


def collector(runtime: Runtime, index: str, labels: Sequence[str] = ()) -> Collector:
    """The driver controller's metrics for ``runtime``; ``labels`` as for ``apps_controller.metrics``."""
    TRANSITIONS.configure([label_name(n) for n in labels])
    return DriverCollector(runtime, index)


__all__ = ["EXECUTOR_RUNNING_COUNT", "DriverCollector", "collector"]
