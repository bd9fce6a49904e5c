"""Docs that cannot drift: every module table in docs/*.md (a table whose first header cell names a
folder, `` | `core/` | what | ``) lists exactly the modules of that folder, and the folders of the
controller runtime and the controllers each have one. The docs give no line counts (they drift)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = re.compile(r"^\| `(?P<folder>[a-z_]+)/` \|")
ROW = re.compile(r"^\| `(?P<module>[a-z_]+\.py)` \|")
TABLED = {"core", "domain", "apps_controller", "driver_controller", "schedule_controller", "connect_controller"}
# "(apps 90 lines, driver 100 ...)", "a 950-line decide": what a reader cannot keep true by hand.
LINE_COUNT = re.compile(r"\b\d[\d,]*[ -]lines?\b(?! of (?:Spark|the log|its log))", re.IGNORECASE)


def module_tables() -> dict[str, list[tuple[str, list[str]]]]:
    """folder -> [(doc, the modules its table lists)]."""
    tables: dict[str, list[tuple[str, list[str]]]] = {}
    for doc in sorted((ROOT / "docs").glob("*.md")):
        lines = doc.read_text().splitlines()
        for number, line in enumerate(lines):
            header = TABLE.match(line)
            if header is None or not lines[number + 1 : number + 2] or not lines[number + 1].startswith("|---"):
                continue  # a row of another table (a list of packages), not a module table's header
            modules = []
            for row in lines[number + 2 :]:
                if not row.startswith("|"):
                    break
                found = ROW.match(row)
                assert found is not None, (
                    f"{doc.name}:{number + 1}: a row of the {header['folder']}/ table names no module"
                )
                modules.append(found["module"])
            tables.setdefault(header["folder"], []).append((doc.name, modules))
    return tables


def test_each_module_table_lists_its_folder() -> None:
    wrong = {}
    for folder, tables in module_tables().items():
        present = sorted(p.name for p in (ROOT / folder).glob("*.py") if p.name != "__init__.py")
        for doc, listed in tables:
            if sorted(listed) != present or len(set(listed)) != len(listed):
                wrong[f"{doc}: {folder}/"] = {
                    "not listed": sorted(set(present) - set(listed)),
                    "no such module": sorted(set(listed) - set(present)),
                }
    assert wrong == {}


def test_the_runtime_and_every_controller_have_a_module_table() -> None:
    assert module_tables().keys() >= TABLED


def test_the_docs_give_no_line_counts() -> None:
    found = [
        f"{doc.name}:{number}: {line.strip()[:100]}"
        for doc in sorted((ROOT / "docs").glob("*.md"))
        for number, line in enumerate(doc.read_text().splitlines(), 1)
        if LINE_COUNT.search(line)
    ]
    assert found == []
