"""Recovery: ``count`` running driver pods deleted at once (a node drained, a preemption wave); how
soon does each SparkDriver have its next incarnation's pod?

``count`` apps whose simulated drivers run until deleted are started and left to run (driver pod
Running); then every driver pod is deleted at once. Measured per app: the delete's answer -> the
replacement pod (incarnation 2) first seen by a watch, as p50/p95/p99, and the operator's CPU.

    .venv/bin/python bench/recovery.py --count 100
"""

from __future__ import annotations

import argparse
import asyncio
import time
from functools import partial
from pathlib import Path
from typing import Any

from harness import (
    ROOT,
    BenchCluster,
    Operator,
    app_manifest,
    bounded,
    label,
    latency_summary,
    log,
    run_alone,
    stamping,
)

from sparkop.core import kube as k8s
from sparkop.core.jsontypes import JSON
from sparkop.domain import kinds, labels, naming

NAMESPACE = "bench"


async def recover(bench: BenchCluster, operator: Operator, count: int, namespace: str, budget: float) -> dict[str, Any]:
    names = [f"long-{i:04d}" for i in range(count)]
    driver_role = f"{labels.SPARK_ROLE}={labels.ROLE_DRIVER}"

    def running_first(pod: JSON) -> str | None:
        phase = (pod.get("status") or {}).get("phase")
        return label(pod, labels.APP) if label(pod, labels.INCARNATION) == "1" and phase == "Running" else None

    def second(pod: JSON) -> str | None:
        return label(pod, labels.APP) if label(pod, labels.INCARNATION) == "2" else None

    async with (
        bench.client() as kube,
        stamping(kube, k8s.PODS, running_first, selector=driver_role, namespace=namespace) as running,
        stamping(kube, k8s.PODS, second, selector=driver_role, namespace=namespace) as replaced,
    ):
        log(f"recovery: {count} apps whose drivers run until deleted")
        await bounded([partial(kube.create, app_manifest(n, namespace, run_seconds=None)) for n in names], 50)
        async with asyncio.timeout(budget):
            await running.wait_for(count)
        await asyncio.to_thread(operator.wait_idle, quiet_seconds=3.0, timeout=budget)
        before = operator.stats()
        deleted: dict[str, float] = {}

        async def delete(app: str) -> None:
            await kube.delete(k8s.PODS, namespace, naming.driver_pod_name(app))
            deleted[app] = time.monotonic()

        log(f"recovery: deleting {count} driver pods at once")
        start = time.monotonic()
        await bounded([partial(delete, n) for n in names], 50)
        async with asyncio.timeout(budget):
            await replaced.wait_for(count)
        all_replaced = time.monotonic() - start
        await asyncio.to_thread(operator.wait_idle, quiet_seconds=3.0, timeout=budget)
        after = operator.stats()
        await bounded(
            [partial(kube.delete, kinds.SPARK_APPLICATIONS, namespace, n) for n in names], 50
        )  # they would run forever
    return {
        "driver_pods_deleted": count,
        "delete_to_replacement_pod": latency_summary(replaced.seen[n] - deleted[n] for n in names),
        "all_replaced_seconds": round(all_replaced, 2),
        "operator_cpu_seconds": round(after.cpu_seconds - before.cpu_seconds, 2),
    }


def measure_recovery(
    bench: BenchCluster, operator: Operator, count: int, namespace: str = NAMESPACE, budget: float = 600
) -> dict[str, Any]:
    return asyncio.run(recover(bench, operator, count, namespace, budget))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "recovery.json")
    args = parser.parse_args()
    return run_alone("recovery", NAMESPACE, measure_recovery, args.count, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
