"""Foreign churn: what other workloads' pods, ConfigMaps and Services cost an idle sparkop.

Someone else creates and then deletes ``count`` pods, ConfigMaps and Services (each kind) in a
namespace the operator watches, while the operator has nothing to do. Their labels are not
sparkop's, so with server-side label selectors on the operator's watches none of it should reach
the operator: its CPU over the churn (until it is idle again) should be about zero, while the API
server's shows the churn was real.

    .venv/bin/python bench/churn.py --count 1000
"""

from __future__ import annotations

import argparse
import asyncio
import time
from functools import partial
from pathlib import Path
from typing import Any

from harness import ROOT, BenchCluster, Operator, bounded, cpu_seconds, log, run_alone

from devcluster import components
from sparkop.core import kube as k8s
from sparkop.core.jsontypes import JSON

NAMESPACE = "bench"
NODE = "kwok-churn"


def foreign(kind: str, name: str, namespace: str) -> JSON:
    meta = {"name": name, "namespace": namespace, "labels": {"app": "someone-else", "tier": "web"}}
    if kind == "Pod":
        container = {"name": "web", "image": "example.com/web:1", "resources": {"requests": {"cpu": "1m"}}}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {"nodeName": NODE, "containers": [container]},
        }
    if kind == "ConfigMap":
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"app.properties": "k=v\n" * 16}}
    spec = {"clusterIP": "None", "selector": {"app": "someone-else"}, "ports": [{"name": "http", "port": 80}]}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


async def churn(bench: BenchCluster, namespace: str, count: int) -> dict[str, float]:
    async with bench.client() as kube:
        if await kube.get(k8s.Resource("", "v1", "nodes", "Node", namespaced=False), None, NODE) is None:
            node = components.fake_node(NODE, "100000", "100Ti", pods=str(count + 100))
            await kube._call("POST", "/api/v1/nodes", body=node)
        objects = [
            foreign(kind, f"web-{kind.lower()}-{i:05d}", namespace)
            for kind in ("Pod", "ConfigMap", "Service")
            for i in range(count)
        ]
        start = time.monotonic()
        await bounded([partial(kube.create, body) for body in objects], 50)
        created = time.monotonic() - start
        await bounded([partial(kube.delete, k8s.resource_of(b), namespace, b["metadata"]["name"]) for b in objects], 50)
        return {"create_seconds": round(created, 1), "create_and_delete_seconds": round(time.monotonic() - start, 1)}


def measure_churn(bench: BenchCluster, operator: Operator, count: int, namespace: str = NAMESPACE) -> dict[str, Any]:
    """Operator CPU while ``count`` foreign pods, ConfigMaps and Services each come and go."""
    operator.wait_idle(timeout=600)
    apiserver = bench.component_pids()["kube-apiserver"]
    before, server_before = operator.stats(), cpu_seconds(apiserver)
    log(f"churn: {count} pods, ConfigMaps and Services each, created and deleted by someone else")
    timing = asyncio.run(churn(bench, namespace, count))
    # Pods are deleted gracefully by KWOK: wait for the operator to be idle after the last of them.
    operator.wait_idle(timeout=600)
    after = operator.stats()
    return {
        "objects_per_kind": count,
        "objects": 3 * count,
        **timing,
        "operator_cpu_seconds": round(after.cpu_seconds - before.cpu_seconds, 2),
        "apiserver_cpu_seconds": round(cpu_seconds(apiserver) - server_before, 2),
        "operator_rss_mib": round(after.rss_mib, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "churn.json")
    args = parser.parse_args()
    return run_alone("churn", NAMESPACE, measure_churn, args.count, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
