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


def test_a_change_is_judged_beside_the_run_before_it() -> None:
    results = ROOT / "bench" / "results" / "issue28"
    before = json.loads((results / "before-perf.json").read_text())
    after = json.loads((results / "after3-perf.json").read_text())
    compared = {row[0]: row for row in perf.comparison_rows(before, after)}
    writes = compared["operator writes per app (1000 apps)"]
    assert writes[1:4] == ("25.99", "16.12", "62%")
    assert writes[4:] == ("≤ 16", "**no**")
    cpu = compared["operator CPU per app (1000 apps, until idle)"]
    assert cpu[3:] == ("81%", "≤ 60% of before", "**no**")
    # Neither run had the burst: a figure only one run has (or neither) is left out, not guessed.
    assert not any(figure.startswith("burst") for figure in compared)
    assert "Beside the code before the change" in perf.markdown({**after, "before": before})


def test_a_restart_is_the_median_of_several_each_beside_its_own_floor() -> None:
    import scale

    def start(first: float, listed: float, writes: int = 0) -> dict[str, object]:
        floor = {"import_seconds": 2.0, "list_seconds": listed, "objects_listed": 20010}
        return {"first_reconcile_seconds": first, "floor": floor, "idle_seconds": 20.0, "writes": writes}

    summary = scale.restart_summary([start(9.3, 6.9), start(7.0, 6.8, writes=1), start(8.1, 6.9)])
    # -1.8, -0.8 and +0.4 s beyond their floors: the median is the third start, reported whole.
    assert summary["first_reconcile_seconds"] == 8.1
    assert [r["over_floor_seconds"] for r in summary["rounds"]] == [0.4, -1.8, -0.8]
    assert summary["writes"] == 1  # a write in any restart counts
    rows = {row[0]: row for row in perf.scale_rows({"apps": 10, "restart": summary, "steady": {}})}
    assert rows["restart with 10 apps: start → first reconcile"][1:] == ("8.1 s", "≤ the floor below + 1 s", True)
    assert rows["restart with 10 apps: writes"][3] is False
