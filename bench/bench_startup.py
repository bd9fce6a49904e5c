"""Start-up cost: `sparkop run` against a cluster full of finished apps and of objects that are not sparkop's.

On a dedicated devcluster (`bench-startup`, torn down at the end):

1. N apps (default 300) run to completion with the real operator (each: one 1-second simulated driver,
   one executor), so their SparkApplications, SparkDrivers, driver and executor pods, ConfigMaps and
   Services have exactly the shape sparkop leaves behind; then that operator stops.
2. 10,000 ConfigMaps and 2,000 pods that are not sparkop's are added (pods bound to a KWOK node, which
   runs them), created concurrently with at most 50 requests in flight.
3. core.informer, in a process of its own, syncs what sparkop owns (server-side label selectors on pods,
   ConfigMaps, Services; its two CRDs whole): sync time, CPU seconds, RSS. A second process syncs every
   ConfigMap unfiltered: its RSS gives the memory an informer pays per 10k ConfigMaps.
4. The operator (`sparkop run`, cluster-wide, both controllers) starts; measured: start -> first
   reconcile (``sparkop_reconcile_total`` on its metrics port), start -> every app and driver reconciled
   once, its CPU seconds (/proc) and RSS. It is stopped after --timeout seconds if it gets nowhere.
   The figures go under ``operator_after`` (on informers); ``operator_before`` (kopf's watches, which
   reached no reconcile in 600 s) is kept from the JSON already there.
5. The same operator on an empty devcluster but for one app: start -> its first reconcile
   (``operator_empty``).

Prints a table and writes JSON (default bench/results/startup.json).

    .venv/bin/python bench/bench_startup.py [--apps 300 --configmaps 10000 --pods 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devcluster import components  # noqa: E402
from devcluster.cluster import Cluster  # noqa: E402
from devcluster.ports import free_ports  # noqa: E402
from sparkop.core import kube as k8s  # noqa: E402
from sparkop.core.informer import Informer  # noqa: E402
from sparkop.domain import kinds, labels  # noqa: E402

APPS_NAMESPACE = "bench-apps"
NOISE_NAMESPACES = [f"noise-{i}" for i in range(10)]
NOISE_NODE = "kwok-noise"
CONCURRENCY = 50
# What sparkop owns, selected on the server: driver/executor pods, ConfigMaps and Services by the
# SparkDriver label, UI Services by managed-by. (One selector per informer: the UI Services get their own.)
OWNED_SELECTOR = labels.DRIVER
UI_SELECTOR = f"{labels.MANAGED_BY}={labels.MANAGER},{labels.COMPONENT}"


def app(name: str) -> dict[str, Any]:
    return {
        "apiVersion": labels.API_VERSION,
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": APPS_NAMESPACE},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "sparkVersion": "3.5.7",
            "image": "apache/spark:3.5.7",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples_2.12-3.5.7.jar",
            "driver": {
                "cores": 1,
                "memory": "512m",
                "annotations": {"sim.sparkop.io/run-seconds": "1", "sim.sparkop.io/outcome": "Succeeded"},
            },
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        },
    }


def noise_config_map(namespace: str, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{i:05d}", "namespace": namespace, "labels": {"app": "someone-else"}},
        "data": {"settings.properties": f"key.{i}=value\n" * 8},
    }


def noise_pod(namespace: str, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i:05d}", "namespace": namespace, "labels": {"app": "someone-else"}},
        "spec": {
            "nodeName": NOISE_NODE,
            "containers": [{"name": "main", "image": "example.com/web:1", "resources": {"requests": {"cpu": "1m"}}}],
        },
    }


def proc_stats(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {
        "rss_mib": round(int(fields["VmRSS"].split()[0]) / 1024, 1),
        "peak_rss_mib": round(int(fields["VmHWM"].split()[0]) / 1024, 1),
        "cpu_seconds": round((int(stat[11]) + int(stat[12])) / ticks, 2),
    }


async def bounded(calls: list[Callable[[], Awaitable[Any]]], limit: int = CONCURRENCY) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the informer probe (runs in a process of its own, so its CPU and RSS are its own) ------------------


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def probe(kubeconfig: str, mode: str) -> dict[str, Any]:
    """Sync informers and report time, CPU and RSS spent on it (imports and connection excluded)."""
    kube = await k8s.Kube.connect(kubeconfig)
    try:
        if mode == "owned":
            informers = [
                Informer(kube, k8s.PODS, label_selector=OWNED_SELECTOR),
                Informer(kube, k8s.CONFIGMAPS, label_selector=OWNED_SELECTOR),
                Informer(kube, k8s.SERVICES, label_selector=OWNED_SELECTOR),
                Informer(kube, k8s.SERVICES, label_selector=UI_SELECTOR),
                Informer(kube, kinds.SPARK_APPLICATIONS),
                Informer(kube, kinds.SPARK_DRIVERS),
            ]
        else:  # every ConfigMap, unfiltered: what caching a whole kind costs
            informers = [Informer(kube, k8s.CONFIGMAPS)]
        rss0, cpu0, start = rss_mib(), cpu_seconds(), time.monotonic()
        tasks = [asyncio.create_task(i.run()) for i in informers]
        async with asyncio.timeout(600):
            await asyncio.gather(*(i.wait_synced() for i in informers))
        seconds = time.monotonic() - start
        cpu, rss = cpu_seconds() - cpu0, rss_mib() - rss0
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return {
            "sync_seconds": round(seconds, 3),
            "cpu_seconds": round(cpu, 3),
            "rss_delta_mib": round(rss, 1),
            "objects": {f"{i.resource.kind}[{i.label_selector or '*'}]": len(i.store) for i in informers},
            "requests": sum(len(i.requests) for i in informers),
        }
    finally:
        await kube.close()


def run_probe(kubeconfig: Path, mode: str) -> dict[str, Any]:
    """The probe's figures, plus its whole wall time (interpreter, imports, connection, sync, exit): the
    figure to hold against the operator's start -> first reconcile."""
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, __file__, "--probe", mode, "--kubeconfig", str(kubeconfig)],
        check=True,
        capture_output=True,
        text=True,
    )
    probed: dict[str, Any] = json.loads(result.stdout)
    probed["process_wall_seconds"] = round(time.monotonic() - start, 2)
    return probed


