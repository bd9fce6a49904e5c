"""The one controller skeleton: a controller declares what it reads and how it decides, and this
module runs it.

A controller is a :class:`Controller`: its name, the :class:`Source` of its own kind (filed under the
object's own key) and those of what it owns (filed under their owner's key), an ``observe`` that turns
a key into what the decision needs (read from those caches only), and a pure
``decide(observed, now) -> Plan``. :func:`start` registers the caches and their change handlers (which
only enqueue keys) and the work queue; the :class:`Loop` runs each pass:

1. read the object from its own cache and ask the Applier what earlier passes learnt about it (the
   API server's refusals and the last transient error), by key and uid (a new object of the same name
   starts afresh);
2. ``observe(own)``: the object (:class:`Own`: its status read by the controller's status model, what
   was learnt, whether its namespace is being deleted) -> the typed views the decision reads. A gone
   object is decided on only where the controller says what that needs (``gone``); otherwise, or when
   that is None, nothing is left to do and what was learnt is forgotten;
3. ``decide`` at the controller's clock;
4. apply the plan through the one :class:`core.applier.Applier` (creates only while the object is
   still current in its cache: ``Runtime.ensure_holds``), handing it what the decision was told, so a
   transient error the status recorded is forgotten once a pass gets through;
5. a create the API server refused is decided on again at once (the refusal is now an observation),
   and so is the object a status write returned (the watch event of that write then asks for no
   pass: :meth:`Loop.echo`), at most ``MAX_DECISIONS_PER_PASS`` times; a pass that keeps learning or
   writing ends and the queue runs it again. A plan that is settled by its own status write
   (``Plan.settled``) ends the pass at that write instead: deciding again on what it wrote would
   change nothing, and whatever else changed meanwhile enqueued the key again.

What the work queue is told is a :class:`core.queue.Result`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any, Final, Generic, TypeVar, cast

from sparkop.core import logs
from sparkop.core.applier import Applied, Applier, DecideAgain
from sparkop.core.expectations import Expectations, Learnt
from sparkop.core.jsontypes import JSON
from sparkop.core.kube import Rules
from sparkop.core.owners import ObservedOwnFields, object_key, snapshot
from sparkop.core.plan import Plan, Record
from sparkop.core.queue import Result, WorkQueue
from sparkop.core.resources import NAMESPACES, Resource
from sparkop.core.runtime import Ours, Runtime, Source
from sparkop.core.specs import Model, lenient
from sparkop.core.store import EventType
from sparkop.core.times import utc_now

# A refused create is decided on again at once; a pass that keeps learning ends, and the queue retries.
MAX_DECISIONS_PER_PASS: Final = 4

Key = tuple[str, str]
"""(namespace, name) of the controller's own object."""
O = TypeVar("O")  # noqa: E741 - what observe returns, decide reads
S = TypeVar("S", bound=Model)  # the plan's status type


def own_source(index: str, resource: Resource, value: Callable[[JSON], Any] = snapshot) -> Source:
    """The Source of a controller's own kind: each object filed under its own key, as ``value(obj)``
    (by default :func:`core.owners.snapshot`, a copy of its own: a pass writes its status into it)."""
    return Source(index, resource, object_key, value)


@dataclass(frozen=True)
class Names:
    """The names one declaration of a controller registers, spelt in one place: the controller's (its work
    queue's) and each of its indexes', ``<controller>_<what>``, all passed through ``variant`` so that a
    controller declared more than once in a process registers nothing twice (sparkop's apps, schedule and
    connect controllers, once for each served API group: ``variant`` is ``domain.kinds.API.named``)."""

    controller: str
    variant: Callable[[str], str]

    @property
    def name(self) -> str:
        return self.variant(self.controller)

    def index(self, what: str) -> str:
        return self.variant(f"{self.controller}_{what}")

    def own_source(self, resource: Resource, value: Callable[[JSON], Any] = snapshot) -> Source:
        """:func:`own_source`, indexed as ``<controller>_<the kind's plural>``."""
        return own_source(self.index(resource.plural), resource, value)


