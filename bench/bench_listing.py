"""What a start does with each listed SparkApplication and SparkDriver, without a cluster.

A restart over N finished apps lists them and their SparkDrivers before its first pass
(bench/scale.py measures that on a devcluster, beside a bare client's LIST). Here the same lines a
watch-list streams (``{"type": "ADDED", "object": ...}``, N of each kind, shaped as a finished app
and its SparkDriver) go through the operator's own informers, with every controller registered (its
indexes, its change handlers, its queues): CPU seconds to file them all, beside decoding the lines
alone, which is all a bare client does. The best of ``--repeat`` rounds.

    .venv/bin/python bench/bench_listing.py [--apps 10000] [--repeat 5] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from typing import Any

import orjson

from sparkop.api.models import DriverPhase
from sparkop.core.informer import INITIAL_EVENTS_END, Informer
from sparkop.core.jsontypes import JSON
from sparkop.core.runtime import Options, Runtime, register_namespaces
from sparkop.domain import kinds, labels
from sparkop.operator import DEFAULT_CONTROLLERS, controller_registrations
from tests.support.simulation import SimCluster
from tests.support.specs import PYTHON_PI_SPEC

NAMESPACE = "bench"
STAMP = "2026-12-04T20:00:00Z"


def finished_pair() -> tuple[JSON, JSON]:
    """A finished app's spec and status, and its SparkDriver's spec (from the apps state machine)."""
    c = SimCluster(spec={**PYTHON_PI_SPEC, "restartPolicy": {"type": "Never"}}, name="pi")
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.SUCCEEDED, "Completed", 0)
    c.run_until_quiet()
    return {"spec": c.spec, "status": c.status}, {"spec": c.drivers["pi-1"].spec}


def app(i: int, shape: JSON) -> JSON:
    meta: JSON = {
        "name": f"app-{i:05d}",
        "namespace": NAMESPACE,
        "uid": f"uid-app-{i}",
        "resourceVersion": str(1000 + i),
    }
    meta |= {"generation": 1, "creationTimestamp": STAMP}
    return {"apiVersion": labels.API_VERSION, "kind": "SparkApplication", "metadata": meta, **shape}


def driver(i: int, shape: JSON) -> JSON:
    owner: JSON = {"apiVersion": labels.API_VERSION, "kind": "SparkApplication", "name": f"app-{i:05d}"}
    owner |= {"uid": f"uid-app-{i}", "controller": True, "blockOwnerDeletion": True}
    meta: JSON = {"name": f"app-{i:05d}-1", "namespace": NAMESPACE, "uid": f"uid-drv-{i}"}
    meta |= {"resourceVersion": str(50_000 + i), "generation": 1, "creationTimestamp": STAMP}
    meta |= {"labels": {labels.APP: f"app-{i:05d}"}, "ownerReferences": [owner]}
    pod = f"app-{i:05d}-driver"
    status = {"phase": "Succeeded", "incarnation": 1, "sparkApplicationId": f"spark-{i}", "exitCode": 0}
    status |= {"driverPod": {"name": pod, "node": "kwok-1", "ip": "10.0.0.1"}, "startTime": STAMP}
    # The app's name is in its SparkDriver's spec too: the driver pod's name, as kubeflow names it.
    spec = {**shape["spec"], "driver": {**shape["spec"]["driver"], "podName": pod}}
    body: JSON = {"apiVersion": labels.API_VERSION, "kind": "SparkDriver", "metadata": meta, **shape}
    return body | {"spec": spec, "status": status}


def stream(objects: list[JSON]) -> list[bytes]:
    end = {"kind": "Status", "metadata": {"resourceVersion": "99999", "annotations": {INITIAL_EVENTS_END: "true"}}}
    added = [orjson.dumps({"type": "ADDED", "object": obj}) for obj in objects]
    return [*added, orjson.dumps({"type": "BOOKMARK", "object": end})]


def runtime() -> Runtime:
    """The operator's registrations, as `sparkop run` makes them (nothing is sent: no informer runs)."""
    made = Runtime(kube=None, options=Options())  # type: ignore[arg-type]
    register_namespaces(made)
    for register in controller_registrations(DEFAULT_CONTROLLERS):
        register(made)
    return made


def file_all(made: Runtime, lines: dict[str, list[bytes]]) -> None:
    """Every line into its informer, as its first listing (the watch's own per-line path)."""
    for informer in made.caches.all():
        listed = lines.get(informer.resource.path())
        if listed is None:
            continue
        first_listing(informer, listed)
        assert informer.store.has_synced() and len(informer.store) == len(listed) - 1


def first_listing(informer: Informer, listed: list[bytes]) -> None:
    for line in listed:
        if (end := informer._on_initial_line(line, None)) is not None:
            informer._streamed(end, time.monotonic())


def measure(apps: int, repeat: int, profile: bool) -> dict[str, Any]:
    app_shape, driver_shape = finished_pair()
    lines = {
        kinds.SPARK_APPLICATIONS.path(): stream([app(i, app_shape) for i in range(apps)]),
        kinds.SPARK_DRIVERS.path(): stream([driver(i, driver_shape) for i in range(apps)]),
    }
    every_line = [line for listed in lines.values() for line in listed]
    decode = min(_cpu(lambda: [orjson.loads(line) for line in every_line]) for _ in range(repeat))
    profiler = cProfile.Profile() if profile else None

    async def rounds() -> float:
        best = float("inf")
        for _ in range(1 if profiler else repeat):
            made = runtime()
            if profiler:
                profiler.enable()
            best = min(best, _cpu(lambda: file_all(made, lines)))  # noqa: B023 (called at once)
            if profiler:
                profiler.disable()
        return best

    filed = asyncio.run(rounds())  # the queues take keys on a running loop, as in the operator
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return {
        "objects": 2 * apps,
        "bytes_per_object": round(sum(map(len, every_line)) / len(every_line)),
        "decode_cpu_s": round(decode, 3),
        "filed_cpu_s": round(filed, 3),
        "filed_us_per_object": round(filed / (2 * apps) * 1e6, 1),
    }


def _cpu(work: Any) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="one round under cProfile (slower)")
    args = parser.parse_args()
    result = measure(args.apps, args.repeat, args.profile)
    print(
        f"{result['objects']} objects ({result['bytes_per_object']} bytes each): decoding alone "
        f"{result['decode_cpu_s']} CPU-s; filed by the operator's informers, indexes and handlers "
        f"{result['filed_cpu_s']} CPU-s ({result['filed_us_per_object']} us per object)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
