"""What a pure ``decide(observed, now)`` returns: a :class:`Plan` made of the action vocabulary
(:class:`Create`, :class:`Ensure`, :class:`Patch`, :class:`Delete`), the :class:`Event` s that report
its status write, and the :class:`Observation` s recorded after that write.

A plan is built the same way by every controller: start from ``Plan()`` and add to it
(:meth:`Plan.with_before`, :meth:`Plan.with_after`, :meth:`Plan.with_event`, :meth:`Plan.requeue`, ...);
each returns a new plan, so a step of a decision never changes what an earlier one made.
``core.applier`` carries a plan out, in the order its module documentation gives.

What the API server refused of an earlier plan comes back to the decision as a :class:`Refusal`, found
by :func:`refused` (``core.expectations`` remembers them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from sparkop.core.frozen import evolve
from sparkop.core.jsontypes import JSON

S = TypeVar("S")

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
    # 0: remove the object at once, without waiting for whoever finishes it (a pod whose kubelet is gone).
    grace_seconds: int | None = None


@dataclass(frozen=True)
class ReadLog:
    """Read the end of a pod container's log (the pod ``uid``, in the plan's namespace): what the pass
    must record before the pod may go. What was read (or why it could not be) comes back to the next
    decision (``core.expectations.Learnt.logs``, by the pod's uid), which follows at once."""

    pod: str
    uid: str
    container: str | None
    lines: int
    limit: int
    reason: str = field(default="ReadLog", compare=False)
    concurrent: bool = field(default=True, compare=False)


EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class Event:
    type: EventType
    reason: str
    message: str


Action = Create | Ensure | Patch | Delete | ReadLog


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


# ---------------------------------------------------------------------------------------------------
# what the API server refused of an earlier plan


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


# ---------------------------------------------------------------------------------------------------
# the plan


def earliest(a: float | None, b: float | None) -> float | None:
    """The sooner of two requeue delays (None: no requeue)."""
    return b if a is None else a if b is None else min(a, b)


@dataclass(frozen=True)
class Plan(Generic[S]):
    """What one pass wants, applied in ``core.applier``'s fixed order. ``status`` None: leave it as it is.

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
    # How long (seconds from now) the status change may still be held back: progress that every later
    # pass derives again from what it observes (a pod's node, pending executors), so that changes that
    # follow each other are written once. The Applier then holds the write, its events and its
    # observations, and asks for the pass again at that deadline; 0: written now. Never above 0 when a
    # fact only this write would keep changes (a count, an outcome, a name created).
    status_wait: float = 0.0
    # Deciding again on what this plan's status write leaves changes nothing: no status change, no
    # event, no action this plan does not take (the Applier does not send those again), no earlier
    # requeue. The pass then ends at the write rather than deciding again (core.controller); the
    # write's echo still asks for no pass, and anything else that changed meanwhile enqueued the key.
    # Each decide that sets it has a test proving the property over any history.
    settled: bool = False

    # -- building (each returns a new plan) --------------------------------------------------------

    def with_status(self, status: S | None) -> Plan[S]:
        return evolve(self, status=status)

    def with_before(self, *actions: Action) -> Plan[S]:
        """``actions`` after those already planned before the status write."""
        return evolve(self, before_status=(*self.before_status, *actions)) if actions else self

    def with_after(self, *actions: Action) -> Plan[S]:
        """``actions`` after those already planned after the status write."""
        return evolve(self, after_status=(*self.after_status, *actions)) if actions else self

    def with_events(self, *events: Event) -> Plan[S]:
        return evolve(self, events=(*self.events, *events)) if events else self

    def with_event(self, type_: EventType, reason: str, message: str) -> Plan[S]:
        return self.with_events(Event(type_, reason, message))

    def with_observations(self, *observations: Observation) -> Plan[S]:
        return evolve(self, observations=(*self.observations, *observations)) if observations else self

    def requeue(self, seconds: float | None) -> Plan[S]:
        """Look again within ``seconds`` at the latest (the earliest of every requeue asked wins)."""
        sooner = earliest(self.requeue_after, seconds)
        return self if sooner == self.requeue_after else evolve(self, requeue_after=sooner)

    # -- reading -----------------------------------------------------------------------------------

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

    @property
    def reads(self) -> tuple[ReadLog, ...]:
        return tuple(a for a in self.actions if isinstance(a, ReadLog))


__all__ = [
    "Action",
    "Create",
    "Delete",
    "Ensure",
    "Event",
    "EventType",
    "Observation",
    "Patch",
    "Plan",
    "ReadLog",
    "Record",
    "Refusal",
    "earliest",
    "refusal_key",
    "refused",
]
