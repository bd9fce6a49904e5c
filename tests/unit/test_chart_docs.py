"""charts/sparkop's README values table and values.schema.json are generated from values.yaml (its
`# --` comments and defaults, tests/support/chart_docs.py): they cannot lag behind it."""

from __future__ import annotations

import os

import jsonschema
import yaml

from tests.support import chart_docs

UPDATE = os.environ.get("SPARKOP_UPDATE_SNAPSHOTS") == "1"


def test_every_value_is_documented_by_a_comment() -> None:
    undocumented = [v.path for v in chart_docs.documented(chart_docs.VALUES.read_text()) if not v.description]
    assert undocumented == [], "give each a `# --` comment in charts/sparkop/values.yaml"


def test_the_readme_values_table_is_generated_from_values_yaml() -> None:
    readme = chart_docs.README.read_text()
    wanted = chart_docs.readme_with_table(readme, chart_docs.VALUES.read_text())
    if UPDATE:
        chart_docs.README.write_text(wanted)
    assert readme == wanted, "charts/sparkop/README.md's table is stale: run with SPARKOP_UPDATE_SNAPSHOTS=1"


def test_the_schema_is_generated_from_values_yaml() -> None:
    wanted = chart_docs.schema_text(chart_docs.VALUES.read_text())
    if UPDATE:
        chart_docs.SCHEMA.write_text(wanted)
    assert chart_docs.SCHEMA.read_text() == wanted, "values.schema.json is stale: run with SPARKOP_UPDATE_SNAPSHOTS=1"


def test_the_defaults_meet_the_schema_and_every_row_is_a_value() -> None:
    text = chart_docs.VALUES.read_text()
    values = yaml.safe_load(text)
    jsonschema.Draft202012Validator(chart_docs.values_schema(text)).validate(values)
    table = chart_docs.values_table(text).splitlines()[2:]
    paths = [row.split(" | ")[0].removeprefix("| ") for row in table]
    assert paths == [v.path for v in chart_docs.documented(text)]
    for path in paths:
        node = values
        for key in path.split("."):
            node = node[key]


def test_the_comment_parser_follows_nesting_and_continuation_lines() -> None:
    text = (
        "# -- top\nname: x\nouter:\n  # -- first line\n  # second line\n  inner: 1\n"
        "  list:\n    - name: a\n      value: b\n  # -- after a list\n  after: true\n"
    )
    assert chart_docs.descriptions(text) == {
        "name": "top",
        "outer.inner": "first line second line",
        "outer.after": "after a list",
    }
