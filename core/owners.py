"""The one ownerReference builder.

Kept apart from ``core.kube`` so that the pure renderers can use it without importing the client
layer (kubernetes_asyncio would double their import time).
"""

from __future__ import annotations

from core.jsontypes import JSON


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
