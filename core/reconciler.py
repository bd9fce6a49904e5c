"""One reconciler skeleton for every sparkop controller: the action vocabulary, the :class:`Plan` a
pure ``decide(observed, now)`` returns, and the :class:`Applier` that carries a plan out.

A controller is registrations + ``observe`` + ``decide``; this module is the rest. The apply order
is fixed:

1. ``before_status``: the creates, ensures and deletes whose *result* the status write records
   (a SparkDriver's ConfigMaps and Service, then its driver pod, whose name status gives only once
   the API server accepted it; a SparkApplication's Spark UI objects). In plan order; a refusal ends
   the pass before anything is written.
2. the status write, guarded by the resourceVersion the decision was made from. A Conflict (the
   object changed since) ends the pass: the queue reconciles again from a fresh view, nothing below
   runs. Written when it changed, and also when ``after_status`` is not empty: the write is then the
   proof that those actions were decided on the newest object. Once it succeeded, the plan's
   :class:`Observation` s are recorded (metrics of transitions: counted once, by the one write that
   makes each transition). A plan that marks its status change ``status_can_wait`` (progress that
   every later pass derives again, with nothing in ``after_status``) may have the write, its events
   and observations held back for up to :data:`SETTLE_SECONDS` from the first pass that held one:
   the pass ends with a requeue, and the change is written once with whatever followed it.
3. events, which report what the status write recorded (never posted for a write that failed),
   sent together with
4. ``after_status``: what may only happen once status holds the facts behind it: a create that
   status counted first (the SparkDriver of run n, after ``lastRun = n`` was written), patches (a
   driver pod's finalizer is released only once its outcome is in status), deletes.

Actions marked ``concurrent`` that stand next to each other in a list are sent at once (see
:class:`Plan`): a pass costs the API server's latency once per dependent step, not once per write.

Why two places for a create rather than one order by kind of action: the two controllers need both
"create, then record" (a driver pod is named in status only once it exists, so a pod named there was
accepted) and "record, then create" (a run is counted before its SparkDriver exists, so a crash never
leaves an uncounted run). ``decide`` puts each action where the fact it depends on is safe.

What the API server answers is observed, not acted on here: a refusal (400/403/422, or a name held
by an object that is not ours, :meth:`Rules.refusal`) and a transient error (5xx, 429, timeouts,
:meth:`Rules.transient`) are *remembered* per key and handed to the next pure pass
(:class:`Learnt`), which decides what they mean (SubmissionFailed, a lastError, a Warning event).
A refusal ends the pass with :class:`Learned`: the shell decides again at once from the same cache.

This module imports nothing of sparkop: the client is a :class:`Client` and its error rules
:class:`Rules`, both Protocols that ``core.kube`` satisfies.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

from sparkop.core.jsontypes import JSON

S = TypeVar("S")
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

# Refusals remembered per key (the oldest dropped first); a restarted operator tries them again.
MAX_REFUSALS_PER_KEY: Final = 16
# A patch whose resourceVersion precondition failed is looked at again this soon.
PATCH_CONFLICT_RETRY_SECONDS: Final = 0.05
# A patch or delete not sent again because ours went through already: its watch event brings the key
# back; this is only the safety net should that event be lost.
AWAITING_CACHE_SECONDS: Final = 1.0
# How long a status change a plan marks ``status_can_wait`` may be held back, from the first pass that
# held it: the progress that follows it within this window (a driver pod scheduled, its executors
# pending, then running) goes out in one write, usually with the next change that cannot wait. Under
# load a pod's steps come many seconds apart (a driver pod Pending for 10 s and more, its executors
# pending, then running, well before its end): a window shorter than that saves nothing. Every view a
# user reads of that progress (a SparkDriver's counts, their copy on its app) is at most this late.
SETTLE_SECONDS: Final = 30.0
# A create of ours the cache has yet to show is not sent again (it could only meet 409) until the cache
# shows it (:meth:`Applier.seen`), or for at most this long.
CREATED_RECENTLY_SECONDS: Final = 10.0


# ---------------------------------------------------------------------------------------------------
# the action vocabulary


@dataclass(frozen=True)
class _Manifested:
    """An action on the object a manifest describes."""

    manifest: JSON

    @property
    def kind(self) -> str:
        return str(self.manifest["kind"])

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


@dataclass(frozen=True)
class Create(_Manifested):
    """Create ``manifest``. A 409 is success only when the existing object's controller owner is the
    manifest's (our own retried create); otherwise it is a refusal naming the holder."""

    reason: str = field(default="Create", compare=False)
    # Depends on no action next to it that is ``concurrent`` too: they are sent together (see Plan).
    concurrent: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Ensure(_Manifested):
    """Create ``manifest``, or, when it exists as ours, patch it to the manifest's labels,
    annotations and spec (an object edited or restored by hand is put back)."""

    reason: str = field(default="Ensure", compare=False)
    concurrent: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Patch:
    """A patch of an object in the plan's namespace, decided from the object at ``resource_version``.

    A merge patch (``body`` a dict) is refused, and looked at again soon, if the object changed since
    then. A JSON patch (``body`` a list of RFC 6902 operations) carries its own preconditions
    (``test`` operations on the fields it changes), so changes elsewhere (a kubelet writing the pod's
    status) do not refuse it."""

    api_version: str
    kind: str
    name: str
    body: Any
    resource_version: str | None = None
    reason: str = field(default="Patch", compare=False)
    concurrent: bool = field(default=False, compare=False)
    # "status": the status subresource of another controller's object (a scheduler's, which reads
    # what its job controller writes there).
    subresource: str | None = None

    @property
    def json_patch(self) -> bool:
        return isinstance(self.body, list)


