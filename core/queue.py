"""A keyed work queue: the loop every sparkop controller runs.

Informers (``core.caches``) watch and index; their change handlers only ``enqueue`` the key of the
object to reconcile (an owned object's change maps to its owner's key). The queue guarantees, as
client-go's does:

* a key is reconciled by at most one worker at a time;
* a key enqueued while it is being reconciled is reconciled once more afterwards;
* many enqueues of a waiting key collapse into one reconcile;
* keys of new objects (created, and acted on by no pass yet) go ahead of the passes that only bring
  status up to date, which are never passed over more than ``NEW_IN_A_ROW`` times in a row: in a
  burst of thousands of apps each one's driver pod starts sooner;
* a reconcile that asks to be requeued after N seconds, or that failed (backoff), runs again; a
  reconcile that succeeds supersedes what was asked for before it began (its own decision on the
  newest view says when the key is due next, if ever), so a requeue left over from an earlier pass
  (a window of held progress that a later write carried, a backoff) makes no pass of its own;
* a reconcile stopped by its namespace being deleted (``NamespaceTerminating``) ends quietly;
* a reconcile that met caches being re-listed after a watch gap (``NotCurrent``) runs again shortly,
  quietly: it decided nothing.

Nothing here is a fact the controllers depend on after a restart: on start the informers list every
object, so every key is enqueued again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from prometheus_client import Counter, Gauge, Histogram

from sparkop.core.caches import NotCurrent
from sparkop.core.kube import Conflict, NamespaceTerminating, Occupied, transient_error

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

RECONCILES = Counter("sparkop_reconcile_total", "Reconciles by controller and result", ["controller", "result"])
RECONCILE_SECONDS = Histogram(
    "sparkop_reconcile_duration_seconds",
    "Time spent in one reconcile",
    ["controller"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
QUEUE_DEPTH = Gauge("sparkop_queue_depth", "Keys waiting to be reconciled", ["controller"])

OCCUPIED_MAX_BACKOFF = 1.0
NOT_CURRENT_RETRY_S = 0.1
# How many new objects' keys the workers take in a row while other keys wait.
NEW_IN_A_ROW: Final = 8


@dataclass(frozen=True)
class Result:
    """What a pass tells the queue: when its key must run again even without events (None: only on
    an event)."""

    requeue_after: float | None = None

    @classmethod
    def done(cls) -> Result:
        return cls()

    @classmethod
    def after(cls, seconds: float | None) -> Result:
        return cls(seconds)

    @classmethod
    def now(cls) -> Result:
        return cls(0.0)


Reconcile = Callable[[K], Awaitable[Result]]
"""Reconcile one key."""


E = TypeVar("E", bound=BaseException)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from, outermost first."""
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def in_chain(exc: BaseException, kind: type[E]) -> E | None:
    """The ``kind`` exception that ``exc`` is, or was raised from (a controller may wrap the client's
    exceptions to say what it was doing)."""
    return next((seen for seen in _chain(exc) if isinstance(seen, kind)), None)


def _passing(exc: BaseException) -> str | None:
    """What went wrong, when ``exc`` is, or was raised from, an error a retry may get past (a lost
    connection, a timeout, 5xx or 429); None otherwise."""
    for seen in _chain(exc):
        doing = str(exc) if seen is not exc else "the reconcile"
        if (error := transient_error(seen, doing)) is not None:
            return str(error["message"])
    return None


class _Ready(Generic[K]):
    """The keys due for a pass, in two lanes: new objects' ahead of the rest, which is served at least
    once every ``NEW_IN_A_ROW + 1`` takes while it holds keys. A take from a lane that holds keys
    does not suspend (as ``asyncio.Queue.get`` would not)."""

    def __init__(self) -> None:
        self._new: deque[K] = deque()
        self._rest: deque[K] = deque()
        self._new_in_a_row = 0
        self._held = asyncio.Semaphore(0)

    def put(self, key: K, *, new: bool) -> None:
        (self._new if new else self._rest).append(key)
        self._held.release()

    async def get(self) -> K:
        await self._held.acquire()
        if self._new and (not self._rest or self._new_in_a_row < NEW_IN_A_ROW):
            self._new_in_a_row += 1
            return self._new.popleft()
        self._new_in_a_row = 0
        return self._rest.popleft()


