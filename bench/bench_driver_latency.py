"""SparkDriver created -> driver pod created, and driver pod deleted -> the next incarnation's pod
created, on a devcluster with the real operator.

    .venv/bin/python bench/bench_driver_latency.py [--count 50] [--concurrency 1] [--replace]

Uses $SPARKOP_KUBECONFIG's cluster if set, else starts a devcluster named bench-<pid>. Starts
``sparkop run --controllers driver`` as a subprocess watching one fresh namespace, creates
SparkDrivers, and measures, with a pod watch, the time from sending each create to the driver
pod's ADDED event (and to the ConfigMaps and Service being there first). With ``--replace`` the
drivers run until deleted, and once all run each driver pod is deleted in turn: the time from sending
the delete to the ADDED event of incarnation 2's pod, which has the same name (kubeflow's naming) and is
created once the first is gone, its outcome and log tail recorded (tests/integration/test_driver_lifecycle.py
checks that this happens; the figure is this benchmark's).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kubernetes_asyncio import client, config, watch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devcluster.testing import session_cluster, wait_for  # noqa: E402
from tests.support.cluster_drivers import driver_manifest  # noqa: E402
from tests.support.operator import OperatorProcess  # noqa: E402


async def run(kubeconfig: str, namespace: str, count: int, concurrency: int, replace: bool) -> list[float]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        seen: dict[str, float] = {}
        ready = asyncio.Event()

        async def watch_pods() -> None:
            w = watch.Watch()
            async with w.stream(core.list_namespaced_pod, namespace, label_selector="spark-role=driver",
                                timeout_seconds=600) as stream:  # fmt: skip
                ready.set()
                async for event in stream:
                    # Each incarnation's pod by its SparkDriver and incarnation (their names may be one).
                    pod_labels = event["object"].metadata.labels or {}
                    pod = f"{pod_labels.get('sparkop.io/driver')}/{pod_labels.get('sparkop.io/incarnation')}"
                    if event["type"] == "ADDED":
                        seen.setdefault(pod, time.perf_counter())

        watcher = asyncio.create_task(watch_pods())
        await ready.wait()
        await asyncio.sleep(0.5)
        sent: dict[str, float] = {}
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            name = f"lat-{i}"
            async with sem:
                sent[f"{name}/1"] = time.perf_counter()
                # The integration tests' SparkPi, done after 2 s in the devcluster's simulator.
                body = (
                    driver_manifest(name, run_seconds=None, outcome=None, instances=1)
                    if replace
                    else driver_manifest(name, run_seconds=2, instances=1)
                )
                await custom.create_namespaced_custom_object("sparkop.io", "v1alpha1", namespace, "sparkdrivers", body)
                while f"{name}/1" not in seen:  # noqa: ASYNC110 - polling a dict the watcher fills
                    await asyncio.sleep(0.002)

        await asyncio.gather(*(one(i) for i in range(count)))
        if not replace:
            watcher.cancel()
            return [seen[k] - t for k, t in sent.items()]
        replaced: dict[str, float] = {}
        for i in range(count):
            second = f"lat-{i}/2"
            selector = f"sparkop.io/driver=lat-{i},sparkop.io/incarnation=1,spark-role=driver"
            while True:
                (first,) = (await core.list_namespaced_pod(namespace, label_selector=selector)).items
                if first.status.phase == "Running":
                    break
                await asyncio.sleep(0.05)
            replaced[second] = time.perf_counter()
            await core.delete_namespaced_pod(first.metadata.name, namespace)
            while second not in seen:  # noqa: ASYNC110 - polling a dict the watcher fills
                await asyncio.sleep(0.002)
        watcher.cancel()
        return [seen[k] - t for k, t in replaced.items()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--replace", action="store_true", help="measure driver pod deleted -> next incarnation's pod")
    args = parser.parse_args()
    with session_cluster() as cluster:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
        # Right after the apply the CRD may not have status.conditions yet, and kubectl wait fails fast on that.
        wait_for(
            lambda: cluster.kubectl("wait", "--for=condition=Established", "crd/sparkdrivers.sparkop.io",
                                    "--timeout=30s", check=False).returncode == 0,
            timeout=60, interval=0.2, message="CRD sparkdrivers.sparkop.io Established",
        )  # fmt: skip
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        cluster.kubectl("create", "namespace", namespace)
        operator = OperatorProcess(cluster.kubeconfig, controllers=["driver"], namespaces=[namespace],
                                   log_dir=Path(tempfile.gettempdir()))  # fmt: skip
        try:
            with operator:
                time.sleep(3)  # operator start-up (the informers' initial listing)
                latencies = asyncio.run(
                    run(str(cluster.kubeconfig), namespace, args.count, args.concurrency, args.replace)
                )
        finally:
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        xs = sorted(latencies)
        what = (
            "driver pod deleted -> next incarnation's pod ADDED"
            if args.replace
            else "SparkDriver create -> driver pod ADDED"
        )
        print(f"{what} ({len(xs)} drivers, concurrency {args.concurrency}): "
              f"median {statistics.median(xs) * 1000:.0f} ms, p90 {xs[int(len(xs) * 0.9)] * 1000:.0f} ms, "
              f"max {xs[-1] * 1000:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
