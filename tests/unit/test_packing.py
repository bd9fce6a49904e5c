"""The caches' encoding (core.packing): every object comes back as it went in, and objects of one kind
take a fraction of their JSON."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkop.core import packing
from sparkop.core.jsontypes import JSON
from sparkop.core.packing import JSON_OBJECT, Dictionaries, pack, unpack

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Dictionaries:
    """Dictionaries of their own: what a test packs does not choose another test's."""
    dictionaries = Dictionaries()
    monkeypatch.setattr(packing, "DICTIONARIES", dictionaries)
    return dictionaries


def app(name: str, **spec: Any) -> JSON:
    meta = {"name": name, "namespace": "spark", "uid": f"uid-{name}", "resourceVersion": "7"}
    meta |= {"labels": {"sparkop.io/app-name": name}}
    body = {"type": "Python", "image": "spark:3.5.3", "sparkConf": {"spark.ui.enabled": "false"}} | spec
    return {"apiVersion": "sparkop.io/v1", "kind": "SparkApplication", "metadata": meta, "spec": body}


@given(kind=st.sampled_from(["Pod", "ConfigMap", ""]), rest=st.dictionaries(st.text(max_size=8), json_values))
def test_every_object_unpacks_to_what_was_packed(kind: str, rest: dict[str, Any]) -> None:
    obj = {**rest, "apiVersion": "v1", "kind": kind}
    assert unpack(pack(obj)) == orjson.loads(orjson.dumps(obj))


def test_each_unpack_is_a_copy_of_its_own() -> None:
    packed = pack(app("pi"))
    unpack(packed)["metadata"]["name"] = "changed"
    assert unpack(packed)["metadata"]["name"] == "pi"


def test_objects_of_a_kind_take_a_fraction_of_their_json(fresh: Dictionaries) -> None:
    pack(app("first"))
    other = app("spark-pi-nightly-2026-12-07", mainApplicationFile="local:///opt/spark/examples/pi.py")
    assert len(pack(other)) * 4 < len(orjson.dumps(other))
    assert len(fresh.texts) == 1


def test_each_kind_is_packed_against_its_own_dictionary(fresh: Dictionaries) -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"}, "data": {"a": "b"}}
    first_app, first_map = pack(app("pi")), pack(config_map)
    assert (first_app[0], first_map[0]) == (0, 1)
    assert pack(app("other"))[0] == 0


def test_once_a_byte_numbers_no_more_dictionaries_new_kinds_are_kept_as_json(fresh: Dictionaries) -> None:
    for n in range(JSON_OBJECT):
        pack({"apiVersion": "example.com/v1", "kind": f"Kind{n}", "spec": {"field": "value" * 10}})
    late = {"apiVersion": "example.com/v1", "kind": "Late", "spec": {"field": "value" * 10}}
    packed = pack(late)
    assert packed == orjson.dumps(late)
    assert unpack(packed) == late
