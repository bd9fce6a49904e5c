"""Metrics of transitions, counted once per status write.

A controller's pure ``decide`` adds a :class:`core.plan.Observation` to its plan when the status
it decides makes a transition (a run submitted, an app completed); the Applier hands it to
:meth:`Transitions.record` only after that status write succeeded. The write happens exactly once
per transition (a Conflict or a crash before it means it did not happen, and the pass that gets
through records it), so nothing here is ever counted twice, and nothing needs to be remembered
across a restart: a restarted operator counts from zero, as any Prometheus counter does.

Current state (how many apps run now) is not kept here: each controller's collector reads it from
the informer caches at scrape time.

Labels follow kubeflow spark-operator v2 (``internal/metrics``): the names given with
``--metrics-labels``, each ``-`` made ``_``; an object's value is its label of that (converted) key,
``namespace`` its namespace when it has no such label, and ``Unknown`` otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client.core import (
    CounterMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from sparkop.core.jsontypes import JSON
from sparkop.core.plan import Observation

MetricKind = Literal["counter", "summary", "histogram", "exact counter"]
UNKNOWN_LABEL_VALUE = "Unknown"


def label_name(name: str) -> str:
    """kubeflow's ``CreateValidMetricNameLabel``: ``-`` is not valid in a metric or label name."""
    return name.replace("-", "_")


def kubeflow_labels(names: Sequence[str], namespace: str, object_labels: Mapping[str, Any]) -> tuple[str, ...]:
    """The values of the configured labels for one object, as kubeflow computes them."""
    converted = {label_name(str(k)): str(v) for k, v in object_labels.items()}
    return tuple(converted.get(n, namespace if n == "namespace" else UNKNOWN_LABEL_VALUE) for n in names)


@dataclass(frozen=True)
class MetricSpec:
    """One metric counted from observations.

    ``kind`` "exact counter": a counter exposed under exactly ``name``, as kubeflow's Go client does
    (the Python client's text format always renames a counter family to ``<name>_total``, which would
    break the dashboards written for kubeflow's names); it is typed ``untyped`` for that reason.
    ``labels`` None: the configured kubeflow labels of the object; otherwise ``namespace`` followed by
    these, taken from the observation."""

    name: str
    documentation: str
    kind: MetricKind
    labels: tuple[str, ...] | None = None
    buckets: tuple[float, ...] = ()


@dataclass
class _Series:
    count: float = 0.0
    total: float = 0.0
    buckets: list[float] | None = None


class Transitions:
    """What the observations recorded so far add up to, per metric and label values. Thread-safe:
    the event loop records, the metrics server's thread collects."""

    def __init__(self, specs: Iterable[MetricSpec], label_names: Sequence[str] = ()) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self.label_names = tuple(label_name(n) for n in label_names)
        self._series: dict[str, dict[tuple[str, ...], _Series]] = {name: {} for name in self.specs}
        self._lock = threading.Lock()

    def configure(self, label_names: Sequence[str]) -> None:
        """Set the kubeflow labels (``--metrics-labels``); what was counted before is dropped, as its
        labels no longer fit."""
        with self._lock:
            self.label_names = tuple(label_name(n) for n in label_names)
            self._series = {name: {} for name in self.specs}

    def record(self, written: JSON, observation: Observation) -> None:
        """Add one observation, for the object ``written`` (its metadata as the status write left it)."""
        spec = self.specs.get(observation.metric)
        if spec is None:
            raise KeyError(f"no metric {observation.metric!r} is declared")
        meta = written.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        if spec.labels is None:
            values = kubeflow_labels(self.label_names, namespace, meta.get("labels") or {})
        else:
            given = dict(observation.labels)
            values = (namespace, *(given.get(n, UNKNOWN_LABEL_VALUE) for n in spec.labels))
        with self._lock:
            series = self._series[spec.name].setdefault(values, _Series())
            series.count += 1
            series.total += observation.value
            if spec.kind == "histogram":
                if series.buckets is None:
                    series.buckets = [0.0] * len(spec.buckets)
                for i, bound in enumerate(spec.buckets):
                    if observation.value <= bound:
                        series.buckets[i] += 1

    def value(self, metric: str, labels: Sequence[str] = ()) -> float:
        """A counter's value (a summary's or histogram's count) for these label values (0 if none)."""
        with self._lock:
            series = self._series[metric].get(tuple(labels))
            return (
                0.0 if series is None else series.total if self.specs[metric].kind.endswith("counter") else series.count
            )

    def label_names_of(self, spec: MetricSpec) -> list[str]:
        return list(self.label_names if spec.labels is None else ("namespace", *spec.labels))

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            snapshot = {
                name: {k: _Series(s.count, s.total, list(s.buckets or ())) for k, s in series.items()}
                for name, series in self._series.items()
            }
        for name, spec in self.specs.items():
            names = self.label_names_of(spec)
            family: Metric
            if spec.kind == "exact counter":
                family = Metric(name, spec.documentation, "unknown")
                for values, s in snapshot[name].items():
                    family.add_sample(name, dict(zip(names, values, strict=True)), s.total)
            elif spec.kind == "counter":
                family = CounterMetricFamily(name, spec.documentation, labels=names)
                for values, s in snapshot[name].items():
                    family.add_metric(list(values), s.total)
            elif spec.kind == "summary":
                family = SummaryMetricFamily(name, spec.documentation, labels=names)
                for values, s in snapshot[name].items():
                    family.add_metric(list(values), count_value=int(s.count), sum_value=s.total)
            else:
                family = HistogramMetricFamily(name, spec.documentation, labels=names)
                for values, s in snapshot[name].items():
                    bounds = [(_bound(b), c) for b, c in zip(spec.buckets, s.buckets or (), strict=True)]
                    family.add_metric(list(values), [*bounds, ("+Inf", s.count)], sum_value=s.total)
            yield family


def _bound(value: float) -> str:
    """A bucket bound as Go prints it (``30``, ``0.5``), so ``le`` values match kubeflow's."""
    return f"{value:g}"


__all__ = ["MetricSpec", "Transitions", "kubeflow_labels", "label_name"]
