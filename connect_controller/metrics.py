"""The connect controller's metrics (docs/metrics.md): server restarts counted from the status writes
that record them (:data:`TRANSITIONS`), and the SparkConnects by state, read from the informer cache at
scrape time (right at once after a restart, with no memory of their own)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sparkop.connect_controller.decide import METRIC_RESTARTS
from sparkop.core.caches import IndexKey
from sparkop.core.jsontypes import JSON
from sparkop.core.kube import Resource
from sparkop.core.metrics import MetricSpec, Transitions
from sparkop.core.runtime import Runtime, Source
from sparkop.domain import kinds

SERVERS: Final = "sparkop_connect_servers"
GAUGES_INDEX: Final = "sparkop_connect_gauges"

TRANSITIONS: Final = Transitions(
    (
        MetricSpec(
            METRIC_RESTARTS,
            "Spark Connect servers started again after theirs ended (Exited) or was deleted (Deleted)",
            "counter",
            labels=("reason",),
        ),
    )
)


def state_key(body: JSON) -> list[IndexKey]:
    meta, status = body.get("metadata") or {}, body.get("status") or {}
    return [(str(meta.get("namespace", "")), str(status.get("state") or "Provisioning"))]


class ConnectCollector(Collector):
    def __init__(self, runtime: Runtime, indexes: Sequence[str] = (GAUGES_INDEX,)) -> None:
        self.runtime = runtime
        self.indexes = tuple(indexes)  # one per served group

    def collect(self) -> Iterator[Metric]:
        yield from TRANSITIONS.collect()
        servers = GaugeMetricFamily(
            SERVERS, "SparkConnects by state (Ready: a server serves)", labels=["namespace", "state"]
        )
        counts: dict[IndexKey, int] = {}
        for name in self.indexes:
            index = self.runtime.indexes.get(name)
            for key, count in (index.counts() if index is not None else {}).items():
                counts[key] = counts.get(key, 0) + count
        for key, count in sorted(counts.items()):
            servers.add_metric([str(k) for k in key], count)
        yield servers


def collector(
    runtime: Runtime, indexes: Sequence[tuple[str, Resource]] = ((GAUGES_INDEX, kinds.SPARK_CONNECTS),)
) -> Collector:
    """The connect controller's metrics, over the SparkConnects of each (index name, resource)."""
    for index, resource in indexes:
        runtime.add_index(Source(index, resource, state_key, lambda body: None))
    return ConnectCollector(runtime, [index for index, _ in indexes])