@dataclass(frozen=True)
class Delete:
    """Delete an object of the plan's namespace. ``uid`` is a precondition, so a same-named successor
    is never hit; None only for an object never observed (created just before a crash) whose name is
    unique."""

    api_version: str
    kind: str
    name: str
    uid: str | None
    reason: str = field(default="Delete", compare=False)
    concurrent: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


Action = Create | Ensure | Patch | Delete


@dataclass(frozen=True)
class Observation:
    """A metric sample the pass decided along with a transition in its status (a run submitted, an
    app completed). The Applier records it only after the status write that makes the transition
    has succeeded: a write refused (Conflict) or never made (a crash) records nothing, and the pass
    that gets through records it, so each transition is counted once. ``labels``: those the sample
    itself carries (a reason); the object's own (namespace, labels) are the recorder's to read."""

    metric: str
    value: float = 1.0
    labels: tuple[tuple[str, str], ...] = ()


Record = Callable[[JSON, Observation], None]
"""Records one observation for the object as its status write left it."""


def refusal_key(action: Create | Ensure) -> str:
    """How a refused create is remembered: a Create by kind and name (a name refused is not tried
    again while the memory lasts), an Ensure by kind, name and content (changed content is tried anew)."""
    if isinstance(action, Create):
        return f"{action.kind}/{action.name}"
    text = json.dumps(action.manifest, sort_keys=True, separators=(",", ":"), default=str)
    return f"{action.kind}/{action.name}/{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def refused(refusals: Mapping[str, Refusal], action: Create | Ensure) -> Refusal | None:
    """The refusal remembered for ``action``, if any. An Ensure's key hashes its whole manifest, so it
    is worked out only when something was refused at all (almost never, and asked every pass)."""
    return refusals.get(refusal_key(action)) if refusals else None


@dataclass(frozen=True)
class Plan(Generic[S]):
    """What one pass wants, applied in the module's fixed order. ``status`` None: leave it as it is.

    Within ``before_status`` and ``after_status`` actions run one after another in plan order, except
    that a run of consecutive actions marked ``concurrent`` is sent at once (a driver's ConfigMaps and
    Service, its executors' adoptions): the pass goes on when all of them are done, and the first
    error in plan order is the pass's. Events are posted together, alongside ``after_status``."""

    status: S | None = None
    before_status: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
    after_status: tuple[Action, ...] = ()
    requeue_after: float | None = None
    # Recorded right after a successful status write of this plan, never otherwise.
    observations: tuple[Observation, ...] = ()
    # The status change is progress that every later pass derives again from what it observes (a
    # pod's phase, executor counts): the Applier may hold the write, and its events and observations,
    # back for up to SETTLE_SECONDS, so that changes that follow each other are written once. Never
    # set when a fact only this write would keep changes (a count, an outcome, a name created).
    status_can_wait: bool = False
    # Deciding again on what this plan's status write leaves changes nothing: no status change, no
    # event, no action this plan does not take (the Applier does not send those again), no earlier
    # requeue. The pass then ends at the write rather than deciding again (core.controller); the
    # write's echo still asks for no pass, and anything else that changed meanwhile enqueued the key.
    # Each decide that sets it has a test proving the property over any history.
    settled: bool = False

    @property
    def actions(self) -> tuple[Action, ...]:
        return self.before_status + self.after_status

    @property
    def creates(self) -> tuple[Create | Ensure, ...]:
        return tuple(a for a in self.actions if isinstance(a, Create | Ensure))

    @property
    def patches(self) -> tuple[Patch, ...]:
        return tuple(a for a in self.actions if isinstance(a, Patch))

    @property
    def deletes(self) -> tuple[Delete, ...]:
        return tuple(a for a in self.actions if isinstance(a, Delete))


