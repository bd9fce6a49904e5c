"""core.memo: values kept from their second read, the least recently read going first; and the
driver controller's parsed specs, kept by their content with the metadata always the body's own."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sparkop.core.memo import Memo
from sparkop.driver_controller.render import parse


def test_a_value_read_once_is_not_kept() -> None:
    memo: Memo[str, int] = Memo(2)
    memo.put("a", 1)
    assert memo.get("a") is None
    assert len(memo) == 0


def test_a_value_read_again_is_kept_until_less_recent_ones_are_full() -> None:
    memo: Memo[str, int] = Memo(2)
    for key, value in (("a", 1), ("b", 2), ("c", 3)):
        memo.put(key, value)  # first read
        memo.put(key, value)  # second read: kept
    assert memo.get("a") is None  # the least recently read went first
    assert (memo.get("b"), memo.get("c")) == (2, 3)
    memo.put("d", 4)
    memo.put("d", 4)
    assert memo.get("b") is None and memo.get("c") == 3 and memo.get("d") == 4


@given(st.lists(st.tuples(st.integers(0, 20), st.booleans()), max_size=200), st.integers(1, 5))
def test_never_more_than_its_size_and_a_kept_value_is_the_one_put(reads: list[tuple[int, bool]], size: int) -> None:
    memo: Memo[int, int] = Memo(size)
    for key, look_first in reads:
        if look_first and (found := memo.get(key)) is not None:
            assert found == key * 10
            continue
        memo.put(key, key * 10)
        assert len(memo) <= size


def _driver(generation: int, image: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {
            "name": "d",
            "namespace": "ns",
            "uid": "uid-memo-test",
            "generation": generation,
            "resourceVersion": str(generation * 10),
            "labels": labels or {},
        },
        "spec": {
            "type": "Scala",
            "sparkVersion": "3.5.7",
            "image": image,
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            "driver": {"cores": 1, "memory": "512m"},
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        },
    }


def test_a_parsed_spec_follows_its_content_and_the_metadata_is_always_the_bodys() -> None:
    for _ in range(3):  # read again: kept from the second read
        first = parse(_driver(1, "spark:a"))
    relabelled = parse(_driver(1, "spark:a", labels={"team": "x"}))
    assert relabelled.spec == first.spec
    assert relabelled.metadata["labels"] == {"team": "x"}
    assert first.metadata["labels"] == {}  # what an earlier pass read is its own
    assert parse(_driver(2, "spark:b")).spec.image == "spark:b"
