"""Fuzzing `sparkop validate` and `sparkop render` (issue 9, "Must show"): arbitrary bytes,
arbitrary YAML and mutated valid manifests never end in a traceback; every bad document is reported
on one line that names it, by both commands alike; bad input exits non-zero, valid input 0.

Both commands' main functions run in-process on a temporary file; one run of each real command
checks what a user sees (no "Traceback" on stderr)."""

from __future__ import annotations

import contextlib
import copy
import io
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkop import render_cli
from sparkop.api import validate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_FILES = sorted(ROOT.glob("examples/*.yaml"))
# The examples' documents that run Spark (each renders a SparkDriver); not a claim, RBAC or history server beside them.
EXAMPLES: list[dict[str, Any]] = [
    d
    for p in EXAMPLE_FILES
    for d in yaml.safe_load_all(p.read_text())
    if d and d.get("apiVersion") == "sparkop.io/v1alpha1" and d.get("kind") != "SparkHistoryServer"
]
EXAMPLE_TEXTS = [p.read_bytes() for p in EXAMPLE_FILES]

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
SOURCE = re.compile(r"^(?P<source>.+?(#\d+)?): ")


@dataclass(frozen=True)
class Outcome:
    status: int
    lines: list[str]  # problems and notes, one per line
    stdout: str


def _run(main: Any, *args: Any) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(*args)  # an uncaught exception fails the test: that is a traceback
    return Outcome(status, err.getvalue().splitlines(), out.getvalue())


@contextlib.contextmanager
def manifest_file(content: bytes) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_bytes(content)
        yield str(path)


def sources_named(lines: list[str], path: str) -> set[str]:
    """The documents (``path``, ``path#2``, ...) that lines name."""
    out = set()
    for line in lines:
        match = SOURCE.match(line)
        assert match and match["source"].split("#")[0] == path, f"a line that names no document: {line[:300]!r}"
        out.add(match["source"])
    return out


def check_both_commands(content: bytes) -> tuple[Outcome, Outcome, set[str]]:
    """Run both commands on ``content`` and check what holds for any input; return their outcomes
    and the documents found bad."""
    with manifest_file(content) as path:
        checked = _run(validate.main, [path])
        rendered = _run(render_cli.main, path)

    summary_line = re.compile(rf"{re.escape(path)}: \d+ documents? valid.*")
    summary = [line for line in checked.stdout.splitlines() if summary_line.fullmatch(line)]
    problems = [line for line in checked.stdout.splitlines() if line not in summary]
    notes = [line for line in checked.lines if ": skipped " in line]
    # Warnings (stderr) name their document too, but leave it valid: only validate prints them.
    warnings = [line for line in checked.lines if ": warning: " in line and line not in notes]
    assert [line for line in checked.lines if line not in notes + warnings] == [] or checked.status == 2, checked.lines
    unreadable = [line for line in checked.lines if line not in notes + warnings]
    bad_in_validate = sources_named(problems + unreadable, path)
    sources_named(notes + warnings, path)
    for line in problems + checked.lines + rendered.lines:
        assert len(line) < 1500, f"an over-long line ({len(line)} characters): {line[:300]!r}"
        assert "this is a bug" not in line, line
    # validate: 0 exactly when no document is bad, and then one summary line.
    assert (checked.status == 0) == (not bad_in_validate), (checked.status, problems, checked.lines)
    assert checked.status in (0, 1, 2)
    if checked.status == 0:
        assert len(summary) == 1, checked.stdout[:500]

    # render: one line per bad document, among them every one validate found bad (render also finds
    # specs that the API server accepts and Spark would refuse, e.g. a volumeMount of no volume);
    # the same notes; 0 exactly when nothing is bad.
    render_problems = [line.removeprefix("sparkop render: ") for line in rendered.lines]
    assert all(line.startswith("sparkop render: ") for line in rendered.lines), rendered.lines
    render_notes = [line for line in render_problems if ": skipped " in line]
    render_bad = [line for line in render_problems if line not in render_notes]
    assert render_notes == notes
    assert len(render_bad) == len(sources_named(render_bad, path)), render_bad
    assert sources_named(render_bad, path) >= bad_in_validate, (render_bad, problems, checked.lines)
    assert rendered.status == (1 if render_bad else 0)
    if rendered.stdout:
        assert all(isinstance(o, dict) and o.get("kind") for o in yaml.safe_load_all(rendered.stdout))
    return checked, rendered, {source.removeprefix(path) for source in bad_in_validate}


