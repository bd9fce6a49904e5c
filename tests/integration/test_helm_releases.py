"""Two releases of the chart in one namespace, beside a ServiceAccount `spark` that was there before,
on real nodes (the operators run as pods, real Spark as their apps):

* both `helm install`s succeed: every name derives from the release (the drivers' ServiceAccount
  `<fullname>-spark`, the Lease `<fullname>-leader`), and the existing `spark` account is left as it was;
* the second release is installed from kubeflow's own default values.yaml (its Go module's, unchanged),
  with only sparkop's image and its job namespace set: it runs, and its NOTES say that nothing needs
  kubeflow's webhook;
* `helm uninstall` of the first, while a real SparkPi of each release runs: the other release's app runs
  on to COMPLETED under its operator; the first's driver goes on to its end with its ServiceAccount,
  Role and RoleBinding, which the uninstall kept; installing the first again adopts them and records
  the outcome;
* `helm install` with a misspelt value is refused by values.schema.json, naming it, and installs nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devcluster import images
from devcluster.build import read_versions
from devcluster.scheduler_crds import module_dir
from devcluster.testing import ClusterHandle, temporary_namespace, unique_name, wait_for
from tests.support.helm import CHART, Release, install, wait_ready
from tests.support.spark_e2e import OLDEST_VERSION, spark_pi

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

KUBEFLOW_MODULE = "github.com/kubeflow/spark-operator/v2"
# A SparkPi long enough to be running while a release is uninstalled (on two busy cores: a minute).
SLICES = 400
SMALL = {"coreRequest": "250m"}
FINISHED_S = 420.0
KEPT_KINDS = ("serviceaccount", "role", "rolebinding")


@pytest.fixture
def operator_image(real_cluster: ClusterHandle) -> images.BuiltImage:
    built = images.ensure_operator_image(lambda line: None)
    assert real_cluster.cluster is not None
    real_cluster.cluster.import_images([built])
    return built


@pytest.fixture
def namespaces(real_cluster: ClusterHandle) -> Iterator[tuple[str, str, str]]:
    """The releases' namespace and one job namespace for each release."""
    with (
        temporary_namespace(real_cluster, "releases") as releases,
        temporary_namespace(real_cluster, "jobs-a") as jobs_a,
        temporary_namespace(real_cluster, "jobs-b") as jobs_b,
    ):
        yield releases, jobs_a, jobs_b


def pi(name: str, account: str) -> dict[str, Any]:
    return spark_pi(
        name,
        OLDEST_VERSION,
        slices=SLICES,
        driver={**SMALL, "serviceAccount": account},
        executor={"instances": 1, **SMALL},
    )


def state(cluster: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    return dict(cluster.kubectl_json("get", "sparkapplication", name, "-n", namespace).get("status") or {})


def app_state(cluster: ClusterHandle, namespace: str, name: str) -> str:
    return str((state(cluster, namespace, name).get("applicationState") or {}).get("state", ""))


def wait_state(cluster: ClusterHandle, namespace: str, name: str, wanted: set[str], timeout: float) -> str:
    return wait_for(
        lambda: s if (s := app_state(cluster, namespace, name)) in wanted else None,
        timeout=timeout,
        interval=2.0,
        message=f"{namespace}/{name} in {sorted(wanted)}",
    )


def kept(cluster: ClusterHandle, namespace: str, release: str) -> list[str]:
    selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component=spark"
    listed = cluster.kubectl_json("get", ",".join(KEPT_KINDS), "-n", namespace, "-l", selector)["items"]
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in listed)


