"""The flags and chart values the README and the docs name are the parser's and values.yaml's: the
README's `sparkop run` tables list every run flag and no other, docs/cli.md's command table names
only flags each command has and every flag it has, and every chart value the docs name exists."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from sparkop import cli
from tests.support import chart_docs
from tests.support.readme import ROOT, section

DOCS = ROOT / "docs"
# Flags every daily command takes (docs/cli.md, "Connection flags, as kubectl"), and argparse's own.
CONNECTION = {"--kubeconfig", "--context", "--namespace", "-n"}
HELP = {"-h", "--help"}


def commands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def flags_of(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings} - HELP


def named_flags(text: str) -> set[str]:
    """The flags a table row names: `--flag`, `-f`, and `-suffix` after a `--stem` (the README's
    `--leader-elect` (`-name`, ...) is `--leader-elect-name`)."""
    found: set[str] = set()
    stem = None
    for token in re.findall(r"(?<![\w-])(--?[A-Za-z][a-z0-9-]*)", text):
        if token.startswith("--"):
            found.add(token)
            stem = stem or token
        elif len(token) == 2:
            found.add(token)
        elif stem is not None:
            found.add(f"{stem}{token}")
    return found


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| `")]


def test_the_readmes_run_tables_list_every_run_flag_and_no_other() -> None:
    rows = table_rows(section("Running it"))
    documented = set().union(*(named_flags(row.split(" | ")[0]) for row in rows))
    assert documented == flags_of(commands()["run"])


def cli_md_rows() -> dict[str, str]:
    """docs/cli.md's command table: the command and the flags of its first cell."""
    text = (DOCS / "cli.md").read_text()
    rows = {}
    for row in table_rows(text):
        usage = row.split(" | ")[0]
        match = re.match(r"\| `sparkop (\w+)", usage)
        if match:
            rows[match.group(1)] = usage
    return rows


def test_docs_cli_md_names_the_flags_each_daily_command_has_and_only_those() -> None:
    rows = cli_md_rows()
    assert sorted(rows) == ["connect", "events", "list", "logs", "resume", "status", "suspend", "ui"]
    for command, usage in rows.items():
        has = flags_of(commands()[command]) - CONNECTION
        documented = named_flags(usage)
        assert documented <= has | CONNECTION, (command, documented - has)
        # Each flag under its long name or its short one.
        missing = [
            action.option_strings
            for action in commands()[command]._actions
            if set(action.option_strings) & has and not set(action.option_strings) & documented
        ]
        assert missing == [], (command, missing)


def test_every_daily_command_takes_the_connection_flags_docs_cli_md_promises() -> None:
    for command in cli_md_rows():
        assert flags_of(commands()[command]) >= CONNECTION, command


# ----------------------------------------------------------------------------------- chart values


def _resolves(values: dict[str, Any], path: str) -> bool:
    node: Any = values
    for key in path.split("."):
        if key == "*":
            return isinstance(node, dict)
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def chart_values_named(text: str, values: dict[str, Any]) -> set[str]:
    """Backticked dotted names that start with a top-level chart value (`controller.workers`,
    `prometheus.metrics.*`); those under `spark.` only when their second part is the chart's (the
    others are Spark's own properties, `spark.kubernetes...`)."""
    found = set()
    for token in re.findall(r"`([A-Za-z][\w.*]*)(?:[:=][^`]*)?`", text):
        first, _, rest = token.partition(".")
        if first not in values or not rest:
            continue
        if first == "spark" and rest.split(".")[0] not in values["spark"]:
            continue
        found.add(token)
    return found


@pytest.mark.parametrize(
    "doc",
    [ROOT / "README.md", DOCS / "operations.md", chart_docs.README, DOCS / "metrics.md"],
    ids=lambda p: str(Path(p).relative_to(ROOT)),
)
def test_every_chart_value_the_docs_name_is_in_values_yaml(doc: Path) -> None:
    values = yaml.safe_load(chart_docs.VALUES.read_text())
    text = doc.read_text()
    if doc == chart_docs.README:  # the generated table is checked against values.yaml by test_chart_docs
        text = text.split(chart_docs.TABLE_BEGIN)[0]
    unknown = sorted(name for name in chart_values_named(text, values) if not _resolves(values, name))
    assert unknown == [], f"{doc.name} names chart values that values.yaml does not have"


def test_the_value_finder_sees_misspelt_values_and_passes_sparks_own_properties() -> None:
    values = yaml.safe_load(chart_docs.VALUES.read_text())
    text = "`controller.replica` `spark.kubernetes.driver.pod.name` `spark.jobNamespaces` `prometheus.metrics.*`"
    named = chart_values_named(text, values)
    assert named == {"controller.replica", "spark.jobNamespaces", "prometheus.metrics.*"}
    assert [n for n in sorted(named) if not _resolves(values, n)] == ["controller.replica"]
