"""`sparkop validate` and `sparkop render` on what users and attackers really hand them (issue 9,
items 4, 7, 8, 9): every bad document is one line naming the file, the document and the field, the
exit status is non-zero, and the good documents of the same file are still checked and rendered."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sparkop import render_cli
from sparkop.api import crds, manifests, rules, validate
from tests.support import testcases

ROOT = Path(__file__).resolve().parents[2]
SPARK_PI: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "spark-pi.yaml").read_text())
MIB = 1 << 20


def app(**spec: Any) -> dict[str, Any]:
    doc = copy.deepcopy(SPARK_PI)
    doc["spec"].update(spec)
    return doc


def named(doc: dict[str, Any], name: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"]["name"] = name
    return doc


def write(tmp_path: Path, content: bytes | str | list[Any], name: str = "in.yaml") -> Path:
    path = tmp_path / name
    if isinstance(content, list):
        content = yaml.safe_dump_all(content, sort_keys=False)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def alias_bomb() -> str:
    """A "billion laughs": 10 bytes of YAML per level, 9 ** 9 strings once expanded."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 10):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def run_validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    status = validate.main([str(path)])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def run_render(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, list[str]]:
    status = render_cli.main(str(path))
    out, err = capsys.readouterr()
    return status, out, err.splitlines()


# --------------------------------------------------------------------------- item 7: hostile input

HOSTILE: dict[str, tuple[bytes | str | list[Any], str]] = {
    # id: (file content, what the one line must name)
    "not-a-mapping": ("- just\n- a list\n", "must be a mapping"),
    "scalar-document": ("42\n", "must be a mapping"),
    "name-254-chars": ([named(SPARK_PI, "a" * 254)], "metadata.name"),
    "spark-conf-value-1mib": ([app(sparkConf={"spark.huge": "x" * MIB})], "spec.sparkConf.spark.huge"),
    "not-utf8": (b"apiVersion: sparkop.io/v1alpha1\nkind: SparkApplication\nmetadata: {name: \xff\xfe}\n", "UTF-8"),
    "alias-bomb": (alias_bomb(), "alias"),
    "self-referencing-alias": ("&loop [*loop]\n", "nests deeper"),
    "deep-nesting": ("a: " + "[" * 2000 + "]" * 2000 + "\n", "YAML"),
    "yaml-syntax": ("apiVersion: [unclosed\n", "not valid YAML"),
    "control-character": ("apiVersion: \x07\n", "not valid YAML"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=str)
def test_hostile_file_is_one_line_per_document_and_non_zero(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    content, names = HOSTILE[case]
    path = write(tmp_path, content)

    status, lines, err = run_validate(path, capsys)
    problems = lines + err.splitlines()
    assert status != 0, problems
    # One line per problem (a 1 MiB value breaks two rules), each naming the document.
    assert 1 <= len(problems) <= 2, problems
    assert all(p.startswith(f"{path}:") and len(p) < 600 for p in problems), problems  # quoted, not echoed
    assert names in problems[0], problems

    status, out, err_lines = run_render(path, capsys)
    assert status == 1 and out == "", out[:200]
    assert len(err_lines) == 1, err_lines
    assert err_lines[0].startswith(f"sparkop render: {path}:") and names in err_lines[0], err_lines
    assert len(err_lines[0]) < 600, len(err_lines[0])


def test_a_1mib_value_is_quoted_with_its_size_not_echoed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [app(sparkConf={"spark.huge": "y" * MIB})])
    status, lines, _ = run_validate(path, capsys)
    assert status == 1
    assert '"' + "y" * (manifests.QUOTE_CHARS - 1) + "…" in lines[0] and f"({MIB} bytes)" in lines[0], lines[0][:300]
    assert "has 1048576 characters, must have at most 65536 characters" in lines[0]


def test_one_bad_document_does_not_stop_the_good_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good_app = named(SPARK_PI, "good-app")
    bad_mode = named(app(mode="client"), "bad-mode")
    good_driver = yaml.safe_load((ROOT / "examples" / "sparkdriver-by-hand.yaml").read_text())
    path = write(tmp_path, [good_app, bad_mode, ["not", "a", "mapping"], good_driver, named(SPARK_PI, "b" * 254)])

    status, lines, _ = run_validate(path, capsys)
    assert status == 1
    assert [line.split(": ")[0] for line in lines] == [f"{path}#2", f"{path}#3", f"{path}#5"], lines
    assert "SparkApplication/bad-mode: spec.mode:" in lines[0]
    assert "metadata.name" in lines[2]

    status, out, err_lines = run_render(path, capsys)
    assert status == 1
    assert [line.split(": ")[1] for line in err_lines] == [f"{path}#2", f"{path}#3", f"{path}#5"], err_lines
    rendered = list(yaml.safe_load_all(out))
    drivers = [o["metadata"]["name"] for o in rendered if o["kind"] == "SparkDriver"]
    assert drivers == ["good-app-1", good_driver["metadata"]["name"]], drivers
    assert sum(1 for o in rendered if o["kind"] == "Pod") == 2


def test_a_yaml_error_keeps_the_documents_before_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, yaml.safe_dump(SPARK_PI) + "---\nspec: [unclosed\n")
    status, out, err_lines = run_render(path, capsys)
    assert status == 1
    assert err_lines == [err_lines[0]] and err_lines[0].startswith(f"sparkop render: {path}#2: not valid YAML")
    assert "SparkDriver" in out


