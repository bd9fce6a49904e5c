"""Throughput, latency and CPU per app: sparkop against the API server's ceiling, in one run.

On one devcluster (KWOK nodes and the Spark-driver simulator):

1. **ceiling**: a bare async client does, for N apps, the writes sparkop makes to submit one (create
   the SparkApplication, its SparkDriver, the two ConfigMaps, the Service and the driver pod, with the
   bodies sparkop's own renderer produces, then the two status writes), with ``--ceiling-concurrency``
   apps in flight. Apps per second to the last driver pod is what this API server can take.
2. **sparkop**: the same N apps are created at once (same concurrency) for the operator, which is
   running (both controllers); the driver pods and COMPLETED states are stamped from watches. With
   ``--kubeflow-share F``, that share of them (every other one for 0.5) is created in kubeflow's group,
   and the operator serves both (``--kubeflow-api``).
   Measured: apps/s to the last driver pod (and the ratio to the ceiling), create -> driver pod and
   create -> COMPLETED percentiles, the operator's CPU per app until it is idle again, its RSS, and its
   writes per app (from the API server's audit log).

Both runs record every devcluster process's CPU, so a ceiling bound by the API server and etcd
sharing the cores shows in the split.

    .venv/bin/python bench/throughput.py --apps 1000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import resource
import time
from collections import Counter
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from harness import (
    ROOT,
    BenchCluster,
    Operator,
    app_manifest,
    app_state,
    bounded,
    cpu_seconds,
    label,
    latency_summary,
    log,
    now_utc,
    profiling,
    stamping,
    write_result,
)

from sparkop.core import kube as k8s
from sparkop.core.jsontypes import JSON
from sparkop.domain import kinds, labels
from sparkop.render_cli import PLACEHOLDER_APP_UID, PLACEHOLDER_DRIVER_UID, render_document

SPARKOP_NAMESPACE = "bench"
CEILING_NAMESPACE = "bench-ceiling"


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuSplit:
    """CPU seconds spent by each devcluster process, the operator and this benchmark over a window."""

    def __init__(self, bench: BenchCluster, operator: Operator | None = None) -> None:
        self.bench, self.operator = bench, operator
        self.start = self._read()

    def _read(self) -> dict[str, float]:
        figures = self.bench.component_cpu()
        if self.operator is not None:
            figures["sparkop"] = cpu_seconds(self.operator.pid)
        figures["bench client"] = self_cpu()
        return figures

    def delta(self) -> dict[str, float]:
        end = self._read()
        return {name: round(end[name] - self.start.get(name, 0.0), 2) for name in end}


# -- the ceiling -----------------------------------------------------------------------------------


def _with_owner_uid(body: JSON, placeholder: str, uid: str) -> JSON:
    copied = copy.deepcopy(body)
    for ref in copied["metadata"].get("ownerReferences") or ():
        if ref.get("uid") == placeholder:
            ref["uid"] = uid
    return copied


def ceiling_bodies(name: str) -> list[JSON]:
    """[app, driver, ConfigMaps..., Service, pod] as sparkop would create them for app ``name``."""
    app = app_manifest(name, CEILING_NAMESPACE)
    return [app, *render_document(app, CEILING_NAMESPACE)]


async def ceiling_app(kube: k8s.Kube, bodies: list[JSON], pods: dict[str, float]) -> None:
    app, driver, *children = bodies
    pod = children[-1]
    created_app = await kube._call("POST", kinds.SPARK_APPLICATIONS.path(CEILING_NAMESPACE), body=app)
    driver = _with_owner_uid(driver, PLACEHOLDER_APP_UID, created_app["metadata"]["uid"])
    created_driver = await kube._call("POST", kinds.SPARK_DRIVERS.path(CEILING_NAMESPACE), body=driver)
    driver_uid = created_driver["metadata"]["uid"]
    owned = [_with_owner_uid(child, PLACEHOLDER_DRIVER_UID, driver_uid) for child in children]
    await asyncio.gather(*(kube.create(child) for child in owned[:-1]))
    created_pod = await kube._call("POST", k8s.PODS.path(CEILING_NAMESPACE), body=owned[-1])
    pod_uid = created_pod["metadata"]["uid"]
    pods[app["metadata"]["name"]] = time.monotonic()
    pod_name = pod["metadata"]["name"]
    now = now_utc().isoformat().replace("+00:00", "Z")
    await asyncio.gather(
        kube.patch(
            kinds.SPARK_DRIVERS,
            CEILING_NAMESPACE,
            driver["metadata"]["name"],
            {
                "status": {
                    "phase": "Pending",
                    "observedGeneration": 1,
                    "incarnation": 1,
                    "driverPod": {"name": pod_name, "uid": pod_uid},
                    "startTime": now,
                }
            },
            subresource="status",
        ),
        kube.patch(
            kinds.SPARK_APPLICATIONS,
            CEILING_NAMESPACE,
            app["metadata"]["name"],
            {
                "status": {
                    "applicationState": {"state": "SUBMITTED"},
                    "observedGeneration": 1,
                    "lastSubmissionAttemptTime": now,
                    "driverInfo": {"podName": pod_name},
                    "executionAttempts": 1,
                    "submissionAttempts": 1,
                    "lastRun": 1,
                    "currentDriver": driver["metadata"]["name"],
                    "attempts": [
                        {"run": 1, "driver": driver["metadata"]["name"], "outcome": "Running", "startTime": now}
                    ],
                }
            },
            subresource="status",
        ),
    )


async def measure_ceiling(bench: BenchCluster, apps: int, concurrency: int, prefix: str = "") -> dict[str, Any]:
    names = [f"{prefix}ceil-{i:05d}" for i in range(apps)]
    bodies = {name: ceiling_bodies(name) for name in names}  # rendered before the clock starts
    pods: dict[str, float] = {}
    split = CpuSplit(bench)
    async with bench.client() as kube:
        start = time.monotonic()
        await bounded([partial(ceiling_app, kube, bodies[n], pods) for n in names], concurrency)
        seconds = time.monotonic() - start
    last_pod = max(pods.values()) - start
    return {
        "apps": apps,
        "concurrency": concurrency,
        "writes_per_app": len(bodies[names[0]]) + 2,
        "seconds_to_last_driver_pod": round(last_pod, 2),
        "apps_per_second": round(apps / last_pod, 2),
        "seconds_with_status_writes": round(seconds, 2),
        "cpu_seconds": split.delta(),
    }


# -- sparkop ---------------------------------------------------------------------------------------


def in_kubeflows_group(index: int, share: float) -> bool:
    """Whether app ``index`` of a run is created in kubeflow's group: ``share`` of them, spread evenly."""
    return int((index + 1) * share) > int(index * share)


