"""What the Applier expects of the caches after its own writes, and what it learnt from the API server,
per key (and owner uid: a new object of the same name starts afresh).

After client-go's ``ControllerExpectations`` (``pkg/controller/controller_utils.go``): "I created it,
expect to see it before deciding on it again". A cache shows a write of ours a moment after the
API server answered it; until then a pass decided from the cache would send the same write again,
and could only meet 409 (a create), a failed precondition (a patch) or a 404 (a delete). So each
write of ours is *expected*, and :class:`Expectations` answers:

* whether a create is still awaited (:meth:`Expectations.awaiting_creation`), until the cache shows the
  object (:meth:`Expectations.creation_observed`) or for :data:`CREATED_RECENTLY_SECONDS`;
* whether a patch or a delete of ours went through already and the cache has yet to show it
  (:meth:`Expectations.patch_awaited`, :meth:`Expectations.delete_awaited`);
* whether an object at some resourceVersion is exactly what our own last write made
  (:meth:`Expectations.own_write` for a status write, :meth:`Expectations.own_change` for a patch or
  delete): its watch event then asks for no pass.

It also keeps what a later pass must be told (:class:`Learnt`): the creates the API server refused,
and the last transient error, until a pass that saw it gets through.

Nothing here sends anything: ``core.applier`` acts and tells this module what it did.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from sparkop.core.jsontypes import JSON
from sparkop.core.plan import Refusal

K = TypeVar("K", bound=Hashable)

# Refusals remembered per key (the oldest dropped first); a restarted operator tries them again.
MAX_REFUSALS_PER_KEY: Final = 16
# Log tails remembered per key until the status that records them is written (a restarted operator
# reads them again: the pod waits for that, its outcome unrecorded).
MAX_LOG_TAILS_PER_KEY: Final = 4
# A create of ours the cache has yet to show is not sent again (it could only meet 409) until the cache
# shows it (:meth:`Expectations.creation_observed`), or for at most this long.
CREATED_RECENTLY_SECONDS: Final = 10.0


@dataclass(frozen=True)
class LogTail:
    """The end of a pod's log as a ``core.plan.ReadLog`` found it: ``text``, or why it could not be read."""

    text: str | None
    error: str | None = None


@dataclass(frozen=True)
class Learnt:
    """What applying earlier plans of one object taught: refusals by ``core.plan.refusal_key``, the last
    transient error as a lastError ``{reason, message, time}`` (until a pass that saw it got through),
    and the log tails its reads found, by pod uid."""

    refusals: Mapping[str, Refusal] = field(default_factory=dict)
    transient: Mapping[str, Any] | None = None
    logs: Mapping[str, LogTail] = field(default_factory=dict)


@dataclass
class _Expected:
    """One key's expectations (for one owner uid)."""

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
    # that change alone: :meth:`Expectations.own_change`).
    changed_to: dict[str, str] = field(default_factory=dict)
    # The resourceVersion our last status write was made from, and the one it gave the object: a pass
    # decided from a cache that has yet to show that write would only meet a Conflict.
    status_written: tuple[str, str | None] | None = None
    # "kind/name" -> when (the Applier's clock) a create of ours of it succeeded (or met our own).
    created: dict[str, float] = field(default_factory=dict)
    # pod uid -> the end of its log, as a ReadLog found it (the newest MAX_LOG_TAILS_PER_KEY).
    logs: dict[str, LogTail] = field(default_factory=dict)


