"""The informer's cache of one selection: :class:`Store` keeps objects by (namespace, name), each
packed (``core.packing``; unpacked on every read, so each reader gets a copy of its own), with
secondary indexes and the resourceVersion the content is current as of. Pure: the informer
(``core.informer``) writes it as its watch tells; readers only read.

The objects the watch wrote last, up to :data:`FRESH_BYTES` of their JSON, are kept undeflated: they
are the ones the passes read and the watch writes again (a running app's pods and status), so each of
their versions is not deflated to be read back and replaced moments later. The least recently
written is deflated as the window moves on; a listing is deflated as it is filed.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, Literal, NamedTuple

from sparkop.core.jsontypes import JSON
from sparkop.core.owners import controller_of
from sparkop.core.packing import Kind, deflate, kind_of, pack, plain, unpack

Key = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects."""
EventType = Literal["ADDED", "MODIFIED", "DELETED"]
IndexFunc = Callable[[JSON], Iterable[str]]

BY_CONTROLLER_UID: Final = "controller-uid"
# The JSON of the last-written objects each store keeps undeflated: a busy moment's hot set (500
# driver pods, ~1.7 MB) for a bounded cost, and nothing of a cache at rest that was listed.
FRESH_BYTES: Final = 2 << 20


class Delta(NamedTuple):
    type: EventType
    obj: JSON
    old: JSON | None


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    # The namespace interned: a handful of names shared by every cached key, not a copy per object.
    return (sys.intern(str(meta.get("namespace") or "")), str(meta.get("name") or ""))


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def resource_version_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def revision(resource_version: str | None) -> int | None:
    """A resourceVersion as the etcd revision it is (None when it is no integer)."""
    try:
        return int(resource_version or "")
    except ValueError:
        return None


def controller_uid(obj: JSON) -> Iterable[str]:
    """Index function: the uid of the object's controller ownerReference."""
    ref = controller_of(obj)
    return (str(ref["uid"]),) if ref is not None and ref.get("uid") else ()


def by_label(label_key: str) -> IndexFunc:
    """Index function: the value of one label."""

    def index(obj: JSON) -> Iterable[str]:
        value = ((obj.get("metadata") or {}).get("labels") or {}).get(label_key)
        return (str(value),) if value is not None else ()

    return index


