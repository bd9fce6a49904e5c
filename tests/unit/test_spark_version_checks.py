"""spec.sparkVersion as users meet it: refused by the CRD rule when it is not a version, warned of by
`sparkop validate` when its line is unknown or is not the image's, shown by `kubectl get` and
`sparkop status` (no cluster; tests/integration/test_api_cluster.py holds the API server to the same
verdicts)."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from sparkop.api import crds, rules, spark_lines, validate
from sparkop.api.spark_lines import SparkLine, image_release, spec_warnings
from sparkop.status_cli import render_status

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

SPARK_VERSION_RULE = next(r for r in rules.RULES if r.name == "spark-version-is-a-version")


def app(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkApplication",
        "metadata": {"name": "pi", "namespace": "jobs", "creationTimestamp": "2026-01-02T03:04:00Z"},
        "spec": {"type": "Scala", "mainClass": "org.apache.spark.examples.SparkPi", **spec},
    }


# --- the CRD rule and its Python twin -----------------------------------------------------------------


def test_the_rule_refuses_with_the_policy_message_at_spark_version() -> None:
    assert SPARK_VERSION_RULE.message == spark_lines.VERSION_MESSAGE
    assert spark_lines.KNOWN_LINES_TEXT in SPARK_VERSION_RULE.message
    assert SPARK_VERSION_RULE.field_path == ".sparkVersion"
    assert set(SPARK_VERSION_RULE.kinds) == {rules.APP, rules.DRIVER}


def test_the_cel_literal_is_the_version_pattern_with_its_backslashes_escaped() -> None:
    literal = re.search(r"matches\('(.*)'\)$", SPARK_VERSION_RULE.cel)
    assert literal, SPARK_VERSION_RULE.cel
    # CEL reads \\ as one backslash (and refuses \. as an unknown escape): what it reads is the pattern.
    assert literal.group(1).replace("\\\\", "\\") == spark_lines.VERSION_PATTERN
    assert re.search(r"(?<!\\)\\\.", SPARK_VERSION_RULE.cel) is None


@pytest.mark.parametrize("kind", ["SparkApplication", "SparkDriver", "ScheduledSparkApplication"])
def test_every_kind_carries_the_rule_in_its_crd(kind: str) -> None:
    schema = crds.crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    if kind == "ScheduledSparkApplication":
        spec = spec["properties"]["template"]
    assert {"rule": SPARK_VERSION_RULE.cel, "message": spark_lines.VERSION_MESSAGE, "fieldPath": ".sparkVersion"} in (
        spec["x-kubernetes-validations"]
    )
    description = spec["properties"]["sparkVersion"]["description"]
    assert spark_lines.KNOWN_LINES_TEXT in description and "nearest known line" in description


@given(st.text(alphabet="0123456789.-+abv \n", max_size=12))
def test_the_predicate_refuses_exactly_what_the_renderer_cannot_read(version: str) -> None:
    accepted = SPARK_VERSION_RULE.predicate({"sparkVersion": version})
    try:
        spark_lines.release(version)
        readable = bool(version)  # the renderer reads "" as unset; the API server refuses it
    except ValueError:
        readable = False
    assert accepted == readable


def test_no_spark_version_passes_the_rule() -> None:
    assert SPARK_VERSION_RULE.predicate({})


# --- image tags ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("apache/spark:4.3.0", ("4.3.0", SparkLine(4, 3))),
        ("apache/spark:4.3.0-python3", ("4.3.0", SparkLine(4, 3))),
        ("docker.io/apache/spark:3.5.3-scala2.12-java17-python3-ubuntu", ("3.5.3", SparkLine(3, 5))),
        ("spark:4.0.0-preview2-java21", ("4.0.0", SparkLine(4, 0))),
        ("gcr.io/spark-operator/spark:v3.1.1", ("3.1.1", SparkLine(3, 1))),
        ("localhost:5000/apache/spark:4.1.4@sha256:" + "0" * 64, ("4.1.4", SparkLine(4, 1))),
        ("apache/spark", None),  # no tag
        ("apache/spark:latest", None),
        ("apache/spark:4.3", None),  # two numbers say too little (a tag scheme of one's own)
        ("localhost:5000/spark", None),  # a registry's port is no tag
        ("myorg/etl:2.1.0", None),  # one's own image versions itself, not its Spark
        ("apache/spark@sha256:" + "0" * 64, None),
    ],
)
def test_an_image_names_its_spark_only_in_a_spark_repository_with_a_release_tag(
    image: str, expected: tuple[str, SparkLine] | None
) -> None:
    assert image_release(image) == expected


# --- the warnings ------------------------------------------------------------------------------------


def test_a_version_whose_line_is_not_the_images_is_warned_of_with_the_fix() -> None:
    assert spec_warnings({"sparkVersion": "3.5.9", "image": "apache/spark:4.3.0"}) == [
        "spec.sparkVersion 3.5.9 (line 3.5) but spec.image apache/spark:4.3.0 is Spark 4.3: the driver is "
        "rendered as spark-submit 3.5 would create it; set sparkVersion to the image's version"
    ]


def test_no_version_is_line_3_5_and_a_4_x_image_is_warned_of() -> None:
    (warning,) = spec_warnings({"image": "apache/spark:4.3.0-python3"})
    assert warning.startswith("spec.sparkVersion is not set (line 3.5) but spec.image apache/spark:4.3.0-python3 is ")
    assert "rendered as spark-submit 3.5" in warning
    assert spec_warnings({"image": "apache/spark:3.5.9"}) == []


@pytest.mark.parametrize(
    "spec",
    [
        {"sparkVersion": "4.3.0", "image": "apache/spark:4.3.0"},
        {"sparkVersion": "4.3.1", "image": "apache/spark:4.3.0-python3"},  # same line
        {"sparkVersion": "4.0.5", "image": "myorg/etl:4.3.0"},  # says nothing of its Spark
        {"sparkVersion": "4.0.5", "image": "apache/spark:latest"},
        {"sparkVersion": "4.0.5"},
        {"sparkVersion": "latest", "image": "apache/spark:4.3.0"},  # an error, not a warning
        {"sparkVersion": 4.3, "image": "apache/spark:4.3.0"},  # a schema error
        {"image": ["apache/spark:4.3.0"]},
        {"driver": "not a mapping"},
    ],
)
def test_nothing_is_said_when_version_and_image_agree_or_cannot_be_compared(spec: dict[str, Any]) -> None:
    assert spec_warnings(spec) == []


@pytest.mark.parametrize(("version", "rendered"), [("3.4.1", "3.5"), ("5.0.0", "4.3")])
def test_an_unknown_line_is_warned_of_once_when_the_image_agrees(version: str, rendered: str) -> None:
    warnings = spec_warnings({"sparkVersion": version, "image": f"apache/spark:{version}"})
    assert warnings == [spark_lines.release(version).warning]
    assert f"rendered as spark-submit {rendered}" in warnings[0]


def test_an_unknown_line_and_another_image_line_are_both_said() -> None:
    warnings = spec_warnings({"sparkVersion": "5.0.0", "image": "apache/spark:4.3.0"})
    assert len(warnings) == 2
    assert "Spark 5.0 is not a line sparkop knows" in warnings[0]
    assert warnings[1].startswith("spec.sparkVersion 5.0.0 (line 5.0) but spec.image apache/spark:4.3.0 is Spark 4.3")
    assert "rendered as spark-submit 4.3 would create it" in warnings[1]


def test_the_driver_and_executor_images_are_compared_too_and_named() -> None:
    spec = {
        "sparkVersion": "4.3.0",
        "driver": {"image": "apache/spark:4.3.0"},
        "executor": {"image": "apache/spark:4.0.5"},
    }
    (warning,) = spec_warnings(spec)
    assert "but spec.executor.image apache/spark:4.0.5 is Spark 4.0" in warning


def test_a_template_is_warned_of_under_its_own_path() -> None:
    warnings = spec_warnings({"sparkVersion": "5.0.0", "image": "apache/spark:4.3.0"}, "spec.template")
    assert all(w.startswith("spec.template.sparkVersion 5.0.0") for w in warnings), warnings
    assert "spec.template.image apache/spark:4.3.0" in warnings[1]


# --- sparkop validate ------------------------------------------------------------------------------------


def test_validate_warns_on_stderr_and_still_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "apps.yaml"
    mismatched = app(sparkVersion="3.5.9", image="apache/spark:4.3.0")
    unknown = app(sparkVersion="5.0.0", image="apache/spark:5.0.0")
    unknown["metadata"]["name"] = "next"
    path.write_text(yaml.safe_dump_all([mismatched, unknown]))
    assert validate.main([str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"{path}: 2 documents valid, 2 warnings"]
    assert err.splitlines() == [
        f"{path}: SparkApplication/pi: warning: spec.sparkVersion 3.5.9 (line 3.5) but spec.image "
        "apache/spark:4.3.0 is Spark 4.3: the driver is rendered as spark-submit 3.5 would create it; set "
        "sparkVersion to the image's version",
        f"{path}#2: SparkApplication/next: warning: {spark_lines.release('5.0.0').warning}",
    ]


def test_validate_refuses_what_is_not_a_version_naming_the_known_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(app(sparkVersion="latest", image="apache/spark:4.3.0")))
    assert validate.main([str(path)]) == 1
    out, err = capsys.readouterr()
    assert f"{path}: SparkApplication/pi: spec.sparkVersion: {spark_lines.VERSION_MESSAGE}" in out
    assert err == ""


def test_a_scheduled_apps_template_is_warned_of() -> None:
    doc = yaml.safe_load((ROOT / "examples" / "scheduled-spark-pi.yaml").read_text())
    assert validate.document_warnings(doc) == []
    doc["spec"]["template"]["sparkVersion"] = "3.5.9"
    (warning,) = validate.document_warnings(doc, "s.yaml")
    assert str(warning).startswith("s.yaml: ScheduledSparkApplication/spark-pi-scheduled: warning: ")
    assert "spec.template.sparkVersion 3.5.9 (line 3.5) but spec.template.image docker.io/apache/spark:4.0.4" in str(
        warning
    )


def test_only_sparkop_documents_are_warned_of() -> None:
    doc = app(sparkVersion="3.5.9", image="apache/spark:4.3.0")
    assert validate.document_warnings(doc)
    # kubeflow's own apiVersion is one sparkop serves (--kubeflow-api): its documents are warned alike.
    assert validate.document_warnings({**copy.deepcopy(doc), "apiVersion": "sparkoperator.k8s.io/v1beta2"})
    for wrong in ({"apiVersion": "sparkoperator.k8s.io/v1beta1"}, {"kind": "ConfigMap"}, {"spec": None}):
        assert validate.document_warnings({**copy.deepcopy(doc), **wrong}) == []
    assert validate.document_warnings(["not", "a", "mapping"]) == []


def test_a_long_image_is_cut_in_the_warning() -> None:
    image = "apache/spark:4.3.0-" + "x" * 4000
    (warning,) = validate.document_warnings(app(sparkVersion="3.5.9", image=image))
    assert len(str(warning)) < validate.WARNING_CHARS + 200


@pytest.mark.parametrize("path", sorted(ROOT.glob("examples/**/*.yaml")), ids=lambda p: p.name)
def test_the_examples_raise_no_warning(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        assert validate.document_warnings(doc) == []


def test_the_examples_cover_the_oldest_and_the_newest_line() -> None:
    lines = {
        spark_lines.release(doc["spec"].get("sparkVersion")).line
        for path in ROOT.glob("examples/*.yaml")
        for doc in yaml.safe_load_all(path.read_text())
        if doc["kind"] == "SparkApplication"
    }
    assert {spark_lines.DEFAULT_LINE, spark_lines.NEWEST_LINE} <= lines


# --- kubectl get ------------------------------------------------------------------------------------


def printer_columns(kind: str) -> dict[str, dict[str, Any]]:
    columns = crds.crd(kind)["spec"]["versions"][0]["additionalPrinterColumns"]
    return {c["name"]: c for c in columns}


def test_kubectl_get_shows_the_apps_spark_and_wide_shows_the_drivers() -> None:
    app_column = printer_columns("SparkApplication")["Spark"]
    assert app_column["jsonPath"] == ".spec.sparkVersion" and "priority" not in app_column
    driver_column = printer_columns("SparkDriver")["Spark"]
    assert driver_column["jsonPath"] == ".spec.sparkVersion" and driver_column["priority"] == 1


def test_the_readme_shows_the_columns_kubectl_prints() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"\$ kubectl get spark\n(.*?)```", readme, flags=re.S)
    assert block, "README has no `kubectl get spark` example"
    headers = [line.split() for line in block.group(1).splitlines() if line.startswith("NAME")]

    def default_columns(kind: str) -> list[str]:
        columns = crds.crd(kind)["spec"]["versions"][0]["additionalPrinterColumns"]
        return ["NAME", *(c["name"].upper() for c in columns if not c.get("priority"))]

    assert headers == [default_columns("SparkApplication"), default_columns("SparkDriver")]


# --- sparkop status ------------------------------------------------------------------------------------


def status_lines(**spec: Any) -> list[str]:
    return render_status(app(**spec), [], NOW).splitlines()


def test_status_shows_the_version_and_the_line_it_is_rendered_as() -> None:
    lines = status_lines(sparkVersion="4.3.0", image="apache/spark:4.3.0")
    assert lines[1] == (
        "  Scala app, spark 4.3.0 (rendered as 4.3), image apache/spark:4.3.0, restart policy Never, age 5s"
    )
    assert not any("Warning" in line for line in lines)


def test_status_of_an_unknown_line_carries_the_warning() -> None:
    lines = status_lines(sparkVersion="5.0.0", image="apache/spark:5.0.0")
    assert "spark 5.0.0 (rendered as 4.3)" in lines[1]
    assert lines[2] == f"  Warning: {spark_lines.release('5.0.0').warning}"


def test_status_without_a_version_says_so_and_warns_of_a_4_x_image() -> None:
    lines = status_lines(image="apache/spark:4.3.0")
    assert "spark not set (rendered as 3.5)" in lines[1]
    assert lines[2].startswith("  Warning: spec.sparkVersion is not set (line 3.5) but spec.image apache/spark:4.3.0")


def test_status_of_a_version_from_before_the_rule_says_it_cannot_be_rendered() -> None:
    assert "spark 'latest' (not a Spark version: no driver can be rendered)" in status_lines(sparkVersion="latest")[1]