def test_render_reports_every_problem_count_on_its_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = app(mode="client")
    doc["spec"]["driver"]["memory"] = "512Mi"
    path = write(tmp_path, [doc])
    status, _, err_lines = run_render(path, capsys)
    assert status == 1 and len(err_lines) == 1
    assert "spec.driver.memory" in err_lines[0] and f"(and 1 more: run sparkop validate {path})" in err_lines[0]


def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.yaml"
    assert validate.main([str(missing)]) == 2
    assert render_cli.main(str(missing)) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(f"{missing}: cannot read: No such file or directory" in e for e in err), err


@pytest.mark.parametrize("command", ["validate", "render"])
def test_the_real_command_never_shows_a_traceback(command: str, tmp_path: Path) -> None:
    content = b"".join(
        [
            yaml.safe_dump(SPARK_PI).encode(),
            b"---\n- a list\n---\n",
            yaml.safe_dump(named(SPARK_PI, "c" * 254)).encode(),
        ]
    )
    for path in (write(tmp_path, content, "mixed.yaml"), write(tmp_path, b"name: \xff\n", "latin1.yaml")):
        result = subprocess.run(
            [sys.executable, "-m", "sparkop", command, str(path)], capture_output=True, text=True, check=False
        )
        assert result.returncode != 0
        assert "Traceback" not in result.stderr, result.stderr
        problems = [line for line in (result.stdout if command == "validate" else result.stderr).splitlines()]
        assert problems and all(str(path) in line for line in problems), problems


# ------------------------------------------------------------------------------- item 8: mixed files

CONFIG_MAP: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "app-env"},
    "data": {"GREETING": "hello"},
}
SECRET: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "app-token"},
    "stringData": {"TOKEN": "t"},
}
SERVICE_MONITOR: dict[str, Any] = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "ServiceMonitor",
    "metadata": {"name": "spark"},
    "spec": {"endpoints": []},
}


def app_using_config() -> dict[str, Any]:
    """An app that reads the ConfigMap and the Secret of its file (like kubeflow's pod-template sample)."""
    env = [
        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "app-env", "key": "GREETING"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "app-token", "key": "TOKEN"}}},
    ]
    doc = named(SPARK_PI, "uses-config")
    doc["spec"]["driver"]["env"] = env
    doc["spec"]["executor"]["envFrom"] = [{"configMapRef": {"name": "app-env"}}]
    return doc


def test_mixed_file_checks_ours_and_passes_over_other_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [CONFIG_MAP, SECRET, app_using_config(), SERVICE_MONITOR])
    status, lines, err = run_validate(path, capsys)
    assert status == 0, lines + err.splitlines()
    assert lines == [f"{path}: 1 document valid, 3 of other kinds skipped"]
    assert err.splitlines() == [
        f"{path}: skipped ConfigMap/app-env: not a sparkop kind",
        f"{path}#2: skipped Secret/app-token: not a sparkop kind",
        f"{path}#4: skipped ServiceMonitor/spark: not a sparkop kind",
    ]

    status, out, err_lines = run_render(path, capsys)
    assert status == 0, err_lines
    assert err_lines == [f"sparkop render: {line}" for line in err.splitlines()]
    kinds = [o["kind"] for o in yaml.safe_load_all(out)]
    assert kinds.count("SparkDriver") == 1 and kinds.count("Pod") == 1


