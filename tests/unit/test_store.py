"""The informer's Store: replace is exact and reports exactly the differences; indexes never drift."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from sparkop.core.jsontypes import JSON
from sparkop.core.packing import JSON_OBJECT
from sparkop.core.store import (
    BY_CONTROLLER_UID,
    FRESH_BYTES,
    Delta,
    Key,
    Store,
    by_label,
    controller_uid,
    drop_managed_fields,
    key_of,
    uid_of,
)

APP_LABEL = "example.com/app"


def make(namespace: str, name: str, uid: str, rv: int, owner: str | None = None, app: str | None = None) -> JSON:
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "uid": uid, "resourceVersion": str(rv)}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Owner", "name": owner, "uid": owner, "controller": True}]
    if app is not None:
        meta["labels"] = {APP_LABEL: app}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


@st.composite
def objects(draw: st.DrawFn) -> JSON:
    """Objects of a few names; a name may be recreated (a new uid), a uid never names two objects, and
    one (uid, resourceVersion) is always the same content, as on a real API server."""
    namespace = draw(st.sampled_from(["a", "b"]))
    name = draw(st.sampled_from(["x", "y", "z", "w"]))
    generation = draw(st.integers(1, 2))
    rv = draw(st.integers(1, 4))
    owner = (None, "o1", "o2")[(rv + generation) % 3]
    app = (None, "p", "q")[(rv + len(name) + ord(namespace)) % 3]
    return make(namespace, name, f"{namespace}/{name}/{generation}", rv, owner, app)


listings = st.lists(objects(), max_size=8).map(lambda objs: list({key_of(o): o for o in objs}.values()))


def new_store() -> Store:
    return Store({BY_CONTROLLER_UID: controller_uid, APP_LABEL: by_label(APP_LABEL)})


def contents(store: Store) -> dict[Key, JSON]:
    return {key: obj for key in store if (obj := store.get(*key)) is not None}


def assert_indexes_match(store: Store) -> None:
    """Every index equals the one recomputed from scratch over the stored objects."""
    for name, func in ((BY_CONTROLLER_UID, controller_uid), (APP_LABEL, by_label(APP_LABEL))):
        expected: dict[str, list[Key]] = {}
        for obj in store.objects():
            for value in func(obj):
                expected.setdefault(value, []).append(key_of(obj))
        assert sorted(store.index_values(name)) == sorted(expected)
        assert store.index_counts(name) == {value: len(keys) for value, keys in expected.items()}
        for value, keys in expected.items():
            assert [key_of(o) for o in store.by_index(name, value)] == sorted(keys)
    for obj in store.objects():
        assert store.get_by_uid(uid_of(obj)) == obj


def mirror(before: dict[Key, JSON], deltas: list[Delta]) -> dict[Key, JSON]:
    """What a handler that keeps its own copy from the deltas alone ends up with."""
    seen = dict(before)
    for delta in deltas:
        key = key_of(delta.obj)
        if delta.type == "DELETED":
            assert seen.pop(key) == delta.old
        elif delta.type == "ADDED":
            assert key not in seen and delta.old is None
            seen[key] = delta.obj
        else:
            assert seen[key] == delta.old
            seen[key] = delta.obj
    return seen


@given(before=listings, after=listings)
def test_replace_holds_exactly_the_list_and_reports_exactly_the_differences(
    before: list[JSON], after: list[JSON]
) -> None:
    store = new_store()
    store.replace(before, "10")
    old = contents(store)
    deltas = store.replace(after, "20")

    assert contents(store) == {key_of(o): o for o in after}
    assert store.resource_version == "20" and store.has_synced()
    assert mirror(old, deltas) == contents(store)
    # No news for an unchanged object, one delta for a changed one, deletion+addition for a new uid.
    expected: list[tuple[str, Key]] = []
    fresh = {key_of(o): o for o in after}
    for key, stored in old.items():
        listed = fresh.get(key)
        if listed is None or uid_of(listed) != uid_of(stored):
            expected.append(("DELETED", key))
    for key, now in fresh.items():
        was = old.get(key)
        if was is None or uid_of(was) != uid_of(now):
            expected.append(("ADDED", key))
        elif was["metadata"]["resourceVersion"] != now["metadata"]["resourceVersion"]:
            expected.append(("MODIFIED", key))
    assert sorted((d.type, key_of(d.obj)) for d in deltas) == sorted(expected)
    # Deletions come first, so a handler never sees two live objects of one name.
    types = [d.type for d in deltas]
    assert types == sorted(types, key=lambda t: t != "DELETED")
    gone = {uid_of(o) for o in old.values()} - {uid_of(o) for o in after}
    assert not any(store.holds_uid(uid) for uid in gone)
    assert_indexes_match(store)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), objects()),
        st.tuples(st.just("delete"), objects()),
        st.tuples(st.just("replace"), listings),
    ),
    max_size=12,
)


@given(ops=operations, fresh_bytes=st.sampled_from([0, 200, FRESH_BYTES]))
def test_indexes_follow_every_change(ops: list[tuple[str, Any]], fresh_bytes: int) -> None:
    store = Store({BY_CONTROLLER_UID: controller_uid, APP_LABEL: by_label(APP_LABEL)}, fresh_bytes)
    for op, arg in ops:
        before = contents(store)
        if op == "upsert":
            deltas = store.upsert(arg)
            assert store.get(*key_of(arg)) == arg
        elif op == "delete":
            deltas = store.delete(arg)
        else:
            deltas = store.replace(arg, "7")
        assert mirror(before, deltas) == contents(store)
        assert_indexes_match(store)


def test_a_deletion_of_an_earlier_object_of_that_name_leaves_the_new_one() -> None:
    store = new_store()
    store.upsert(make("a", "x", "new", 5))
    assert store.delete(make("a", "x", "old", 4)) == []
    assert store.holds_uid("new")


def test_a_recreated_name_is_told_as_deletion_then_addition() -> None:
    store = new_store()
    first = make("a", "x", "u1", 1, owner="o1")
    second = make("a", "x", "u2", 2, owner="o2")
    store.upsert(first)
    deltas = store.upsert(second)
    assert [(d.type, d.obj) for d in deltas] == [("DELETED", first), ("ADDED", second)]
    assert store.by_index(BY_CONTROLLER_UID, "o1") == [] and store.by_index(BY_CONTROLLER_UID, "o2") == [second]
    assert not store.holds_uid("u1")


def test_freshness_compares_revisions_as_numbers() -> None:
    store = new_store()
    assert not store.is_at_least("1")  # nothing seen yet
    store.replace([], "99")
    assert store.is_at_least("99") and store.is_at_least("100") is False and store.is_at_least("9")
    store.advance("100")  # a bookmark
    assert store.is_at_least("100")
    assert not store.is_at_least("not-a-number")


def test_an_index_added_late_covers_what_is_stored() -> None:
    store = Store()
    store.replace([make("a", "x", "u1", 1, app="p"), make("a", "y", "u2", 1)], "1")
    store.add_indexer(APP_LABEL, by_label(APP_LABEL))
    assert [key_of(o) for o in store.by_index(APP_LABEL, "p")] == [("a", "x")]


def test_every_read_is_a_copy_of_its_own() -> None:
    """Objects are kept encoded: a reader that changes what it read changes nothing for the others."""
    store = Store({APP_LABEL: by_label(APP_LABEL)})
    store.replace([make("a", "x", "u1", 1, app="p")], "1")
    for read in (store.get("a", "x"), store.get_by_uid("u1"), *store.objects(), *store.by_index(APP_LABEL, "p")):
        assert read is not None
        read["metadata"]["labels"][APP_LABEL] = "changed"
        read["spec"] = {"changed": True}
    assert store.get("a", "x") == make("a", "x", "u1", 1, app="p")
    assert store.index_counts(APP_LABEL) == {"p": 1}


def padded(name: str, rv: int) -> JSON:
    """An object large enough that deflating it against its kind's dictionary packs it smaller."""
    obj = make("a", name, f"u-{name}", rv, app="p")
    obj["data"] = {f"spark.property.number.{i}": f"value of property {i}" for i in range(40)}
    return obj


