"""A registered cache index as the controllers' shells read it, for tests without a cluster: a dict
from key to the values filed under it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class FakeIndex(dict[Any, list[Any]]):
    def holds(self, key: Any, uid: str) -> bool:
        """As core.caches.CacheIndex.holds: whether the object of ``uid`` is filed under ``key``."""
        return any(_uid(value) == uid for value in self.get(key) or ())


def _uid(value: Any) -> str | None:
    if isinstance(value, Mapping):
        return (value.get("metadata") or {}).get("uid")
    return getattr(value, "uid", None)
