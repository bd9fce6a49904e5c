"""README's performance figures are bench/perf.py's last recorded run, rendered, not retyped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import perf  # noqa: E402


def test_the_readme_figures_are_the_recorded_perf_run() -> None:
    result = json.loads((ROOT / "bench" / "results" / "perf.json").read_text())
    readme = (ROOT / "README.md").read_text()
    assert perf.readme_block(result) in readme, (
        "regenerate: .venv/bin/python bench/perf.py --from-json bench/results/perf.json --readme"
    )


def test_every_target_row_says_whether_it_was_met() -> None:
    result = json.loads((ROOT / "bench" / "results" / "perf.json").read_text())
    rows = perf.rows(result)
    assert rows, "perf.json holds no figures"
    for figure, measured, target, met in rows:
        assert measured and "None" not in measured, figure
        # A figure with a target says whether it met it; one without has nothing to meet.
        assert (met in ("yes", "**no**")) == bool(target), figure
