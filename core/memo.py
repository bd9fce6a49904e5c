"""A bounded memo for values worked out from one version of an object and read again while that version
lasts (a busy owner's passes read the same unchanged children and its own unchanged spec again and
again).

A value is kept from its second read: what is read once (every finished app an operator's start reads)
costs no memory, and the least recently read value goes first when the memo is full.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(Generic[K, V]):
    """At most ``size`` values, and as many keys read once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[K, V] = OrderedDict()
        self._read_once: OrderedDict[K, None] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._kept.get(key)
        if value is not None:
            self._kept.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Tell the memo of ``key``'s value, worked out because :meth:`get` had none: kept if the key
        was read before."""
        if self._read_once.pop(key, False) is None:
            self._kept[key] = value
            if len(self._kept) > self.size:
                self._kept.popitem(last=False)
        else:
            self._read_once[key] = None
            if len(self._read_once) > self.size:
                self._read_once.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
