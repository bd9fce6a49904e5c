"""The one place that builds and reads ownerReferences: who owns an object, and who controls it.

"Is this object ours" is always asked the same way: its controller reference (the one with
``controller: true``) names our API group and kind, and, where the owner is known, its uid. A kind
alone is not enough (kubeflow's SparkApplication has our kind's name in another group), and a label is
never proof of ownership (anyone can edit one onto an object). An object another object controls but
ours owns too (an executor pod, which its driver pod controls and its SparkDriver owns) is ours by a
plain reference, asked the same way (:func:`reference_to`).

A controller's caches file what it owns under the owner's key by these references
(:func:`controller_keys`, :func:`reference_keys`: group and kind), and a pass counts as its own only
what names its owner's uid. Labels stay what the API server selects by (a watch's label selector),
never what decides ownership.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypedDict, TypeVar

from sparkop.core.jsontypes import JSON
from sparkop.core.plan import Refusal

# Kept apart from ``core.kube`` so that the pure renderers can use it without importing the client
# layer (kubernetes_asyncio would double their import time).


def owner_reference(owner: JSON, *, controller: bool = True) -> JSON:
    """An ownerReference to ``owner``, which needs only apiVersion, kind and metadata name and uid."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def owner_references(body: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """Every readable ownerReference of an object, in order."""
    refs = (body.get("metadata") or {}).get("ownerReferences") or ()
    return tuple(ref for ref in refs if _is_mapping(ref))


READ_FIELDS: Final = ("apiVersion", "kind", "name", "uid", "controller")
"""What this module reads of an ownerReference (the name: an owned object is filed under its owner's key)."""


def read_references(body: Mapping[str, Any]) -> list[JSON]:
    """An object's ownerReferences with only what this module reads of each: for a cache that keeps
    little of what it holds for long (a finished app's ConfigMaps and Service)."""
    return [{k: ref[k] for k in READ_FIELDS if k in ref} for ref in owner_references(body)]


def controller_of(
    body: Mapping[str, Any], group: str | None = None, kind: str | None = None, uid: str | None = None
) -> Mapping[str, Any] | None:
    """The controller reference of an object, if it has one, and only when it names ``group``,
    ``kind`` and ``uid`` (each when given)."""
    # Asked several times of every object a watch or a start's listing brings (by each index and
    # each queue that files it): no copies, no generator.
    ref: Mapping[str, Any]
    for ref in (body.get("metadata") or {}).get("ownerReferences") or ():
        if _is_mapping(ref) and ref.get("controller"):
            break
    else:
        return None
    if group is not None and str(ref.get("apiVersion", "")).partition("/")[0] != group:
        return None
    if kind is not None and ref.get("kind") != kind:
        return None
    if uid is not None and ref.get("uid") != uid:
        return None
    return ref


def reference_to(body: Mapping[str, Any], group: str, kind: str, uid: str | None = None) -> Mapping[str, Any] | None:
    """The first ownerReference of an object that names ``group`` and ``kind`` (and ``uid``, when given),
    whether it is the object's controller or not."""
    ref: Mapping[str, Any]
    for ref in (body.get("metadata") or {}).get("ownerReferences") or ():
        if not _is_mapping(ref) or ref.get("kind") != kind:
            continue
        if str(ref.get("apiVersion", "")).partition("/")[0] == group and (uid is None or ref.get("uid") == uid):
            return ref
    return None


def same_controller(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two controller references name the same object: its group, kind and uid (a version
    may differ)."""
    return (
        str(a.get("apiVersion", "")).partition("/")[0] == str(b.get("apiVersion", "")).partition("/")[0]
        and a.get("kind") == b.get("kind")
        and bool(a.get("uid"))
        and a.get("uid") == b.get("uid")
    )


def _is_mapping(value: object) -> bool:
    # Decoded JSON holds dicts: the exact type check first spares the ABC's slower one.
    return type(value) is dict or isinstance(value, Mapping)


ObjectKey = tuple[str, str]
"""(namespace, name): how a controller files an object and its children."""


def object_key(body: Mapping[str, Any]) -> list[ObjectKey]:
    """An object's own key (a controller's Source.keys for its own kind)."""
    meta = body.get("metadata") or {}
    return [(str(meta.get("namespace") or ""), str(meta.get("name") or ""))]


def controller_keys(group: str, kind: str) -> Callable[[Mapping[str, Any]], list[ObjectKey]]:
    """Source.keys for what a controller owns: the key of an object's controller owner, when that is
    of ``group`` and ``kind`` (ownership, not a label, links a child to its owner: a label can be
    edited away)."""

    def keys(body: Mapping[str, Any]) -> list[ObjectKey]:
        ref = controller_of(body, group, kind)
        namespace = str((body.get("metadata") or {}).get("namespace") or "")
        return [(namespace, str(ref.get("name") or ""))] if ref else []

    return keys


def reference_keys(group: str, kind: str) -> Callable[[Mapping[str, Any]], list[ObjectKey]]:
    """Source.keys for what a controller owns, its controller or not (an executor pod, which its driver
    pod controls): the key of each owner of ``group`` and ``kind`` an object references."""

    def keys(body: Mapping[str, Any]) -> list[ObjectKey]:
        meta = body.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        return [
            (namespace, str(ref.get("name") or ""))
            for ref in meta.get("ownerReferences") or ()
            if _is_mapping(ref)
            and ref.get("kind") == kind
            and str(ref.get("apiVersion", "")).partition("/")[0] == group
        ]

    return keys


def controller_uid(body: Mapping[str, Any], group: str, kind: str) -> str:
    """The uid of an object's controller, when that is of ``group`` and ``kind`` ("" otherwise): what a
    view of an owned object keeps, so that a pass counts it as its owner's only by that uid."""
    ref = controller_of(body, group, kind)
    return str(ref.get("uid") or "") if ref is not None else ""


T = TypeVar("T")
S = TypeVar("S")  # a controller's status model


def owned_by(views: Iterable[T], uid: str, order: Callable[[T], Any] | None = None) -> tuple[T, ...]:
    """The views among ``views`` (what an index filed under an owner's key: an earlier owner of the same
    name may have left its own) whose ``owner_uid`` is ``uid``, in ``order`` when given."""
    mine = [view for view in views if view.owner_uid == uid]  # type: ignore[attr-defined]
    return tuple(sorted(mine, key=order) if order is not None else mine)


@dataclass(frozen=True, kw_only=True)
class ObjectView:
    """What every view of a controller's own object says of its metadata (read by :func:`identity`)."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False


@dataclass(frozen=True, kw_only=True)
class ObservedOwn(Generic[S]):
    """What a controller's ``Observed`` holds of its own object beside the views its decision reads, as
    the pass's :class:`Own` has it: the status as read, the body as listed (for the ownerReference of
    what it creates), the creates the API server refused and whether its namespace is being deleted."""

    status: S
    body: JSON
    refusals: Mapping[str, Refusal] = field(default_factory=dict)
    namespace_terminating: bool = False


class ObservedOwnFields(TypedDict, Generic[S]):
    """:class:`ObservedOwn`'s fields as ``core.controller.Own.observed()`` hands them to an ``Observed``."""

    status: S
    body: JSON
    refusals: Mapping[str, Refusal]
    namespace_terminating: bool


