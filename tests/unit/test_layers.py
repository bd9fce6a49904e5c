"""The layers are visible in folders and the imports keep to them.

``core/`` is the generic floor (client, caches, queue, reconciler, the controller skeleton, runtime,
owners, names, times, logs) and knows nothing of Spark; ``domain/`` (sparkop's kinds, labels and
names) stands on it, ``api/`` on both; the three controllers stand on those and not on each other;
``sparkop/`` holds the entry points and may use everything shipped. Imports are read from the source (every ``import``
and ``from ... import`` anywhere in a module, function-level ones included), so a lazy import cannot
hide a cycle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = (
    "core",
    "domain",
    "api",
    "apps_controller",
    "driver_controller",
    "schedule_controller",
    "connect_controller",
    "history_controller",
    "sparkop",
    "devcluster",
)
FIRST_PARTY = {*SHIPPED, "tests", "bench"}

# What each shipped package may import of the first-party packages (itself always).
ALLOWED: Mapping[str, set[str]] = {
    "core": set(),
    # sparkop's kinds, labels and names: the vocabulary above the generic floor.
    "domain": {"core"},
    "api": {"core", "domain"},
    "apps_controller": {"core", "domain", "api"},
    "driver_controller": {"core", "domain", "api"},
    "schedule_controller": {"core", "domain", "api"},
    "connect_controller": {"core", "domain", "api"},
    "history_controller": {"core", "domain", "api"},
    "sparkop": {
        "core",
        "domain",
        "api",
        "apps_controller",
        "driver_controller",
        "schedule_controller",
        "connect_controller",
        "history_controller",
        "devcluster",
    },
    # The local control plane and its Spark-driver simulator are a separate tool: none of sparkop.
    "devcluster": set(),
}


# The layers the one installed package, sparkop, holds as sparkop.<layer> (sparkop/<layer> links
# to the repository's folder <layer>/): everything shipped is imported through sparkop.
LINKED = {path.name for path in (ROOT / "sparkop").iterdir() if path.is_symlink()}


def module_name(path: Path) -> str:
    """The name a shipped file is imported by: core/kube.py is sparkop.core.kube."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[0] in LINKED:
        parts = ("sparkop", *parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(name: str) -> str:
    """The layer (a folder of the repository) a module name belongs to: sparkop.core.kube is core's,
    sparkop.cli the entry points'."""
    parts = name.split(".")
    if parts[0] == "sparkop" and len(parts) > 1 and parts[1] in LINKED:
        return parts[1]
    return parts[0]


@cache
def shipped_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "gobuild" not in path.parts:
                modules[module_name(path)] = path
    return modules


def imported_names(path: Path) -> Iterator[tuple[str, int]]:
    """Every absolute module name ``path`` imports (``from a import b`` yields ``a.b`` and ``a``:
    ``b`` may be a submodule or a name), with its line."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            yield module, node.lineno
            for alias in node.names:
                yield f"{module}.{alias.name}", node.lineno


def resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The shipped module an import name loads (its longest known prefix), if any."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def import_graph() -> dict[str, set[str]]:
    modules = shipped_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for imported, _ in imported_names(path):
            target = resolve(imported, modules)
            if target is not None and target != name:
                graph[name].add(target)
    # ``from a import b`` where b is a submodule resolves to a.b; the bare ``a`` it also yields is
    # the package's __init__, which that import runs too. Keep that edge only when ``a`` itself is
    # not an ancestor of the importer: a package's own modules importing their package's __init__
    # (which imports them back) is how Python packages work, not a cycle between layers.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(f"{t}.")}
    return graph


def strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_the_import_graph_is_read_from_the_source() -> None:
    """The graph sees function-level and relative imports (a lazy import is still an edge)."""
    graph = import_graph()
    assert "sparkop.core.kube" in graph["sparkop.core.queue"]
    assert "sparkop.api.models" in graph["sparkop.api.crds"]  # from .models import ...
    assert "sparkop.demo" in graph["sparkop.cli"]  # imported inside a function
    assert {"sparkop.apps_controller.controller", "sparkop.driver_controller.controller"} <= graph["sparkop.operator"]


def test_the_wheel_has_one_top_level_package_and_each_layer_is_imported_through_it() -> None:
    """Every shipped layer is a folder of its own linked under sparkop/, and no module imports a
    layer by its bare folder name (which, from a checkout, would load a second copy of it)."""
    assert set(SHIPPED) - {"sparkop", "devcluster"} == LINKED
    for name in LINKED:
        assert (ROOT / "sparkop" / name).resolve() == ROOT / name
    bare = [
        f"{path.relative_to(ROOT)}:{line} imports {imported}"
        for top in sorted(FIRST_PARTY)
        for path in sorted((ROOT / top).rglob("*.py"))
        if "gobuild" not in path.parts
        for imported, line in imported_names(path)
        if imported.split(".")[0] in LINKED
    ]
    assert not bare, "import the layers through sparkop:\n" + "\n".join(sorted(set(bare)))


def test_no_import_cycle_between_shipped_modules() -> None:
    cycles = [c for c in strongly_connected(import_graph()) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_each_package_imports_only_the_layers_below_it() -> None:
    wrong: list[str] = []
    for name, path in shipped_modules().items():
        layer = layer_of(name)
        allowed = ALLOWED[layer] | {layer}
        for imported, line in imported_names(path):
            top = layer_of(imported)
            if imported in ("sparkop", "sparkop.__init__"):
                continue  # the package itself: its __init__ imports nothing
            if top in FIRST_PARTY and top not in allowed:
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({layer}) imports {top}")
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(set(wrong)))


def test_sparkop_holds_only_entry_points() -> None:
    entry_points = {
        "__init__",
        "__main__",
        "cli",
        "operator",
        "demo",
        "status_cli",
        "render_cli",
        "daily_cli",  # list, logs, events, suspend, resume
        "connect_cli",  # connect: a SparkConnect's endpoint, and a port-forward to its server
        "ui_cli",  # ui: an app's live Spark UI or its history page, through a port-forward
    }
    assert {p.stem for p in (ROOT / "sparkop").glob("*.py")} == entry_points


def test_one_plan_and_one_applier_in_the_tree() -> None:
    defined: dict[str, list[str]] = {"Plan": [], "Applier": []}
    for top in sorted(FIRST_PARTY):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "gobuild" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef) and node.name in defined:
                    defined[node.name].append(str(path.relative_to(ROOT)))
    assert defined == {"Plan": ["core/plan.py"], "Applier": ["core/applier.py"]}


def test_core_knows_nothing_of_spark() -> None:
    """Spark's and the schedulers' kinds, labels and names are domain/'s: core's code (its identifiers and
    strings, docstrings and comments aside) never names them. "sparkop" is the product's own name."""
    spark = re.compile(r"spark(?!op)|volcano|yunikorn|kueue|podgroup", re.IGNORECASE)
    found: list[str] = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text = node.value
            elif isinstance(node, ast.Name):
                text = node.id
            elif isinstance(node, ast.Attribute):
                text = node.attr
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                text = node.name
            else:
                continue
            if spark.search(text):
                found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}: {text[:60]!r}")
    assert found == []
