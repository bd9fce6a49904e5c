"""api on a real API server: the CRDs install, examples apply, and the API server and
`sparkop validate` give the same verdict on every invalid manifest of tests/support/testcases.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devcluster.testing import ClusterHandle, temporary_namespace
from sparkop.api import crds, rules, spark_lines, validate
from sparkop.api import models as api
from sparkop.api.types import now
from tests.support import testcases

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
CRD_NAMES = [f"{info.plural}.sparkop.io" for info in crds.KINDS.values()]


@pytest.fixture(scope="module")
def installed(crds: ClusterHandle) -> ClusterHandle:
    """The CRDs, installed as users will: `kubectl apply --server-side` (they exceed the 256 KiB
    last-applied annotation of client-side apply); see the session fixture `crds`."""
    return crds


@pytest.fixture(scope="module")
def shared_namespace(installed: ClusterHandle) -> Iterator[str]:
    """One namespace for the dry-run checks (nothing is persisted there)."""
    with temporary_namespace(installed, prefix="api") as name:
        yield name


def server_verdict(cluster: ClusterHandle, namespace: str, doc: dict[str, Any]) -> tuple[bool, str]:
    """(accepted, stderr) of a server-side dry-run create with strict field validation."""
    result = cluster.kubectl(
        "create",
        "--dry-run=server",
        "--validate=strict",
        "-n",
        namespace,
        "-f",
        "-",
        "-o",
        "json",
        input=json.dumps(doc),
        check=False,
    )
    return result.returncode == 0, result.stderr


def test_crds_established_with_conditions_clean(installed: ClusterHandle) -> None:
    for name in CRD_NAMES:
        crd = installed.kubectl_json("get", "crd", name)
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True", conditions
        assert conditions.get("NonStructuralSchema", "False") == "False", conditions
        size = len(json.dumps(crd))
        assert size < 1024 * 1024, size


@pytest.mark.parametrize("case", testcases.INVALID, ids=lambda c: c.id)
def test_invalid_manifest_rejected_by_server_and_validate(
    installed: ClusterHandle, shared_namespace: str, case: testcases.Case
) -> None:
    doc = testcases.manifest(case)
    offline = validate.validate_document(doc, case.id)
    accepted, stderr = server_verdict(installed, shared_namespace, doc)
    assert not accepted, f"API server accepted {case.id}"
    assert offline, f"sparkop validate accepted {case.id}; the API server said: {stderr}"
    # Both name the same field.
    assert case.expect in stderr, stderr
    assert any(e.path.startswith(case.expect) for e in offline), [str(e) for e in offline]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_valid_manifest_accepted_by_server_and_validate(
    installed: ClusterHandle, shared_namespace: str, path: Path
) -> None:
    for doc in filter(None, yaml.safe_load_all(path.read_text())):
        # As `sparkop validate` checks a file: what an example needs beside its app (a claim) is
        # passed over offline, and still has to be accepted by the API server.
        assert validate.validate_documents([doc], path.name) == []
        accepted, stderr = server_verdict(installed, shared_namespace, doc)
        assert accepted, stderr


@pytest.mark.parametrize("case", testcases.HISTORY_TEMPLATES_ACCEPTED, ids=lambda c: c.id)
def test_a_history_template_both_accept(installed: ClusterHandle, shared_namespace: str, case: testcases.Case) -> None:
    """The good side of the history server's pod template (the refused side is in testcases.INVALID)."""
    doc = testcases.manifest(case)
    assert validate.validate_document(doc, case.id) == []
    accepted, stderr = server_verdict(installed, shared_namespace, doc)
    assert accepted, stderr


