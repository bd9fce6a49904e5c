"""The informer caches of one operator: one :class:`~core.informer.Informer` per (resource, label
selector, namespace), shared by every controller that reads that selection, with named indexes that
map a controller's key to the values it observes.

Two rules keep decisions off stale state:

* **A gap anywhere is a gap everywhere.** When one watch finds it lost continuity (410 Gone after an
  etcd compaction, an API server restart), every other watch of the same server may have missed
  events too, unnoticed yet. Every informer is made to re-list, and until all have, the caches are not
  :attr:`Caches.continuous`.
* **Reads refuse while not continuous.** :meth:`CacheIndex.get` raises :class:`NotCurrent` while an
  informer of its selection is syncing or re-listing; the work queue takes that as "try again
  shortly". Since a gap makes every informer re-list at once, an index whose own informers are
  continuous again has seen the gap repaired, whatever the others are still listing. After the
  re-lists, every object that changed or vanished has been delivered to the handlers, which enqueue
  its owner's key, so each affected owner is reconciled on the fresh view.

Nothing here imports sparkop, api or the controllers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from sparkop.core.informer import Handler, Informer, ResourceLike, Transform
from sparkop.core.jsontypes import JSON
from sparkop.core.memo import Memo
from sparkop.core.packing import unpack
from sparkop.core.requester import Requester
from sparkop.core.store import Stored, drop_managed_fields

log = logging.getLogger(__name__)

V = TypeVar("V")
IndexKey = tuple[str, ...]
"""What an index maps from: a controller's key, e.g. (namespace, name)."""


class NotCurrent(Exception):
    """The caches cannot be trusted now (a first list or a re-list after a gap is under way): decide
    nothing, look again shortly."""


def current(informers: Iterable[Informer]) -> bool:
    """Whether each of ``informers`` has listed and has seen every change since (no gap being repaired)."""
    return all(informer.has_synced() and informer.continuous for informer in informers)


# A unit separator cannot occur in a namespace, a name or a label value.
INDEX_SEPARATOR: Final = "\x1f"


def index_text(key: IndexKey) -> str:
    return INDEX_SEPARATOR.join(key)


@dataclass
class CacheIndex(Generic[V]):
    """A read-only map from a controller key to the values of the objects an index files under it,
    across the informers of one selection (one per watched namespace)."""

    caches: Caches
    name: str
    informers: Sequence[Informer]
    value: Callable[[JSON], V]
    # For values no reader changes (frozen summaries): how many of those read again are kept
    # (core.memo), by the object's uid and resourceVersion, so that the passes of a busy owner, which
    # read the same unchanged children again and again, decode and summarise each version once.
    # 0: none kept (every read is a fresh copy, for values a reader may change).
    memo: int = 0
    _memo: Memo[tuple[str, str], V] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._memo = Memo(self.memo)

    def get(self, key: IndexKey) -> list[V] | None:
        """The values under ``key`` (None when there are none); :class:`NotCurrent` while a cache of
        this selection is listing or re-listing."""
        self.caches.check_current(self.informers)
        found = [self._value(item) for item in self._stored(key)]
        return found or None

    def holds(self, key: IndexKey, uid: str) -> bool:
        """Whether the object of ``uid`` is filed under ``key`` (nothing decoded); :class:`NotCurrent`
        as :meth:`get`."""
        self.caches.check_current(self.informers)
        return any(item.uid == uid for item in self._stored(key))

    def _stored(self, key: IndexKey) -> list[Stored]:
        text = index_text(key)
        return [item for informer in self.informers for item in informer.store.stored_by_index(self.name, text)]

    def _value(self, item: Stored) -> V:
        if not self.memo:
            return self.value(unpack(item.packed))
        version = (item.uid, item.resource_version)
        value = self._memo.get(version)
        if value is None:
            value = self.value(unpack(item.packed))
            self._memo.put(version, value)
        return value

    def counts(self) -> dict[IndexKey, int]:
        """How many objects each key files, as cached now (nothing decoded; no refusal while
        re-listing: for gauges, which a scrape later corrects)."""
        totals: dict[IndexKey, int] = {}
        for informer in self.informers:
            for text, count in informer.store.index_counts(self.name).items():
                key = tuple(text.split(INDEX_SEPARATOR))
                totals[key] = totals.get(key, 0) + count
        return totals


