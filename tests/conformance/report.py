"""The conformance results table (markdown) from the JSON files the conformance tests write.

.venv/bin/python -m tests.conformance.report [results-dir]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from tests.support.conformance import CACHE


def table(directory: Path) -> str:
    rows = [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]
    lines = [
        "| configuration | Spark | fields compared | differences | deliberate | unexplained |",
        "|---|---|---:|---:|---|---:|",
    ]
    for row in sorted(rows, key=lambda r: (r["config"], r["version"])):
        diffs = row["differences"]
        kinds = Counter(_kind(d) for d in diffs if d["deliberate"])
        deliberate = ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))
        unexplained = sum(1 for d in diffs if not d["deliberate"])
        lines.append(
            f"| {row['config']} | {row['version']} | {row['fields']} | {len(diffs)} | {deliberate} | {unexplained} |"
        )
    return "\n".join(lines)


def _kind(diff: dict[str, object]) -> str:
    path = str(diff["path"])
    if path.startswith("metadata.labels"):
        return "sparkop labels"
    if path.startswith("metadata.ownerReferences"):
        return "owner"
    if path.startswith("metadata.finalizers"):
        return "finalizer"
    return path.rsplit(".", 1)[-1]


if __name__ == "__main__":
    print(table(Path(sys.argv[1]) if len(sys.argv) > 1 else CACHE / "conformance"))