def test_properties_budget_has_the_same_edge_on_the_server(installed: ClusterHandle, shared_namespace: str) -> None:
    """The CEL rule and its Python twin count the same characters (multi-byte ones too): at the budget
    both accept, one character over both refuse."""
    doc = testcases.manifest(testcases.Case("budget-edge", "{}", ""))
    filler = "x" * 59_990 + "é" * 10
    doc["spec"]["sparkConf"] = {f"spark.edge.{i}": filler for i in range(rules.INLINED_PROPERTIES_BUDGET // 60_000 - 1)}
    doc["spec"]["hadoopConf"] = {"edge": ""}
    doc["spec"]["hadoopConf"]["edge"] = "h" * (
        rules.INLINED_PROPERTIES_BUDGET - rules.inlined_properties_size(doc["spec"])
    )
    assert rules.inlined_properties_size(doc["spec"]) == rules.INLINED_PROPERTIES_BUDGET
    assert validate.validate_document(doc) == []
    accepted, stderr = server_verdict(installed, shared_namespace, doc)
    assert accepted, stderr[:2000]

    doc["spec"]["driver"]["javaOptions"] = "é"
    assert [e.path for e in validate.validate_document(doc)] == ["spec.sparkConf"]
    accepted, stderr = server_verdict(installed, shared_namespace, doc)
    assert not accepted and "spec.sparkConf" in stderr and "1 MiB" in stderr, stderr[:2000]


@pytest.mark.parametrize("version", ["3.4.1", "5.0.0", "4.0.0-preview2", "4.3"])
def test_a_version_of_an_unknown_or_any_line_is_accepted_by_server_and_validate(
    installed: ClusterHandle, shared_namespace: str, version: str
) -> None:
    """Only what is not a version is refused (testcases.INVALID); 3.4.1 and 5.0.0 are rendered as the
    nearest known line, and sparkop validate says so in a warning, not an error."""
    override = f"spec: {{sparkVersion: '{version}', image: 'apache/spark:{version}'}}"
    doc = testcases.manifest(testcases.Case("unknown-line", override, ""))
    assert validate.validate_document(doc) == []
    warned = validate.document_warnings(doc)
    assert bool(warned) == (spark_lines.release(version).warning is not None), [str(w) for w in warned]
    accepted, stderr = server_verdict(installed, shared_namespace, doc)
    assert accepted, stderr


def test_a_scheduled_template_sparkversion_is_held_to_the_same_rule(
    installed: ClusterHandle, shared_namespace: str
) -> None:
    doc = yaml.safe_load((ROOT / "examples" / "scheduled-spark-pi.yaml").read_text())
    doc["spec"]["template"]["sparkVersion"] = "latest"
    offline = validate.validate_document(doc)
    assert [e.path for e in offline] == ["spec.template.sparkVersion"], [str(e) for e in offline]
    accepted, stderr = server_verdict(installed, shared_namespace, doc)
    assert not accepted and "spec.template.sparkVersion" in stderr, stderr
    assert spark_lines.KNOWN_LINES_TEXT in stderr, stderr


def test_kubeflow_manifest_accepted_by_server(installed: ClusterHandle, shared_namespace: str) -> None:
    doc = testcases.kubeflow_as_sparkop()
    assert validate.validate_document(doc) == []
    accepted, stderr = server_verdict(installed, shared_namespace, doc)
    assert accepted, stderr


def test_apply_examples_then_get_spark_and_explain(installed: ClusterHandle, namespace: str) -> None:
    installed.kubectl("apply", "--server-side", "-n", namespace, "-f", str(ROOT / "examples"))
    listed = installed.kubectl("get", "spark", "-n", namespace).stdout
    for path in EXAMPLES:
        *_, doc = filter(None, yaml.safe_load_all(path.read_text()))  # the example's own object is its last
        assert doc["metadata"]["name"] in listed, listed
    assert (
        "sparkapplication.sparkop.io/spark-pi"
        in installed.kubectl("get", "spark", "-n", namespace, "-o", "name").stdout
    )
    header = installed.kubectl("get", "sparkapp", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "STATE", "ATTEMPTS", "DRIVER", "INCARNATIONS", "EXECUTORS", "SPARK", "AGE"], header
    # No operator runs here: the status columns are blank, the spec's version is there.
    row = installed.kubectl("get", "sparkapp", "spark-pi-4-3", "-n", namespace, "--no-headers").stdout.split()
    assert "4.3.0" in row, row
    header = installed.kubectl("get", "sparkdrv", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "PHASE", "POD", "EXECUTORS", "ATTEMPT", "INCARNATION", "AGE"], header
    wide = installed.kubectl("get", "sparkdrv", "-n", namespace, "-o", "wide").stdout.splitlines()[0].split()
    assert wide[-2:] == ["APP-ID", "SPARK"], wide
    explained = installed.kubectl("explain", "sparkapplication.spec.restartPolicy").stdout
    assert "maxDriverPodReplacements" in explained and "onFailureRetries" in explained
    assert "OnFailure" in explained
    explained = installed.kubectl("explain", "sparkdriver.spec.maxDriverPodReplacements").stdout
    assert "incarnation" in explained


def test_status_subresource_round_trip(installed: ClusterHandle, namespace: str) -> None:
    doc = yaml.safe_load((ROOT / "examples" / "sparkdriver-by-hand.yaml").read_text())
    doc["metadata"]["name"] = "status-rt"
    installed.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(doc))
    status = api.SparkDriverStatus(
        phase=api.DriverPhase.RUNNING,
        incarnation=1,
        driverPod=api.DriverPodInfo(name="status-rt-1-driver", uid="u", startTime="2026-01-02T03:04:05Z"),
        executors=api.ExecutorCounts(running=2, pending=1),
        conditions=[api.Condition(type="Ready", status="True", reason="Running", lastTransitionTime=now())],
        incarnations=[api.IncarnationRecord(incarnation=1, outcome=api.IncarnationOutcome.LOST, time=now())],
    )
    installed.kubectl(
        "patch",
        "sparkdriver",
        "status-rt",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status.to_json()}),
    )
    got = api.SparkDriver.model_validate(installed.kubectl_json("get", "sparkdriver", "status-rt", "-n", namespace))
    assert got.status == status