class Caches:
    """Every informer of one operator. ``namespaces`` empty: cluster-wide; else one informer per
    namespace (a cluster-scoped resource is then selected by ``metadata.name``)."""

    def __init__(self, api: Requester, namespaces: Sequence[str] = ()) -> None:
        self.api = api
        self.namespaces = tuple(namespaces)
        self._informers: dict[tuple[str, str | None], list[Informer]] = {}

    def informers(
        self, resource: ResourceLike, label_selector: str | None = None, transform: Transform | None = None
    ) -> list[Informer]:
        """The informers of this selection (created on first ask, shared afterwards). ``transform``:
        what of each object the cache keeps (core.informer's default: all but managedFields); the
        selection's first ask decides it, and a later ask may not name another."""
        selection = (resource.path(), label_selector)
        if selection not in self._informers:
            # Namespaced kinds, and the watched Namespaces themselves, one informer per namespace;
            # any other cluster-scoped kind (a scheduler's configuration object) is read whole, whatever the
            # namespaces.
            per_namespace = getattr(resource, "namespaced", True) or resource.kind == "Namespace"
            made = [
                self._informer(resource, label_selector, namespace, transform or drop_managed_fields)
                for namespace in (self.namespaces if per_namespace else ()) or (None,)
            ]
            for informer in made:
                informer.add_gap_handler(self._gap)
            self._informers[selection] = made
        informers = self._informers[selection]
        if transform is not None and any(informer.transform is not transform for informer in informers):
            raise ValueError(f"{resource.path()} [{label_selector}] is cached already, trimmed otherwise")
        return informers

    def _informer(
        self, resource: ResourceLike, label_selector: str | None, namespace: str | None, transform: Transform
    ) -> Informer:
        if namespace is not None and not getattr(resource, "namespaced", True):
            return Informer(
                self.api,
                resource,
                label_selector=label_selector,
                field_selector=f"metadata.name={namespace}",
                transform=transform,
            )
        return Informer(self.api, resource, namespace=namespace, label_selector=label_selector, transform=transform)

    def all(self) -> list[Informer]:
        return [informer for informers in self._informers.values() for informer in informers]

    def on_change(self, resource: ResourceLike, handler: Handler, label_selector: str | None = None) -> None:
        """Call ``handler(type, obj, old)`` on every change of the selection (it must only enqueue)."""
        for informer in self.informers(resource, label_selector):
            informer.add_handler(handler)

    def index(
        self,
        name: str,
        resource: ResourceLike,
        keys: Callable[[JSON], Iterable[IndexKey]],
        value: Callable[[JSON], V],
        label_selector: str | None = None,
        transform: Transform | None = None,
        memo: int = 0,
    ) -> CacheIndex[V]:
        """File each object of the selection under ``keys(obj)``; read back as ``value(obj)`` (``memo``:
        see :class:`CacheIndex`)."""
        informers = self.informers(resource, label_selector, transform)
        for informer in informers:
            informer.store.add_indexer(name, lambda obj: [index_text(k) for k in keys(obj)])
        return CacheIndex(self, name, informers, value, memo)

    @property
    def continuous(self) -> bool:
        """Whether every informer has listed and has seen every change since (no gap being repaired)."""
        return current(self.all())

    def check_current(self, informers: Sequence[Informer] | None = None) -> None:
        """:class:`NotCurrent` unless ``informers`` (default: all) have listed and are continuous."""
        chosen = self.all() if informers is None else informers
        if not current(chosen):
            waiting = ", ".join(i.name for i in chosen if not current((i,)))
            raise NotCurrent(f"listing, or re-listing after a watch gap: {waiting}")

    def _gap(self, lost: Informer) -> None:
        others = [informer for informer in self.all() if informer is not lost]
        log.info("%s lost its watch history: re-listing every cache (%d more)", lost.name, len(others))
        for informer in others:
            informer.relist()

    async def run(self, later: Iterable[Informer] = ()) -> None:
        """Run every informer until cancelled; the ``later`` ones start once the others have listed (on
        a busy cluster, the objects the controllers are keyed by, and the few each reads beside them,
        are listed before the thousands of pods, ConfigMaps and Services the drivers own, so the apps
        controller can start sooner)."""
        deferred = set(map(id, later))
        leading = [informer for informer in self.all() if id(informer) not in deferred]
        async with asyncio.TaskGroup() as group:
            for informer in leading:
                group.create_task(informer.run(), name=f"informer:{informer.name}")
            await self.wait_synced(leading)
            for informer in self.all():
                if id(informer) in deferred:
                    group.create_task(informer.run(), name=f"informer:{informer.name}")

    async def wait_synced(self, informers: Iterable[Informer] | None = None) -> None:
        """Until ``informers`` (default: all) have listed once."""
        await asyncio.gather(*(informer.wait_synced() for informer in (self.all() if informers is None else informers)))

    def sizes(self) -> dict[str, int]:
        """Objects cached per informer (for the start-up log line)."""
        return {f"{i.name}[{i.label_selector or '*'}]": len(i.store) for i in self.all()}
