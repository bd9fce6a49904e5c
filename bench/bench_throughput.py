"""Submission throughput and operator footprint on the devcluster.

Creates N SparkApplications at once (each: one 1-second simulated driver, one executor) against a
fresh devcluster with the real operator (`sparkop run`, both controllers), and measures:

* submit latency: app created -> its driver pod exists (first seen by a 100 ms poll);
* throughput: apps submitted per minute, apps completed per minute;
* the operator's peak resident memory (VmHWM) and CPU time.

Everything runs on this machine: the API server, etcd, KWOK, the Spark-driver simulator and the
operator share its cores, so the figures are a floor for what a real cluster would see.

    .venv/bin/python bench/bench_throughput.py --apps 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core import kube as k8s  # noqa: E402
from devcluster.cluster import Cluster  # noqa: E402

NAMESPACE = "bench"


def app(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": NAMESPACE},
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


def proc_stats(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {
        "peak_rss_mib": int(fields["VmHWM"].split()[0]) / 1024,
        "rss_mib": int(fields["VmRSS"].split()[0]) / 1024,
        "cpu_seconds": (int(stat[11]) + int(stat[12])) / ticks,
    }


async def measure(kube: k8s.Kube, names: list[str], budget_seconds: float) -> dict[str, Any]:
    created: dict[str, float] = {}
    submitted: dict[str, float] = {}
    completed: dict[str, float] = {}

    async def create(name: str) -> None:
        await kube.create(app(name))
        created[name] = time.monotonic()

    start = time.monotonic()
    await asyncio.gather(*(create(n) for n in names))
    create_seconds = time.monotonic() - start
    deadline = start + budget_seconds
    while len(completed) < len(names) and time.monotonic() < deadline:
        now = time.monotonic()
        for pod in await kube.list(k8s.PODS, NAMESPACE, selector="spark-role=driver"):
            owner = pod["metadata"]["labels"].get("sparkop.io/app")
            if owner in created and owner not in submitted:
                submitted[owner] = now
        for item in await kube.list(k8s.SPARK_APPLICATIONS, NAMESPACE):
            state = ((item.get("status") or {}).get("applicationState") or {}).get("state")
            if state == "COMPLETED" and item["metadata"]["name"] not in completed:
                completed[item["metadata"]["name"]] = now
        await asyncio.sleep(0.1)
    latencies = sorted(submitted[n] - created[n] for n in submitted)
    last_submit = max(submitted.values()) - start if submitted else float("nan")
    last_complete = max(completed.values()) - start if completed else float("nan")
    return {
        "apps": len(names),
        "create_seconds": round(create_seconds, 2),
        "submitted": len(submitted),
        "completed": len(completed),
        "submit_latency_median_s": round(statistics.median(latencies), 3) if latencies else None,
        "submit_latency_p90_s": round(latencies[int(len(latencies) * 0.9) - 1], 3) if latencies else None,
        "all_submitted_after_s": round(last_submit, 2),
        "all_completed_after_s": round(last_complete, 2),
        "submitted_per_minute": round(len(submitted) / last_submit * 60, 1) if submitted else 0,
        "completed_per_minute": round(len(completed) / last_complete * 60, 1) if completed else 0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "throughput.json")
    parser.add_argument("--profile", type=Path, help="record the operator with py-spy (collapsed stacks) here")
    args = parser.parse_args()

    cluster = Cluster.up(f"bench-{os.getpid()}", nodes=4, node_cpu="2000", node_memory="8Ti", die_with_parent=True)
    operator: subprocess.Popen[bytes] | None = None
    try:
        kubectl = [str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}"]
        subprocess.run([*kubectl, "apply", "--server-side", "-f", str(ROOT / "crds")], check=True, capture_output=True)
        subprocess.run(
            [*kubectl, "wait", "--for=condition=Established", "crd/sparkapplications.sparkop.io", "--timeout=60s"],
            check=True,
            capture_output=True,
        )
        subprocess.run([*kubectl, "create", "namespace", NAMESPACE], check=True, capture_output=True)
        log = (cluster.directory / "operator.log").open("wb")
        operator = subprocess.Popen(
            [sys.executable, "-m", "sparkop", "run", "--kubeconfig", str(cluster.kubeconfig), "-n", NAMESPACE],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        time.sleep(3)  # let the operator finish its start-up listing before the clock starts
        idle = proc_stats(operator.pid)
        profiler = None
        if args.profile:
            profiler = subprocess.Popen(
                ["py-spy", "record", "-p", str(operator.pid), "-f", "raw", "-o", str(args.profile), "-r", "200"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        async def run() -> dict[str, Any]:
            kube = await k8s.Kube.connect(str(cluster.kubeconfig))
            try:
                return await measure(kube, [f"tp-{i:04d}" for i in range(args.apps)], args.timeout)
            finally:
                await kube.close()

        result = asyncio.run(run())
        busy = proc_stats(operator.pid)
        if profiler is not None:
            profiler.send_signal(2)
            profiler.wait(30)
        result["operator_idle_rss_mib"] = round(idle["rss_mib"], 1)
        result["operator_peak_rss_mib"] = round(busy["peak_rss_mib"], 1)
        result["operator_cpu_seconds"] = round(busy["cpu_seconds"] - idle["cpu_seconds"], 1)
        result["cores"] = os.cpu_count()
        result["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    finally:
        if operator is not None:
            operator.terminate()
            operator.wait(20)
        cluster.down()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
