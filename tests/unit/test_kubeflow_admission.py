"""What kubeflow's group takes and refuses that sparkop's does not (issue 44, kubeflow's e2e specs
sparkConf-key-authorization): kubeflow's CRD takes an app without an image, and its webhook refuses the
sparkConf keys the operator sets itself; sparkop's CRD of that group carries the refusal as CEL rules, and
``sparkop validate`` the same predicates. The API server's verdicts are in
tests/integration/test_kubeflow_admission.py."""

from __future__ import annotations

from typing import Any

import pytest

from sparkop.api import rules, validate
from sparkop.apps_controller.observed import SpecErrors
from sparkop.domain import labels

KUBEFLOW = f"{labels.KUBEFLOW_GROUP}/v1beta2"
SPEC: dict[str, Any] = {
    "type": "Scala",
    "mode": "cluster",
    "sparkVersion": "3.5.0",
    "mainClass": "org.apache.spark.examples.SparkPi",
    "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
    "driver": {"cores": 1, "memory": "512m"},
    "executor": {"cores": 1, "memory": "512m", "instances": 1},
}


def app(api_version: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "SparkApplication",
        "metadata": {"name": "pi", "namespace": "default", "uid": "u", "generation": 1},
        "spec": {**SPEC, **spec},
    }


def errors(doc: dict[str, Any]) -> list[str]:
    return [f"{e.path}: {e.message}" for e in validate.validate_document(doc)]


def test_kubeflows_group_takes_an_app_without_an_image_and_warns_that_it_cannot_run() -> None:
    doc = app(KUBEFLOW)
    assert errors(doc) == []
    (warning,) = [w.message for w in validate.document_warnings(doc)]
    assert "no run of it can start" in warning and "spec.image" in warning and rules.IMAGE_CONF in warning


def test_sparkops_group_refuses_an_app_without_an_image() -> None:
    assert any("an image is required" in e for e in errors(app(labels.API_VERSION)))


@pytest.mark.parametrize(
    ("spec", "missing"),
    [
        ({"image": "spark:4"}, None),
        ({"driver": {"image": "d"}, "executor": {"image": "e"}}, None),
        ({"sparkConf": {rules.IMAGE_CONF: "spark:4"}}, None),
        ({"sparkConf": {rules.role_image_conf("driver"): "d", rules.role_image_conf("executor"): "e"}}, None),
        ({"driver": {"image": "d"}, "sparkConf": {rules.role_image_conf("executor"): "e"}}, None),
        ({"driver": {"image": "d"}}, "executor"),
        ({"sparkConf": {rules.role_image_conf("driver"): "d"}}, "executor"),
        ({}, "driver and the executor"),
    ],
)
def test_the_image_is_resolved_per_role_as_spark_submit_does(spec: dict[str, Any], missing: str | None) -> None:
    message = rules.missing_image(spec)
    if missing is None:
        assert message is None
        assert errors(app(labels.API_VERSION, **spec)) == []  # sparkop's CRD takes it likewise
    else:
        assert message is not None and message.startswith(f"no container image for the {missing}:")


def test_the_apps_controller_says_why_an_app_without_an_image_cannot_run() -> None:
    error = SpecErrors()(app(KUBEFLOW))
    assert error is not None and not error.unknown and error.message == rules.missing_image(SPEC)
    assert SpecErrors()(app(KUBEFLOW, image="spark:4")) is None


@pytest.mark.parametrize("key", sorted(rules.KUBEFLOW_DENIED_SPARK_CONF))
def test_kubeflows_group_refuses_the_sparkconf_keys_kubeflows_webhook_refuses(key: str) -> None:
    (error,) = errors(app(KUBEFLOW, image="spark:4", sparkConf={key: "x", "spark.executor.memory": "4g"}))
    assert f'sparkConf key "{key}" is not allowed' in error
    for kind_doc in (
        {"apiVersion": KUBEFLOW, "kind": "ScheduledSparkApplication", "metadata": {"name": "s"},
         "spec": {"schedule": "@hourly", "template": {**SPEC, "image": "i", "sparkConf": {key: "x"}}}},
        {"apiVersion": f"{labels.KUBEFLOW_GROUP}/v1alpha1", "kind": "SparkConnect", "metadata": {"name": "c"},
         "spec": {"sparkVersion": "4.0.1", "image": "i", "server": {}, "executor": {}, "sparkConf": {key: "x"}}},
    ):  # fmt: skip
        assert any("is not allowed" in e for e in errors(kind_doc)), kind_doc["kind"]


def test_sparkops_group_keeps_taking_those_keys() -> None:
    """sparkop's own group replaces the values it sets (driver_controller.submission.OWNED_PROPERTIES)."""
    conf = {"spark.master": "k8s://x", rules.IMAGE_CONF: "spark:4"}
    assert errors(app(labels.API_VERSION, sparkConf=conf)) == []


def test_a_safe_sparkconf_passes_in_kubeflows_group() -> None:
    assert errors(app(KUBEFLOW, sparkConf={"spark.executor.memory": "4g"})) == []
