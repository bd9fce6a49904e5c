"""README's kubeflow comparison is bench/peer.py's last recorded run, rendered, not retyped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import peer  # noqa: E402


def test_the_readme_kubeflow_table_is_the_recorded_peer_run() -> None:
    result = json.loads((ROOT / "bench" / "results" / "peer.json").read_text())
    readme = (ROOT / "README.md").read_text()
    assert peer.readme_block(result) in readme, (
        "regenerate: .venv/bin/python bench/peer.py --from-json bench/results/peer.json --readme"
    )
    # Every figure of the three contenders is there, with sparkop's ratio to kubeflow.
    rows = peer.table_rows(result)
    assert rows and all(len(row) == 5 for row in rows)
    assert any("\u00d7" in row[4] for row in rows)  # the multiplication sign of "113x faster"
