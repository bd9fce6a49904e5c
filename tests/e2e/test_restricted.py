"""Real Spark in namespaces that enforce Pod Security's `restricted` profile: a SparkPi whose spec
sets the restricted security contexts for its driver and executors completes; one that sets none
completes under an operator run with --pod-security=restricted (sparkop fills in what the spec left
out); and without either its driver pod is refused by admission, which fails the app at once with
the API server's reason in its status, never a retry loop."""

from __future__ import annotations

import pytest

from tests.support.spark_e2e import OLDEST_VERSION, SparkNamespace, spark_pi, spark_versions

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.cluster,
    pytest.mark.realnode,
    pytest.mark.namespace_labels(
        {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
    ),
]

SPARK_PI_S = 240.0
POD_CONTEXT = {"runAsNonRoot": True, "runAsUser": 185, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
RESTRICTED_ROLE = {"podSecurityContext": POD_CONTEXT, "securityContext": CONTAINER_CONTEXT}


def assert_pi(spark: SparkNamespace, name: str) -> None:
    app = spark.wait_app(name, ["COMPLETED", "FAILED"], timeout=SPARK_PI_S)
    assert app["status"]["applicationState"]["state"] == "COMPLETED", app["status"]
    assert app["status"]["executionAttempts"] == 1
    assert "Pi is roughly 3.1" in spark.driver_log(name)
    executors = spark.pods("spark-role=executor")
    for pod in [*spark.driver_pods(name), *executors]:
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True, pod["metadata"]["name"]


@pytest.mark.parametrize("version", spark_versions(ci=(OLDEST_VERSION,)))
def test_a_spark_pi_with_the_restricted_contexts_written_in_its_spec_completes(
    spark: SparkNamespace, version: str
) -> None:
    spark.apply(spark_pi("pi-written", version, driver=dict(RESTRICTED_ROLE), executor=dict(RESTRICTED_ROLE)))
    assert_pi(spark, "pi-written")


@pytest.mark.operator_args("--pod-security=restricted")
@pytest.mark.parametrize("version", spark_versions(ci=(OLDEST_VERSION,)))
def test_a_spark_pi_without_contexts_completes_under_the_restricted_default(
    spark: SparkNamespace, version: str
) -> None:
    spark.apply(spark_pi("pi-filled", version))
    assert_pi(spark, "pi-filled")


@pytest.mark.parametrize("version", spark_versions(ci=(OLDEST_VERSION,)))
def test_without_either_the_app_fails_at_once_with_the_admission_reason(spark: SparkNamespace, version: str) -> None:
    spark.apply(spark_pi("pi-refused", version))
    app = spark.wait_app("pi-refused", ["FAILED", "SUBMISSION_FAILED"], timeout=60)
    status = app["status"]
    message = status["applicationState"].get("errorMessage") or ""
    assert "violates PodSecurity" in message and "restricted" in message, status
    assert status["executionAttempts"] == 0
    assert spark.pods("spark-role=driver") == []
