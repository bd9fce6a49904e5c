"""The apps controller's metrics endpoint part (docs/metrics.md): what the status writes counted
(``apps_controller.transitions``), and the gauges of current state, read from the SparkApplication
informer caches at scrape time (apps running now, apps stuck by reason), so they are right at once
after a restart, with no memory of their own. The caches file each app under the gauge it counts in
(:data:`GAUGES_INDEX`) as it changes, so a scrape adds up counts and decodes no app.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sparkop.api.models import ApplicationState
from sparkop.apps_controller import status as st
from sparkop.apps_controller.transitions import TRANSITIONS
from sparkop.core.caches import IndexKey
from sparkop.core.jsontypes import JSON
from sparkop.core.kube import Resource
from sparkop.core.metrics import Transitions, kubeflow_labels, label_name
from sparkop.core.runtime import Runtime, Source
from sparkop.domain import kinds

RUNNING_COUNT: Final = "spark_application_running_count"
STUCK: Final = "sparkop_applications_stuck"
GAUGES_INDEX: Final = "sparkop_app_gauges"
TERMINAL_STATE_NAMES: Final = frozenset(state.value for state in st.TERMINAL_STATES)


def gauge_keys(transitions: Transitions) -> Callable[[JSON], list[IndexKey]]:
    """Where an app counts: (RUNNING_COUNT, *its metrics labels) while RUNNING, and (STUCK, namespace,
    reason) while unfinished with its Stuck condition True. Read from the stored status as it is (no
    model: this runs on every change of every app)."""

    def keys(body: JSON) -> list[IndexKey]:
        meta, status = body.get("metadata") or {}, body.get("status") or {}
        state = (status.get("applicationState") or {}).get("state")
        namespace = str(meta.get("namespace", ""))
        found: list[IndexKey] = []
        if state == ApplicationState.RUNNING.value:
            labels = kubeflow_labels(transitions.label_names, namespace, meta.get("labels") or {})
            found.append((RUNNING_COUNT, *labels))
        if state not in TERMINAL_STATE_NAMES:
            stuck = next((c for c in status.get("conditions") or () if _is(c, st.CONDITION_STUCK)), None)
            if stuck is not None and stuck.get("status") == "True":
                found.append((STUCK, namespace, str(stuck.get("reason") or "Unknown")))
        return found

    return keys


def _is(condition: object, kind: str) -> bool:
    return isinstance(condition, Mapping) and condition.get("type") == kind


class AppCollector(Collector):
    """What :data:`TRANSITIONS` counted, and the gauges of the apps in the informer caches now."""

    def __init__(self, runtime: Runtime, indexes: Sequence[str], transitions: Transitions = TRANSITIONS) -> None:
        self.runtime = runtime
        self.indexes = tuple(indexes)  # those that file each app under its gauges (gauge_keys), one per group
        self.transitions = transitions

    def collect(self) -> Iterator[Metric]:
        yield from self.transitions.collect()
        names = list(self.transitions.label_names)
        running = GaugeMetricFamily(RUNNING_COUNT, "Total number of running SparkApplication", labels=names)
        stuck = GaugeMetricFamily(
            STUCK, "SparkApplications whose current driver is stuck, by reason", labels=["namespace", "reason"]
        )
        counts: dict[IndexKey, int] = {}
        for name in self.indexes:
            index = self.runtime.indexes.get(name)  # None: no apps controller in this process
            for key, count in (index.counts() if index is not None else {}).items():
                counts[key] = counts.get(key, 0) + count
        for key, count in sorted(counts.items()):
            if key[0] == RUNNING_COUNT:
                running.add_metric(list(key[1:]), count)
            elif key[0] == STUCK:
                stuck.add_metric(list(key[1:]), count)
        yield running
        yield stuck


def collector(
    runtime: Runtime,
    indexes: Sequence[tuple[str, Resource]] = ((GAUGES_INDEX, kinds.SPARK_APPLICATIONS),),
    labels: Sequence[str] = (),
) -> Collector:
    """The apps controller's metrics for ``runtime``, over the SparkApplications of each (index name,
    resource): one per served group; ``labels``: kubeflow's ``--metrics-labels`` (its chart sets
    ``app_type``). Register it once: ``prometheus_client.REGISTRY.register(...)``."""
    TRANSITIONS.configure([label_name(n) for n in labels])
    for index, resource in indexes:
        runtime.add_index(Source(index, resource, gauge_keys(TRANSITIONS), lambda body: None))
    return AppCollector(runtime, [index for index, _ in indexes])


__all__ = ["GAUGES_INDEX", "RUNNING_COUNT", "STUCK", "AppCollector", "collector", "gauge_keys"]
