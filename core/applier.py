"""The one Applier: carries out the :class:`core.plan.Plan` a pure ``decide`` returned, for every
controller. The order is fixed:

1. ``before_status``: the creates, ensures and deletes whose *result* the status write records
   (a SparkDriver's ConfigMaps and Service, then its driver pod, whose name status gives only once
   the API server accepted it; a SparkApplication's Spark UI objects). In plan order; a refusal ends
   the pass before anything is written.
2. the status write, guarded by the resourceVersion the decision was made from. A Conflict (the
   object changed since) ends the pass: the queue reconciles again from a fresh view, nothing below
   runs. Written when it changed, and also when ``after_status`` is not empty: the write is then the
   proof that those actions were decided on the newest object. Once it succeeded, the plan's
   observations are recorded (metrics of transitions: counted once, by the one write that makes each
   transition). A plan whose status change may wait (``status_wait`` seconds: progress that every
   later pass derives again, with nothing in ``after_status``) has the write, its events and
   observations held back: the pass ends with a requeue at that deadline, and the change is written
   once with whatever followed it. The deadline is the plan's, worked out by each pass from what it
   observes (``domain.status_waits``): nothing here remembers when a change was first held.
3. events, which report what the status write recorded (never posted for a write that failed),
   sent together with
4. ``after_status``: what may only happen once status holds the facts behind it: a create that
   status counted first (the SparkDriver of run n, after ``lastRun = n`` was written), patches (a
   driver pod's finalizer is released only once its outcome is in status), deletes.

Actions marked ``concurrent`` that stand next to each other in a list are sent at once (see
:class:`core.plan.Plan`): a pass costs the API server's latency once per dependent step, not once per
write.

Why two places for a create rather than one order by kind of action: the controllers need both
"create, then record" (a driver pod is named in status only once it exists, so a pod named there was
accepted) and "record, then create" (a run is counted before its SparkDriver exists, so a crash never
leaves an uncounted run). ``decide`` puts each action where the fact it depends on is safe.

What the API server answers is observed, not acted on here: a refusal (400/403/422, or a name held
by an object that is not ours, :meth:`Rules.refusal`) and a transient error (5xx, 429, timeouts,
:meth:`Rules.transient`) are remembered per key (``core.expectations``) and handed to the next pure
pass (``core.expectations.Learnt``), which decides what they mean (SubmissionFailed, a lastError, a
Warning event). A refusal ends the pass with :class:`CreateRefused`: the skeleton decides again at
once from the same cache. Each write of ours is expected (``core.expectations``), so a pass decided
from a cache that has yet to show it does not send it again.

This module imports nothing of sparkop: the client is a :class:`Client` and its error rules
:class:`Rules`, both Protocols that ``core.kube`` satisfies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

from sparkop.core.expectations import Expectations, Learnt, LogTail
from sparkop.core.jsontypes import JSON
from sparkop.core.plan import (
    Action,
    Create,
    Delete,
    Ensure,
    Patch,
    Plan,
    ReadLog,
    Record,
    Refusal,
    earliest,
    refusal_key,
)

S = TypeVar("S")
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

# A patch whose resourceVersion precondition failed is looked at again this soon.
PATCH_CONFLICT_RETRY_SECONDS: Final = 0.05
# A patch or delete not sent again because ours went through already: its watch event brings the key
# back; this is only the safety net should that event be lost.
AWAITING_CACHE_SECONDS: Final = 1.0


class DecideAgain(Exception):
    """The pass learnt what its decision must take in before it goes on: remembered; decide again."""


class CreateRefused(DecideAgain):
    """A create of the plan was refused: remembered; decide again (the refusal is now observed)."""


class LogTailRead(DecideAgain):
    """A pod's log tail the plan asked for was read: remembered; decide again (it is now observed)."""


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

    async def delete(
        self,
        resource: Any,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        grace_seconds: int | None = None,
    ) -> Any:
        """The object as the deletion left it (a JSON object), or anything else when there is no such
        answer (gone already). ``grace_seconds`` 0: removed at once."""

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

    async def pod_log_tail(self, namespace: str, name: str, *, container: str | None, lines: int, limit: int) -> str:
        """The end of a pod container's log; raises when it cannot be read."""


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

    def unreadable(self, exc: BaseException) -> str:
        """Why a read (a pod's log) failed, in a line."""


