"""Informer caches: LIST then WATCH one resource, with client-go's semantics, on kubernetes_asyncio.

An :class:`Informer` keeps a :class:`core.store.Store` of one resource in one scope (a namespace, or the whole
cluster) up to date:

* it streams the current state over a WATCH (``sendInitialEvents=true``, the API server's watch-list:
  one object per line from its watch cache, ended by a bookmark marked ``k8s.io/initial-events-end``)
  and goes on watching on the same connection; a server that refuses that (the WatchList feature off,
  a server older than 1.27) is LISTed (paged with ``limit``/``continue``) and then WATCHed from the
  list's resourceVersion. Every request carries ``allowWatchBookmarks=true`` and the server-side
  ``labelSelector``/``fieldSelector``, so objects outside the selection are never sent, decoded or
  stored;
* bookmarks and events advance the store's resourceVersion, and a watch that ends (its
  ``timeoutSeconds``, a dropped connection) resumes from it, with a backoff when it ends early;
* when continuity is lost (410 Gone / Expired, an ERROR event, an undecodable line) it LISTs again and
  **replaces** the store: an object missing from the new list is removed and handed to the handlers as
  a deletion, so no object deleted during a gap survives in the cache.

Handlers are plain callables ``handler(event_type, obj, old)`` called on the event loop after the store
changed; they must only enqueue keys (a reconciler reads the store, never the event).

How a reconciler uses the cache safely (never acting on an owner the server has deleted):

1. Reconcile only once ``informer.has_synced()``; while ``informer.continuous`` is False (a gap was
   detected and the re-list has not replaced the store yet) requeue rather than create anything.
2. Before creating children of an owner of uid U, require ``owners.store.holds_uid(U)``: after a gap
   the re-list removed a deleted owner, and its deletion enqueued its key. The create itself names U
   in its controller ownerReference, so a child created in the window before the gap was detected is
   collected by the garbage collector and is never re-created from this cache after the re-list.
3. Read your own writes: a write returns the object's new resourceVersion R; ``await
   informer.wait_for_resource_version(R)`` (or check ``store.is_at_least(R)``) before deciding on that
   object again, so a decision is never taken on a view older than the last write. resourceVersions
   are compared as integers (etcd revisions, which is what every Kubernetes API server hands out);
   an unparsable one is never "at least" anything, which only makes callers wait or requeue.

Memory: each informer keeps objects packed (``core.packing``), minus ``metadata.managedFields``
(:func:`drop_managed_fields`, the default ``transform``); pass a narrower ``transform`` for kinds
whose bodies are not needed whole. A streamed listing decodes and trims one object at a time, where a
LIST page is decoded whole first (and the process keeps its peak). Each informer holds one connection
of the client's pool.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple, Protocol

import aiohttp
import orjson

from sparkop.core.jsontypes import JSON
from sparkop.core.lines import Lines
from sparkop.core.requester import Requester, Response
from sparkop.core.store import (
    Delta,
    EventType,
    IndexFunc,
    Key,
    Store,
    Stored,
    drop_managed_fields,
    key_of,
    resource_version_of,
    revision,
    stored,
)

log = logging.getLogger(__name__)

Handler = Callable[[EventType, JSON, JSON | None], None]
GapHandler = Callable[["Informer"], None]
"""Called when an informer finds its watch lost continuity, before it re-lists."""
"""``handler(event_type, obj, old)``: ``old`` is the stored object before the change (None when added)."""
Transform = Callable[[JSON], JSON]

# A page is decoded whole before the transform trims its objects: the peak is what the process keeps
# (freed memory is rarely handed back). With 3,000 finished apps cached, pages of 500 left the
# operator 132 MiB above its start, pages of 100 left it 96 MiB (bench/scale.py's objects).
DEFAULT_PAGE_SIZE: Final = 100
DEFAULT_WATCH_TIMEOUT_S: Final = 300
# A first listing that took this long says where its time went (core.informer.Informer._log_slow_listing).
SLOW_LISTING_S: Final = 1.0
MIN_BACKOFF_S: Final = 0.1
MAX_BACKOFF_S: Final = 30.0
EARLY_END_S: Final = 1.0  # a watch that ends sooner than this without an event is treated as a failure
# How often the informer of an optional kind (core.kube.Resource.optional) that the server does not
# serve, or does not let us read, looks for it again.
ABSENT_POLL_S: Final = 30.0
# What an optional kind's LIST or WATCH answers when the kind is not served (404) or not ours to read (403).
ABSENT_STATUSES: Final = frozenset({403, 404})
# The annotation of the bookmark that ends a watch-list's initial events.
INITIAL_EVENTS_END: Final = "k8s.io/initial-events-end"
# What a server that cannot stream the initial state answers (400, 422 Invalid: sendInitialEvents or
# resourceVersionMatch "is forbidden for watch"): list instead.
WATCH_LIST_REFUSALS: Final = frozenset({400, 422})


class ResourceLike(Protocol):
    """What an informer needs to know of a resource: its REST path, apiVersion and kind."""

    @property
    def api_version(self) -> str: ...

    @property
    def kind(self) -> str: ...

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str: ...


class RecordedRequest(NamedTuple):
    """A LIST or WATCH the informer made: for tests and diagnostics."""

    verb: Literal["LIST", "WATCH"]
    path: str
    params: tuple[tuple[str, str], ...]

    def param(self, name: str) -> str | None:
        return next((v for k, v in self.params if k == name), None)


class _ContinuityLost(Exception):
    """The watch cannot resume from the store's resourceVersion: re-list and replace."""


