"""The one place that builds and reads ownerReferences: who owns an object, and who controls it.

"Is this object ours" is always asked the same way: its controller reference (the one with
``controller: true``) names our API group and kind, and, where the owner is known, its uid. A kind
alone is not enough (kubeflow's SparkApplication has our kind's name in another group), and a label is
never proof of ownership (anyone can edit one onto an object).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.jsontypes import JSON

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
    return tuple(ref for ref in refs if isinstance(ref, Mapping))


def controller_of(
    body: Mapping[str, Any], group: str | None = None, kind: str | None = None, uid: str | None = None
) -> Mapping[str, Any] | None:
    """The controller reference of an object, if it has one, and only when it names ``group``,
    ``kind`` and ``uid`` (each when given)."""
    ref = next((r for r in owner_references(body) if r.get("controller")), None)
    if ref is None:
        return None
    if group is not None and str(ref.get("apiVersion", "")).split("/")[0] != group:
        return None
    if kind is not None and ref.get("kind") != kind:
        return None
    if uid is not None and ref.get("uid") != uid:
        return None
    return ref