# -- the cluster ---------------------------------------------------------------------------------------


def kubectl(cluster: Cluster, *args: str) -> None:
    subprocess.run([str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}", *args], check=True, capture_output=True)


def run_apps_to_completion(cluster: Cluster, apps: int, budget: float) -> dict[str, Any]:
    """The finished apps, made by the real operator so that every object has its real shape."""
    with (cluster.directory / "operator-seed.log").open("wb") as log_file:
        seeder = subprocess.Popen(
            [sys.executable, "-m", "sparkop", "run", "--kubeconfig", str(cluster.kubeconfig), "-n", APPS_NAMESPACE],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            return asyncio.run(submit_and_wait(cluster, apps, budget))
        finally:
            seeder.terminate()
            seeder.wait(30)


async def submit_and_wait(cluster: Cluster, apps: int, budget: float) -> dict[str, Any]:
    kube = await k8s.Kube.connect(str(cluster.kubeconfig))
    start = time.monotonic()
    try:
        await bounded([partial(kube.create, app(f"app-{n:04d}")) for n in range(apps)])
        completed = 0
        while time.monotonic() - start < budget:
            items = await kube.list(kinds.SPARK_APPLICATIONS, APPS_NAMESPACE)
            states = [((i.get("status") or {}).get("applicationState") or {}).get("state") for i in items]
            completed = states.count("COMPLETED")
            if completed == apps:
                break
            await asyncio.sleep(2)
        log(f"{completed}/{apps} apps completed in {time.monotonic() - start:.0f}s")
        return {"apps_completed": completed, "seed_seconds": round(time.monotonic() - start, 1)}
    finally:
        await kube.close()


async def add_noise(cluster: Cluster, config_maps: int, pods: int) -> dict[str, Any]:
    kube = await k8s.Kube.connect(str(cluster.kubeconfig))
    try:
        node = components.fake_node(NOISE_NODE, "100000", "100Ti", pods=str(pods + 100))
        await kube._call("POST", "/api/v1/nodes", body=node, decode=False)
        start = time.monotonic()
        calls: list[Callable[[], Awaitable[Any]]] = []
        for i in range(config_maps):
            calls.append(partial(kube.create, noise_config_map(NOISE_NAMESPACES[i % 10], i)))
        for i in range(pods):
            calls.append(partial(kube.create, noise_pod(NOISE_NAMESPACES[i % 10], i)))
        await bounded(calls)
        seconds = time.monotonic() - start
        log(f"{config_maps} ConfigMaps and {pods} pods created in {seconds:.0f}s")
        counts = {
            "pods": len(await kube.list(k8s.PODS, None)),
            "configmaps": len(await kube.list(k8s.CONFIGMAPS, None)),
            "services": len(await kube.list(k8s.SERVICES, None)),
            "sparkapplications": len(await kube.list(kinds.SPARK_APPLICATIONS, None)),
            "sparkdrivers": len(await kube.list(kinds.SPARK_DRIVERS, None)),
        }
        return {"noise_create_seconds": round(seconds, 1), "cluster_objects": counts}
    finally:
        await kube.close()


def reconciles(port: int) -> dict[str, float]:
    """sparkop_reconcile_total by controller, from the operator's metrics endpoint ({} if not up yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return {}
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("sparkop_reconcile_total{"):
            controller = line.split('controller="', 1)[1].split('"', 1)[0]
            totals[controller] = totals.get(controller, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


def measure_operator(cluster: Cluster, apps: int, timeout: float) -> dict[str, Any]:
    (port,) = free_ports(1)
    log_path = cluster.directory / "operator-startup.log"
    with log_path.open("wb") as log_file:
        start = time.monotonic()
        operator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sparkop",
                "run",
                "--kubeconfig",
                str(cluster.kubeconfig),
                "--metrics-port",
                f"{port}",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        result: dict[str, Any] = {"first_reconcile_seconds": None, "all_reconciled_seconds": None}
        try:
            while time.monotonic() - start < timeout and operator.poll() is None:
                counts = reconciles(port)
                now = time.monotonic() - start
                if result["first_reconcile_seconds"] is None and sum(counts.values()) > 0:
                    result["first_reconcile_seconds"] = round(now, 2)
                    result["at_first_reconcile"] = proc_stats(operator.pid)
                    log(f"first reconcile after {now:.1f}s")
                if min(counts.get("apps", 0), counts.get("driver", 0)) >= apps:
                    result["all_reconciled_seconds"] = round(now, 2)
                    break
                time.sleep(0.2)
            result["at_end"] = {**proc_stats(operator.pid), "seconds": round(time.monotonic() - start, 1)}
            result["reconciles"] = reconciles(port)
            if result["first_reconcile_seconds"] is None:
                result["outcome"] = f"no reconcile within {timeout:.0f}s; stopped"
            elif result["all_reconciled_seconds"] is None:
                result["outcome"] = f"not every app and driver reconciled within {timeout:.0f}s; stopped"
            else:
                result["outcome"] = "ok"
        finally:
            operator.terminate()
            try:
                operator.wait(30)
            except subprocess.TimeoutExpired:
                operator.kill()
                operator.wait()
    return result


def measure_empty(name: str) -> dict[str, Any]:
    """Start -> first reconcile on an otherwise empty cluster holding one app (a reconcile needs a key)."""
    cluster = Cluster.up(name, nodes=1, die_with_parent=True)
    try:
        kubectl(cluster, "apply", "--server-side", "-f", str(ROOT / "crds"))
        for crd in ("sparkapplications", "sparkdrivers"):
            kubectl(cluster, "wait", "--for=condition=Established", f"crd/{crd}.sparkop.io", "--timeout=60s")
        kubectl(cluster, "create", "namespace", APPS_NAMESPACE)
        (port,) = free_ports(1)
        asyncio.run(_create(cluster, app("first")))
        start = time.monotonic()
        with (cluster.directory / "operator-empty.log").open("wb") as log_file:
            argv = [sys.executable, "-m", "sparkop", "run", "--kubeconfig", str(cluster.kubeconfig)]
            operator = subprocess.Popen([*argv, "--metrics-port", f"{port}"], stdout=log_file, stderr=subprocess.STDOUT)
            try:
                while time.monotonic() - start < 60 and not sum(reconciles(port).values()):
                    time.sleep(0.02)
                seconds = round(time.monotonic() - start, 2)
            finally:
                operator.terminate()
                operator.wait(30)
        return {"first_reconcile_seconds": seconds, "note": "one app in the cluster; includes interpreter start"}
    finally:
        cluster.down()


async def _create(cluster: Cluster, body: dict[str, Any]) -> None:
    kube = await k8s.Kube.connect(str(cluster.kubeconfig))
    try:
        await kube.create(body)
    finally:
        await kube.close()


def table(result: dict[str, Any]) -> str:
    owned, every = result["informer_owned"], result["informer_all_configmaps"]
    rows = [("cluster", ", ".join(f"{v} {k}" for k, v in result["cluster_objects"].items()))]
    for label, op in (
        ("before (kopf)", result.get("operator_before")),
        ("after (informers)", result.get("operator_after")),
    ):
        if not op:
            continue
        end = op.get("at_end", {})
        rows += [
            (f"operator {label}: start -> first reconcile", f"{op['first_reconcile_seconds']} s"),
            (f"operator {label}: start -> every app+driver reconciled", f"{op['all_reconciled_seconds']} s"),
            (f"operator {label}: CPU / RSS at the end", f"{end.get('cpu_seconds')} CPU-s / {end.get('rss_mib')} MiB"),
            (f"operator {label}: outcome", op["outcome"]),
        ]
    if empty := result.get("operator_empty"):
        rows.append(
            ("operator after, empty cluster: start -> first reconcile", f"{empty['first_reconcile_seconds']} s")
        )
    rows += [
        ("core.informer, what sparkop owns: sync", f"{owned['sync_seconds']} s, {owned['cpu_seconds']} CPU-s"),
        ("core.informer, what sparkop owns: process start -> synced -> exit", f"{owned['process_wall_seconds']} s"),
        ("core.informer, what sparkop owns: RSS", f"+{owned['rss_delta_mib']} MiB for {owned['objects']}"),
        ("core.informer, every ConfigMap: sync", f"{every['sync_seconds']} s, {every['cpu_seconds']} CPU-s"),
        ("core.informer: RSS per 10k ConfigMaps", f"{result['informer_rss_mib_per_10k_configmaps']} MiB"),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=300)
    parser.add_argument("--configmaps", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=2_000)
    parser.add_argument("--timeout", type=float, default=600, help="seconds the operator gets to start")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "startup.json")
    parser.add_argument("--name", default="bench-startup", help="devcluster name")
    parser.add_argument("--probe", choices=["owned", "configmaps"], help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(asyncio.run(probe(args.kubeconfig, args.probe))))
        return 0

    cluster = Cluster.up(args.name, nodes=4, node_cpu="2000", node_memory="8Ti", die_with_parent=True)
    try:
        kubectl(cluster, "apply", "--server-side", "-f", str(ROOT / "crds"))
        for crd in ("sparkapplications", "sparkdrivers"):
            kubectl(cluster, "wait", "--for=condition=Established", f"crd/{crd}.sparkop.io", "--timeout=60s")
        for namespace in [APPS_NAMESPACE, *NOISE_NAMESPACES]:
            kubectl(cluster, "create", "namespace", namespace)
        result: dict[str, Any] = {"apps": args.apps, "unrelated_configmaps": args.configmaps}
        result["unrelated_pods"] = args.pods
        result |= run_apps_to_completion(cluster, args.apps, budget=900)
        result |= asyncio.run(add_noise(cluster, args.configmaps, args.pods))
        log("informer probes")
        result["informer_owned"] = run_probe(cluster.kubeconfig, "owned")
        every = run_probe(cluster.kubeconfig, "configmaps")
        result["informer_all_configmaps"] = every
        count = sum(every["objects"].values())
        result["informer_rss_mib_per_10k_configmaps"] = round(every["rss_delta_mib"] / count * 10_000, 1)
        log("the operator")
        result["operator_after"] = measure_operator(cluster, args.apps, args.timeout)
        result["cores"] = os.cpu_count()
        result["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    finally:
        cluster.down()
    if args.out.exists():
        kept = json.loads(args.out.read_text()).get("operator_before")
        if kept:
            result["operator_before"] = kept
    result["operator_empty"] = measure_empty(args.name + "-empty")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
