"""Gateway API routes served by a real implementation, Traefik built from the Go module proxy
(`devcluster up --gateway traefik`), on the real nodes: a running app's live Spark UI through its
HTTPRoute (a path prefix the route strips and the UI writes its links below), and a Spark Connect query
through a SparkConnect's GRPCRoute (gRPC in clear text over the Gateway's HTTP listener)."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest

from devcluster.components import GatewayInfo
from devcluster.testing import ClusterHandle
from tests.support.connect_client import EXPECTED, run_query
from tests.support.spark_e2e import (
    CONNECT_VERSIONS,
    JOBS_DIR,
    STAGES_JOB,
    SparkNamespace,
    jobs_volume,
    python_application,
    release_order,
    spark_connect,
    spark_versions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode, pytest.mark.needs_build("traefik")]

# Spark Connect needs Spark 4: the newest pinned release.
NEWEST = max(CONNECT_VERSIONS, key=release_order)
VERSIONS = spark_versions(ci=(NEWEST,), versions=(NEWEST,))
READY_S = 300.0
LONG = ["40", "2", "2", "0.5"]


def gateway(cluster: ClusterHandle) -> GatewayInfo:
    if cluster.cluster is None:
        pytest.skip("an external cluster: no Gateway to start")
    return cluster.cluster.start_gateway()


def route_to(info: GatewayInfo, **more: Any) -> dict[str, Any]:
    return {"gateway": {"name": info.name, "namespace": info.namespace, "sectionName": info.listener}, **more}


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except OSError:
        return 0, ""


@pytest.mark.parametrize("version", VERSIONS)
def test_the_live_ui_and_a_connect_query_through_gateway_routes(spark: SparkNamespace, version: str) -> None:
    info = gateway(spark.cluster)
    prefix = f"/ui/{spark.ns}/long"
    spark.jobs({"stages.py": STAGES_JOB})
    app = python_application(
        "long",
        version,
        f"local://{JOBS_DIR}/stages.py",
        arguments=LONG,
        sparkUIOptions={"httpRoute": route_to(info, path=prefix)},
        **jobs_volume(),
    )
    spark.apply(app)
    spark.wait_app("long", ["RUNNING"], timeout=READY_S)
    route = spark.get("httproute", "long-ui-route")
    assert route["spec"]["rules"][0]["backendRefs"][0]["name"] == "long-ui-svc"
    status, page = spark.wait_pod(
        lambda: (got := fetch(f"{info.url}{prefix}/jobs/"))[0] == 200 and "Spark Jobs" in got[1] and got,
        timeout=120,
        message="the live UI's jobs page through the HTTPRoute",
    )
    assert f"{prefix}/" in page  # the UI writes its links below the route's prefix (spark.ui.proxyBase)
    print(f"live UI through Traefik: GET {info.url}{prefix}/jobs/ -> {status}, {len(page)} bytes")

    connect = spark_connect("sc", version)
    connect["spec"]["grpcRoute"] = route_to(info)
    spark.apply(connect)
    spark.wait_pod(
        lambda: (spark.get("sparkconnect", "sc").get("status") or {}).get("state") == "Ready",
        timeout=READY_S,
        message="the SparkConnect Ready",
    )
    url = f"sc://{info.address}:{info.port}"
    assert run_query(version, url) == EXPECTED
    print(f"Spark Connect query through Traefik's GRPCRoute at {url}: sum = {EXPECTED}")
