"""Pure render time per SparkDriver (the hot path of every submission), and one reconcile pass.

    .venv/bin/python bench/bench_render.py [iterations]

Measures parse (manifest -> model) and render (model -> pod, ConfigMaps, Service) separately,
for a minimal spec and for a spec that uses most fields; then decide(observed, now) for a new
SparkDriver (everything to create) and for a running one whose objects all exist (the pass that
runs on every pod event).
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime
from typing import Any

from sparkop.driver_controller.decide import decide
from sparkop.driver_controller.observed import Observed
from sparkop.driver_controller.render import parse, render
from sparkop.driver_controller.summaries import summarize_object, summarize_pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)

MINIMAL: dict[str, Any] = {
    "type": "Scala",
    "sparkVersion": "3.5.7",
    "image": "apache/spark:3.5.7",
    "mainClass": "org.apache.spark.examples.SparkPi",
    "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
    "arguments": ["1000"],
}
FULL: dict[str, Any] = {
    **MINIMAL,
    "sparkConf": {f"spark.custom.key{i}": f"value{i}" for i in range(30)},
    "hadoopConf": {"fs.s3a.endpoint": "http://minio:9000"},
    "deps": {"jars": ["local:///a.jar"], "files": ["local:///f"]},
    "volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
        {"name": "c", "configMap": {"name": "c"}},
    ],
    "dynamicAllocation": {"enabled": True, "minExecutors": 1, "maxExecutors": 10},
    "driver": {
        "cores": 2, "memory": "4g", "labels": {"team": "a"}, "annotations": {"x": "y"},
        "envVars": {"A": "1"}, "secrets": [{"name": "s", "path": "/s", "secretType": "Generic"}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "c", "mountPath": "/c"}],
        "tolerations": [{"key": "k", "operator": "Exists"}], "sidecars": [{"name": "side", "image": "busybox"}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}}]}},
    },
    "executor": {"instances": 10, "cores": 4, "memory": "8g", "env": [{"name": "E", "value": "1"}],
                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
}  # fmt: skip


def manifest(spec: dict[str, Any], i: int) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {"name": f"app-{i}", "namespace": "default", "uid": f"00000000-0000-4000-8000-{i:012d}",
                     "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"sparkop.io/app": "app"}},
        "spec": spec,
    }  # fmt: skip


def measure(name: str, spec: dict[str, Any], n: int) -> None:
    bodies = [manifest(spec, i) for i in range(n)]
    parse_t, render_t = [], []
    for body in bodies:
        t0 = time.perf_counter()
        model = parse(body)
        t1 = time.perf_counter()
        render(model, 1)
        t2 = time.perf_counter()
        parse_t.append(t1 - t0)
        render_t.append(t2 - t1)
    for label, xs in (("parse", parse_t), ("render", render_t)):
        xs.sort()
        print(f"{name:8} {label:7} median {statistics.median(xs) * 1e6:7.0f} us   "
              f"p99 {xs[int(len(xs) * 0.99)] * 1e6:7.0f} us   ({n} SparkDrivers)")  # fmt: skip


def running(spec: dict[str, Any]) -> Observed:
    """A SparkDriver whose driver pod runs, with two adopted executors and all objects present."""
    body = {**manifest(spec, 0), "status": {"incarnation": 1, "driverPod": {"name": "app-0-driver"}}}
    body["metadata"] = {**body["metadata"], "generation": 1, "resourceVersion": "1"}
    out = render(parse(body), 1)
    uid = {"uid": "u", "resourceVersion": "1"}
    pod = {**out.pod, "metadata": {**out.pod["metadata"], **uid},
           "status": {"phase": "Running", "containerStatuses": [{"name": "spark-kubernetes-driver",
                                                                 "state": {"running": {}}}]}}  # fmt: skip
    owner = out.pod["metadata"]["ownerReferences"][0]
    executors = [
        {"metadata": {"name": f"app-0-1-exec-{i}", "namespace": "default", "uid": f"e{i}", "resourceVersion": "1",
                      "labels": {**out.pod["metadata"]["labels"], "spark-role": "executor"},
                      "ownerReferences": [{**owner, "controller": True}]}, "status": {"phase": "Running"}}
        for i in (1, 2)
    ]  # fmt: skip
    owned = [*out.config_maps, out.service]
    summaries = [summarize_object({**o, "metadata": {**o["metadata"], **uid}}) for o in owned]
    pods = [summarize_pod(p) for p in (pod, *executors)]
    first = decide(Observed.of(body, pods, summaries[:-1], summaries[-1:]), NOW)
    assert first.status is not None
    body["status"] = first.status.to_json()
    observed = Observed.of(body, pods, summaries[:-1], summaries[-1:])
    again = decide(observed, NOW)
    assert again.status is None and not again.creates and not again.patches, "not a steady state"
    return observed


def measure_reconcile(name: str, spec: dict[str, Any], n: int) -> None:
    for label, observed in (("create", Observed.of(manifest(spec, 0))), ("steady", running(spec))):
        xs = []
        for _ in range(n):
            t0 = time.perf_counter()
            decide(observed, NOW)
            xs.append(time.perf_counter() - t0)
        xs.sort()
        print(f"{name:8} {label:7} median {statistics.median(xs) * 1e6:7.0f} us   "
              f"p99 {xs[int(len(xs) * 0.99)] * 1e6:7.0f} us   (reconcile passes)")  # fmt: skip


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    measure("minimal", MINIMAL, n)
    measure("full", FULL, n)
    measure_reconcile("minimal", MINIMAL, n)
    measure_reconcile("full", FULL, n)


if __name__ == "__main__":
    main()
