"""A kubeflow spark-operator values file applied to sparkop's chart (issue 44): where sparkop has the
same thing the value means what it means in kubeflow's chart, and what sparkop cannot do is refused
with every such value named at once. kubeflow's own default values.yaml comes from its Go module (the
version devcluster/gobuild/spark-operator pins), unchanged; the custom one is a platform team's
(tests/support/kubeflow/custom-values.yaml)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.build import helm_binary, read_versions
from devcluster.scheduler_crds import module_dir
from tests.support.chart_render import container, deployment, of_kind, resources_of
from tests.support.helm import CHART

KUBEFLOW_MODULE = "github.com/kubeflow/spark-operator/v2"
CUSTOM = Path(__file__).resolve().parents[1] / "support" / "kubeflow" / "custom-values.yaml"
# What a user moving over sets beside their kubeflow file: where sparkop's image is.
SPARKOP_IMAGE = ["--set", "image.registry=registry.corp.example", "--set", "image.repository=platform/sparkop"]


@pytest.fixture(scope="module")
def kubeflow_defaults() -> Path:
    chart = module_dir(KUBEFLOW_MODULE, read_versions()["KUBEFLOW_SPARK_OPERATOR_VERSION"])
    return chart / "charts" / "spark-operator-chart" / "values.yaml"


def template(*args: str, release: str = "spark-operator") -> subprocess.CompletedProcess[str]:
    helm = helm_binary(lambda line: None)
    argv = [str(helm), "template", release, str(CHART), "-n", "spark-operator", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def refused_values(stderr: str) -> list[str]:
    """The values named by the chart's refusal, one per `- ` line."""
    assert "sparkop's chart cannot do what these values ask" in stderr, stderr
    return [
        re.split(r"[ :]", line.removeprefix("- "), maxsplit=1)[0]
        for line in stderr.splitlines()
        if line.startswith("- ")
    ]


def objects(stdout: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(stdout) if doc]


def test_kubeflows_default_values_are_refused_only_for_kubeflows_image(kubeflow_defaults: Path) -> None:
    result = template("-f", str(kubeflow_defaults))
    assert result.returncode != 0
    assert refused_values(result.stderr) == ["image.repository"]
    assert "kubeflow/spark-operator/controller is kubeflow's operator image" in result.stderr


