"""The driver controller's metrics endpoint part (docs/metrics.md): what the SparkDriver status
writes counted (``driver_controller.transitions``), and ``spark_executor_running_count``, read from
the pod informer cache at scrape time, so it is right at once after a restart. The cache files each
running executor under its metrics labels (:data:`EXECUTORS_INDEX`) as it changes, so a scrape adds
up counts and decodes no pod.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sparkop.core.caches import IndexKey
from sparkop.core.jsontypes import JSON
from sparkop.core.metrics import Transitions, kubeflow_labels, label_name
from sparkop.core.resources import PODS
from sparkop.core.runtime import Runtime, Source
from sparkop.domain import labels
from sparkop.driver_controller.transitions import TRANSITIONS

EXECUTOR_RUNNING_COUNT: Final = "spark_executor_running_count"
EXECUTORS_INDEX: Final = "sparkop_running_executors"


def running_executor_keys(transitions: Transitions) -> Callable[[JSON], list[IndexKey]]:
    """A running executor pod (not being deleted) files under its metrics labels; any other pod nowhere."""

    def keys(pod: JSON) -> list[IndexKey]:
        meta = pod.get("metadata") or {}
        pod_labels = meta.get("labels") or {}
        if pod_labels.get(labels.SPARK_ROLE) != labels.ROLE_EXECUTOR or meta.get("deletionTimestamp"):
            return []
        if (pod.get("status") or {}).get("phase") != "Running":
            return []
        return [kubeflow_labels(transitions.label_names, str(meta.get("namespace", "")), pod_labels)]

    return keys


class DriverCollector(Collector):
    def __init__(self, runtime: Runtime, index: str, transitions: Transitions = TRANSITIONS) -> None:
        self.runtime = runtime
        self.index = index  # the informer index of the objects it counts, filed by the controller
        self.transitions = transitions

    def collect(self) -> Iterator[Metric]:
        yield from self.transitions.collect()
        names = list(self.transitions.label_names)
        running = GaugeMetricFamily(EXECUTOR_RUNNING_COUNT, "Total number of running Spark executors", labels=names)
        index = self.runtime.indexes.get(self.index)
        for key, count in sorted((index.counts() if index is not None else {}).items()):
            running.add_metric(list(key) if names else [], count)
        yield running


def collector(runtime: Runtime, index: str, metrics_labels: Sequence[str] = ()) -> Collector:
    """The driver controller's metrics for ``runtime``; ``metrics_labels`` as ``labels`` for
    ``apps_controller.metrics``. Register it after the pods' index (it shares their trimmed cache)."""
    TRANSITIONS.configure([label_name(n) for n in metrics_labels])
    runtime.add_index(Source(index, PODS, running_executor_keys(TRANSITIONS), lambda pod: None, selector=labels.DRIVER))
    return DriverCollector(runtime, index)


__all__ = ["EXECUTORS_INDEX", "EXECUTOR_RUNNING_COUNT", "DriverCollector", "collector", "running_executor_keys"]