def drop_managed_fields(obj: JSON) -> JSON:
    """The default transform: server-side-apply bookkeeping is often a third of an object, and unread."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


class Stored(NamedTuple):
    """One cached object: what the store compares without decoding, and its packed encoding."""

    uid: str
    resource_version: str
    packed: bytes


def stored(obj: JSON) -> Stored:
    return Stored(uid_of(obj), resource_version_of(obj), pack(obj))


class Store:
    """Objects of one informer by (namespace, name), with secondary indexes and the resourceVersion
    the content is current as of. Pure: the informer mutates it, readers only read.

    Each object is kept packed (``core.packing``) and unpacked on every read: a fraction of the memory
    of the decoded dicts, and every reader gets a copy of its own, so none can change the cache under
    another. The last written, up to ``fresh_bytes`` of their JSON, are kept as JSON (see above)."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None, fresh_bytes: int = FRESH_BYTES) -> None:
        self.fresh_bytes = fresh_bytes
        self._items: dict[Key, Stored] = {}
        self._by_uid: dict[str, Key] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        # A value that files one object holds its key itself, a set only once it files more: most
        # values file one (an app's own key, its SparkDriver's), and a set of one is 216 bytes, a
        # seventh of what the caches held per finished app (bench/bench_cache_memory.py).
        self._indexes: dict[str, dict[str, Key | set[Key]]] = {name: {} for name in self._indexers}
        self._indexed: dict[str, dict[Key, tuple[str, ...]]] = {name: {} for name in self._indexers}
        self.resource_version: str | None = None
        self._synced = False
        # The keys of the objects kept undeflated (least recently written first), with their kinds.
        self._fresh: OrderedDict[Key, Kind] = OrderedDict()
        self._fresh_bytes = 0

    # -- reading -------------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """True once a first full list has been stored."""
        return self._synced

    def has_index(self, name: str) -> bool:
        return name in self._indexers

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, namespace: str | None, name: str) -> JSON | None:
        stored = self._items.get((namespace or "", name))
        return unpack(stored.packed) if stored is not None else None

    def get_by_uid(self, uid: str) -> JSON | None:
        key = self._by_uid.get(uid)
        return self.get(*key) if key is not None else None

    def holds_uid(self, uid: str) -> bool:
        """Whether the object of this uid is (still) in the cache."""
        return uid in self._by_uid

    def __iter__(self) -> Iterator[Key]:
        """The keys, as of now (a copy: the store may change while the caller iterates)."""
        return iter(list(self._items))

    def objects(self) -> list[JSON]:
        return [unpack(stored.packed) for stored in self._items.values()]

    def by_index(self, index: str, value: str) -> list[JSON]:
        """The objects whose ``index`` function yields ``value`` (e.g. children by controller uid)."""
        return [unpack(item.packed) for item in self.stored_by_index(index, value)]

    def stored_by_index(self, index: str, value: str) -> list[Stored]:
        """As :meth:`by_index`, undecoded: for readers that decode only what they have not seen."""
        filed = self._indexes[index].get(value)
        if filed is None:
            return []
        if isinstance(filed, set):
            return [self._items[k] for k in sorted(filed)]
        return [self._items[filed]]

    def index_values(self, index: str) -> list[str]:
        return list(self._indexes[index])

    def index_counts(self, index: str) -> dict[str, int]:
        """How many objects each value of ``index`` files (nothing decoded)."""
        return {value: len(filed) if isinstance(filed, set) else 1 for value, filed in self._indexes[index].items()}

    def is_at_least(self, resource_version: str) -> bool:
        """Whether the cache is at least as new as ``resource_version`` (has seen every change up to it)."""
        have, want = revision(self.resource_version), revision(resource_version)
        return have is not None and want is not None and have >= want

    # -- writing (the informer's) --------------------------------------------------------------

    def add_indexer(self, name: str, index: IndexFunc) -> None:
        if name in self._indexers:
            raise ValueError(f"index {name!r} is already registered")
        self._indexers[name] = index
        self._indexes[name] = {}
        self._indexed[name] = {}
        for key, stored in self._items.items():
            self._index(name, key, unpack(stored.packed))

    def advance(self, resource_version: str | None) -> None:
        """Record that the cache is current as of ``resource_version`` (an event's or a bookmark's)."""
        if resource_version:
            self.resource_version = resource_version

    def upsert(self, obj: JSON) -> list[Delta]:
        """Store ``obj`` (added or modified). A same-named object of another uid is a deletion of the old
        one followed by an addition, so uid-keyed readers never mistake one for the other."""
        key = key_of(obj)
        old = self._items.get(key)
        if old is not None and old.uid != uid_of(obj):
            return [*self._remove(key, old), self._put(key, obj, None)]
        return [self._put(key, obj, old)]

    def delete(self, obj: JSON) -> list[Delta]:
        """Remove the object ``obj`` names (``obj`` is its final state, as a DELETED event carries it)."""
        key = key_of(obj)
        old = self._items.get(key)
        if old is None:
            return []
        if uid_of(obj) and old.uid != uid_of(obj):
            return []  # a deletion of an earlier object of that name; ours is another one
        self._unput(key, old)
        return [Delta("DELETED", obj, unpack(old.packed))]

    def replace(self, objs: Iterable[JSON], resource_version: str | None) -> list[Delta]:
        """Make the store hold exactly ``objs`` (a full list) as of ``resource_version``. Returns the
        differences: additions, modifications (a changed resourceVersion), deletions of objects the list
        no longer has (delivered with their last known state)."""
        return list(self.replacing({key_of(obj): stored(obj) for obj in objs}, resource_version))

    def replacing(self, fresh: Mapping[Key, Stored], resource_version: str | None) -> Iterator[Delta]:
        """:meth:`replace` with the list already encoded, telling each difference as it is applied, so
        that no more than one listed object is ever decoded at a time. Consume it whole, with no await
        in between: the store is consistent again only at its end."""
        # Deletions first (also of a name now held by a new uid), so no handler sees two at once.
        for key, held in list(self._items.items()):
            listed = fresh.get(key)
            if listed is None or listed.uid != held.uid:
                yield from self._remove(key, held)
        for key, item in fresh.items():
            old = self._items.get(key)
            if old is None or old.resource_version != item.resource_version:
                yield self._put_stored(key, item, unpack(item.packed), old)
            # else: the same version is the same object: keep ours, nothing to tell
        self.listed(resource_version)

    def listed(self, resource_version: str | None) -> None:
        """What the store holds is the whole selection as of ``resource_version`` (a listing just
        replaced it, or a first listing was streamed into it object by object)."""
        self.resource_version = resource_version
        self._synced = True

    def _put(self, key: Key, obj: JSON, old: Stored | None) -> Delta:
        text = plain(obj)
        delta = self._put_stored(key, Stored(uid_of(obj), resource_version_of(obj), text), obj, old)
        self._fresh[key] = kind_of(obj)
        self._fresh_bytes += len(text)
        while self._fresh_bytes > self.fresh_bytes:
            self._deflate_oldest()
        return delta

    def _deflate_oldest(self) -> None:
        key, kind = self._fresh.popitem(last=False)
        item = self._items[key]
        self._fresh_bytes -= len(item.packed)
        packed = deflate(item.packed, kind)
        if packed is not None:
            self._items[key] = item._replace(packed=packed)

    def _unfresh(self, key: Key, old: Stored) -> None:
        if self._fresh.pop(key, None) is not None:
            self._fresh_bytes -= len(old.packed)

    def _put_stored(self, key: Key, item: Stored, obj: JSON, old: Stored | None) -> Delta:
        if old is not None:
            self._unindex(key)
            self._unfresh(key, old)
        self._items[key] = item
        if item.uid:
            self._by_uid[item.uid] = key
        for name in self._indexers:
            self._index(name, key, obj)
        return Delta("ADDED" if old is None else "MODIFIED", obj, unpack(old.packed) if old is not None else None)

    def _remove(self, key: Key, old: Stored) -> list[Delta]:
        self._unput(key, old)
        body = unpack(old.packed)
        return [Delta("DELETED", body, body)]

    def _unput(self, key: Key, old: Stored) -> None:
        del self._items[key]
        self._unfresh(key, old)
        if self._by_uid.get(old.uid) == key:
            del self._by_uid[old.uid]
        self._unindex(key)

    def _index(self, name: str, key: Key, obj: JSON) -> None:
        values = tuple(self._indexers[name](obj))
        if len(values) > 1:
            values = tuple(dict.fromkeys(values))
        if values:
            self._indexed[name][key] = values
            index = self._indexes[name]
            for value in values:
                filed = index.get(value)
                if filed is None:
                    index[value] = key
                elif isinstance(filed, set):
                    filed.add(key)
                elif filed != key:
                    index[value] = {filed, key}

    def _unindex(self, key: Key) -> None:
        for name, indexed in self._indexed.items():
            index = self._indexes[name]
            for value in indexed.pop(key, ()):
                filed = index[value]
                if isinstance(filed, set):
                    filed.discard(key)
                    if len(filed) == 1:
                        index[value] = filed.pop()
                elif filed == key:
                    del index[value]


__all__ = [
    "BY_CONTROLLER_UID",
    "FRESH_BYTES",
    "Delta",
    "EventType",
    "IndexFunc",
    "Key",
    "Store",
    "Stored",
    "by_label",
    "controller_uid",
    "drop_managed_fields",
    "key_of",
    "resource_version_of",
    "revision",
    "stored",
    "uid_of",
]
