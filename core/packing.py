"""How the caches keep each object: its compact JSON, deflated against a dictionary of its kind.

Objects of one kind share most of their bytes (field names, label keys, images, Spark property
names, the kinds their ownerReferences name), and a finished app's objects stay cached for as long
as the app is kept: tens of thousands on a cluster that sets no TTL. Deflated against the first
object of the same kind the process packed, a finished app's six cached objects take a fraction of
their JSON (bench/bench_cache_memory.py), for a few microseconds an object (zlib, no dependency).

:func:`pack` and :func:`unpack` are the store's only encoding; the first byte of a packed object
tells which dictionary it was deflated against, or is ``{`` for an object kept as JSON.
"""

from __future__ import annotations

import zlib
from typing import Final

import orjson

from sparkop.core.jsontypes import JSON

DICTIONARY_BYTES: Final = 8192
_WINDOW_BITS: Final = -13  # raw deflate (no header, no checksum), a window of DICTIONARY_BYTES
_MEMORY_LEVEL: Final = 4  # a state is made for every object: the smallest that packs as well
_LEVEL: Final = 1  # the dictionary is what packs: a higher level costs more for a few bytes
JSON_OBJECT: Final = ord("{")  # orjson's encoding of an object starts with it: a packed one never does

Kind = tuple[str, str]


class Dictionaries:
    """The dictionaries of this process: one per kind, the first object of the kind packed, kept
    unchanged for as long as the process runs (every object packed against it needs it to unpack)."""

    def __init__(self) -> None:
        self.texts: list[bytes] = []
        # Each dictionary's packer, primed with it once: a copy for each object costs a fifth less
        # than priming a new one.
        self.packers: list[zlib._Compress] = []
        self._number_of: dict[Kind, int] = {}

    def number(self, kind: Kind, text: bytes) -> int | None:
        """The dictionary for ``kind`` (its number: the first byte of what it packs), made from
        ``text`` for the first of a kind. None once the numbers below ``{`` are taken."""
        number = self._number_of.get(kind)
        if number is None and len(self.texts) < JSON_OBJECT:
            number = self._number_of[kind] = len(self.texts)
            dictionary = text[-DICTIONARY_BYTES:]
            self.texts.append(dictionary)
            self.packers.append(
                zlib.compressobj(
                    _LEVEL, zlib.DEFLATED, _WINDOW_BITS, _MEMORY_LEVEL, zlib.Z_DEFAULT_STRATEGY, dictionary
                )
            )
        return number


DICTIONARIES: Final = Dictionaries()


def kind_of(obj: JSON) -> Kind:
    """What an object's dictionary is chosen by: its apiVersion and kind."""
    return str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")


def plain(obj: JSON) -> bytes:
    """``obj`` kept as its JSON, undeflated: what :func:`unpack` reads fastest."""
    # orjson's bytes keep the buffer it wrote into (4 KiB for a 1 KiB object): held for as long as
    # the object is cached, a copy of the exact size is a quarter of the memory.
    return bytes(memoryview(orjson.dumps(obj)))


def deflate(text: bytes, kind: Kind) -> bytes | None:
    """The JSON ``text`` of an object of ``kind`` deflated against its kind's dictionary; None when
    that packs no smaller (or no dictionary is left to make)."""
    number = DICTIONARIES.number(kind, text)
    if number is None:
        return None
    packer = DICTIONARIES.packers[number].copy()
    packed = bytes((number,)) + packer.compress(text) + packer.flush()
    return packed if len(packed) < len(text) else None


def pack(obj: JSON) -> bytes:
    text = orjson.dumps(obj)
    return deflate(text, kind_of(obj)) or bytes(memoryview(text))


def unpack(packed: bytes) -> JSON:
    """The object :func:`pack` packed, a new copy on every call."""
    text: bytes | memoryview = packed
    if packed[0] != JSON_OBJECT:
        text = zlib.decompressobj(_WINDOW_BITS, DICTIONARIES.texts[packed[0]]).decompress(memoryview(packed)[1:])
    obj: JSON = orjson.loads(text)
    return obj


__all__ = ["DICTIONARIES", "Dictionaries", "Kind", "deflate", "kind_of", "pack", "plain", "unpack"]