# ---------------------------------------------------------------------------------------------------
# what the API server said, for the next pass


@dataclass(frozen=True)
class Refusal:
    """The API server refused a create for a reason a retry will not fix (400/403/422, or 409 on a
    name held by an object that is not ours)."""

    code: int
    reason: str  # the API server's Status reason, e.g. Forbidden, Invalid, AlreadyExists
    message: str

    def describe(self, what: str | None = None, limit: int = 4096) -> str:
        text = f"{self.code} {self.reason}: {self.message}"
        return (f"{what} refused by the API server ({text})" if what else text)[:limit]


@dataclass(frozen=True)
class Learnt:
    """What applying earlier plans of one object taught: refusals by :func:`refusal_key`, and the last
    transient error as a lastError ``{reason, message, time}`` (until a pass that saw it got through)."""

    refusals: Mapping[str, Refusal] = field(default_factory=dict)
    transient: Mapping[str, Any] | None = None


class Learned(Exception):
    """A create of the plan was refused: remembered; decide again (the refusal is now observed)."""


class ApplyFailed(RuntimeError):
    """An API call of a plan failed; ``doing`` says which (the API error is the ``__cause__``)."""

    def __init__(self, doing: str) -> None:
        super().__init__(doing)
        self.doing = doing


class Client(Protocol):
    """The writes an Applier makes (``core.kube.Kube``). ``resource`` is what :meth:`Rules.resource`
    returns for a kind."""

    async def create(self, body: JSON) -> bool: ...

    async def patch(
        self,
        resource: Any,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: Literal["merge", "json"] = ...,
        subresource: str | None = ...,
    ) -> JSON | None: ...

    async def delete(self, resource: Any, namespace: str | None, name: str, *, uid: str | None = None) -> Any:
        """The object as the deletion left it (a JSON object), or anything else when there is no such
        answer (gone already)."""

    async def patch_status(
        self,
        resource: Any,
        namespace: str,
        name: str,
        *,
        old: Mapping[str, Any],
        new: Mapping[str, Any],
        resource_version: str,
    ) -> JSON | None: ...

    async def event(
        self, regarding: JSON, *, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None: ...


class Rules(Protocol):
    """The client layer's error rules, as the Applier needs them."""

    def resource(self, api_version: str, kind: str) -> Any:
        """The client's handle for a kind."""

    def refusal(self, exc: BaseException) -> Refusal | None:
        """``exc`` as a refusal a retry will not fix (remembered for the next pass), or None."""

    def transient(self, exc: BaseException, doing: str) -> JSON | None:
        """``exc`` as a lastError a retry may get past (5xx, 429, timeout, lost connection), or None."""

    def stale(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the object changed since it was read (a resourceVersion precondition)."""

    def for_the_queue(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the work queue's to handle as it is (Conflict: reconcile again; a name on
        its way out: wait), never wrapped in ApplyFailed."""


Decision = Callable[[str, str, str], None]
"""Logs one decision line: (object, what is done, reason)."""


@dataclass(frozen=True)
class Applied:
    gone: bool = False  # the object vanished at its status write: nothing after it ran
    requeue_after: float | None = None
    written: JSON | None = None  # the object as its status write returned it
    # The status write gave the object a new resourceVersion. Its watch event is this write's own
    # (:meth:`Applier.own_write`): the pass that made it decides again on what it wrote instead.
    new_version: bool = False


@dataclass
class _Memory:
    uid: str
    refusals: dict[str, Refusal] = field(default_factory=dict)
    transient: JSON | None = None
    # "kind/name" -> the resourceVersion a patch of ours was made from, and the one the API server gave
    # the patched object: the same patch decided again from a cache that has not seen it yet (that
    # version, or an update made just before ours) is bound to fail its precondition.
    patched: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    # uids we deleted (uid-preconditioned): a stale cache still showing one asks for nothing new.
    deleted: set[str] = field(default_factory=set)
    # "kind/name" -> the resourceVersion our last patch or delete of it gave the object (the echo of
    # that change alone: :meth:`Applier.own_change`).
    changed_to: dict[str, str] = field(default_factory=dict)
    # When (the Applier's clock) a pass first held back a status change that can wait; None: none held.
    settling_since: float | None = None
    # The resourceVersion our last status write was made from, and the one it gave the object: a pass
    # decided from a cache that has yet to show that write would only meet a Conflict.
    status_written: tuple[str, str | None] | None = None
    # "kind/name" -> when (the Applier's clock) a create of ours of it succeeded (or met our own).
    created: dict[str, float] = field(default_factory=dict)


def _before_ours(seen: str, ours: tuple[str, str | None] | None) -> bool:
    """Whether a cache showing the object at version ``seen`` has yet to see our patch ``ours`` (the
    version it was made from, the version it made). Versions compare as numbers where they are
    (as the API server's are; a client may not rely on more than equality otherwise)."""
    if ours is None:
        return False
    made_from, made = ours
    if seen == made_from:
        return True
    if made is None or not (seen.isdigit() and made.isdigit()):
        return False
    return int(seen) < int(made)


def _version_of(answer: Any) -> str | None:
    """The resourceVersion of an API server's answer that is an object (None for any other answer)."""
    if not isinstance(answer, dict):
        return None
    made = (answer.get("metadata") or {}).get("resourceVersion")
    return str(made) if made else None


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _batches(actions: tuple[Action, ...]) -> list[tuple[Action, ...]]:
    """Plan order, cut into what runs together: each run of ``concurrent`` actions, every other alone."""
    batches: list[tuple[Action, ...]] = []
    for action in actions:
        if action.concurrent and batches and batches[-1][-1].concurrent:
            batches[-1] = (*batches[-1], action)
        else:
            batches.append((action,))
    return batches


async def _all(calls: Iterable[Awaitable[T]]) -> list[T]:
    """Await ``calls`` together; each runs to its end, then the first error in their order is raised."""
    pending = list(calls)
    if len(pending) == 1:
        return [await pending[0]]
    results = await asyncio.gather(*pending, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


class Applier(Generic[K]):
    """Applies plans through a :class:`Client`, and remembers per key (and object uid) what the API
    server refused or failed to do, for the next pass (:meth:`learnt`)."""

    def __init__(
        self,
        client: Client,
        rules: Rules,
        decision: Decision,
        record: Record | None = None,
        *,
        settle_seconds: float = SETTLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.rules = rules
        self.decision = decision
        self.record = record
        self.settle_seconds = settle_seconds
        self.clock = clock
        self._memory: dict[K, _Memory] = {}

    # -- memory ----------------------------------------------------------------------------------

    def learnt(self, key: K, uid: str) -> Learnt:
        """What earlier passes of this object learnt (a new object of the same name starts afresh)."""
        memory = self._memory.get(key)
        if memory is None or memory.uid != uid:
            return Learnt()
        return Learnt(dict(memory.refusals), memory.transient)

    def forget(self, key: K) -> None:
        """The object is gone: what was learnt about it is no news to anyone."""
        self._memory.pop(key, None)

    def remember_refusal(self, key: K, uid: str, action_key: str, refusal: Refusal) -> None:
        memory = self._own(key, uid)
        memory.refusals[action_key] = refusal
        while len(memory.refusals) > MAX_REFUSALS_PER_KEY:
            del memory.refusals[next(iter(memory.refusals))]

    def _own(self, key: K, uid: str) -> _Memory:
        memory = self._memory.get(key)
        if memory is None or memory.uid != uid:
            memory = self._memory[key] = _Memory(uid)
        return memory

    # -- applying --------------------------------------------------------------------------------

    async def apply(
        self,
        key: K,
        body: JSON | None,
        plan: Plan[S],
        status_json: Callable[[S], JSON],
        *,
        namespace: str,
        seen: Learnt | None = None,
        owner_current: Callable[[], None] | None = None,
    ) -> Applied:
        """Apply ``plan`` for the object ``body`` as observed (None: it is gone; only its leftovers are
        acted on: no status, no events). ``body`` must be the caller's own copy: it takes the written
        status and resourceVersion. ``seen``: what the pass that made the plan was told; a
        transient error it saw is forgotten once the plan got through (the status recorded it).
        ``owner_current`` is called before each create and raises when the owner of what is created is
        no longer current in the cache (a child is never created for an owner the server deleted).

        Raises :class:`Learned` after remembering a refusal, the client's own errors the queue handles
        (Conflict, ...), and :class:`ApplyFailed` for anything else (a transient one remembered)."""
        uid = str(((body or {}).get("metadata") or {}).get("uid", ""))
        try:
            applied = await self._apply(key, uid, body, plan, status_json, namespace, owner_current)
        except ApplyFailed as exc:
            error = self.rules.transient(exc.__cause__ or exc, exc.doing)
            if error is not None and body is not None:
                self._own(key, uid).transient = error
            raise
        if body is None:
            self.forget(key)
        elif seen is not None and seen.transient is not None and (memory := self._memory.get(key)) is not None:
            memory.transient = None
        return applied

    async def _apply(
        self,
        key: K,
        uid: str,
        body: JSON | None,
        plan: Plan[S],
        status_json: Callable[[S], JSON],
        namespace: str,
        owner_current: Callable[[], None] | None,
    ) -> Applied:
        where = f"{namespace}/{(body or {}).get('metadata', {}).get('name', key)}"

        async def act(actions: tuple[Action, ...]) -> float | None:
            requeue: float | None = None
            for batch in _batches(actions):
                delays = await _all(self._do(key, uid, namespace, where, action, owner_current) for action in batch)
                for delay in delays:
                    requeue = _earliest(requeue, delay)
            return requeue

        if body is not None and self._behind_our_write(key, uid, body):
            # Decided from a view older than our own last status write: its write would be refused
            # (Conflict), and its actions were decided from that old view. Our write's watch event
            # brings the key back (the requeue is only the safety net should that event be lost).
            return Applied(requeue_after=AWAITING_CACHE_SECONDS)
        before, after_status = (
            self._not_made_yet(key, uid, plan.before_status),
            self._not_made_yet(key, uid, plan.after_status),
        )
        if len(before) + len(after_status) < len(plan.actions):
            # A create of ours the cache has yet to show: its watch event brings the key back.
            plan = replace(
                plan,
                before_status=before,
                after_status=after_status,
                requeue_after=_earliest(plan.requeue_after, AWAITING_CACHE_SECONDS),
            )
        requeue = _earliest(plan.requeue_after, await act(plan.before_status))
        written: JSON | None = None
        new_version = False
        if plan.status is None:
            self._settled(key)  # nothing changed: whatever was held went back
        elif body is not None:
            new = status_json(plan.status)
            old = body.get("status") or {}
            changed = new != old
            wait = self._settling(key, uid, plan) if changed else None
            if not changed:
                self._settled(key)
            if wait is not None:
                # Held back, with the events that report it: a later pass decides it again from what
                # it observes then, and writes once what followed meanwhile.
                return Applied(requeue_after=_earliest(requeue, wait))
            if changed or plan.after_status:
                written = await self._doing("writing the status", self._write_status(body, old, new))
                if written is None:
                    return Applied(gone=True)
                # The pass's own copy follows the write: events name the new resourceVersion, and a
                # shell that decides again (after a refusal) decides from what was written.
                meta = body["metadata"]
                made_from, made = (
                    str(meta.get("resourceVersion", "")),
                    (written.get("metadata") or {}).get("resourceVersion"),
                )
                # A write that changed nothing (the API server then keeps the version) leaves no news.
                new_version = made is not None and str(made) != made_from
                self._own(key, uid).status_written = (made_from, str(made)) if new_version else None
                if made is not None:
                    meta["resourceVersion"] = made
                body["status"] = written.get("status") or new
                if self.record is not None:
                    for observation in plan.observations:
                        self.record(body, observation)
        events = plan.events if body is not None else ()
        for event in events:
            self.decision(where, event.message, event.reason)
        posts = (
            self._doing(
                f"posting the {event.reason} event",
                self.client.event(regarding, type_=event.type, reason=event.reason, message=event.message),
            )
            for regarding in ([body] if body is not None else [])
            for event in events
        )
        after, *_ = await _all([act(plan.after_status), *posts])
        return Applied(requeue_after=_earliest(requeue, after), written=written, new_version=new_version)

    def _settling(self, key: K, uid: str, plan: Plan[S]) -> float | None:
        """Seconds to hold back ``plan``'s status change, or None to write it now (and forget the
        window: the write carries whatever was held)."""
        if not plan.status_can_wait or plan.after_status or self.settle_seconds <= 0:
            self._settled(key)
            return None
        memory = self._own(key, uid)
        now = self.clock()
        if memory.settling_since is None:
            memory.settling_since = now
        left = memory.settling_since + self.settle_seconds - now
        if left > 0:
            return left
        memory.settling_since = None
        return None

    def own_write(self, key: K, uid: str, resource_version: str) -> bool:
        """Whether the object ``uid`` at ``resource_version`` is what our last status write of ``key``
        made (its watch event brings nothing a pass has not decided on: the pass that wrote it decides
        again on what the write returned, or ends in an error the queue retries)."""
        memory = self._memory.get(key)
        return (
            memory is not None
            and memory.uid == uid
            and memory.status_written is not None
            and memory.status_written[1] == resource_version
        )

    def own_change(self, key: K, kind: str, name: str, resource_version: str) -> bool:
        """Whether ``kind``/``name`` at ``resource_version`` is what our last patch or delete of it, made
        by a pass of ``key``, left (that change alone: any other since has a later version)."""
        memory = self._memory.get(key)
        return memory is not None and memory.changed_to.get(f"{kind}/{name}") == resource_version

    @property
    def remembers_any(self) -> bool:
        """Whether any key holds a memory (a create or change of ours, a refusal): without one,
        :meth:`seen` and :meth:`own_change` can only answer no."""
        return bool(self._memory)

    def seen(self, key: K, kind: str, name: str) -> bool:
        """The cache of ``key``'s objects now shows ``kind``/``name``: a create of it is decided on
        what is observed again. True when this is the first sight of a create of ours."""
        memory = self._memory.get(key)
        return memory is not None and memory.created.pop(f"{kind}/{name}", None) is not None

    def _not_made_yet(self, key: K, uid: str, actions: tuple[Action, ...]) -> tuple[Action, ...]:
        """``actions`` without the Creates of objects ours made moments ago."""
        memory = self._memory.get(key)
        if memory is None or memory.uid != uid or not memory.created:
            return actions
        now = self.clock()
        for name, at in list(memory.created.items()):
            if now - at >= CREATED_RECENTLY_SECONDS:
                del memory.created[name]
        # Only a Create: an Ensure also puts the object's content back (a Service re-pointed).
        return tuple(a for a in actions if not (isinstance(a, Create) and f"{a.kind}/{a.name}" in memory.created))

    def _behind_our_write(self, key: K, uid: str, body: JSON) -> bool:
        memory = self._memory.get(key)
        if memory is None or memory.uid != uid or memory.status_written is None:
            return False
        seen = str((body.get("metadata") or {}).get("resourceVersion", ""))
        return _before_ours(seen, memory.status_written)

    def _settled(self, key: K) -> None:
        memory = self._memory.get(key)
        if memory is not None:
            memory.settling_since = None

    async def _write_status(self, body: JSON, old: Mapping[str, Any], new: JSON) -> JSON | None:
        meta = body["metadata"]
        resource = self.rules.resource(str(body["apiVersion"]), str(body["kind"]))
        return await self.client.patch_status(
            resource,
            str(meta["namespace"]),
            str(meta["name"]),
            old=old,
            new=new,
            resource_version=str(meta.get("resourceVersion", "")),
        )

    async def _do(
        self, key: K, uid: str, namespace: str, where: str, action: Action, owner_current: Callable[[], None] | None
    ) -> float | None:
        """One action; a requeue delay when it could not be done now (a patch met a newer object)."""
        if isinstance(action, Create | Ensure):
            if owner_current is not None:
                owner_current()
            created = await self._create(key, uid, where, action)
            self._own(key, uid).created[f"{action.kind}/{action.name}"] = self.clock()
            if isinstance(action, Create):
                what = "created" if created else "already existed (a retried create)"
                self.decision(where, f"{action.kind} {action.name} {what}", action.reason)
            elif not created:
                meta = action.manifest["metadata"]
                wanted = {k: meta[k] for k in ("labels", "annotations") if k in meta}
                patch = {"metadata": wanted, "spec": action.manifest.get("spec")}
                resource = self.rules.resource(str(action.manifest["apiVersion"]), action.kind)
                await self._doing(
                    f"patching {action.kind} {action.name}", self.client.patch(resource, namespace, action.name, patch)
                )
            else:
                self.decision(where, f"{action.kind} {action.name} created", action.reason)
            return None
        resource = self.rules.resource(action.api_version, action.kind)
        if isinstance(action, Patch):
            target = f"{action.kind}/{action.name}"
            memory = self._own(key, uid)
            seen = action.resource_version
            if seen is not None and _before_ours(seen, memory.patched.get(target)):
                # Our own patch went through; the cache has yet to show it (it shows the version the
                # patch was made from, or one made before ours), and its watch event will bring this key
                # back. Sent again, it could only fail its precondition.
                return AWAITING_CACHE_SECONDS
            self.decision(where, f"patch {action.kind} {action.name}", action.reason)
            body = action.body
            if action.resource_version is not None and not action.json_patch:
                body = {**body, "metadata": {**body.get("metadata", {}), "resourceVersion": action.resource_version}}
            sent = self.client.patch(
                resource,
                namespace,
                action.name,
                body,
                patch_type="json" if action.json_patch else "merge",
                subresource=action.subresource,
            )
            try:
                answer = await self._doing(f"patching {action.kind} {action.name} ({action.reason})", sent)
            except Exception as exc:
                if self.rules.stale(exc):
                    return PATCH_CONFLICT_RETRY_SECONDS  # it moved on since we looked: look again soon
                raise
            made = _version_of(answer)
            if action.resource_version is not None:
                memory.patched[target] = (action.resource_version, made)
            if made is not None:
                memory.changed_to[target] = made
            return None
        memory = self._own(key, uid)
        if action.uid is not None and action.uid in memory.deleted:
            return AWAITING_CACHE_SECONDS
        self.decision(where, f"delete {action.kind} {action.name}", action.reason)
        answer = await self._doing(
            f"deleting {action.kind} {action.name}",
            self.client.delete(resource, namespace, action.name, uid=action.uid),
        )
        if action.uid is not None:
            memory.deleted.add(action.uid)
        made = _version_of(answer)
        if made is not None:
            memory.changed_to[f"{action.kind}/{action.name}"] = made
        return None

    async def _create(self, key: K, uid: str, where: str, action: Create | Ensure) -> bool:
        """Create; a refusal is remembered for the next pass and ends this one (:class:`Learned`)."""
        try:
            return await self.client.create(action.manifest)
        except Exception as exc:
            refusal = self.rules.refusal(exc)
            if refusal is None:
                if self.rules.for_the_queue(exc):
                    raise
                raise ApplyFailed(f"creating {action.kind} {action.name}") from exc
            self.decision(where, f"{action.kind} {action.name} refused: {refusal.describe()}", refusal.reason)
            self.remember_refusal(key, uid, refusal_key(action), refusal)
            raise Learned(f"{action.kind} {action.name}: {refusal.describe()}") from exc

    async def _doing(self, doing: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except Exception as exc:
            if self.rules.for_the_queue(exc):
                raise
            raise ApplyFailed(doing) from exc


__all__ = [
    "JSON",
    "Action",
    "Applied",
    "Applier",
    "ApplyFailed",
    "Client",
    "Create",
    "Delete",
    "Ensure",
    "Event",
    "Learned",
    "Learnt",
    "Observation",
    "Patch",
    "Plan",
    "Record",
    "Refusal",
    "Rules",
    "refusal_key",
    "refused",
]