# ----------------------------------------------------------------------------------------- strategies

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["", "512m", "512Mi", "cluster", "client", "Never", "OnFailure", "1.5g", "-1", "x" * 300]),
)
huge_strings = st.builds(lambda char, size: char * size, st.characters(), st.sampled_from([4097, 65537, 70_000]))
values = st.recursive(
    st.one_of(scalars, huge_strings),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
api_versions = st.sampled_from(
    ["sparkop.io/v1alpha1", "sparkop.io/v1", "sparkoperator.k8s.io/v1beta2", "v1", "apps/v1", "x.example.com/v1", "", 7]
)
kinds = st.sampled_from(["SparkApplication", "SparkDriver", "ConfigMap", "Secret", "Widget", "", None])


@st.composite
def shaped_documents(draw: st.DrawFn) -> Any:
    """Arbitrary content in the shape of a Kubernetes object, so that it gets past apiVersion and kind."""
    doc: dict[str, Any] = {"apiVersion": draw(api_versions), "kind": draw(kinds)}
    doc["metadata"] = draw(st.one_of(values, st.fixed_dictionaries({"name": st.text(max_size=300)})))
    doc["spec"] = draw(values)
    return doc


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


@st.composite
def mutated_manifests(draw: st.DrawFn) -> dict[str, Any]:
    """An example manifest with 1-3 fields dropped, replaced by random values (huge strings, wrong
    types) or added."""
    doc = copy.deepcopy(draw(st.sampled_from(EXAMPLES)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(doc))))
        parent = _parent(doc, path)
        action = draw(st.sampled_from(["drop", "replace", "replace", "add"]))
        if action == "drop":
            del parent[path[-1]]
        elif action == "replace":
            parent[path[-1]] = draw(values)
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(values)
    return doc


def dump_all(docs: list[Any]) -> bytes:
    return yaml.safe_dump_all(docs, allow_unicode=True, sort_keys=False).encode()


# -------------------------------------------------------------------------------------------- the fuzz


@FUZZ
@given(content=st.binary(max_size=600))
def test_arbitrary_bytes(content: bytes) -> None:
    check_both_commands(content)


@FUZZ
@given(text=st.sampled_from(EXAMPLE_TEXTS), at=st.integers(0, 5000), noise=st.binary(min_size=1, max_size=8))
def test_example_files_with_random_bytes_spliced_in(text: bytes, at: int, noise: bytes) -> None:
    at %= len(text)
    check_both_commands(text[:at] + noise + text[at:])


@FUZZ
@given(docs=st.lists(st.one_of(values, shaped_documents()), min_size=1, max_size=3))
def test_arbitrary_yaml(docs: list[Any]) -> None:
    check_both_commands(dump_all(docs))


@FUZZ
@given(docs=st.lists(mutated_manifests(), min_size=1, max_size=2), keep=st.sampled_from(EXAMPLES))
def test_mutated_manifests_next_to_a_valid_one(docs: list[dict[str, Any]], keep: dict[str, Any]) -> None:
    _, rendered, bad = check_both_commands(dump_all([keep, *docs]))
    # The untouched first document is never blamed, and is always rendered.
    assert "" not in bad
    assert "SparkDriver" in rendered.stdout


def test_valid_examples_exit_zero() -> None:
    for text in EXAMPLE_TEXTS:
        checked, rendered, bad = check_both_commands(text)
        assert not bad and checked.status == 0 and rendered.status == 0 and rendered.stdout


def test_the_real_commands_exit_non_zero_without_a_traceback() -> None:
    bad = copy.deepcopy(EXAMPLES[0])
    bad["spec"]["sparkConf"] = {"spark.huge": "x" * (1 << 20)}
    content = dump_all([EXAMPLES[0], ["not", "a", "mapping"], bad]) + b"---\n&a [*a]\n"
    with manifest_file(content) as path:
        for command in ("validate", "render"):
            result = subprocess.run(
                [sys.executable, "-m", "sparkop", command, path], capture_output=True, text=True, check=False
            )
            assert result.returncode != 0, command
            assert "Traceback" not in result.stderr, result.stderr[-2000:]
            lines = (result.stdout if command == "validate" else result.stderr).splitlines()
            assert sources_named([line.removeprefix("sparkop render: ") for line in lines], path) == {
                f"{path}#2",
                f"{path}#3",
                f"{path}#4",
            }, lines