def made_before_ours(seen: str, ours: tuple[str, str | None] | None) -> bool:
    """Whether a cache showing the object at version ``seen`` has yet to see our write ``ours`` (the
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


class Expectations(Generic[K]):
    """Per key: the writes of ours the caches have yet to show, and what the API server said."""

    def __init__(self) -> None:
        self._by_key: dict[K, _Expected] = {}

    # -- what a pass is told ---------------------------------------------------------------------

    def learnt(self, key: K, uid: str) -> Learnt:
        """What earlier passes of this object learnt (a new object of the same name starts afresh)."""
        expected = self._by_key.get(key)
        if expected is None or expected.uid != uid:
            return Learnt()
        return Learnt(dict(expected.refusals), expected.transient, dict(expected.logs))

    def forget(self, key: K) -> None:
        """The object is gone: what was learnt about it is no news to anyone."""
        self._by_key.pop(key, None)

    def refused(self, key: K, uid: str, action_key: str, refusal: Refusal) -> None:
        expected = self.of(key, uid)
        expected.refusals[action_key] = refusal
        while len(expected.refusals) > MAX_REFUSALS_PER_KEY:
            del expected.refusals[next(iter(expected.refusals))]

    def log_read(self, key: K, uid: str, pod_uid: str, tail: LogTail) -> None:
        """What a read of a pod's log found, for the next pass to record."""
        logs = self.of(key, uid).logs
        logs[pod_uid] = tail
        while len(logs) > MAX_LOG_TAILS_PER_KEY:
            del logs[next(iter(logs))]

    def failed(self, key: K, uid: str, error: JSON) -> None:
        """A transient error (as a lastError) for the next pass to record."""
        self.of(key, uid).transient = error

    def got_through(self, key: K) -> None:
        """A plan whose pass had been told of a transient error got through: the status recorded it."""
        expected = self._by_key.get(key)
        if expected is not None:
            expected.transient = None

    @property
    def any(self) -> bool:
        """Whether any key holds an expectation or a lesson (a create or change of ours, a refusal):
        without one, :meth:`creation_observed` and :meth:`own_change` can only answer no."""
        return bool(self._by_key)

    # -- creates ---------------------------------------------------------------------------------

    def expect_creation(self, key: K, uid: str, kind: str, name: str, at: float) -> None:
        self.of(key, uid).created[f"{kind}/{name}"] = at

    def creation_observed(self, key: K, kind: str, name: str) -> bool:
        """The cache of ``key``'s objects now shows ``kind``/``name``: a create of it is decided on
        what is observed again. True when this is the first sight of a create of ours."""
        expected = self._by_key.get(key)
        return expected is not None and expected.created.pop(f"{kind}/{name}", None) is not None

    def awaiting_creation(self, key: K, uid: str, now: float) -> set[str]:
        """The "kind/name" of the creates of ours the cache has yet to show (made within
        CREATED_RECENTLY_SECONDS of ``now``)."""
        expected = self._by_key.get(key)
        if expected is None or expected.uid != uid or not expected.created:
            return set()
        for name, at in list(expected.created.items()):
            if now - at >= CREATED_RECENTLY_SECONDS:
                del expected.created[name]
        return set(expected.created)

    # -- patches and deletes ---------------------------------------------------------------------

    def patch_awaited(self, key: K, uid: str, target: str, seen: str | None) -> bool:
        """Whether our own patch of ``target`` ("kind/name") went through and a cache showing it at
        version ``seen`` has yet to show it (sent again, the patch could only fail its precondition)."""
        expected = self.of(key, uid)
        return seen is not None and made_before_ours(seen, expected.patched.get(target))

    def patched(self, key: K, uid: str, target: str, made_from: str | None, made: str | None) -> None:
        expected = self.of(key, uid)
        if made_from is not None:
            expected.patched[target] = (made_from, made)
        if made is not None:
            expected.changed_to[target] = made

    def delete_awaited(self, key: K, uid: str, deleted_uid: str | None) -> bool:
        expected = self.of(key, uid)
        return deleted_uid is not None and deleted_uid in expected.deleted

    def deleted(self, key: K, uid: str, target: str, deleted_uid: str | None, made: str | None) -> None:
        expected = self.of(key, uid)
        if deleted_uid is not None:
            expected.deleted.add(deleted_uid)
        if made is not None:
            expected.changed_to[target] = made

    def own_change(self, key: K, kind: str, name: str, resource_version: str) -> bool:
        """Whether ``kind``/``name`` at ``resource_version`` is what our last patch or delete of it, made
        by a pass of ``key``, left (that change alone: any other since has a later version)."""
        expected = self._by_key.get(key)
        return expected is not None and expected.changed_to.get(f"{kind}/{name}") == resource_version

    # -- status writes ---------------------------------------------------------------------------

    def status_written(self, key: K, uid: str, made_from: str, made: str | None) -> None:
        """Our status write of ``key`` took the object from ``made_from`` to ``made`` (None: it left the
        version as it was: no news)."""
        self.of(key, uid).status_written = (made_from, made) if made is not None else None

    def own_write(self, key: K, uid: str, resource_version: str) -> bool:
        """Whether the object ``uid`` at ``resource_version`` is what our last status write of ``key``
        made (its watch event brings nothing a pass has not decided on: the pass that wrote it decides
        again on what the write returned, or ends in an error the queue retries)."""
        expected = self._by_key.get(key)
        return (
            expected is not None
            and expected.uid == uid
            and expected.status_written is not None
            and expected.status_written[1] == resource_version
        )

    def behind_our_write(self, key: K, uid: str, resource_version: str) -> bool:
        """Whether an object seen at ``resource_version`` has yet to show our last status write (a
        decision made from it would only meet a Conflict)."""
        expected = self._by_key.get(key)
        if expected is None or expected.uid != uid or expected.status_written is None:
            return False
        return made_before_ours(resource_version, expected.status_written)

    # --------------------------------------------------------------------------------------------

    def of(self, key: K, uid: str) -> _Expected:
        """``key``'s expectations for the object ``uid`` (those of an earlier object of the name go)."""
        expected = self._by_key.get(key)
        if expected is None or expected.uid != uid:
            expected = self._by_key[key] = _Expected(uid)
        return expected


__all__ = [
    "CREATED_RECENTLY_SECONDS",
    "MAX_LOG_TAILS_PER_KEY",
    "MAX_REFUSALS_PER_KEY",
    "Expectations",
    "Learnt",
    "LogTail",
    "made_before_ours",
]
