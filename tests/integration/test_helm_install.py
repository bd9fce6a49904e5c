"""`helm install` of charts/sparkop on real nodes, with the operator image built here: the operator
runs as a pod under the chart's RBAC only and becomes Ready through its /readyz probe, real Spark
3.5.9 SparkPi in a watched namespace runs to COMPLETED, and an app in a namespace the release
does not watch is left alone, with `kubectl auth can-i` showing no cluster-wide right on pods.

Only namespaced installs here: the real-node cluster is shared with the e2e tests, whose own
operators serve their namespaces; a cluster-wide release would reconcile their apps too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devcluster import images
from devcluster.testing import ClusterHandle, temporary_namespace, unique_name, wait_for
from tests.support.helm import CHART, READY_S, Release, install

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

SPARK_VERSION = "3.5.9"
# SparkPi with one executor: two JVMs start and finish, about a minute on two busy cores.
COMPLETED_S = 420.0


def spark_pi(name: str, service_account: str) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "image": f"apache/spark:{SPARK_VERSION}",
            "imagePullPolicy": "Never",
            "sparkVersion": SPARK_VERSION,
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": f"local:///opt/spark/examples/jars/spark-examples_2.12-{SPARK_VERSION}.jar",
            "arguments": ["10"],
            "restartPolicy": {"type": "Never"},
            "driver": {"cores": 1, "coreRequest": "250m", "memory": "512m", "serviceAccount": service_account},
            "executor": {"instances": 1, "cores": 1, "coreRequest": "250m", "memory": "512m"},
        },
    }


@pytest.fixture
def operator_image(real_cluster: ClusterHandle) -> images.BuiltImage:
    """This checkout's operator image on every real node (a no-op when it is there already)."""
    built = images.ensure_operator_image(lambda line: None)
    assert real_cluster.cluster is not None
    real_cluster.cluster.import_images([built])
    return built


@pytest.fixture
def two_namespaces(real_cluster: ClusterHandle) -> Iterator[tuple[str, str]]:
    with temporary_namespace(real_cluster, "watched") as a, temporary_namespace(real_cluster, "other") as b:
        yield a, b


def app_status(cluster: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    return dict(cluster.kubectl_json("get", "sparkapplication", name, "-n", namespace).get("status") or {})


def can_i(cluster: ClusterHandle, subject: str, *args: str) -> str:
    result = cluster.kubectl("auth", "can-i", *args, f"--as={subject}", check=False)
    return result.stdout.strip()


def test_a_namespaced_release_runs_spark_pi_in_its_namespace_and_leaves_others_alone(
    real_cluster: ClusterHandle,
    real_namespace: str,
    two_namespaces: tuple[str, str],
    operator_image: images.BuiltImage,
) -> None:
    watched, other = two_namespaces
    # What docs/operations.md says to run before every install or upgrade.
    real_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    release = Release(real_cluster, unique_name("sparkop"), real_namespace)
    values = {
        # The exact image built above, never pulled: there is no registry.
        "image": {"tag": operator_image.key, "pullPolicy": "Never"},
        "spark": {"jobNamespaces": [watched]},
        "controller": {"logEncoder": "console"},
    }
    install(release, values)
    try:
        fullname = release.name  # the release name contains the chart's
        deployment = f"deployment/{fullname}"
        try:
            wait_for(
                lambda: (
                    real_cluster.kubectl_json("get", deployment, "-n", real_namespace)
                    .get("status", {})
                    .get("readyReplicas")
                    == 1
                ),
                timeout=READY_S,
                interval=1.0,
                message="the operator pod to pass its /readyz probe",
            )
        except AssertionError as err:
            raise AssertionError(f"{err}\n{release.diagnostics()}") from None
        (pod,) = release.pods()
        assert pod["spec"]["serviceAccountName"] == fullname
        assert pod["spec"]["nodeName"].startswith("real-node-")
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0, release.diagnostics()

        # The chart's RBAC, as the API server sees it for the operator's ServiceAccount.
        operator = f"system:serviceaccount:{real_namespace}:{fullname}"
        assert can_i(real_cluster, operator, "list", "pods", "--all-namespaces") == "no"
        assert can_i(real_cluster, operator, "list", "pods", "-n", watched) == "yes"
        assert can_i(real_cluster, operator, "create", "pods", "-n", other) == "no"
        assert can_i(real_cluster, operator, "list", "sparkapplications.sparkop.io", "-n", other) == "no"
        assert can_i(real_cluster, operator, "get", f"namespace/{watched}") == "yes"
        assert can_i(real_cluster, operator, "get", f"namespace/{other}") == "no"
        driver_account = f"system:serviceaccount:{watched}:{fullname}-spark"
        assert can_i(real_cluster, driver_account, "create", "pods", "-n", watched) == "yes"
        assert can_i(real_cluster, driver_account, "create", "pods", "-n", other) == "no"

        real_cluster.apply(spark_pi("pi", f"{fullname}-spark"), namespace=watched)
        real_cluster.apply(spark_pi("pi-elsewhere", "default"), namespace=other)
        try:
            finished = wait_for(
                lambda: (
                    status
                    if (status := app_status(real_cluster, watched, "pi")).get("applicationState", {}).get("state")
                    in ("COMPLETED", "FAILED", "SUBMISSION_FAILED")
                    else None
                ),
                timeout=COMPLETED_S,
                interval=2.0,
                message="SparkPi under the chart's operator to finish",
            )
        except AssertionError as err:
            raise AssertionError(f"{err}\n{release.diagnostics()}") from None
        assert finished["applicationState"]["state"] == "COMPLETED", finished
        log = real_cluster.kubectl("logs", finished["driverInfo"]["podName"], "-n", watched).stdout
        assert "Pi is roughly 3.1" in log, log[-2000:]

        # The app in the namespace the release does not watch: no status, no SparkDriver, no pod.
        assert app_status(real_cluster, other, "pi-elsewhere") == {}
        assert real_cluster.kubectl_json("get", "sparkdrivers", "-n", other)["items"] == []
        assert real_cluster.kubectl_json("get", "pods", "-n", other)["items"] == []
    finally:
        release.helm_run("uninstall", release.name, "--wait", "--timeout", "2m", check=False)