async def measure_sparkop(
    bench: BenchCluster,
    operator: Operator,
    apps: int,
    concurrency: int,
    budget_seconds: float,
    prefix: str = "",
    run_seconds: float = 0,
    kubeflow_share: float = 0.0,
    executors: int = 1,
) -> dict[str, Any]:
    names = [f"{prefix}app-{i:05d}" for i in range(apps)]
    kubeflow = {n for i, n in enumerate(names) if in_kubeflows_group(i, kubeflow_share)}
    created: dict[str, float] = {}
    async with bench.client() as kube:

        async def create(name: str) -> None:
            api_version = kinds.KUBEFLOW_SPARK_APPLICATIONS.api_version if name in kubeflow else labels.API_VERSION
            manifest = app_manifest(
                name, SPARKOP_NAMESPACE, run_seconds=run_seconds, executors=executors, api_version=api_version
            )
            await kube.create(manifest)
            created[name] = time.monotonic()

        # Only this run's apps count: an earlier run's on the same cluster are listed at the watch's start.
        ours = set(names)

        def driver_pod_app(obj: JSON) -> str | None:
            app = label(obj, labels.APP)
            return app if app in ours else None

        def completed(obj: JSON) -> str | None:
            name = str(obj["metadata"]["name"])
            return name if name in ours and app_state(obj) == "COMPLETED" else None

        pod_selector = f"{labels.SPARK_ROLE}={labels.ROLE_DRIVER}"
        async with (
            stamping(kube, k8s.PODS, driver_pod_app, selector=pod_selector, namespace=SPARKOP_NAMESPACE) as pods,
            stamping(kube, kinds.SPARK_APPLICATIONS, completed, namespace=SPARKOP_NAMESPACE) as done,
            stamping(kube, kinds.KUBEFLOW_SPARK_APPLICATIONS, completed, namespace=SPARKOP_NAMESPACE, into=done)
            if kubeflow
            else contextlib.nullcontext(),
        ):
            since = now_utc()
            split = CpuSplit(bench, operator)
            before = operator.stats()
            passes_before = operator.reconciles()
            start = time.monotonic()
            await bounded([partial(create, n) for n in names], concurrency)
            create_seconds = time.monotonic() - start
            async with asyncio.timeout(budget_seconds):
                await pods.wait_for(apps)
                at_last_pod = operator.stats()
                await done.wait_for(apps)
            at_completed = time.monotonic()
        # The work an app costs includes finishing it: executors deleted, final statuses written.
        idle_after = await asyncio.to_thread(_idle_after, operator)
        after = operator.stats()
        passes = {k: v - passes_before.get(k, 0.0) for k, v in operator.reconciles().items()}
        cpu = split.delta()
    writes = bench.writes_since(since)
    last_pod = max(pods.seen.values()) - start
    return {
        "apps": apps,
        "kubeflow_apps": len(kubeflow),
        "create_concurrency": concurrency,
        "create_seconds": round(create_seconds, 2),
        "seconds_to_last_driver_pod": round(last_pod, 2),
        "apps_per_second": round(apps / last_pod, 2),
        "seconds_to_last_completed": round(at_completed - start, 2),
        "create_to_driver_pod": latency_summary(pods.seen[n] - created[n] for n in names),
        "create_to_completed": latency_summary(done.seen[n] - created[n] for n in names),
        "operator_cpu_seconds_to_last_driver_pod": round(at_last_pod.cpu_seconds - before.cpu_seconds, 2),
        "operator_cpu_seconds_to_idle": round(after.cpu_seconds - before.cpu_seconds, 2),
        "operator_cpu_ms_per_app": round((after.cpu_seconds - before.cpu_seconds) / apps * 1000, 1),
        "operator_idle_after_s": round(idle_after, 1),
        "operator_rss_mib": round(after.rss_mib, 1),
        "operator_peak_rss_mib": round(after.peak_rss_mib, 1),
        "operator_writes_per_app": round(len(writes) / apps, 2),
        "operator_passes_per_app": {k: round(v / apps, 2) for k, v in passes.items()},
        "operator_writes": dict(Counter(_write_kind(w) for w in writes).most_common()),
        "cpu_seconds": cpu,
    }


