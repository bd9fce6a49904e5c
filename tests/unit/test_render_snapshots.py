"""`sparkop render` output for every example, pinned. A change to what sparkop creates shows up
here as a diff to review; refresh on purpose with SPARKOP_UPDATE_SNAPSHOTS=1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from sparkop.render_cli import dump, render_documents

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "tests" / "snapshots" / "render"
EXAMPLES = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/demo/*.yaml")])
UPDATE = os.environ.get("SPARKOP_UPDATE_SNAPSHOTS") == "1"


def _snapshot_name(example: Path) -> str:
    return str(example.relative_to(ROOT / "examples")).replace("/", "__")


@pytest.mark.parametrize("example", EXAMPLES, ids=_snapshot_name)
def test_render_output_matches_its_snapshot(example: Path) -> None:
    rendered = dump(render_documents(list(yaml.safe_load_all(example.read_text()))))
    snapshot = SNAPSHOTS / _snapshot_name(example)
    if UPDATE:
        snapshot.write_text(rendered)
    assert snapshot.exists(), f"no snapshot for {example.name}; run with SPARKOP_UPDATE_SNAPSHOTS=1"
    assert rendered == snapshot.read_text(), f"sparkop render {example} changed; review, then refresh the snapshot"


def test_every_snapshot_has_its_example() -> None:
    assert sorted(p.name for p in SNAPSHOTS.glob("*.yaml")) == sorted(_snapshot_name(e) for e in EXAMPLES)


def test_render_is_deterministic() -> None:
    docs = list(yaml.safe_load_all((ROOT / "examples" / "spark-pi.yaml").read_text()))
    assert dump(render_documents(docs)) == dump(render_documents(docs))
