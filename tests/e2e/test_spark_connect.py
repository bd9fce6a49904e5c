"""Real Spark Connect under sparkop on the real nodes: a SparkConnect becomes Ready, and clients outside
the cluster run a query, one through the stable Service's ClusterIP (kube-proxy serves it on the host
here), one through `sparkop connect --port-forward` (the API server's port-forward); the server pod is
deleted while Ready, a new incarnation becomes Ready behind the same Service, and new client sessions
run the query again, both ways (the forwarder follows the new pod)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.connect_client import EXPECTED, run_query
from tests.support.spark_e2e import CONNECT_VERSIONS, SparkNamespace, release_order, spark_connect, spark_versions

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

# A server JVM, its two executors and the first query's code generation on 2-CPU nodes.
READY_S = 300.0
CI_VERSIONS = (min(CONNECT_VERSIONS, key=release_order), max(CONNECT_VERSIONS, key=release_order))


@contextmanager
def port_forward(spark: SparkNamespace, name: str) -> Iterator[str]:
    """`sparkop connect NAME --port-forward 0`: the sc:// URL it listens on."""
    argv = [sys.executable, "-m", "sparkop", "connect", name, "-n", spark.ns]
    argv += ["--kubeconfig", str(spark.cluster.kubeconfig), "--port-forward", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.match(r"Forwarding (sc://\S+) -> ", line)
        assert found, f"{line!r} {proc.stderr.read() if proc.poll() is not None and proc.stderr else ''}"
        yield found.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0


def wait_ready(spark: SparkNamespace, name: str, **server: Any) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        status = (spark.find("sparkconnect", name) or {}).get("status") or {}
        found = status.get("server") or {}
        return status if status.get("state") == "Ready" and all(found.get(k) == v for k, v in server.items()) else None

    found: dict[str, Any] = spark.wait_pod(ready, READY_S, f"{name} Ready {server}")
    return found


@pytest.mark.parametrize("version", spark_versions(ci=CI_VERSIONS, versions=CONNECT_VERSIONS))
def test_a_client_outside_runs_a_query_through_the_service_and_again_after_the_server_pod_is_lost(
    spark: SparkNamespace, version: str
) -> None:
    applied = time.monotonic()
    spark.apply(spark_connect("sc", version))
    status = wait_ready(spark, "sc")
    ready_s = time.monotonic() - applied
    assert status["endpoint"] == f"sc://sc-server.{spark.ns}.svc:15002"
    cluster_ip = spark.get("service", "sc-server")["spec"]["clusterIP"]
    url = f"sc://{cluster_ip}:15002"
    assert run_query(version, url) == EXPECTED
    with port_forward(spark, "sc") as forwarded:
        assert run_query(version, forwarded) == EXPECTED

        first_pod = status["server"]["podName"]
        deleted = time.monotonic()
        spark.kubectl("delete", "pod", first_pod, "--wait=false")
        again = wait_ready(spark, "sc", incarnation=2)
        back_s = time.monotonic() - deleted
        # The same run's next incarnation (wait_ready's), under the same pod name (issue 44: one name a run).
        assert again["server"]["driver"] == "sc-server-1" and again["server"]["podName"] == first_pod
        assert again["restarts"] == 0 and again["lastRun"] == 1
        assert run_query(version, url) == EXPECTED
        assert run_query(version, forwarded) == EXPECTED
    assert spark.get("service", "sc-server")["spec"]["clusterIP"] == cluster_ip
    print(f"\nSpark {version}: applied -> Ready {ready_s:.1f}s; server pod deleted -> Ready again {back_s:.1f}s")