@dataclass(frozen=True)
class Controller(Generic[O, S]):
    """What a controller declares; :func:`start` and :class:`Loop` are the rest."""

    name: str
    own: Source
    owned: tuple[Source, ...]
    observe: Callable[[Own[S]], O]
    """What the decision needs of the object (:class:`Own`): typed views of it and of what it owns, read
    from the caches."""
    decide: Callable[[O, datetime], Plan[S]]
    status: type[S]
    """The status model: read leniently from the object (``core.specs.lenient``) for ``observe``, and
    written as its ``to_json``."""
    log: logging.Logger
    record: Record | None = None
    """Records the plan's observations (metrics of transitions) after the status write that makes them."""
    clock: Callable[[], datetime] = utc_now
    unchanged: Callable[[O, S], bool] | None = None
    """Whether a plan's status is the one the decision started from (compared as models): such a plan,
    with nothing that needs the write after it, writes nothing, and no JSON is made to tell."""
    reads: tuple[Source, ...] = ()
    """Reference data the decisions look up (a scheduler's configuration objects, filed by name): cached
    and waited for like the rest, but a change of it asks for no pass; a pass that misses what it looks
    for asks for another one later."""
    by_namespace_selector: bool = False
    """Whether it acts only in the namespaces the operator's --namespace-selector selects (the served
    kinds, as kubeflow's controllers do with its jobNamespaceSelector): a pass of an object elsewhere does
    nothing, and a namespace's labels changing asks for no pass (an object there already waits for its
    next change, as kubeflow's do)."""
    gone: Callable[[Key, Learnt], O | None] | None = None
    """What the decision needs once the object is gone (None, or no ``gone``: nothing; what was learnt
    of it is forgotten). The garbage collector removes what it owned, unless something of it holds a
    finalizer of ours."""

    def read_status(self, body: JSON) -> S:
        return lenient(self.status, body.get("status"))

    def status_json(self, status: S) -> JSON:
        return status.to_json()


@dataclass(frozen=True)
class Own(Generic[S]):
    """The controller's own object as one pass reads it."""

    key: Key
    body: JSON  # the pass's own copy (its status write lands in it)
    status: S  # read by the controller's status model
    learnt: Learnt  # what applying earlier plans taught: the API server's refusals, a transient error
    namespace_terminating: bool  # the namespace is being deleted: leave what is in it alone

    @property
    def meta(self) -> JSON:
        meta: JSON = self.body.get("metadata") or {}
        return meta

    def observed(self) -> ObservedOwnFields[S]:
        """What an ``Observed`` holds of the object beside its views (``core.owners.ObservedOwn``): its
        status, body, the creates the API server refused (the pass's own copy) and whether its namespace
        is being deleted."""
        return ObservedOwnFields(
            status=self.status,
            body=self.body,
            refusals=dict(self.learnt.refusals),
            namespace_terminating=self.namespace_terminating,
        )


class Loop(Generic[O, S]):
    """Runs the passes of one controller: the work queue calls :meth:`reconcile`, serialized per key."""

    def __init__(self, runtime: Runtime, controller: Controller[O, S]) -> None:
        self.runtime = runtime
        self.controller = controller
        self.applier: Applier[Key] = Applier(
            runtime.kube, Rules(), partial(logs.decision, controller.log), controller.record
        )

    def body(self, key: Key) -> JSON | None:
        """The object of ``key`` as its own cache holds it."""
        return next(iter(self.runtime.filed(self.controller.own.index, key)), None)

    def learnt(self, key: Key, body: JSON | None) -> Learnt:
        return self.applier.expectations.learnt(key, _uid(body))

    async def reconcile(self, key: Key) -> Result:
        body = self.body(key)
        for _ in range(MAX_DECISIONS_PER_PASS):
            learnt = self.learnt(key, body)
            observed = self.observe(key, body, learnt)
            if observed is None:
                self.applier.expectations.forget(key)
                return Result.done()
            plan = self._unchanged_left_out(observed, self.controller.decide(observed, self.controller.clock()))
            try:
                applied = await self.apply(key, body, plan, learnt)
            except DecideAgain:
                if not self.applier.expectations.own_write(key, _uid(body), _version(body)):
                    body = self.body(key)
                continue
            if applied.gone:
                return Result.done()
            if not applied.new_version or plan.settled:
                return Result.after(applied.requeue_after)
            # ``body`` is now what the status write returned: decided on again here, so that the
            # write's own watch event asks for no pass (Loop.echo).
        return Result.now()

    def observe(self, key: Key, body: JSON | None, learnt: Learnt) -> O | None:
        """What the decision needs, from the caches (None: nothing is left to do)."""
        controller = self.controller
        if body is None:
            return controller.gone(key, learnt) if controller.gone is not None else None
        if controller.by_namespace_selector and not self.runtime.namespace_selected(key[0]):
            return None
        terminating = self.runtime.namespace_terminating(key[0])
        return controller.observe(Own(key, body, controller.read_status(body), learnt, terminating))

    def _unchanged_left_out(self, observed: O, plan: Plan[S]) -> Plan[S]:
        unchanged = self.controller.unchanged
        if unchanged is None or plan.status is None or plan.after_status or not unchanged(observed, plan.status):
            return plan
        return replace(plan, status=None)

    def echo(self, type_: EventType, obj: JSON, keys: Sequence[Any]) -> bool:
        """Whether this change of an object of the controller's own kind is the watch event of a status
        write of its own: the pass that wrote it decides again on what the write returned (or ends in an
        error the queue retries), so it asks for no pass."""
        if type_ != "MODIFIED":
            return False
        uid, version = _uid(obj), _version(obj)
        return any(self.applier.expectations.own_write(cast(Key, key), uid, version) for key in keys)

    async def apply(self, key: Key, body: JSON | None, plan: Plan[S], learnt: Learnt | None = None) -> Applied:
        """Apply ``plan`` decided on ``body`` (core.applier's order), creating only while the object
        is still current in its cache. ``learnt``: what the decision was told. ``body`` is the pass's
        own copy (every read of an index is): it takes the written status and resourceVersion."""
        current = partial(self.runtime.ensure_holds, self.controller.own.index, key, _uid(body))
        return await self.applier.apply(
            key, body, plan, self.controller.status_json, namespace=key[0], seen=learnt, owner_current=current
        )