@dataclass
class WorkQueue(Generic[K]):
    name: str
    reconcile: Reconcile[K]
    workers: int = 4
    base_backoff: float = 0.05
    max_backoff: float = 30.0
    # Told the namespace when a reconcile met NamespaceTerminating (the shared runtime remembers it).
    on_namespace_terminating: Callable[[str], None] | None = None

    _ready: _Ready[K] = field(default_factory=_Ready, init=False)
    _waiting: set[K] = field(default_factory=set, init=False)
    _active: set[K] = field(default_factory=set, init=False)
    _again: set[K] = field(default_factory=set, init=False)
    # A delayed ask per key, with when (the loop's clock) it was last asked for: asks merged into one
    # timer are all covered only by a pass that began after the latest of them.
    _timers: dict[K, tuple[asyncio.TimerHandle, float]] = field(default_factory=dict, init=False)
    _failures: dict[K, int] = field(default_factory=dict, init=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        # Read when /metrics is scraped, not set on every enqueue (a gauge's set takes a lock: a
        # tenth of what a start spends filing each listed object).
        QUEUE_DEPTH.labels(self.name).set_function(lambda: len(self._waiting))
        # The series every pass touches, looked up once (a lookup takes a lock and checks the labels).
        self._seconds = RECONCILE_SECONDS.labels(self.name)
        self._ok = RECONCILES.labels(self.name, "ok")

    def enqueue(self, key: K, after: float = 0.0, *, new: bool = False) -> None:
        """Ask for ``key`` to be reconciled now, or after ``after`` seconds (an earlier ask wins).
        ``new``: the key of an object no pass has acted on yet, taken ahead of the others (a key
        already waiting keeps its place).

        Safe to call from any thread (it hands the call to the queue's loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or (self._loop is not None and loop is not self._loop):
            if self._loop is None:
                raise RuntimeError(f"work queue {self.name!r} is not running yet")
            self._loop.call_soon_threadsafe(lambda: self.enqueue(key, after, new=new))
            return
        if after > 0:
            asked = self._timers.get(key)
            now = loop.time()
            due = now + after
            if asked is not None and asked[0].when() <= due:
                self._timers[key] = (asked[0], now)
                return
            if asked is not None:
                asked[0].cancel()
            self._timers[key] = (loop.call_at(due, self._fire, key), now)
            return
        if key in self._active:
            self._again.add(key)
        elif key not in self._waiting:
            self._waiting.add(key)
            self._ready.put(key, new=new)

    def enqueue_soon(self, key: K, within: float) -> None:
        """Ask for ``key`` to be reconciled within ``within`` seconds, together with every other ask
        for it meanwhile: a burst of changes to what one key owns (a pod's phases, its executors
        appearing) makes one pass, not one per change. A pass already due covers this ask; a later
        one (a requeue minutes away) is brought forward."""
        if within <= 0:
            self.enqueue(key)
        elif key not in self._waiting and key not in self._again:
            self.enqueue(key, after=within)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.enqueue(key)

    async def run(self) -> None:
        """Run the workers until cancelled."""
        self._loop = asyncio.get_running_loop()
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(self.workers):
                    group.create_task(self._work())
        finally:
            for timer, _ in self._timers.values():
                timer.cancel()
            self._timers.clear()

    async def _work(self) -> None:
        while True:
            key = await self._ready.get()
            self._waiting.discard(key)
            self._active.add(key)
            try:
                await self._process(key)
            finally:
                self._active.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self.enqueue(key)
            # A pass that needs no request never suspends, and neither does a get from a queue that
            # holds keys: without this a worker would run the 10,000 passes of a restart in one go,
            # and the watches, the metrics endpoint and the leader's lease renewals would wait for it.
            await asyncio.sleep(0)

    async def _process(self, key: K) -> None:
        began = asyncio.get_running_loop().time()
        started = time.perf_counter()
        try:
            requeue_after = (await self.reconcile(key)).requeue_after
        except Occupied as exc:
            self._failed(key, exc)
            return
        except Conflict:
            # Our view was stale; a fresh event is on its way, but do not depend on it.
            RECONCILES.labels(self.name, "conflict").inc()
            self.enqueue(key, after=self.base_backoff)
            return
        except NotCurrent:
            RECONCILES.labels(self.name, "not_current").inc()
            self.enqueue(key, after=NOT_CURRENT_RETRY_S)
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failed(key, exc)
            return
        finally:
            self._seconds.observe(time.perf_counter() - started)
        self._failures.pop(key, None)
        self._ok.inc()
        asked = self._timers.get(key)
        if asked is not None and asked[1] <= began:
            # Every ask it holds came before this pass read the caches: what they were for, this pass
            # has decided on.
            asked[0].cancel()
            del self._timers[key]
        if requeue_after is not None:
            self.enqueue(key, after=max(requeue_after, 0.001))

    def _failed(self, key: K, exc: Exception) -> None:
        if (terminating := in_chain(exc, NamespaceTerminating)) is not None:
            # Not an error: the namespace and everything in it are going. No retry.
            RECONCILES.labels(self.name, "namespace_terminating").inc()
            log.debug("%s: %s stopped: %s", self.name, key, terminating)
            if self.on_namespace_terminating is not None:
                self.on_namespace_terminating(terminating.namespace)
            self._failures.pop(key, None)
            return
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        if (occupied := in_chain(exc, Occupied)) is not None:
            # A name is held by an object on its way out: free in a moment, or after a garbage
            # collector's resync. Not an error; keep looking at least every OCCUPIED_MAX_BACKOFF.
            RECONCILES.labels(self.name, "occupied").inc()
            log.debug("%s: %s waits: %s", self.name, key, occupied)
            self.enqueue(key, after=min(OCCUPIED_MAX_BACKOFF, self.base_backoff * 2**failures))
            return
        delay = min(self.max_backoff, self.base_backoff * 2**failures)
        RECONCILES.labels(self.name, "error").inc()
        if (passing := _passing(exc)) is not None:
            # The API server restarting, overloaded or out of reach: expected in a cluster's life and
            # retried; a line says what and why (a traceback is for what a retry cannot mend).
            log.warning(
                "%s: reconcile of %s failed (%d in a row), %s; retrying in %.2fs",
                self.name,
                key,
                failures,
                passing,
                delay,
            )
        else:
            log.error(
                "%s: reconcile of %s failed (%d in a row); retrying in %.2fs",
                self.name,
                key,
                failures,
                delay,
                exc_info=exc,
            )
        self.enqueue(key, after=delay)
