"""api: models, CRD generation and offline validation (no cluster)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.build import kubernetes_releases
from sparkop.api import crds, k8s_openapi, rules, validate
from sparkop.api import models as api
from sparkop.api.connect import SparkConnect
from sparkop.api.history import SparkHistoryServer
from sparkop.api.scheduled import ScheduledSparkApplication
from sparkop.api.types import now
from tests.support import testcases

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


# ---------------------------------------------------------------------------------------------- models


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_round_trip_through_models(path: Path) -> None:
    """Each sparkop document of an example (one with its claim and RBAC holds others too)."""
    models = {
        "SparkApplication": api.SparkApplication,
        "SparkDriver": api.SparkDriver,
        "ScheduledSparkApplication": ScheduledSparkApplication,
        "SparkConnect": SparkConnect,
        "SparkHistoryServer": SparkHistoryServer,
    }
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d.get("apiVersion") == "sparkop.io/v1alpha1"]
    assert docs
    for doc in docs:
        model = models[doc["kind"]]
        obj = model.model_validate(doc)
        again = model.model_validate(json.loads(json.dumps(obj.to_json())))
        assert again == obj
        # What the user wrote survives unchanged (dumps add only defaults).
        schema = crds.crd(doc["kind"])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert validate.apply_defaults(schema, json.loads(json.dumps(doc))) == obj.to_json()


def test_models_reject_unknown_fields() -> None:
    with pytest.raises(ValueError, match="extra"):
        api.RestartPolicy.model_validate({"type": "Never", "retries": 3})


def test_run_spec_copies_only_the_run_spec() -> None:
    app = api.SparkApplication.model_validate(testcases.kubeflow_as_sparkop())
    run = app.spec.run_spec()
    assert type(run) is api.RunSpec
    assert run.mainClass == "org.apache.spark.examples.SparkPi"
    assert run.executor.instances == 2 and run.volumes and run.volumes[0]["name"] == "test-volume"
    driver = api.SparkDriverSpec.model_validate({**run.to_json(), "attempt": 2})
    assert driver.maxDriverPodReplacements == 3 and driver.attempt == 2
    run.driver.cores = 7  # a deep copy
    assert app.spec.driver.cores == 1


def test_status_round_trip_and_time_format() -> None:
    status = api.SparkDriverStatus(
        phase=api.DriverPhase.RUNNING,
        incarnation=2,
        driverPod=api.DriverPodInfo(name="x-2-driver", podIP="10.0.0.1", startTime="2026-01-02T03:04:05Z"),
        executors=api.ExecutorCounts(running=3),
        incarnations=[api.IncarnationRecord(incarnation=1, outcome=api.IncarnationOutcome.LOST, reason="Evicted")],
        conditions=[api.Condition(type="Ready", status="True", lastTransitionTime=now())],
    )
    data = status.to_json()
    assert data["driverPod"]["startTime"] == "2026-01-02T03:04:05Z"
    assert data["driverPod"]["podIP"] == "10.0.0.1"
    assert api.SparkDriverStatus.model_validate(data) == status
    app_status = api.SparkApplicationStatus(
        applicationState=api.ApplicationStateInfo(state=api.ApplicationState.RUNNING),
        lastRun=2,
        attempts=[api.AttemptRecord(run=1, driver="a-1", outcome=api.AttemptOutcome.FAILED)],
    )
    assert api.SparkApplicationStatus.model_validate(app_status.to_json()) == app_status
    assert api.DriverPhase.SUBMISSION_FAILED.terminal and not api.DriverPhase.RUNNING.terminal


def test_status_lists_are_bounded() -> None:
    rec = {"incarnation": 1, "outcome": "Lost"}
    with pytest.raises(ValueError):
        api.SparkDriverStatus.model_validate({"incarnations": [rec] * 11})


# ------------------------------------------------------------------------------------------------ CRDs


def test_crds_are_not_stale() -> None:
    assert crds.stale() == [], "crds/ is stale: run `python -m sparkop.api crds` (sparkop crds) and commit"


def test_k8s_schemas_are_fresh() -> None:
    if not all((source / k8s_openapi.SOURCE_FILES[0]).exists() for source in k8s_openapi.DEFAULT_SOURCES):
        pytest.skip("Kubernetes OpenAPI source not on this machine")
    committed = json.loads(k8s_openapi.OUTPUT.read_text())
    assert committed == json.loads(json.dumps(k8s_openapi.extract())), "run python -m sparkop.api.k8s_openapi --refresh"


def test_k8s_schemas_follow_every_supported_release_the_devcluster_builds() -> None:
    assert tuple(release.kubernetes for release in kubernetes_releases()) == k8s_openapi.K8S_VERSIONS
    committed = json.loads(k8s_openapi.OUTPUT.read_text())
    assert all(version in committed["source"] for version in k8s_openapi.K8S_VERSIONS), committed["source"]


def test_an_embedded_k8s_schema_keeps_only_what_every_release_serves() -> None:
    """A field one release lacks (added later, or an alpha field dropped) is not embedded: an API
    server of that release would drop it from the pod, and an accepted field would be lost."""
    oldest = {
        "type": "object",
        "required": ["name", "workloadRef"],
        "properties": {
            "name": {"type": "string"},
            "workloadRef": {"type": "object"},
            "policy": {"type": "string", "enum": ["Always", "Never", "Legacy"]},
            "items": {"type": "array", "items": {"type": "object", "properties": {"a": {}, "b": {}}}},
        },
    }
    newest = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "schedulingGroup": {"type": "object"},
            "policy": {"type": "string", "enum": ["Always", "Never", "OnDemand"]},
            "items": {"type": "array", "items": {"type": "object", "properties": {"b": {}, "c": {}}}},
        },
    }
    assert k8s_openapi.common(oldest, newest) == {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "policy": {"type": "string", "enum": ["Always", "Never"]},
            "items": {"type": "array", "items": {"type": "object", "properties": {"b": {}}}},
        },
    }
    assert k8s_openapi.common(oldest) == oldest


def _walk(node: Any, path: str = "") -> Any:
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}[{i}]")


@pytest.mark.parametrize("kind", list(crds.KINDS))
def test_crd_is_structural_and_bounded(kind: str) -> None:
    crd = crds.crd(kind)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    size = len(json.dumps(crd, separators=(",", ":")))
    assert size < 512 * 1024, size
    for path, node in _walk(schema):
        assert "$ref" not in node and "$defs" not in node, path
        if "properties" in node and isinstance(node.get("properties"), dict) and "type" in node:
            assert "additionalProperties" not in node, path
        assert "propertyNames" not in node and "const" not in node and "title" not in node, path
    # Every field of ours has a description (embedded Kubernetes objects are described at their root).
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]

    def ours(node: dict[str, Any], path: str) -> None:
        assert node.get("description"), f"{path} has no description"
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            node = node["items"]
        if "x-kubernetes-list-type" in node or path.endswith(("template", "affinity")):
            return
        for name, sub in (node.get("properties") or {}).items():
            if name in k8s_embedded(node):
                assert sub.get("description") or node.get("description"), f"{path}.{name}"
                continue
            ours(sub, f"{path}.{name}")

    ours(spec["spec"], "spec")
    ours(spec["status"], "status")
    names = crd["spec"]["names"]
    assert "spark" in names["categories"]
    short = {
        "SparkApplication": "sparkapp",
        "SparkDriver": "sparkdrv",
        "ScheduledSparkApplication": "scheduledsparkapp",
        "SparkConnect": "sparkconn",  # kubeflow's
        "SparkHistoryServer": "sparkhist",
    }
    assert names["shortNames"] == [short[kind]]
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def k8s_embedded(node: dict[str, Any]) -> set[str]:
    """Properties of ``node`` that are embedded Kubernetes objects (their insides have no descriptions)."""
    out = set()
    for name, sub in (node.get("properties") or {}).items():
        inner = sub.get("items", sub) if sub.get("type") == "array" else sub
        if (
            isinstance(inner, dict)
            and inner.get("properties")
            and not any("description" in v for v in inner["properties"].values())
        ):
            out.add(name)
    return out


def test_restart_policy_explains_itself() -> None:
    schema = crds.crd("SparkApplication")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rp = schema["properties"]["spec"]["properties"]["restartPolicy"]
    assert "maxDriverPodReplacements" in rp["properties"]
    assert rp["properties"]["maxDriverPodReplacements"]["default"] == 3
    assert (
        rp["x-kubernetes-validations"][0]["rule"]
        == next(r for r in rules.RULES if r.name == "retries-need-restart").cel
    )


def test_embedded_kubernetes_types_are_kubernetes_schemas() -> None:
    spec = crds.crd("SparkDriver")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    tol = spec["properties"]["executor"]["properties"]["tolerations"]["items"]
    assert tol["properties"]["operator"]["enum"] == ["", "Equal", "Exists"]
    port = spec["properties"]["driver"]["properties"]["sidecars"]["items"]["properties"]["ports"]
    assert port["x-kubernetes-list-type"] == "map"
    limits = spec["properties"]["driver"]["properties"]["sidecars"]["items"]["properties"]["resources"]
    assert limits["properties"]["limits"]["additionalProperties"]["x-kubernetes-int-or-string"] is True


# -------------------------------------------------------------------------------------------- validate


def test_examples_are_valid() -> None:
    for path in EXAMPLES:
        assert validate.validate_documents(yaml.safe_load_all(path.read_text()), str(path)) == []


@pytest.mark.parametrize("case", testcases.INVALID, ids=lambda c: c.id)
def test_invalid_manifests_are_rejected_offline(case: testcases.Case) -> None:
    errors = validate.validate_document(testcases.manifest(case), case.id)
    assert errors, f"{case.id} was accepted"
    assert any(e.path.startswith(case.expect) for e in errors), [str(e) for e in errors]
    assert all(str(e) for e in errors)


def test_a_history_template_for_placement_only_is_refused_with_the_container_to_add() -> None:
    """What the API server refuses of a SparkHistoryServer's pod template (its PodSpec's containers, each
    named) sparkop validate refuses at the same field, with what to write."""
    by_id = {c.id: c for c in testcases.INVALID}
    (error,) = validate.validate_document(testcases.manifest(by_id["history-template-without-containers"]))
    assert (error.path, error.message) == ("spec.template.spec.containers", "required value")
    assert "containers: [{name: spark-history-server}]" in error.hint
    (error,) = validate.validate_document(testcases.manifest(by_id["history-template-container-unnamed"]))
    assert error.path == "spec.template.spec.containers[0].name" and "spark-history-server" in error.hint
    for case in testcases.HISTORY_TEMPLATES_ACCEPTED:
        assert validate.validate_document(testcases.manifest(case)) == [], case.id


def test_a_missing_field_is_named_itself_with_a_fix() -> None:
    """Each missing field its own error at its own path, as the API server says "<path>: Required value"."""
    doc = testcases.manifest(testcases.Case("two-missing", "spec: {volumes: [{}]}", ""))
    doc["spec"]["driver"]["volumeMounts"] = [{}]
    errors = {e.path: e for e in validate.validate_document(doc)}
    for path in ("spec.volumes[0].name", "spec.driver.volumeMounts[0].name", "spec.driver.volumeMounts[0].mountPath"):
        assert errors[path].message == "required value", errors
    assert errors["spec.driver.volumeMounts[0].mountPath"].hint == "add mountPath"


def test_enough_invalid_cases() -> None:
    assert len(testcases.INVALID) >= 25
    assert len({c.id for c in testcases.INVALID}) == len(testcases.INVALID)


def test_kubeflow_v1beta2_manifest_as_it_is_or_with_only_api_version_changed() -> None:
    raw = yaml.safe_load(testcases.KUBEFLOW_V1BETA2_SPARK_PI)
    assert validate.validate_document(raw) == []  # kubeflow's group, served with --kubeflow-api
    assert api.SparkApplication.model_validate(raw).apiVersion == "sparkoperator.k8s.io/v1beta2"
    doc = testcases.kubeflow_as_sparkop()
    assert validate.validate_document(doc) == []
    app = api.SparkApplication.model_validate(doc)
    # Same meaning: every field the user wrote is kept as written.
    dumped = app.to_json()
    for key, value in doc["spec"].items():
        assert dumped["spec"][key] == value or key == "restartPolicy", key
    assert dumped["spec"]["restartPolicy"] == {**doc["spec"]["restartPolicy"], "maxDriverPodReplacements": 3}


def test_rules_predicates_and_cel_cover_the_same_fields() -> None:
    for rule in rules.RULES:
        fields = [f.strip(".") for f in [rule.field_path or ""] if f]
        for f in fields:
            assert f in rule.cel, (rule.name, f)


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api", *args], input=stdin, capture_output=True, text=True, cwd=ROOT, check=False
    )


def test_validate_cli_on_examples_and_stdin() -> None:
    result = run_cli("validate", *map(str, EXAMPLES))
    assert result.returncode == 0, result.stdout + result.stderr
    bad = yaml.safe_dump_all([testcases.manifest(c) for c in testcases.INVALID[:3]])
    good = (ROOT / "examples" / "spark-pi.yaml").read_text()
    result = run_cli("validate", "-", stdin=good + "\n---\n" + bad)
    assert result.returncode == 1
    assert "<stdin>#2: SparkApplication/case: spec.type:" in result.stdout
    assert "<stdin>#4" in result.stdout and "spec.mode" in result.stdout
    assert run_cli("validate", "/nonexistent.yaml").returncode == 2


def test_validate_main_in_process(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(testcases.manifest(testcases.INVALID[0])))
    assert validate.main([str(path)]) == 1
    assert "spec.type" in capsys.readouterr().out


def test_unsupported_kubeflow_fields_say_what_to_do() -> None:
    doc = testcases.kubeflow_as_sparkop()
    doc["spec"]["failureRetries"] = 3
    errors = validate.validate_document(doc)
    assert len(errors) == 1 and "restartPolicy" in errors[0].hint, [str(e) for e in errors]
