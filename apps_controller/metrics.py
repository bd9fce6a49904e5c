"""The apps controller's metrics endpoint part (docs/metrics.md): what the status writes counted
(``apps_controller.transitions``), and the gauges of current state, read from the SparkApplication
informer caches at scrape time (apps running now, apps stuck by reason), so they are right at once
after a restart, with no memory of their own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.models import ApplicationState
from apps_controller import status as st
from apps_controller.transitions import TRANSITIONS
from core.metrics import Transitions, kubeflow_labels, label_name
from core.runtime import Runtime

RUNNING_COUNT: Final = "spark_application_running_count"
STUCK: Final = "sparkop_applications_stuck"


class AppCollector(Collector):
    """What :data:`TRANSITIONS` counted, and the gauges of the apps in the informer caches now."""

    def __init__(self, runtime: Runtime, index: str, transitions: Transitions = TRANSITIONS) -> None:
        self.runtime = runtime
        self.index = index  # the informer index of the objects it counts, filed by the controller
        self.transitions = transitions

    def collect(self) -> Iterator[Metric]:
        yield from self.transitions.collect()
        names = list(self.transitions.label_names)
        running = GaugeMetricFamily(RUNNING_COUNT, "Total number of running SparkApplication", labels=names)
        stuck = GaugeMetricFamily(
            STUCK, "SparkApplications whose current driver is stuck, by reason", labels=["namespace", "reason"]
        )
        running_by: dict[tuple[str, ...], int] = {}
        stuck_by: dict[tuple[str, str], int] = {}
        for body in self._apps():
            meta = body.get("metadata") or {}
            status = st.read_status(body.get("status"))
            state = st.state(status)
            namespace = str(meta.get("namespace", ""))
            if state is ApplicationState.RUNNING:
                key = kubeflow_labels(names, namespace, meta.get("labels") or {})
                running_by[key] = running_by.get(key, 0) + 1
            condition = st.condition(status, st.CONDITION_STUCK)
            if state not in st.TERMINAL_STATES and condition is not None and condition.status == "True":
                where = (namespace, condition.reason or "Unknown")
                stuck_by[where] = stuck_by.get(where, 0) + 1
        for key, count in sorted(running_by.items()):
            running.add_metric(list(key), count)
        for where, count in sorted(stuck_by.items()):
            stuck.add_metric(list(where), count)
        yield running
        yield stuck

    def _apps(self) -> list[dict[str, Any]]:
        index = self.runtime.indexes.get(self.index)
        if index is None:  # the apps controller does not run in this process
            return []
        return [obj for informer in index.informers for obj in informer.store.objects()]


def collector(runtime: Runtime, index: str, labels: Sequence[str] = ()) -> Collector:
    """The apps controller's metrics for ``runtime``; ``labels``: kubeflow's ``--metrics-labels`` (its
    chart sets ``app_type``). Register it once: ``prometheus_client.REGISTRY.register(...)``."""
    TRANSITIONS.configure([label_name(n) for n in labels])
    return AppCollector(runtime, index)


__all__ = ["RUNNING_COUNT", "STUCK", "AppCollector", "collector"]