def test_a_bad_app_in_a_mixed_file_is_still_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [CONFIG_MAP, app(mode="client")])
    status, lines, _ = run_validate(path, capsys)
    assert status == 1 and len(lines) == 1 and lines[0].startswith(f"{path}#2: SparkApplication/spark-pi: spec.mode")


# kubeflow's v1beta2 is no wrong version: sparkop serves it with --kubeflow-api.
WRONG_VERSIONS = [
    "sparkoperator.k8s.io/v1alpha1",
    "sparkoperator.k8s.io/v1beta1",
    "sparkop.io/v1",
    "sparkop.io/v1beta1",
]


@pytest.mark.parametrize("api_version", WRONG_VERSIONS)
def test_wrong_version_of_a_spark_group_says_change_the_api_version(
    api_version: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {**SPARK_PI, "apiVersion": api_version}
    path = write(tmp_path, [CONFIG_MAP, doc])
    status, lines, err = run_validate(path, capsys)
    assert status == 1
    assert len(lines) == 1 and lines[0].startswith(f"{path}#2: SparkApplication/spark-pi: apiVersion:"), lines
    assert "change apiVersion to sparkop.io/v1alpha1" in lines[0]
    assert "skipped ConfigMap/app-env" in err

    status, _, err_lines = run_render(path, capsys)
    assert status == 1
    assert len(err_lines) == 2 and "change apiVersion to sparkop.io/v1alpha1" in err_lines[1], err_lines


def test_documents_without_api_version_or_kind_are_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    no_version = {k: v for k, v in SPARK_PI.items() if k != "apiVersion"}
    no_kind = {k: v for k, v in SPARK_PI.items() if k != "kind"}
    path = write(tmp_path, [no_version, no_kind])
    status, lines, _ = run_validate(path, capsys)
    assert status == 1
    assert "apiVersion: apiVersion is required" in lines[0]
    assert lines[1].startswith(f"{path}#2:") and "kind: unsupported kind null" in lines[1]


def test_skip_note_only_for_other_groups() -> None:
    assert validate.skip_note(CONFIG_MAP) == "skipped ConfigMap/app-env: not a sparkop kind"
    assert validate.skip_note({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role"})
    assert validate.skip_note(SPARK_PI) is None
    assert validate.skip_note({**SPARK_PI, "apiVersion": "sparkoperator.k8s.io/v1beta2"}) is None
    assert validate.skip_note({"kind": "ConfigMap"}) is None  # no apiVersion: an error, not a skip


# ---------------------------------------------------------------------- item 4: batch scheduler fields


@pytest.mark.parametrize("value", ["slurm", "", "kueue", "Volcano"])
def test_an_unknown_batch_scheduler_is_refused_with_the_known_ones(value: str) -> None:
    errors = validate.validate_document(app(batchScheduler=value))
    assert [e.path for e in errors] == ["spec.batchScheduler"], [str(e) for e in errors]
    assert "volcano, yunikorn, kube-scheduler" in errors[0].message


@pytest.mark.parametrize("value", ["volcano", "yunikorn", "kube-scheduler"])
def test_a_known_batch_scheduler_is_accepted(value: str) -> None:
    assert validate.validate_document(app(batchScheduler=value)) == []


def test_batch_scheduler_options_without_a_scheduler_are_refused() -> None:
    errors = validate.validate_document(app(batchSchedulerOptions={"queue": "q"}))
    assert [e.path for e in errors] == ["spec.batchSchedulerOptions"], [str(e) for e in errors]
    assert "set spec.batchScheduler" in errors[0].hint


def test_the_crd_refuses_an_unknown_batch_scheduler_by_the_same_rule() -> None:
    spec = crds.crd("SparkApplication")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules_by_cel = {v["rule"]: v for v in spec["x-kubernetes-validations"]}
    known = "!has(self.batchScheduler) || self.batchScheduler in ['volcano', 'yunikorn', 'kube-scheduler']"
    assert "volcano, yunikorn, kube-scheduler" in rules_by_cel[known]["message"]
    assert "!has(self.batchScheduler)" not in rules_by_cel  # no longer refused outright
    assert "Not supported" not in spec["properties"]["batchScheduler"]["description"]


# ------------------------------------------------------------------- item 9: the properties ConfigMap


def test_twenty_60kb_spark_conf_values_are_refused_before_the_configmap_is() -> None:
    doc = app(sparkConf={f"spark.big.{i}": "x" * 60_000 for i in range(20)})
    size = rules.inlined_properties_size(doc["spec"])
    assert size > 1_200_000
    errors = validate.validate_document(doc)
    assert [e.path for e in errors] == ["spec.sparkConf"], [str(e) for e in errors]
    assert "1 MiB" in errors[0].message and f"(they have {size} characters)" in errors[0].message


def test_the_budget_counts_every_inlined_field_and_stops_at_its_edge() -> None:
    doc = testcases.manifest(next(c for c in testcases.INVALID if c.id == "inlined-properties-over-budget"))
    assert rules.inlined_properties_size(doc["spec"]) > rules.INLINED_PROPERTIES_BUDGET
    assert "sparkConf" not in doc["spec"]  # refused for hadoopConf, javaOptions, envVars, annotations, deps
    assert [e.path for e in validate.validate_document(doc)] == ["spec.sparkConf"]

    budget = rules.INLINED_PROPERTIES_BUDGET
    key = "spark.edge"
    values = {f"{key}.{i}": "é" * 60_000 for i in range(budget // 60_000 - 1)}
    used = rules.inlined_properties_size(app(sparkConf=values)["spec"])
    at_edge = app(sparkConf={**values, key: "v" * (budget - used - len(key))})
    assert rules.inlined_properties_size(at_edge["spec"]) == budget
    assert validate.validate_document(at_edge) == []
    at_edge["spec"]["sparkConf"][key] += "v"
    assert [e.path for e in validate.validate_document(at_edge)] == ["spec.sparkConf"]


def test_the_budget_leaves_room_below_the_api_server_limit() -> None:
    assert rules.INLINED_PROPERTIES_BUDGET + 100_000 <= 1_000_000 < MIB


DUPLICATES = """\
apiVersion: sparkop.io/v1alpha1
kind: SparkApplication
metadata:
  name: pi
spec:
  type: Scala
  image: apache/spark:3.5.9
  sparkConf:
    spark.executor.cores: "1"
    spark.executor.cores: "2"
  image: apache/spark:4.0.5
"""


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (DUPLICATES, "spec.sparkConf.spark.executor.cores: the key 'spark.executor.cores' is given twice"),
        (DUPLICATES.replace('    spark.executor.cores: "2"\n', ""), "spec.image: the key 'image' is given twice"),
        ("a:\n  - b: 1\n    b: 2\n", "a[0].b: the key 'b' is given twice in one mapping (line 2 and line 3)"),
    ],
)
def test_a_key_given_twice_is_refused_as_kubectl_apply_refuses_it(text: str, where: str) -> None:
    [document] = manifests.parse(text.encode(), "app.yaml")
    assert document.body is None and document.problem is not None
    assert document.problem.startswith(where) and document.problem.endswith("kubectl apply refuses it: keep one")


def test_the_same_key_in_different_mappings_and_through_anchors_and_merges_is_fine() -> None:
    text = "a: &base {x: 1, y: 2}\nb:\n  <<: *base\n  x: 3\nc: *base\nd: {x: 1}\n"
    [document] = manifests.parse(text.encode(), "ok.yaml")
    assert document.problem is None
    assert document.body == {"a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 2}, "c": {"x": 1, "y": 2}, "d": {"x": 1}}


def test_validate_names_the_duplicate_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(DUPLICATES)
    assert validate.main([str(path)]) != 0
    out = capsys.readouterr()
    assert "spec.sparkConf.spark.executor.cores: the key 'spark.executor.cores' is given twice" in out.out + out.err
