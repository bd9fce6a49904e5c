"""The connect controller's metrics (docs/metrics.md): server restarts counted from the status writes
that record them (:data:`TRANSITIONS`), and the SparkConnects by state, read from the informer cache at
scrape time (right at once after a restart, with no memory of their own)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sparkop.connect_controller.decide import METRIC_RESTARTS
from sparkop.core.caches import IndexKey
from sparkop.core.jsontypes import JSON
from sparkop.core.metrics import MetricSpec, Transitions
from sparkop.core.runtime import Runtime
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
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        yield from TRANSITIONS.collect()
        servers = GaugeMetricFamily(
            SERVERS, "SparkConnects by state (Ready: a server serves)", labels=["namespace", "state"]
        )
        index = self.runtime.indexes.get(GAUGES_INDEX)
        for key, count in sorted((index.counts() if index is not None else {}).items()):
            servers.add_metric([str(k) for k in key], count)
        yield servers


def collector(runtime: Runtime) -> Collector:
    runtime.add_index(GAUGES_INDEX, kinds.SPARK_CONNECTS, state_key, lambda body: None)
    return ConnectCollector(runtime)
