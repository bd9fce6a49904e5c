"""What one pass of the history controller decides from: a SparkHistoryServer and the objects it
controls (Deployment, Service, Ingress, HTTPRoute), read leniently from the informer caches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkop.api.history import KIND, SparkHistoryServerStatus
from sparkop.core.jsonread import integer, mapping
from sparkop.core.owners import ObjectView, ObservedOwn, OwnedView, controller_keys, identity, owned_by, owned_identity
from sparkop.domain import labels

Key = tuple[str, str]  # (namespace, SparkHistoryServer name)


@dataclass(frozen=True, kw_only=True)
class ServerView(ObjectView):
    """The facts of one SparkHistoryServer a pass reads (its status: Observed.status)."""

    generation: int
    spec: Mapping[str, Any]

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ServerView:
        return cls(
            **identity(body),
            generation=integer(mapping(body.get("metadata")).get("generation")),
            spec=mapping(body.get("spec")),
        )


@dataclass(frozen=True, kw_only=True)
class ChildView(OwnedView):
    """One object a SparkHistoryServer controls: what a pass compares (the hash of the manifest it was
    made from) and, for its Deployment, how many pods are Ready."""

    api_version: str
    kind: str
    spec_hash: str | None
    ready_replicas: int = 0

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ChildView:
        meta = mapping(body.get("metadata"))
        return cls(
            **owned_identity(body, labels.GROUP, KIND),
            api_version=str(body.get("apiVersion") or ""),
            kind=str(body.get("kind") or ""),
            spec_hash=mapping(meta.get("annotations")).get(labels.SPEC_HASH),
            ready_replicas=integer(mapping(body.get("status")).get("readyReplicas")),
        )


@dataclass(frozen=True)
class Observed(ObservedOwn[SparkHistoryServerStatus]):
    """Everything one pass decides from. ``children``: those filed under this key; only those whose
    controller is this object's uid count. ``body``: the object as listed (for ownerReferences)."""

    server: ServerView
    children: Sequence[ChildView] = ()

    def owned(self) -> tuple[ChildView, ...]:
        return owned_by(self.children, self.server.uid)

    def child(self, kind: str, name: str) -> ChildView | None:
        return next((c for c in self.owned() if (c.kind, c.name) == (kind, name)), None)


owner_keys = controller_keys(labels.GROUP, KIND)
