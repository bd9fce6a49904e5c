"""`helm install` of the chart on the devcluster's control plane (kwok nodes: nothing of the operator
runs here; tests/integration/test_helm_releases.py runs it on real nodes): two releases in one
namespace and an existing `spark` ServiceAccount do not collide; a misspelt value is refused by the
schema, naming it; kubeflow's own default values.yaml installs (its webhook values accepted, the NOTES
saying they do nothing); `helm uninstall` keeps the drivers' ServiceAccount, Role and RoleBinding and
deletes everything else of the release; installing the release again adopts what was kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.build import read_versions
from devcluster.scheduler_crds import module_dir
from devcluster.testing import ClusterHandle, temporary_namespace, unique_name
from tests.support.helm import Release, install

pytestmark = pytest.mark.cluster

KEPT = ("serviceaccount", "role", "rolebinding")
KUBEFLOW_MODULE = "github.com/kubeflow/spark-operator/v2"


def kubeflow_default_values() -> Path:
    module = module_dir(KUBEFLOW_MODULE, read_versions()["KUBEFLOW_SPARK_OPERATOR_VERSION"])
    return module / "charts" / "spark-operator-chart" / "values.yaml"


@pytest.fixture
def namespaces(cluster: ClusterHandle) -> Iterator[tuple[str, str]]:
    with temporary_namespace(cluster, "releases") as releases, temporary_namespace(cluster, "jobs") as jobs:
        yield releases, jobs


def objects_of(cluster: ClusterHandle, release: str, namespace: str, kinds: str) -> list[str]:
    selector = f"app.kubernetes.io/instance={release}"
    listed = cluster.kubectl_json("get", kinds, "-n", namespace, "-l", selector)["items"]
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in listed)


def test_two_releases_beside_a_spark_account_uninstall_keeps_the_drivers_account(
    cluster: ClusterHandle, namespaces: tuple[str, str]
) -> None:
    releases, jobs = namespaces
    cluster.kubectl("create", "serviceaccount", "spark", "-n", jobs)
    spark_before = cluster.kubectl_json("get", "serviceaccount", "spark", "-n", jobs)["metadata"]
    first, second = Release(cluster, unique_name("a"), releases), Release(cluster, unique_name("b"), releases)
    values = {"spark": {"jobNamespaces": [jobs]}}

    refused = install(first, {**values, "controller": {"replica": 2}}, check=False)
    assert refused.returncode != 0
    assert "at '/controller': additional properties 'replica' not allowed" in refused.stderr, refused.stderr
    assert first.helm_run("list", "-q").stdout == ""
    try:
        notes = install(first, values).stdout
        assert f'Spark drivers run as ServiceAccount "{first.name}-sparkop-spark" in {jobs}' in notes, notes
        # The second from kubeflow's own default values.yaml, with sparkop's image: its webhook values
        # are accepted, and its NOTES say they do nothing.
        image = {"registry": "", "repository": "sparkop.io/sparkop"}
        notes = install(second, {**values, "image": image}, "-f", str(kubeflow_default_values())).stdout
        assert "WARNING: these kubeflow values are accepted and have no effect in sparkop:" in notes, notes
        assert "webhook.*: nothing in sparkop needs a webhook" in notes, notes
        assert sorted(first.helm_run("list", "-q").stdout.split()) == sorted([first.name, second.name])
        assert cluster.kubectl_json("get", "serviceaccount", "spark", "-n", jobs)["metadata"] == spark_before
        for release in (first, second):
            fullname = f"{release.name}-sparkop"
            assert objects_of(cluster, release.name, releases, "deployment,serviceaccount") == [
                f"Deployment/{fullname}", f"ServiceAccount/{fullname}",
            ]  # fmt: skip
            assert objects_of(cluster, release.name, jobs, ",".join(KEPT)) == [
                f"Role/{fullname}", f"Role/{fullname}-spark", f"RoleBinding/{fullname}",
                f"RoleBinding/{fullname}-spark", f"ServiceAccount/{fullname}-spark",
            ]  # fmt: skip

        first.helm_run("uninstall", first.name, "--wait", "--timeout", "2m")
        fullname = f"{first.name}-sparkop"
        assert objects_of(cluster, first.name, releases, "deployment,serviceaccount,role,rolebinding") == []
        assert objects_of(cluster, first.name, jobs, ",".join(KEPT)) == [
            f"Role/{fullname}-spark", f"RoleBinding/{fullname}-spark", f"ServiceAccount/{fullname}-spark",
        ]  # fmt: skip
        assert cluster.kubectl("get", "clusterrole", fullname, check=False).returncode != 0
        # The other release is whole.
        assert len(objects_of(cluster, second.name, jobs, ",".join(KEPT))) == 5

        install(first, values)  # adopts the kept objects
        assert len(objects_of(cluster, first.name, jobs, ",".join(KEPT))) == 5
    finally:
        for release in (first, second):
            release.helm_run("uninstall", release.name, "--wait", "--timeout", "2m", check=False)