class _Unavailable(Exception):
    """A request failed in a way the same request may get past later (connection, 429, 5xx)."""


class _WatchListRefused(Exception):
    """The server does not stream a watch's initial state: LIST instead."""


class _Absent(Exception):
    """An optional kind is not served, or not ours to read: an empty cache, looked for again later."""


@dataclass
class InformerStats:
    lists: int = 0
    relists: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    errors: int = 0
    first_sync_seconds: float | None = None


@dataclass
class Informer:
    """LIST+WATCH of ``resource`` in ``namespace`` (None: cluster-wide) into :attr:`store`.

    ``api`` sends its requests (``core.kube.Kube``: the one request path); ``resource`` anything
    with ``path()``, ``api_version`` and ``kind`` (e.g. ``core.kube.PODS``). Run it with
    ``asyncio.create_task(informer.run())`` and ``await informer.wait_synced()``."""

    api: Requester
    resource: ResourceLike
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    indexers: Mapping[str, IndexFunc] = field(default_factory=dict)
    transform: Transform = drop_managed_fields
    page_size: int = DEFAULT_PAGE_SIZE
    # Stream the initial state over the watch (``sendInitialEvents``) rather than LIST it, while the
    # server allows it.
    watch_list: bool = True
    watch_timeout_seconds: int = DEFAULT_WATCH_TIMEOUT_S
    request_timeout_seconds: float = 60.0
    max_backoff_seconds: float = MAX_BACKOFF_S
    recorded_requests: int = 64

    store: Store = field(init=False)
    stats: InformerStats = field(default_factory=InformerStats, init=False)
    requests: deque[RecordedRequest] = field(init=False)
    continuous: bool = field(default=False, init=False)
    _handlers: list[Handler] = field(default_factory=list, init=False)
    _gap_handlers: list[GapHandler] = field(default_factory=list, init=False)
    _relist_requested: bool = field(default=False, init=False)
    _must_list: bool = field(default=True, init=False)
    _listed_at: float = field(default=-EARLY_END_S, init=False)
    _watching: Any = field(default=None, init=False)  # the open watch response, closed by relist()
    # When the current attempt's watch was opened, and whether it has said anything: see _recovered().
    _watch_opened: float | None = field(default=None, init=False)
    _watch_said: bool = field(default=False, init=False)
    _synced: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    # An optional kind found absent (see _Absent): the cache is empty and current while it stays so.
    absent: str | None = field(default=None, init=False)
    _waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.store = Store(self.indexers)
        self.requests = deque(maxlen=self.recorded_requests)

    @property
    def name(self) -> str:
        return f"{self.resource.kind}@{self.namespace or '*'}"

    def add_handler(self, handler: Handler) -> None:
        """Called for every change after the store applied it (also for the first list's additions)."""
        self._handlers.append(handler)

    def add_gap_handler(self, handler: GapHandler) -> None:
        """Called when this informer's watch lost continuity (410 Gone, an ERROR event, an unexpected
        error), before its re-list: other caches of the same server may be as stale, unnoticed yet."""
        self._gap_handlers.append(handler)

    def relist(self) -> None:
        """Re-list and replace the store as soon as possible (the open watch is closed); until then the
        informer is not :attr:`continuous`. Does not call the gap handlers: the caller knows."""
        if not self.store.has_synced():
            return  # the first list is on its way anyway
        if self.absent is not None:
            return  # nothing of an absent kind can have been missed; it is looked for again anyway
        self.continuous = False
        self._relist_requested = True
        if self._watching is not None:
            self._watching.close()

    def has_synced(self) -> bool:
        return self.store.has_synced()

    async def wait_synced(self) -> None:
        """Until the first list is stored (bound it with ``asyncio.timeout``)."""
        await self._synced.wait()

    async def wait_for_resource_version(self, resource_version: str) -> None:
        """Until the cache is at least as new as ``resource_version`` (bound it with ``asyncio.timeout``;
        a version that is not an integer is never reached)."""
        want = revision(resource_version)
        if self.store.is_at_least(resource_version):
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (want if want is not None else -1, waiter)
        if want is not None:
            self._waiters.append(entry)
        try:
            await waiter
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    # -- the loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        """LIST, then WATCH for ever (until cancelled), re-listing whenever continuity is lost. Run again
        after a cancel, it resumes watching from where the store is."""
        backoff = MIN_BACKOFF_S
        # A store that has synced resumes from its resourceVersion (the server says 410 if it cannot).
        self._must_list = not self.store.has_synced()
        while True:
            if self._relist_requested:
                self._relist_requested, self._must_list = False, True
            self._watch_opened, self._watch_said = None, False
            try:
                if self._must_list and not self.watch_list:
                    await self._list_and_replace()
                if await self._watch(initial=self._must_list):
                    backoff = MIN_BACKOFF_S
                    continue
                # Ended at once with nothing said: do not hammer the server.
                await self._back_off(backoff)
                backoff = min(backoff * 2, self.max_backoff_seconds)
            except _Absent as absent:
                self._stay_absent(str(absent))
                await self._back_off(ABSENT_POLL_S)
            except _WatchListRefused as refused:
                log.info("%s: the server does not stream a watch's initial state (%s); listing", self.name, refused)
                self.watch_list = False
            except _ContinuityLost as lost:
                self.continuous, self._must_list = False, True
                log.info("%s: watch lost continuity (%s); re-listing", self.name, lost)
                self._gap()
                if time.monotonic() - self._listed_at < EARLY_END_S:
                    # A fresh list refused at once (an API server whose watch cache is still filling).
                    await self._back_off(backoff)
                    backoff = min(backoff * 2, self.max_backoff_seconds)
            except (_Unavailable, aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
                if self._relist_requested:
                    continue  # relist() closed the watch under us
                if self._recovered():
                    backoff = MIN_BACKOFF_S
                self.stats.errors += 1
                log.warning("%s: %s; retrying in %.1fs", self.name, exc or type(exc).__name__, backoff)
                await self._back_off(backoff)
                backoff = min(backoff * 2, self.max_backoff_seconds)
            except Exception:
                # Something this loop does not understand (a malformed response, a failing transform):
                # whatever the store missed meanwhile, a re-list makes it right.
                self.stats.errors += 1
                self.continuous, self._must_list = False, True
                log.exception("%s: unexpected error; re-listing in %.1fs", self.name, backoff)
                self._gap()
                await self._back_off(backoff)
                backoff = min(backoff * 2, self.max_backoff_seconds)

    def _stay_absent(self, why: str) -> None:
        """An optional kind is absent: the cache is empty and current (whatever it held is gone, and its
        handlers are told), and the next attempt lists afresh."""
        if self.absent is None:
            log.info("%s: %s; an empty cache until it is, looked for every %.0fs", self.name, why, ABSENT_POLL_S)
            self._replace({}, "", time.monotonic())
        self.absent = why
        self._must_list = True

    def _recovered(self) -> bool:
        """Whether the attempt that just failed had a working watch (it said something, or stayed open
        a while): the failure is then a new incident (an API server restart hours after the last), met
        with the shortest backoff rather than the one the last incident grew to."""
        opened = self._watch_opened
        return self._watch_said or (opened is not None and time.monotonic() - opened >= EARLY_END_S)

    def _gap(self) -> None:
        for handler in self._gap_handlers:
            try:
                handler(self)
            except Exception:
                log.exception("%s: gap handler %r failed", self.name, handler)

    async def _back_off(self, seconds: float) -> None:
        await asyncio.sleep(seconds * random.uniform(0.8, 1.2))

    def _base_params(self) -> list[tuple[str, str]]:
        params: list[tuple[str, str]] = []
        if self.label_selector:
            params.append(("labelSelector", self.label_selector))
        if self.field_selector:
            params.append(("fieldSelector", self.field_selector))
        return params

    async def _get(
        self, verb: Literal["LIST", "WATCH"], params: list[tuple[str, str]], client_timeout: aiohttp.ClientTimeout
    ) -> Response:
        path = self.resource.path(self.namespace)
        self.requests.append(RecordedRequest(verb, path, tuple(params)))
        response = await self.api.request("GET", path, params, client_timeout=client_timeout)
        if 200 <= response.status < 300:
            return response
        body = await response.read()
        response.release()
        status = _status(body)
        if response.status in ABSENT_STATUSES and getattr(self.resource, "optional", False):
            verb_text = "not served" if response.status == 404 else "not readable by this operator (403)"
            raise _Absent(f"{path} is {verb_text}")
        if response.status == 410 or status.get("reason") in ("Expired", "Gone"):
            raise _ContinuityLost(f"{response.status} {status.get('reason') or 'Gone'}")
        if ("sendInitialEvents", "true") in params and response.status in WATCH_LIST_REFUSALS:
            raise _WatchListRefused(f"{response.status} {status.get('message') or response.reason}")
        if response.status == 429 or response.status >= 500:
            raise _Unavailable(f"{verb} {path}: {response.status} {status.get('message') or response.reason}")
        # 401/403/404 and the like: a retry will not fix it, but an operator must not die of it either
        # (RBAC may be granted, a CRD installed); keep retrying with the capped backoff, loudly.
        raise _Unavailable(f"{verb} {path} refused: {response.status} {status.get('message') or response.reason}")

    async def _list_and_replace(self) -> None:
        started = time.monotonic()
        items: dict[Key, Stored] = {}
        token: str | None = None
        while True:
            params = [*self._base_params(), ("limit", str(self.page_size))]
            if token:
                params.append(("continue", token))
            try:
                response = await self._get("LIST", params, aiohttp.ClientTimeout(total=self.request_timeout_seconds))
            except _ContinuityLost:
                if token is None:
                    raise
                items, token = {}, None  # the continue token expired: start the list over
                continue
            try:
                page = orjson.loads(await response.read())
            finally:
                response.release()
            for obj in page.get("items") or ():
                obj.setdefault("apiVersion", self.resource.api_version)
                obj.setdefault("kind", self.resource.kind)
                obj = self.transform(obj)
                items[key_of(obj)] = stored(obj)
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                resource_version = str(meta.get("resourceVersion") or "")
                break
        self._replace(items, resource_version, started)

    def _replace(self, items: Mapping[Key, Stored], resource_version: str, started: float) -> None:
        """Make the store hold exactly the listed ``items`` (a LIST's, or a watch's initial events)."""
        relist = self.store.has_synced()
        self._count_listing()
        gone = 0
        for delta in self.store.replacing(items, resource_version):
            gone += delta.type == "DELETED"
            self._dispatch((delta,))
        self._mark_synced(started)
        if relist:
            log.info("%s: re-listed %d objects (%d gone since the gap)", self.name, len(items), gone)

    def _streamed(self, resource_version: str, started: float) -> None:
        """A first listing streamed into the empty store (``_on_initial_line`` without a listing) has
        ended at its bookmark: the store is whole as of ``resource_version``."""
        self._count_listing()
        self.store.listed(resource_version)
        self._mark_synced(started)

    def _count_listing(self) -> None:
        self.absent = None
        self.stats.lists += 1
        self.stats.relists += self.store.has_synced()
        self._must_list, self._listed_at = False, time.monotonic()
        # A re-list asked for while this one was under way may need what this list began before.
        self.continuous = not self._relist_requested

    def _mark_synced(self, started: float) -> None:
        if self.stats.first_sync_seconds is None:
            self.stats.first_sync_seconds = time.monotonic() - started
        self._synced.set()
        self._wake()

    async def _watch(self, initial: bool) -> bool:
        """Watch until the server ends the watch: from the store's resourceVersion, or (``initial``)
        from the current state, streamed first as additions: the cache has them whole (synced) at
        the bookmark that ends them. True if it ran normally (it said something or lasted a while),
        False if it ended at once."""
        if self._relist_requested:
            return True
        server_timeout = int(self.watch_timeout_seconds * random.uniform(1.0, 1.2))
        params = [*self._base_params(), ("watch", "true"), ("allowWatchBookmarks", "true")]
        if initial:
            # No resourceVersion with NotOlderThan: as fresh as a quorum read, as a LIST would be.
            params += [("sendInitialEvents", "true"), ("resourceVersionMatch", "NotOlderThan")]
        else:
            assert self.store.resource_version is not None
            params.append(("resourceVersion", self.store.resource_version))
        params.append(("timeoutSeconds", str(server_timeout)))
        read_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.request_timeout_seconds, sock_read=server_timeout + 30
        )
        started, cpu_started = time.monotonic(), time.process_time()
        response = await self._get("WATCH", params, read_timeout)
        answered = time.monotonic() - started
        self._watch_opened = started
        self.stats.watches += 1
        said = False
        listing: dict[Key, Stored] | None = {} if initial else None
        # The first listing of an empty cache is stored and told object by object as it streams in:
        # each object is decoded once (a start over 10,000 apps and their SparkDrivers spends a fifth
        # less). Nothing reads the cache before it has synced (core.caches refuses), and no queue it
        # feeds runs before then. Any later listing (after a gap, or a first one cut short) is
        # collected whole and replaces the store, which tells what changed and what went.
        streamed = initial and not self.store.has_synced() and not len(self.store)
        first_line = last_object = 0.0
        self._watching = response
        reader = Lines(response)
        reader.gathering = listing is not None
        try:
            async for line in reader:
                if self._relist_requested:
                    break
                said = self._watch_said = True
                if listing is None:
                    self._on_line(line)
                elif streamed:
                    if (end := self._on_initial_line(line, None)) is not None:
                        self._streamed(end, started)
                        listing = None
                        reader.gathering = False
                        took, cpu = time.monotonic() - started, time.process_time() - cpu_started
                        self._log_slow_listing(took, cpu, answered, first_line, last_object)
                    else:
                        last_object = time.monotonic() - started
                        first_line = first_line or last_object
                elif (end := self._on_initial_line(line, listing)) is not None:
                    self._replace(listing, end, started)
                    listing = None
                    reader.gathering = False
        finally:
            self._watching = None
            response.release()
        if listing is not None and not self._relist_requested:
            told = len(self.store) if streamed else len(listing)
            raise _Unavailable(f"the watch ended after {told} of its initial events, before their end")
        return said or time.monotonic() - started >= EARLY_END_S

    def _log_slow_listing(self, took: float, cpu: float, answered: float, first: float, last: float) -> None:
        """Where a slow first listing spent its time: waiting for the API server's answer (a watch-list
        waits until the server's cache is as fresh as a quorum read), streaming the objects (this
        process busy all along, or waiting for them), or waiting for the bookmark that ends them."""
        if took >= SLOW_LISTING_S:
            log.info(
                "%s: listed %d objects in %.2fs (the API server answered after %.2fs, its first object came at"
                " %.2fs, its last at %.2fs; this process used %.2f CPU-s meanwhile)",
                self.name,
                len(self.store),
                took,
                answered,
                first,
                last,
                cpu,
            )

    def _on_initial_line(self, line: bytes, listing: dict[Key, Stored] | None) -> str | None:
        """One line of a watch's initial events, into ``listing`` (None: into the store, told to the
        handlers); at the bookmark that ends them, the resourceVersion they are the state as of."""
        kind, obj = _event(line)
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
            meta = obj.get("metadata") or {}
            if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                return resource_version_of(obj)
            return None
        if kind == "ERROR":
            raise _ContinuityLost(f"watch ERROR {obj.get('code')} {obj.get('reason')}: {obj.get('message')}")
        self.stats.events += 1
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            raise _ContinuityLost(f"unknown watch event type {kind!r}")
        if listing is None:
            obj = self.transform(obj)
            self._dispatch(self.store.delete(obj) if kind == "DELETED" else self.store.upsert(obj))
        elif kind == "DELETED":
            listing.pop(key_of(obj), None)
        else:
            obj = self.transform(obj)
            listing[key_of(obj)] = stored(obj)
        return None

    def _on_line(self, line: bytes) -> None:
        kind, obj = _event(line)
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
            self.store.advance(resource_version_of(obj))
            self._wake()
            return
        if kind == "ERROR":
            code, reason = obj.get("code"), obj.get("reason")
            raise _ContinuityLost(f"watch ERROR {code} {reason}: {obj.get('message')}")
        self.stats.events += 1
        obj = self.transform(obj)
        if kind == "DELETED":
            deltas = self.store.delete(obj)
        elif kind in ("ADDED", "MODIFIED"):
            deltas = self.store.upsert(obj)
        else:
            raise _ContinuityLost(f"unknown watch event type {kind!r}")
        self.store.advance(resource_version_of(obj))
        self._dispatch(deltas)
        self._wake()

    def _dispatch(self, deltas: Sequence[Delta]) -> None:
        for delta in deltas:
            for handler in self._handlers:
                try:
                    handler(delta.type, delta.obj, delta.old)
                except Exception:
                    log.exception("%s: handler %r failed on %s %s", self.name, handler, delta.type, key_of(delta.obj))

    def _wake(self) -> None:
        if not self._waiters:
            return
        have = revision(self.store.resource_version)
        if have is None:
            return
        for want, waiter in list(self._waiters):
            if want <= have and not waiter.done():
                waiter.set_result(None)


def _event(line: bytes) -> tuple[str, JSON]:
    """A watch line's event type and object."""
    try:
        event = orjson.loads(line)
        kind, obj = event["type"], event["object"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise _ContinuityLost(f"undecodable watch line: {exc}") from None
    if not isinstance(obj, dict):
        raise _ContinuityLost(f"a watch event's object is a {type(obj).__name__}")
    return str(kind), obj


def _status(body: bytes) -> dict[str, Any]:
    try:
        status = json.loads(body or b"{}")
    except ValueError:
        return {}
    return status if isinstance(status, dict) else {}