def test_kubeflows_default_values_with_sparkops_image_mean_what_they_mean_in_kubeflows_chart(
    kubeflow_defaults: Path,
) -> None:
    result = template("-f", str(kubeflow_defaults), *SPARKOP_IMAGE)
    assert result.returncode == 0, result.stderr
    rendered = objects(result.stdout)
    args = container(rendered)["args"]
    # kubeflow's defaults: the default namespace watched, 10 workers, console logs at info, leader
    # election with its timings, metrics on 8080 at /metrics labelled by app_type.
    assert [a for a in args if a.startswith("--namespace")] == ["--namespace=default"]
    assert {
        "--workers=10",
        "--log-format=text",
        "--log-level=info",
        "--leader-elect",
        "--leader-elect-lease-duration=15s",
        "--leader-elect-renew-deadline=10s",
        "--leader-elect-retry-period=2s",
        "--metrics-port=8080",
        "--metrics-endpoint=/metrics",
        "--metrics-labels=app_type",
    } <= set(args)
    assert container(rendered)["image"] == "registry.corp.example/platform/sparkop:0.1.0"
    # kubeflow's tmp volume (1Gi) replaces sparkop's own: one volume, one mount.
    pod = deployment(rendered)["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp"] and pod["volumes"][0]["emptyDir"]["sizeLimit"] == "1Gi"
    # Helm merges a map value into the default: kubeflow's fsGroup joins sparkop's non-root user.
    assert pod["securityContext"]["fsGroup"] == 185 and pod["securityContext"]["runAsUser"] == 65532
    # kubeflow's client rate (20/s, bursts of 30, in its chart since v2.5.2) is accepted and unused:
    # sparkop's own bound stays its default.
    assert {"--kube-api-qps=1000", "--kube-api-burst=2000"} <= set(args)
    # No webhook object: nothing in sparkop needs one (NOTES.txt says so; tests/integration/test_helm_releases.py).
    kinds = {o["kind"] for o in rendered}
    assert not kinds & {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Job", "Certificate"}
    (account,) = [o for o in of_kind(rendered, "ServiceAccount") if o["metadata"]["namespace"] == "default"]
    assert account["metadata"]["name"] == "spark-operator-sparkop-spark"


def test_a_custom_kubeflow_file_is_refused_naming_each_value_sparkop_cannot_do() -> None:
    result = template("-f", str(CUSTOM))
    assert result.returncode != 0
    assert refused_values(result.stderr) == [
        "image.repository",
        "controller.featureGates",
        "controller.pprof.enable",
        "controller.uiIngress.tls",
        "controller.uiIngress.annotations",
        "controller.batchScheduler.default",
    ]
    assert "controller.featureGates PartialRestart" in result.stderr


def test_other_latency_buckets_than_kubeflows_defaults_are_refused() -> None:
    result = template(
        *SPARKOP_IMAGE,
        "--set-string",
        "prometheus.metrics.jobSubmitLatencyBuckets=1\\,10\\,100",
        "--set-string",
        "prometheus.metrics.jobStartLatencyBuckets=60\\,600",
    )
    assert result.returncode != 0
    assert refused_values(result.stderr) == [
        "prometheus.metrics.jobStartLatencyBuckets",
        "prometheus.metrics.jobSubmitLatencyBuckets",
    ]


def test_the_custom_file_without_what_sparkop_cannot_do_works_as_it_does_in_kubeflows_chart(tmp_path: Path) -> None:
    values = yaml.safe_load(CUSTOM.read_text())
    controller = values["controller"]
    values["image"].update(repository="platform/sparkop", tag="0.1.0")
    controller["featureGates"] = [{"name": "PartialRestart", "enabled": False}]
    controller["pprof"]["enable"] = False
    del controller["uiIngress"]["tls"], controller["uiIngress"]["annotations"], controller["batchScheduler"]["default"]
    adapted = tmp_path / "values.yaml"
    adapted.write_text(yaml.safe_dump(values))
    result = template("-f", str(adapted))
    assert result.returncode == 0, result.stderr
    rendered = objects(result.stdout)
    deploy = deployment(rendered)
    args = container(rendered)["args"]
    assert deploy["spec"]["replicas"] == 2
    assert [a for a in args if a.startswith("--namespace")] == ["--namespace=spark-jobs", "--namespace=etl"]
    assert {
        "--workers=20",
        "--log-level=debug",
        "--log-format=json",
        "--leader-elect-lease-duration=30s",
        "--ingress-url-format={{$appName}}.spark.corp.example",
        "--ingress-class-name=nginx",
        "--metrics-prefix=corp_",
        "--metrics-labels=app_type,team",
    } <= set(args)
    main = container(rendered)
    assert main["image"] == "registry.corp.example/platform/sparkop:0.1.0"
    assert main["env"][0] == {"name": "HTTPS_PROXY", "value": "http://proxy.corp.example:3128"}
    pod = deploy["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "corp-registry"}]
    assert pod["priorityClassName"] == "platform-critical"
    assert (
        pod["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
    )
    # The drivers' ServiceAccount under the name the team's apps already use, in each job namespace.
    accounts = [o for o in of_kind(rendered, "ServiceAccount") if o["metadata"]["name"] == "spark-operator-spark"]
    assert sorted(a["metadata"]["namespace"] for a in accounts) == ["etl", "spark-jobs"]
    # batchScheduler.enable grants the PodGroups, as in kubeflow's chart.
    roles = [r for r in of_kind(rendered, "Role") if r["metadata"]["name"] == "spark-operator-sparkop"]
    assert all("podgroups" in resources_of(r) for r in roles) and len(roles) == 2
    assert {"PodMonitor", "PodDisruptionBudget"} <= {o["kind"] for o in rendered}
    assert all(o["metadata"]["labels"]["cost-center"] == "data-platform" for o in rendered)
