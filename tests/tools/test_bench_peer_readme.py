"""README's comparison with the peers is bench/peer.py's last recorded run, rendered, not retyped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import peer  # noqa: E402

# The figures the issue asks of each operator at each burst size (bench/results/peer.json).
ENTRY_FIELDS = (
    "name",
    "version",
    "in_process",
    "apps_per_s",
    "p99_s",
    "cpu_ms_per_app",
    "peak_rss_mib",
    "writes_per_app",
)


def recorded() -> dict:  # type: ignore[type-arg]
    result: dict = json.loads((ROOT / "bench" / "results" / "peer.json").read_text())  # type: ignore[type-arg]
    return result


def test_the_readme_comparison_is_the_recorded_peer_run() -> None:
    readme = (ROOT / "README.md").read_text()
    assert peer.readme_block(recorded()) in readme, (
        "regenerate: .venv/bin/python bench/peer.py --from-json bench/results/peer.json --readme"
    )


def test_each_burst_size_has_one_entry_per_operator_with_the_issues_figures() -> None:
    bursts = recorded()["bursts"]
    assert bursts
    for size, burst in bursts.items():
        names = [entry["key"] for entry in burst["operators"]]
        assert len(names) == len(set(names)), f"{size} apps: an operator twice: {names}"
        assert "sparkop" in names and "ceiling" in names
        for entry in burst["operators"]:
            missing = [f for f in ENTRY_FIELDS if f not in entry]
            assert not missing, f"{size} apps, {entry['key']}: no {missing}"
            assert isinstance(entry["in_process"], bool)


def test_each_row_compares_sparkop_with_the_best_in_process_peer() -> None:
    for burst in recorded()["bursts"].values():
        rows = peer.table_rows(burst)
        assert rows and all(len(row) == len(burst["peers"]) + 2 for row in rows)
        if any(p["in_process"] and p["key"] not in ("sparkop", "ceiling") for p in burst["peers"]):
            assert any("\u00d7" in row[-1] for row in rows)  # the multiplication sign of "3.1x better"