def start(runtime: Runtime, controller: Controller[O, S]) -> Loop[O, S]:
    """Register the controller's caches, their change handlers and its work queue."""
    if controller.own.shared:
        # The pass writes its status into the body it read: each read must be its own copy.
        raise ValueError(f"{controller.name}: the controller's own index cannot share its values")
    loop = Loop(runtime, controller)
    queue: WorkQueue[Key] = runtime.queue(controller.name, loop.reconcile)
    for source in (controller.own, *controller.owned):
        owned = source is not controller.own
        runtime.add_index(source)
        runtime.enqueue_on_change(
            source.resource,
            queue,
            source.keys,
            selector=source.selector,
            view=source.view,
            coalesce=owned,
            within=source.within,
            ours=_ours(loop.applier.expectations, source) if owned else loop.echo,
        )
    for source in controller.reads:
        runtime.add_index(source)
        runtime.read_by(queue, source.resource, source.selector)
    if controller.by_namespace_selector and runtime.options.namespace_selector is not None:
        runtime.read_by(queue, NAMESPACES)  # the pass reads the Namespace cache (Runtime.namespace_selected)
    return loop


def _ours(expectations: Expectations[Key], source: Source) -> Ours:
    """Tells the Applier of each owner that its cache shows the object now (a create of the Applier's
    waits for that rather than being sent again); True for the creation the owner's pass made itself:
    that pass decided with the object there, so its arrival asks for no pass. And, where the source's
    ``own_changes_settle``, True for the echo of the owner's own patch or delete of it."""
    kind = source.resource.kind

    def ours(type_: EventType, obj: JSON, filed: Sequence[Any]) -> bool:
        if not expectations.any:
            return False  # nothing of ours in flight (every start, while its listing streams in)
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        keys = [cast(Key, key) for key in filed]
        answered = [expectations.creation_observed(key, kind, name) for key in keys]
        if type_ == "ADDED":
            return bool(answered) and all(answered)
        if type_ == "MODIFIED" and source.own_changes_settle and keys:
            version = str(meta.get("resourceVersion", ""))
            return all(expectations.own_change(key, kind, name, version) for key in keys)
        return False

    return ours


def _uid(body: JSON | None) -> str:
    return str(((body or {}).get("metadata") or {}).get("uid", ""))


def _version(body: JSON | None) -> str:
    return str(((body or {}).get("metadata") or {}).get("resourceVersion", ""))


__all__ = [
    "MAX_DECISIONS_PER_PASS",
    "Controller",
    "Key",
    "Loop",
    "Names",
    "Own",
    "Result",
    "Source",
    "own_source",
    "start",
]