Decision = Callable[[str, str, str], None]
"""Logs one decision line: (object, what is done, reason)."""


@dataclass(frozen=True)
class Applied:
    gone: bool = False  # the object vanished at its status write: nothing after it ran
    requeue_after: float | None = None
    written: JSON | None = None  # the object as its status write returned it
    # The status write gave the object a new resourceVersion. Its watch event is this write's own
    # (:meth:`core.expectations.Expectations.own_write`): the pass that made it decides again on what it
    # wrote instead.
    new_version: bool = False


@dataclass(frozen=True)
class _Target:
    """The object a plan is applied for: its key, uid and namespace, and how decision lines name it."""

    key: Any
    uid: str
    namespace: str
    where: str
    owner_current: Callable[[], None] | None


def _version_of(answer: Any) -> str | None:
    """The resourceVersion of an API server's answer that is an object (None for any other answer)."""
    if not isinstance(answer, dict):
        return None
    made = (answer.get("metadata") or {}).get("resourceVersion")
    return str(made) if made else None


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
    """Applies plans through a :class:`Client`; what it expects of the caches after its own writes,
    and what the API server refused or failed to do, are its :attr:`expectations` (per key and object
    uid), told to the next pass (``expectations.learnt``)."""

    def __init__(
        self,
        client: Client,
        rules: Rules,
        decision: Decision,
        record: Record | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.rules = rules
        self.decision = decision
        self.record = record
        self.clock = clock
        self.expectations: Expectations[K] = Expectations()
        self._act: dict[type[Any], Callable[[_Target, Any], Awaitable[float | None]]] = {
            Create: self.create,
            Ensure: self.ensure,
            Patch: self.patch,
            Delete: self.delete,
            ReadLog: self.read_log,
        }

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

        Raises :class:`CreateRefused` after remembering a refusal, the client's own errors the queue
        handles (Conflict, ...), and :class:`ApplyFailed` for anything else (a transient one remembered)."""
        meta = (body or {}).get("metadata") or {}
        uid = str(meta.get("uid", ""))
        target = _Target(key, uid, namespace, f"{namespace}/{meta.get('name', key)}", owner_current)
        try:
            applied = await self._apply(target, body, plan, status_json)
        except ApplyFailed as exc:
            error = self.rules.transient(exc.__cause__ or exc, exc.doing)
            if error is not None and body is not None:
                self.expectations.failed(key, uid, error)
            raise
        if body is None:
            self.expectations.forget(key)
        elif seen is not None and seen.transient is not None:
            self.expectations.got_through(key)
        return applied

    async def _apply(
        self, target: _Target, body: JSON | None, plan: Plan[S], status_json: Callable[[S], JSON]
    ) -> Applied:
        if body is not None and self.expectations.behind_our_write(
            target.key, target.uid, str((body.get("metadata") or {}).get("resourceVersion", ""))
        ):
            # Decided from a view older than our own last status write: its write would be refused
            # (Conflict), and its actions were decided from that old view. Our write's watch event
            # brings the key back (the requeue is only the safety net should that event be lost).
            return Applied(requeue_after=AWAITING_CACHE_SECONDS)
        plan = self._not_made_yet(target, plan)
        requeue = earliest(plan.requeue_after, await self._act_in_order(target, plan.before_status))
        if plan.reads:
            # What was read is decided on at once (this pass wrote nothing yet).
            raise LogTailRead(", ".join(read.pod for read in plan.reads))
        written: JSON | None = None
        new_version = False
        if plan.status is not None and body is not None:
            new, old = status_json(plan.status), body.get("status") or {}
            if new != old and plan.status_wait > 0 and not plan.after_status:
                # Held back, with the events that report it: a later pass decides it again from what
                # it observes then, and writes once what followed meanwhile.
                return Applied(requeue_after=earliest(requeue, plan.status_wait))
            if new != old or plan.after_status:
                answer = await self._write_status(target, body, old, new)
                if answer is None:
                    return Applied(gone=True)
                written, new_version = answer
                if self.record is not None:
                    for observation in plan.observations:
                        self.record(body, observation)
        events = plan.events if body is not None else ()
        for event in events:
            self.decision(target.where, event.message, event.reason)
        posts = (
            self._doing(
                f"posting the {event.reason} event",
                self.client.event(body, type_=event.type, reason=event.reason, message=event.message),
            )
            for event in events
            if body is not None
        )
        after, *_ = await _all([self._act_in_order(target, plan.after_status), *posts])
        return Applied(requeue_after=earliest(requeue, after), written=written, new_version=new_version)

    def _not_made_yet(self, target: _Target, plan: Plan[S]) -> Plan[S]:
        """``plan`` without the Creates of objects ours made moments ago: a create of ours the cache has
        yet to show is not sent again; its watch event brings the key back."""
        awaited = self.expectations.awaiting_creation(target.key, target.uid, self.clock())
        if not awaited:
            return plan

        def made(action: Action) -> bool:
            # Only a Create: an Ensure also puts the object's content back (a Service re-pointed).
            return isinstance(action, Create) and f"{action.kind}/{action.name}" in awaited

        before = tuple(a for a in plan.before_status if not made(a))
        after = tuple(a for a in plan.after_status if not made(a))
        if len(before) + len(after) == len(plan.actions):
            return plan
        return replace(plan, before_status=before, after_status=after).requeue(AWAITING_CACHE_SECONDS)

    async def _write_status(
        self, target: _Target, body: JSON, old: Mapping[str, Any], new: JSON
    ) -> tuple[JSON, bool] | None:
        """Write ``new`` over ``old``: the object as written, and whether the write gave it a new
        resourceVersion (None: the object is gone). The pass's own copy ``body`` follows the write
        (events name the new resourceVersion, and a skeleton that decides again decides from what was
        written)."""
        meta = body["metadata"]
        resource = self.rules.resource(str(body["apiVersion"]), str(body["kind"]))
        made_from = str(meta.get("resourceVersion", ""))
        written = await self._doing(
            "writing the status",
            self.client.patch_status(
                resource, str(meta["namespace"]), str(meta["name"]), old=old, new=new, resource_version=made_from
            ),
        )
        if written is None:
            return None
        made = (written.get("metadata") or {}).get("resourceVersion")
        # A write that changed nothing (the API server then keeps the version) leaves no news.
        new_version = made is not None and str(made) != made_from
        self.expectations.status_written(target.key, target.uid, made_from, str(made) if new_version else None)
        if made is not None:
            meta["resourceVersion"] = made
        body["status"] = written.get("status") or new
        return written, new_version

    async def _act_in_order(self, target: _Target, actions: tuple[Action, ...]) -> float | None:
        requeue: float | None = None
        for batch in _batches(actions):
            for delay in await _all(self._act[type(action)](target, action) for action in batch):
                requeue = earliest(requeue, delay)
        return requeue

    # -- one method per action: each returns a requeue delay when it could not be done now ----------

    async def create(self, target: _Target, action: Create) -> float | None:
        created = await self._create(target, action)
        what = "created" if created else "already existed (a retried create)"
        self.decision(target.where, f"{action.kind} {action.name} {what}", action.reason)
        return None

    async def ensure(self, target: _Target, action: Ensure) -> float | None:
        if await self._create(target, action):
            self.decision(target.where, f"{action.kind} {action.name} created", action.reason)
            return None
        meta = action.manifest["metadata"]
        wanted = {k: meta[k] for k in ("labels", "annotations") if k in meta}
        patch = {"metadata": wanted, "spec": action.manifest.get("spec")}
        resource = self.rules.resource(str(action.manifest["apiVersion"]), action.kind)
        await self._doing(
            f"patching {action.kind} {action.name}",
            self.client.patch(resource, target.namespace, action.name, patch),
        )
        return None

    async def patch(self, target: _Target, action: Patch) -> float | None:
        what = f"{action.kind}/{action.name}"
        if self.expectations.patch_awaited(target.key, target.uid, what, action.resource_version):
            # Our own patch went through; the cache has yet to show it (it shows the version the
            # patch was made from, or one made before ours), and its watch event will bring this key
            # back. Sent again, it could only fail its precondition.
            return AWAITING_CACHE_SECONDS
        self.decision(target.where, f"patch {action.kind} {action.name}", action.reason)
        body = action.body
        if action.resource_version is not None and not action.json_patch:
            body = {**body, "metadata": {**body.get("metadata", {}), "resourceVersion": action.resource_version}}
        sent = self.client.patch(
            self.rules.resource(action.api_version, action.kind),
            target.namespace,
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
        self.expectations.patched(target.key, target.uid, what, action.resource_version, _version_of(answer))
        return None

    async def delete(self, target: _Target, action: Delete) -> float | None:
        if self.expectations.delete_awaited(target.key, target.uid, action.uid):
            return AWAITING_CACHE_SECONDS
        forced = " at once (grace 0)" if action.grace_seconds == 0 else ""
        self.decision(target.where, f"delete {action.kind} {action.name}{forced}", action.reason)
        resource = self.rules.resource(action.api_version, action.kind)
        answer = await self._doing(
            f"deleting {action.kind} {action.name}",
            self.client.delete(
                resource, target.namespace, action.name, uid=action.uid, grace_seconds=action.grace_seconds
            ),
        )
        what = f"{action.kind}/{action.name}"
        self.expectations.deleted(target.key, target.uid, what, action.uid, _version_of(answer))
        return None

    async def read_log(self, target: _Target, action: ReadLog) -> float | None:
        """Read a pod's log tail into the key's expectations: what it says, or why it could not be read
        (a lost node's kubelet, a container gone); the next decision records either."""
        try:
            text = await self.client.pod_log_tail(
                target.namespace, action.pod, container=action.container, lines=action.lines, limit=action.limit
            )
            tail = LogTail(text)
        except Exception as exc:
            if self.rules.for_the_queue(exc):
                raise
            tail = LogTail(None, self.rules.unreadable(exc))
        read = f"read the log tail of Pod {action.pod}" + (f": {tail.error}" if tail.error else "")
        self.decision(target.where, read, action.reason)
        self.expectations.log_read(target.key, target.uid, action.uid, tail)
        return None

    async def _create(self, target: _Target, action: Create | Ensure) -> bool:
        """Create (the owner still current); a refusal is remembered for the next pass and ends this one
        (:class:`CreateRefused`). True when created, False when it existed as ours."""
        if target.owner_current is not None:
            target.owner_current()
        try:
            created = await self.client.create(action.manifest)
        except Exception as exc:
            refusal = self.rules.refusal(exc)
            if refusal is None:
                if self.rules.for_the_queue(exc):
                    raise
                raise ApplyFailed(f"creating {action.kind} {action.name}") from exc
            self.decision(target.where, f"{action.kind} {action.name} refused: {refusal.describe()}", refusal.reason)
            self.expectations.refused(target.key, target.uid, refusal_key(action), refusal)
            raise CreateRefused(f"{action.kind} {action.name}: {refusal.describe()}") from exc
        self.expectations.expect_creation(target.key, target.uid, action.kind, action.name, self.clock())
        return created

    async def _doing(self, doing: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except Exception as exc:
            if self.rules.for_the_queue(exc):
                raise
            raise ApplyFailed(doing) from exc


__all__ = [
    "AWAITING_CACHE_SECONDS",
    "PATCH_CONFLICT_RETRY_SECONDS",
    "Applied",
    "Applier",
    "ApplyFailed",
    "Client",
    "CreateRefused",
    "DecideAgain",
    "Decision",
    "LogTailRead",
    "Rules",
]