# ----------------------------------------------------------------------------------- hypothesis round trip

names = st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True)
memory = st.from_regex(r"[1-9][0-9]{0,3}[mg]", fullmatch=True)
conf_keys = st.from_regex(r"spark\.[a-z]{1,8}\.[a-zA-Z]{1,8}", fullmatch=True).filter(
    lambda k: k not in ("spark.driver.host", "spark.driver.bindAddress")
)


@st.composite
def pod_specs(draw: st.DrawFn, executor: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["cores"] = draw(st.integers(1, 16))
    if draw(st.booleans()):
        out["memory"] = draw(memory)
    if draw(st.booleans()):
        out["coreLimit"] = draw(st.sampled_from(["500m", "1", "1.5", "2000m"]))
    if draw(st.booleans()):
        out["labels"] = draw(st.dictionaries(names, names, max_size=3))
    if draw(st.booleans()):
        out["env"] = [
            {"name": n.upper(), "value": v} for n, v in draw(st.dictionaries(names, names, max_size=3)).items()
        ]
    if draw(st.booleans()):
        out["tolerations"] = [{"key": draw(names), "operator": "Exists", "effect": "NoSchedule"}]
    if executor and draw(st.booleans()):
        out["instances"] = draw(st.integers(0, 50))
    if executor and draw(st.booleans()):
        out["deleteOnTermination"] = draw(st.booleans())
    return out


@st.composite
def app_specs(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["Scala", "Java", "Python", "R"]))
    spec: dict[str, Any] = {"type": kind, "image": "apache/spark:3.5.7"}
    spec["mainApplicationFile"] = draw(st.sampled_from(["local:///opt/app.jar", "s3a://b/app.py"]))
    if kind in ("Scala", "Java"):
        spec["mainClass"] = draw(st.sampled_from(["org.apache.spark.examples.SparkPi", "a.B"]))
    if draw(st.booleans()):
        spec["arguments"] = draw(st.lists(st.text(max_size=20), max_size=4))
    if draw(st.booleans()):
        spec["sparkConf"] = draw(st.dictionaries(conf_keys, st.text(max_size=20), max_size=4))
    spec["driver"] = draw(pod_specs(False))
    spec["executor"] = draw(pod_specs(True))
    if draw(st.booleans()):
        policy = draw(st.sampled_from(["Never", "OnFailure", "Always"]))
        rp: dict[str, Any] = {"type": policy, "maxDriverPodReplacements": draw(st.integers(0, 10))}
        if policy != "Never":
            rp["onFailureRetries"] = draw(st.integers(0, 10))
            rp["onFailureRetryInterval"] = draw(st.integers(1, 600))
        spec["restartPolicy"] = rp
    if draw(st.booleans()):
        lo = draw(st.integers(0, 5))
        spec["dynamicAllocation"] = {"enabled": True, "minExecutors": lo, "maxExecutors": lo + draw(st.integers(0, 5))}
    if draw(st.booleans()):
        spec["deps"] = {"packages": draw(st.lists(st.sampled_from(["g:a:1", "org.x:y:2.0"]), max_size=2))}
    if draw(st.booleans()):
        spec["suspend"] = draw(st.booleans())
    if draw(st.booleans()):
        spec["timeToLiveSeconds"] = draw(st.integers(0, 10**6))
    return spec


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=app_specs(), as_driver=st.booleans())
def test_generated_specs_round_trip_through_the_api_server(
    installed: ClusterHandle, shared_namespace: str, spec: dict[str, Any], as_driver: bool
) -> None:
    if as_driver:
        spec = {k: v for k, v in spec.items() if k not in ("restartPolicy", "suspend", "timeToLiveSeconds")}
        model = api.SparkDriver.model_validate({"metadata": {"generateName": "rt-"}, "spec": spec})
    else:
        model = api.SparkApplication.model_validate({"metadata": {"generateName": "rt-"}, "spec": spec})
    doc = model.to_json()
    assert validate.validate_document(doc) == [], validate.validate_document(doc)
    created = json.loads(
        installed.kubectl("create", "-n", shared_namespace, "-f", "-", "-o", "json", input=json.dumps(doc)).stdout
    )
    got = installed.kubectl_json("get", doc["kind"], created["metadata"]["name"], "-n", shared_namespace)
    installed.kubectl("delete", doc["kind"], created["metadata"]["name"], "-n", shared_namespace, "--wait=false")
    again = type(model).model_validate(got)
    assert again.spec == model.spec
    assert again.to_json()["spec"] == doc["spec"]
