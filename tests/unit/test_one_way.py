"""One way to do each thing, held by reading the source: one controller loop, one owner lookup."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = (
    "core",
    "domain",
    "api",
    "apps_controller",
    "driver_controller",
    "schedule_controller",
    "connect_controller",
    "history_controller",
    "sparkop",
)


def product_sources() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text() for top in PRODUCT for path in sorted((ROOT / top).rglob("*.py"))
    }


# A read of an object's ownerReferences, or of a reference's controller flag: building a reference
# (``"ownerReferences": [...]``, an assignment, a JSON-patch path) is not a lookup.
OWNER_READ = re.compile(
    r"""(\.get\(\s*["'](ownerReferences|controller)["']|\[\s*["']ownerReferences["']\s*\](?!\s*=[^=]))"""
)


def test_who_owns_an_object_is_read_in_core_owners_only() -> None:
    readers = {
        path: [line.strip() for line in text.splitlines() if OWNER_READ.search(line)]
        for path, text in product_sources().items()
        if path != "core/owners.py"
    }
    assert {path: lines for path, lines in readers.items() if lines} == {}


def test_the_owner_lookup_finds_reads_it_forbids() -> None:
    assert OWNER_READ.search('refs = meta.get("ownerReferences") or ()')
    assert OWNER_READ.search('ref = next(r for r in refs if r.get("controller"))')
    assert OWNER_READ.search('refs = body["metadata"]["ownerReferences"]')
    assert not OWNER_READ.search('meta["ownerReferences"] = [owner_reference(driver)]')
    assert not OWNER_READ.search('"ownerReferences": [owner_reference(app)],')


def test_the_controller_loop_is_written_once() -> None:
    """Only the skeleton builds an Applier and loops over decisions; a controller declares."""
    builders: list[str] = []
    loops: list[str] = []
    for path, text in product_sources().items():
        for node in ast.walk(ast.parse(text, path)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Applier":
                builders.append(path)
            if isinstance(node, ast.Name) and node.id == "MAX_DECISIONS_PER_PASS":
                loops.append(path)
    assert set(builders) == {"core/controller.py"}
    assert set(loops) == {"core/controller.py"}


def test_every_controller_is_a_declaration_for_the_skeleton() -> None:
    controllers = ("apps", "driver", "schedule", "connect", "history")
    for package in (f"{name}_controller" for name in controllers):
        shell = (ROOT / package / "controller.py").read_text()
        assert "from sparkop.core.controller import" in shell and "start(runtime, " in shell, package
        assert "reconcile_key" not in shell, package


def test_every_request_takes_the_one_path() -> None:
    """Kube.request is the one request path (the informers' LISTs and WATCHes, the leader's Lease, the
    controllers' writes): nothing else calls into the generated client or its session."""
    bypasses = re.compile(r"\.call_api\(|CoordinationV1Api|CoreV1Api|CustomObjectsApi|\.pool_manager\b|\.rest_client\b")
    found = {
        path: [line.strip() for line in text.splitlines() if bypasses.search(line)]
        for path, text in product_sources().items()
        if path != "core/kube.py"
    }
    assert {path: lines for path, lines in found.items() if lines} == {}
