"""The tests and the benchmarks share code only through tests/support/: no file under tests/ or bench/
imports a test module, a conftest, or a helper of another test directory (tests.unit,
tests.integration, tests.e2e, tests.conformance, tests.conftest). A helper two places need moves to
tests/support/. One allowance: a test directory's own non-test module, imported from that directory
(tests/conformance/configs.py by tests/conformance/test_spark_submit.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = "tests.support"


def imported_modules(path: Path) -> Iterator[tuple[str, int]]:
    """Every absolute module ``path`` imports (for ``from a import b``: ``a.b``, which may be a
    submodule or a name), function-level imports included."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                yield f"{node.module}.{alias.name}", node.lineno


def allowed(importer: Path, module: str) -> bool:
    parts = module.split(".")
    if parts[0] != "tests" or module == "tests" or module.startswith(f"{SHARED}.") or module == SHARED:
        return True
    # The module file it names (the longest prefix that is a file), if it names one.
    for end in range(len(parts), 1, -1):
        target = ROOT.joinpath(*parts[:end]).with_suffix(".py")
        if target.is_file():
            own = target.parent == importer.parent
            return own and not target.name.startswith("test_") and target.name != "conftest.py"
    return False  # a package of tests (tests.unit, ...) itself


def test_the_rule_reads_imports_as_written() -> None:
    here = ROOT / "tests" / "conformance" / "test_spark_submit.py"
    assert allowed(here, "tests.support.operator.OperatorProcess")
    assert allowed(here, "tests.conformance.configs.CONFIGS")  # its own directory's helper
    assert not allowed(ROOT / "bench" / "x.py", "tests.conformance.configs.CONFIGS")
    assert not allowed(ROOT / "tests" / "unit" / "x.py", "tests.unit.test_driver_reconcile.driver")
    assert not allowed(ROOT / "tests" / "e2e" / "x.py", "tests.e2e.conftest.JOBS_DIR")
    assert not allowed(ROOT / "tests" / "e2e" / "conftest.py", "tests.conftest.install_crds")
    assert not allowed(ROOT / "bench" / "x.py", "tests.integration")


def test_tests_and_bench_import_only_tests_support_across() -> None:
    wrong = []
    for top in ("tests", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for module, line in imported_modules(path):
                if not allowed(path, module):
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "move what is shared to tests/support/:\n" + "\n".join(wrong)