@dataclass(frozen=True, kw_only=True)
class OwnedView:
    """What every view of an object a controller owns says of it (read by :func:`owned_identity`): who
    it is, and whose (its controller's uid, when that is of the owner's group and kind)."""

    name: str
    uid: str
    owner_uid: str
    deleting: bool = False


def owned_identity(body: Mapping[str, Any], group: str, kind: str) -> dict[str, Any]:
    """:class:`OwnedView`'s fields of an object, read leniently."""
    meta = body.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return {
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
        "owner_uid": controller_uid(body, group, kind),
        "deleting": bool(meta.get("deletionTimestamp")),
    }


def identity(body: Mapping[str, Any]) -> dict[str, Any]:
    """:class:`ObjectView`'s fields of an object, read leniently: ``namespace``, ``name``, ``uid``,
    ``labels`` and whether it is being deleted (``deleting``)."""
    meta = body.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    found = meta.get("labels")
    return {
        "namespace": str(meta.get("namespace") or ""),
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
        "labels": {str(k): str(v) for k, v in found.items() if v is not None} if isinstance(found, Mapping) else {},
        "deleting": bool(meta.get("deletionTimestamp")),
    }


def copy_json(value: Any) -> Any:
    """A deep copy of JSON data (what a cache holds is shared; a pass changes only its own copy)."""
    if isinstance(value, Mapping):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def snapshot(body: Mapping[str, Any]) -> JSON:
    """What an own index hands out: a copy (a pass writes its new status into its own), without the
    managedFields nothing reads."""
    copied: JSON = copy_json(body)
    copied.get("metadata", {}).pop("managedFields", None)
    return copied
