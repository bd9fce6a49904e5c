"""Each Spark line rendered as its own spark-submit would: the line table, and what it changes in
the driver pod, its Service and the executors' NetworkPolicy (tests/conformance holds the same facts
against real spark-submit of every line)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkop.api import spark_lines
from sparkop.api.spark_lines import DEFAULT_LINE, KNOWN_LINES, NEWEST_LINE, Feature, SparkLine, release
from sparkop.domain import labels, naming
from sparkop.driver_controller.build import FEATURE_STEP_PACKAGE
from sparkop.driver_controller.render import InvalidSpec, parse, render

UID = "0b4c3d9e-0000-4000-8000-000000000002"


def driver(version: str | None, *, kind: str = "Scala", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"type": kind, "image": f"apache/spark:{version or '3.5.9'}"}
    if version is not None:
        base["sparkVersion"] = version
    if kind == "Python":
        base["mainApplicationFile"] = "local:///opt/spark/examples/src/main/python/pi.py"
    else:
        base["mainClass"] = "org.apache.spark.examples.SparkPi"
        base["mainApplicationFile"] = "local:///opt/spark/examples/jars/spark-examples.jar"
    base.update(spec)
    return {
        "apiVersion": labels.API_VERSION,
        "kind": "SparkDriver",
        "metadata": {"name": "pi-1", "namespace": "ns", "uid": UID},
        "spec": base,
    }


def spark_container(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "spark-kubernetes-driver")


def port_names(ports: list[dict[str, Any]]) -> list[str]:
    return [p["name"] for p in ports]


# --- the table -----------------------------------------------------------------------------------


def test_known_lines_are_in_order_and_every_fact_starts_and_ends_on_a_known_line() -> None:
    assert list(KNOWN_LINES) == sorted(KNOWN_LINES)
    assert (SparkLine(3, 5), SparkLine(4, 3)) == (DEFAULT_LINE, NEWEST_LINE)
    for feature in Feature:
        _, since, until = feature.value
        assert since in KNOWN_LINES
        assert until is None or until in KNOWN_LINES


@pytest.mark.parametrize(
    ("feature", "lines"),
    [
        (Feature.CONNECT_PORT, ("4.1", "4.2", "4.3")),
        (Feature.CONNECT_APP_PROTOCOL, ("4.2", "4.3")),
        (Feature.EXECUTOR_NETWORK_POLICY, ("4.2", "4.3")),
        (Feature.ALLOW_PRIVILEGE_ESCALATION, ("4.3",)),
        (Feature.PUBLISH_NOT_READY_ADDRESSES, ("4.3",)),
        (Feature.PYSPARK_PYTHON_VERSION, ("3.5", "4.0")),
        (Feature.PROXY_USER_IS_SPARK_USER, ("4.3",)),
        (Feature.EXCLUDED_FEATURE_STEPS, ("4.1", "4.2", "4.3")),
    ],
)
def test_each_fact_holds_for_exactly_the_lines_spark_submit_does_it_on(
    feature: Feature, lines: tuple[str, ...]
) -> None:
    assert tuple(str(line) for line in KNOWN_LINES if line.has(feature)) == lines


@pytest.mark.parametrize(
    ("version", "line", "warned"),
    [
        ("3.5.9", "3.5", False),
        ("4.0.5", "4.0", False),
        ("4.3.0", "4.3", False),
        ("4.3", "4.3", False),
        ("4.0.0-preview2", "4.0", False),
        ("3.4.1", "3.5", True),  # older than every known line: the oldest
        ("2.4.8", "3.5", True),
        ("4.4.0", "4.3", True),  # between or after: the newest known line before it
        ("5.0.0", "4.3", True),
        (None, "3.5", False),
        ("", "3.5", False),
    ],
)
def test_a_version_is_rendered_as_its_line_or_the_nearest_known_one_with_a_warning(
    version: str | None, line: str, warned: bool
) -> None:
    got = release(version)
    assert str(got.line) == line
    assert (got.warning is not None) == warned
    if got.warning:
        assert version in got.warning and spark_lines.KNOWN_LINES_TEXT in got.warning


@pytest.mark.parametrize(
    "version", ["x", "latest", "4", "4.3.0 ", "v4.3.0", "4.3.x", "4..3", "4.3.0+build", "4.3.0-", "4.3.0-rc1."]
)
def test_what_is_not_a_version_is_refused_naming_the_field_and_the_known_lines(version: str) -> None:
    with pytest.raises(ValueError, match=r"spec\.sparkVersion") as caught:
        release(version)
    assert spark_lines.KNOWN_LINES_TEXT in str(caught.value)
    with pytest.raises(InvalidSpec, match="sparkVersion"):
        render(parse(driver(version)), 1)


@given(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99))
def test_every_release_number_has_a_known_line_not_after_it_unless_older_than_all(
    major: int, minor: int, patch: int
) -> None:
    got = release(f"{major}.{minor}.{patch}")
    assert got.line in KNOWN_LINES
    asked = SparkLine(major, minor)
    assert got.line <= asked or (got.line == DEFAULT_LINE and asked < DEFAULT_LINE)
    assert (got.warning is None) == (asked in KNOWN_LINES)


# --- what each line renders ------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["3.5.9", "4.0.5"])
def test_up_to_4_0_the_driver_has_three_ports_and_no_policy_or_security_defaults(version: str) -> None:
    objects = render(parse(driver(version)), 1)
    container = spark_container(objects.pod)
    assert port_names(container["ports"]) == ["driver-rpc-port", "blockmanager", "spark-ui"]
    assert "securityContext" not in container
    assert port_names(objects.service["spec"]["ports"]) == ["driver-rpc-port", "blockmanager", "spark-ui"]
    assert "publishNotReadyAddresses" not in objects.service["spec"]
    assert objects.network_policy is None


def test_4_1_adds_the_connect_port_to_the_driver_and_its_service_without_an_app_protocol() -> None:
    objects = render(parse(driver("4.1.4")), 1)
    assert {"name": "spark-connect", "containerPort": 15002, "protocol": "TCP"} in spark_container(objects.pod)["ports"]
    service_ports = objects.service["spec"]["ports"]
    assert service_ports[-1] == {"name": "spark-connect", "port": 15002, "targetPort": 15002}
    assert objects.network_policy is None


def test_4_2_names_the_connect_protocol_and_isolates_the_executors() -> None:
    objects = render(parse(driver("4.2.1")), 1)
    assert objects.service["spec"]["ports"][-1]["appProtocol"] == "grpc"
    policy = objects.network_policy
    assert policy is not None
    app_id = objects.properties["spark.app.id"]
    assert policy["metadata"]["name"] == naming.network_policy_name("pi-1", 1) == "pi-1-1-policy"
    assert policy["metadata"]["labels"][labels.SPARK_APP_SELECTOR] == app_id
    assert policy["metadata"]["labels"][labels.DRIVER] == "pi-1"
    assert policy["metadata"]["ownerReferences"][0]["kind"] == "SparkDriver"
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {labels.SPARK_ROLE: labels.ROLE_EXECUTOR, labels.SPARK_APP_SELECTOR: app_id}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {labels.SPARK_APP_SELECTOR: app_id}}}]}],
    }
    # The executors it selects are the ones the driver makes: the executor template carries no other app id.
    assert "securityContext" not in spark_container(objects.pod)


def test_4_3_defaults_the_driver_to_no_privilege_escalation_and_not_ready_addresses_unpublished() -> None:
    objects = render(parse(driver("4.3.0", driver={"securityContext": {"runAsUser": 185}})), 1)
    assert spark_container(objects.pod)["securityContext"] == {"runAsUser": 185, "allowPrivilegeEscalation": False}
    assert objects.service["spec"]["publishNotReadyAddresses"] is False


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"spark.kubernetes.securityContext.allowPrivilegeEscalation": "true"}, True),
        ({"spark.kubernetes.driver.securityContext.allowPrivilegeEscalation": "true"}, True),
        (
            {
                "spark.kubernetes.securityContext.allowPrivilegeEscalation": "true",
                "spark.kubernetes.driver.securityContext.allowPrivilegeEscalation": "false",
            },
            False,
        ),
        ({"spark.kubernetes.executor.securityContext.allowPrivilegeEscalation": "true"}, False),
    ],
)
def test_4_3_allow_privilege_escalation_comes_from_the_driver_setting_then_the_general_one(
    conf: dict[str, str], expected: bool
) -> None:
    objects = render(parse(driver("4.3.0", sparkConf=conf)), 1)
    assert spark_container(objects.pod)["securityContext"]["allowPrivilegeEscalation"] is expected


@pytest.mark.parametrize("allowed", [True, False])
def test_4_3_keeps_an_explicit_allow_privilege_escalation_of_the_spec_for_both_roles(allowed: bool) -> None:
    context = {"securityContext": {"runAsUser": 185, "allowPrivilegeEscalation": allowed}}
    objects = render(parse(driver("4.3.0", driver=context, executor=context)), 1)
    assert spark_container(objects.pod)["securityContext"] == {"runAsUser": 185, "allowPrivilegeEscalation": allowed}
    for role in ("driver", "executor"):
        key = f"spark.kubernetes.{role}.securityContext.allowPrivilegeEscalation"
        assert objects.properties[key] == str(allowed).lower()  # real Spark builds the executors from it


def test_4_3_lets_spark_conf_decide_over_the_spec_security_context() -> None:
    conf = {"spark.kubernetes.securityContext.allowPrivilegeEscalation": "false"}
    context = {"securityContext": {"allowPrivilegeEscalation": True}}
    objects = render(parse(driver("4.3.0", sparkConf=conf, driver=context)), 1)
    assert spark_container(objects.pod)["securityContext"]["allowPrivilegeEscalation"] is False
    assert "spark.kubernetes.driver.securityContext.allowPrivilegeEscalation" not in objects.properties


def test_lines_before_4_3_leave_the_spec_security_context_to_the_template() -> None:
    context = {"securityContext": {"allowPrivilegeEscalation": True}}
    objects = render(parse(driver("4.2.1", driver=context)), 1)
    assert spark_container(objects.pod)["securityContext"] == {"allowPrivilegeEscalation": True}
    assert not any("allowPrivilegeEscalation" in key for key in objects.properties)


def test_the_connect_port_and_publish_not_ready_addresses_follow_spark_conf() -> None:
    conf = {
        "spark.connect.grpc.binding.port": "15010",
        "spark.kubernetes.driver.service.publishNotReadyAddresses": "true",
    }
    objects = render(parse(driver("4.3.0", sparkConf=conf)), 1)
    assert spark_container(objects.pod)["ports"][-1]["containerPort"] == 15010
    assert objects.service["spec"]["ports"][-1] == {
        "name": "spark-connect",
        "port": 15010,
        "targetPort": 15010,
        "appProtocol": "grpc",
    }
    assert objects.service["spec"]["publishNotReadyAddresses"] is True


@pytest.mark.parametrize(("version", "written"), [("3.5.9", True), ("4.0.5", True), ("4.1.4", False), ("4.3.0", False)])
def test_python_version_is_a_property_only_up_to_4_0(version: str, written: bool) -> None:
    objects = render(parse(driver(version, kind="Python", pythonVersion="3")), 1)
    assert ("spark.kubernetes.pyspark.pythonVersion" in objects.properties) is written


def test_excluded_feature_steps_are_skipped_from_4_1_and_ignored_before() -> None:
    steps = f"{FEATURE_STEP_PACKAGE}NetworkPolicyFeatureStep, {FEATURE_STEP_PACKAGE}LocalDirsFeatureStep,com.x.Other"
    conf = {"spark.kubernetes.driver.pod.excludedFeatureSteps": steps}
    newest = render(parse(driver("4.3.0", sparkConf=conf)), 1)
    assert newest.network_policy is None
    assert not any(v["name"].startswith("spark-local-dir-") for v in newest.pod["spec"]["volumes"])
    older = render(parse(driver("4.0.5", sparkConf=conf)), 1)
    assert any(v["name"].startswith("spark-local-dir-") for v in older.pod["spec"]["volumes"])


@pytest.mark.parametrize("step", ["BasicDriverFeatureStep", "DriverServiceFeatureStep", "PodTemplateConfigMapStep"])
def test_a_step_sparkop_cannot_do_without_is_refused_with_the_field_and_the_fix(step: str) -> None:
    conf = {"spark.kubernetes.driver.pod.excludedFeatureSteps": FEATURE_STEP_PACKAGE + step}
    with pytest.raises(InvalidSpec, match=rf"excludedFeatureSteps: .*{step} cannot be excluded .*remove it"):
        render(parse(driver("4.3.0", sparkConf=conf)), 1)


def test_an_unknown_line_is_rendered_as_the_nearest_known_one_and_labelled_with_its_own_version() -> None:
    objects = render(parse(driver("5.0.0")), 1)
    assert objects.network_policy is not None  # as 4.3
    assert objects.pod["metadata"]["labels"][labels.SPARK_VERSION] == "5.0.0"


@pytest.mark.parametrize(("version", "user"), [("4.2.1", "spark"), ("4.3.0", "alice")])
def test_from_4_3_the_driver_runs_as_the_proxy_user(version: str, user: str) -> None:
    objects = render(parse(driver(version, proxyUser="alice")), 1)
    env = {e["name"]: e.get("value") for e in spark_container(objects.pod)["env"]}
    assert env["SPARK_USER"] == user