def deflated(store: Store) -> dict[str, bool]:
    return {item.uid: item.packed[0] != JSON_OBJECT for item in store.stored_by_index(APP_LABEL, "p")}


def test_the_last_written_objects_are_kept_as_json_and_the_rest_deflated() -> None:
    """The watch's last writes, up to fresh_bytes of JSON, stay undeflated; the least recently written
    is deflated as others arrive, a write moves an object back, and every read is what was written."""
    size = len(orjson.dumps(padded("w", 1)))
    store = Store({APP_LABEL: by_label(APP_LABEL)}, fresh_bytes=2 * size + size // 2)
    for name in "wxyz":
        store.upsert(padded(name, 1))
    assert deflated(store) == {"u-w": True, "u-x": True, "u-y": False, "u-z": False}
    store.upsert(padded("w", 2))  # written again: the most recent, so y is now the oldest kept
    assert deflated(store) == {"u-w": False, "u-x": True, "u-y": True, "u-z": False}
    store.delete(padded("z", 1))  # its bytes leave the window: x is not deflated for w's next write
    store.upsert(padded("x", 2))
    assert deflated(store) == {"u-w": False, "u-x": False, "u-y": True}
    assert [store.get("a", name) for name in "wxy"] == [padded("w", 2), padded("x", 2), padded("y", 1)]
    store.replace([padded("w", 3), padded("y", 1)], "9")  # a listing is filed deflated
    assert deflated(store) == {"u-w": True, "u-y": True}
    assert store.objects() == [padded("w", 3), padded("y", 1)]


def test_managed_fields_are_not_kept() -> None:
    obj = make("a", "x", "u1", 1)
    obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    assert "managedFields" not in drop_managed_fields(obj)["metadata"]


def test_core_imports_nothing_above_it() -> None:
    """core is the floor: the layers above may import it, never the other way round."""
    import ast
    from pathlib import Path

    def above(name: str) -> bool:
        return name.split(".")[0] in {"devcluster", "tests", "bench"} or (
            name.startswith("sparkop") and not name.startswith("sparkop.core")
        )

    for path in (Path(__file__).resolve().parents[2] / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            assert not [n for n in names if above(n)], f"{path.name} imports {names}"
