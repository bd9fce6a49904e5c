"""What kubeflow's own e2e specs ask of its group, on the devcluster with the real operator and simulated
drivers (issue 44): the API server takes an app of kubeflow's group without an image and refuses the
sparkConf keys kubeflow's webhook refuses (sparkop's CRD carries them as CEL rules; no webhook), and a
kubeflow-group app's applicationState.errorMessage leads with kubeflow's words, sparkop's detail after."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle
from sparkop.api import rules
from tests.support.cluster_apps import KUBEFLOW_APPS, app_manifest, kubeflow, wait_state
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


@pytest.fixture
def operator(kubeflow_crds: ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    with OperatorProcess(
        kubeflow_crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, extra_args=["--kubeflow-api"]
    ) as proc:
        yield proc


def create(cluster: ClusterHandle, namespace: str, manifest: Obj, *flags: str) -> Any:
    return cluster.kubectl("create", "-n", namespace, *flags, "-f", "-", input=json.dumps(manifest), check=False)


def test_the_api_server_refuses_kubeflows_denied_keys_and_takes_an_app_without_an_image(
    kubeflow_crds: ClusterHandle, namespace: str
) -> None:
    cluster, ns = kubeflow_crds, namespace
    # kubeflow's spec sparkConf-key-authorization: no image anywhere, a key its webhook refuses.
    app = kubeflow(app_manifest("sparkconf-denied-key"))
    del app["spec"]["image"]
    app["spec"]["sparkConf"] = {"spark.kubernetes.authenticate.driver.serviceAccountName": "cluster-admin"}
    refused = create(cluster, ns, app)
    assert refused.returncode != 0
    assert 'sparkConf key "spark.kubernetes.authenticate.driver.serviceAccountName" is not allowed' in refused.stderr
    assert "image" not in refused.stderr  # no image is no refusal in kubeflow's group
    # Every denied key, one refusal each, in one create.
    app["spec"]["sparkConf"] = dict.fromkeys(rules.KUBEFLOW_DENIED_SPARK_CONF, "x")
    everything = create(cluster, ns, app)
    assert all(f'"{key}" is not allowed' in everything.stderr for key in rules.KUBEFLOW_DENIED_SPARK_CONF)
    # A safe key, dry-run on the server, as kubeflow's spec does it.
    app["metadata"]["name"] = "sparkconf-safe-key"
    app["spec"]["sparkConf"] = {"spark.executor.memory": "4g"}
    assert create(cluster, ns, app, "--dry-run=server").returncode == 0

    # sparkop's group still wants an image, from any field spark-submit would take it from.
    ours = app_manifest("no-image")
    del ours["spec"]["image"]
    missing = create(cluster, ns, ours, "--dry-run=server")
    assert missing.returncode != 0 and "an image is required" in missing.stderr
    ours["spec"]["sparkConf"] = {rules.IMAGE_CONF: "apache/spark:3.5.7", "spark.master": "k8s://elsewhere"}
    assert create(cluster, ns, ours, "--dry-run=server").returncode == 0


def test_a_kubeflow_apps_error_message_is_worded_as_kubeflows(
    kubeflow_crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    cluster, ns = kubeflow_crds, namespace
    # kubeflow's spec application-fails: the driver exits 1.
    failing = kubeflow(app_manifest("application-fails", outcome="Failed"))
    # kubeflow's spec fail-submission: the API server refuses the driver pod (its ServiceAccount is missing).
    refused = kubeflow(app_manifest("fail-submission", service_account="non-existent"))
    refused["spec"]["driver"]["podName"] = "fail-submission-driver"
    no_image = kubeflow(app_manifest("no-image"))
    del no_image["spec"]["image"]
    for manifest in (failing, refused, no_image):
        assert create(cluster, ns, manifest).returncode == 0

    failed = wait_state(cluster, ns, "application-fails", "FAILED", resource=KUBEFLOW_APPS)["applicationState"]
    assert failed["errorMessage"].startswith("driver container failed with ExitCode: 1, Reason: "), failed
    assert "; run 1 (application-fails-1-kf) failed" in failed["errorMessage"]

    submission = wait_state(cluster, ns, "fail-submission", "FAILED", resource=KUBEFLOW_APPS)["applicationState"]
    assert submission["errorMessage"].startswith("failed to run spark-submit: run 1 (fail-submission-1-kf)")
    assert 'serviceaccount "non-existent" not found' in submission["errorMessage"]

    invalid = wait_state(cluster, ns, "no-image", "FAILED", resource=KUBEFLOW_APPS)
    assert invalid["applicationState"]["errorMessage"] == rules.missing_image({})
    assert invalid["lastError"]["reason"] == "InvalidSpec"
    assert not cluster.kubectl_json("get", "sparkdrivers", "-n", ns, "-l", "sparkop.io/app=no-image")["items"]