def _idle_after(operator: Operator) -> float:
    started = time.monotonic()
    operator.wait_idle(timeout=600)
    return time.monotonic() - started


def _write_kind(event: Mapping[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
    code = (event.get("responseStatus") or {}).get("code", 0)
    refused = "" if 200 <= code < 300 else f" -> {code}"
    return f"{event.get('verb')} {ref.get('resource')}{sub}{refused}"


# -- the run ---------------------------------------------------------------------------------------


def measure(
    bench: BenchCluster,
    operator: Operator,
    apps: int,
    concurrency: int,
    timeout: float,
    profile: Path | None = None,
    prefix: str = "",
    run_seconds: float = 0,
    kubeflow_share: float = 0.0,
    executors: int = 1,
) -> dict[str, Any]:
    """The ceiling's run, then sparkop's; ``prefix`` names the apps, so runs can share a cluster.
    ``run_seconds``: how long each driver runs (the simulator starts its executors a moment after it
    runs: an app whose driver ends sooner never has any); ``kubeflow_share`` of sparkop's apps are of
    kubeflow's group (the ceiling's writes are the same); ``executors``: how many each app asks for (0:
    none, so what executors cost, passes and counts, is left out of the figures)."""
    log(f"ceiling: {apps} apps' writes by a bare client")
    ceiling = asyncio.run(measure_ceiling(bench, apps, concurrency, prefix))
    log(f"ceiling: {ceiling['apps_per_second']} apps/s; letting the cluster settle")
    bench_settle(bench)
    log(f"sparkop: {apps} apps")
    with profiling(operator.pid, profile):
        sparkop = asyncio.run(
            measure_sparkop(bench, operator, apps, concurrency, timeout, prefix, run_seconds, kubeflow_share, executors)
        )
    ratio = sparkop["apps_per_second"] / ceiling["apps_per_second"]
    log(f"sparkop: {sparkop['apps_per_second']} apps/s, {ratio:.0%} of the ceiling")
    return {
        "ceiling": ceiling,
        "sparkop": sparkop,
        "ratio_to_ceiling": round(ratio, 3),
        "run_seconds": run_seconds,
        "executors": executors,
    }


def bench_settle(bench: BenchCluster, quiet_seconds: float = 3.0, timeout: float = 300) -> None:
    """Until the API server and etcd use less than a fifth of a core for ``quiet_seconds``."""
    pids = [pid for name, pid in bench.component_pids().items() if name in ("kube-apiserver", "etcd")]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = sum(cpu_seconds(p) for p in pids)
        time.sleep(quiet_seconds)
        if sum(cpu_seconds(p) for p in pids) - before < 0.2 * quiet_seconds:
            return


def table(result: Mapping[str, Any]) -> str:
    c, s = result["ceiling"], result["sparkop"]
    rows: list[tuple[str, str]] = [
        ("apps", str(s["apps"])),
        ("ceiling (bare client, same writes): apps/s", f"{c['apps_per_second']}"),
        ("sparkop: apps/s, create -> last driver pod", f"{s['apps_per_second']} ({result['ratio_to_ceiling']:.0%})"),
        ("sparkop: create -> driver pod p50/p95/p99", _pcts(s["create_to_driver_pod"])),
        ("sparkop: create -> COMPLETED p50/p95/p99", _pcts(s["create_to_completed"])),
        ("sparkop: CPU per app (until idle)", f"{s['operator_cpu_ms_per_app']} ms"),
        ("sparkop: writes per app", f"{s['operator_writes_per_app']} (ceiling {c['writes_per_app']})"),
        ("sparkop: RSS / peak", f"{s['operator_rss_mib']} / {s['operator_peak_rss_mib']} MiB"),
        ("CPU split, ceiling run", _split(c["cpu_seconds"])),
        ("CPU split, sparkop run", _split(s["cpu_seconds"])),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def _pcts(summary: Mapping[str, Any]) -> str:
    return f"{summary['p50_s']} / {summary['p95_s']} / {summary['p99_s']} s"


def _split(cpu: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]) if v >= 0.05)


def main(argv: list[str] | None = None, run: Callable[..., dict[str, Any]] = measure) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50, help="apps in flight (the ceiling; sparkop's creates)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--operator-arg", action="append", default=[], help="extra `sparkop run` flag")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "throughput.json"))
    parser.add_argument("--profile", type=Path, help="sample the operator with py-spy into this file")
    parser.add_argument(
        "--run-seconds",
        type=float,
        default=0,
        help="how long each driver runs (default 0: it ends as it starts, before its executors would start)",
    )
    parser.add_argument(
        "--kubeflow-share",
        type=float,
        default=0.0,
        help="share of the apps created in kubeflow's group (0.5: every other one); the operator serves both",
    )
    parser.add_argument("--executors", type=int, default=1, help="executors each app asks for (0: none)")
    args = parser.parse_args(argv)
    kubeflow = args.kubeflow_share > 0
    namespaces = [SPARKOP_NAMESPACE, CEILING_NAMESPACE]
    with BenchCluster.up(f"bench-tp-{os.getpid()}", namespaces=namespaces, kubeflow=kubeflow) as bench:
        operator_args = (*args.operator_arg, *(("--kubeflow-api",) if kubeflow else ()))
        operator = Operator(bench, (SPARKOP_NAMESPACE,), operator_args).start()
        try:
            operator.wait_ready()
            result = run(
                bench,
                operator,
                args.apps,
                args.concurrency,
                args.timeout,
                args.profile,
                run_seconds=args.run_seconds,
                kubeflow_share=args.kubeflow_share,
                executors=args.executors,
            )
        finally:
            operator.stop()
    write_result(Path(args.out), result)
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