def test_two_releases_in_one_namespace_beside_a_spark_account_and_one_uninstalled_under_running_apps(
    real_cluster: ClusterHandle, namespaces: tuple[str, str, str], operator_image: images.BuiltImage
) -> None:
    cluster = real_cluster
    releases, jobs_a, jobs_b = namespaces
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    # The account Spark's own documentation tells people to create, there before either release.
    cluster.kubectl("create", "serviceaccount", "spark", "-n", jobs_a)
    spark_before = cluster.kubectl_json("get", "serviceaccount", "spark", "-n", jobs_a)["metadata"]
    image = {"registry": "", "repository": images.OPERATOR_REPO, "tag": operator_image.key, "pullPolicy": "Never"}
    first = Release(cluster, unique_name("team-a"), releases)
    second = Release(cluster, unique_name("team-b"), releases)
    kubeflow_values = (
        module_dir(KUBEFLOW_MODULE, read_versions()["KUBEFLOW_SPARK_OPERATOR_VERSION"])
        / "charts"
        / "spark-operator-chart"
        / "values.yaml"
    )

    # A misspelt value: refused by the schema, naming it; nothing installed.
    misspelt = install(first, {"image": image, "controller": {"replica": 2}}, check=False)
    assert misspelt.returncode != 0
    assert "at '/controller': additional properties 'replica' not allowed" in misspelt.stderr, misspelt.stderr
    assert first.helm_run("list", "-q").stdout.strip() == ""
    try:
        install(first, {"image": image, "spark": {"jobNamespaces": [jobs_a]}, "controller": {"logEncoder": "console"}})
        installed = install(second, {"image": image, "spark": {"jobNamespaces": [jobs_b]}}, "-f", str(kubeflow_values))
        notes = installed.stdout
        assert "WARNING: these kubeflow values are accepted and have no effect in sparkop:" in notes, notes
        assert "webhook.*: nothing in sparkop needs a webhook" in notes, notes
        first_name, second_name = f"{first.name}-sparkop", f"{second.name}-sparkop"
        assert f'Spark drivers run as ServiceAccount "{second_name}-spark" in {jobs_b}' in notes, notes
        wait_ready(first, first_name)
        wait_ready(second, second_name)

        # Nothing shared, nothing taken over: the existing `spark` account is as it was.
        spark_after = cluster.kubectl_json("get", "serviceaccount", "spark", "-n", jobs_a)["metadata"]
        assert spark_after == spark_before
        leases = {o["metadata"]["name"] for o in cluster.kubectl_json("get", "leases", "-n", releases)["items"]}
        assert {f"{first_name}-leader", f"{second_name}-leader"} <= leases
        assert kept(cluster, jobs_a, first.name) == [
            f"Role/{first_name}-spark", f"RoleBinding/{first_name}-spark", f"ServiceAccount/{first_name}-spark",
        ]  # fmt: skip

        cluster.apply(pi("pi-a", f"{first_name}-spark"), namespace=jobs_a)
        cluster.apply(pi("pi-b", f"{second_name}-spark"), namespace=jobs_b)
        for namespace, name in ((jobs_a, "pi-a"), (jobs_b, "pi-b")):
            wait_state(cluster, namespace, name, {"RUNNING"}, FINISHED_S)

        first.helm_run("uninstall", first.name, "--wait", "--timeout", "2m")
        assert not [p for p in first.pods() if not p["metadata"].get("deletionTimestamp")]
        # Kept, for the driver still running as that account.
        assert len(kept(cluster, jobs_a, first.name)) == 3

        # The other release's app runs on to its end under its own operator, in its one run.
        assert wait_state(cluster, jobs_b, "pi-b", {"COMPLETED", "FAILED"}, FINISHED_S) == "COMPLETED"
        assert state(cluster, jobs_b, "pi-b")["executionAttempts"] == 1
        wait_ready(second, second_name)
        # The uninstalled release's driver ends on its own, its executors created and deleted with
        # the kept account's rights.
        driver_pod = wait_for(
            lambda: (state(cluster, jobs_a, "pi-a").get("driverInfo") or {}).get("podName"), message="pi-a's driver"
        )
        phase = wait_for(
            lambda: (
                p
                if (p := cluster.kubectl_json("get", "pod", driver_pod, "-n", jobs_a)["status"].get("phase"))
                in ("Succeeded", "Failed")
                else None
            ),
            timeout=FINISHED_S,
            interval=2.0,
            message=f"{driver_pod} to end",
        )
        assert phase == "Succeeded", cluster.kubectl("logs", driver_pod, "-n", jobs_a, "--tail=40", check=False).stdout

        # The same release again: it adopts what was kept and records the run's outcome.
        install(first, {"image": image, "spark": {"jobNamespaces": [jobs_a]}})
        wait_ready(first, first_name)
        assert wait_state(cluster, jobs_a, "pi-a", {"COMPLETED", "FAILED"}, FINISHED_S) == "COMPLETED"
        assert state(cluster, jobs_a, "pi-a")["executionAttempts"] == 1
    finally:
        for release in (first, second):
            release.helm_run("uninstall", release.name, "--wait", "--timeout", "2m", check=False)
