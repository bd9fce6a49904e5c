"""Gateway API routes (``gateway.networking.k8s.io/v1``) in front of what sparkop serves: an HTTPRoute
for a Spark UI (a running app's, a history server's) and a GRPCRoute for a Spark Connect server,
attached to a Gateway the user names. sparkop writes only the route; the Gateway, its class and the
implementation that serves them (Traefik, Envoy Gateway, ...) are the cluster's.

The spec part (:class:`api.models.RouteSpec`) and the pure builders of both routes live here, shared by the
controllers that create them and by ``sparkop validate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .models import GatewayRef, RouteSpec

GROUP: Final = "gateway.networking.k8s.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
HTTP_ROUTE: Final = "HTTPRoute"
GRPC_ROUTE: Final = "GRPCRoute"


def _parent(ref: Mapping[str, Any]) -> dict[str, Any]:
    parent: dict[str, Any] = {"group": GROUP, "kind": "Gateway", "name": str(ref.get("name") or "")}
    for key in ("namespace", "sectionName", "port"):
        if ref.get(key):
            parent[key] = ref[key]
    return parent


def prefix(route: Mapping[str, Any]) -> str:
    """The route's path prefix without a trailing slash ("" for the root)."""
    return str(route.get("path") or "").rstrip("/")


def url(route: Mapping[str, Any], scheme: str = "http") -> str | None:
    """The address a route makes a page reachable at, when it names a host (None: any host, so the
    Gateway's own address, which sparkop does not know)."""
    hosts = [h for h in route.get("hostnames") or () if isinstance(h, str) and not h.startswith("*")]
    return f"{scheme}://{hosts[0]}{prefix(route)}" if hosts else None


def _backend(service: str, port: int) -> list[dict[str, Any]]:
    return [{"group": "", "kind": "Service", "name": service, "port": port, "weight": 1}]


def http_route(metadata: Mapping[str, Any], route: Mapping[str, Any], service: str, port: int) -> dict[str, Any]:
    """An HTTPRoute from ``route`` (a :class:`RouteSpec` as JSON) to ``service``:``port``. Under a
    path prefix the prefix is stripped on the way to the backend, which writes its links below it."""
    path = prefix(route)
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": path or "/"}}],
        "backendRefs": _backend(service, port),
    }
    if path:
        rule["filters"] = [
            {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}
        ]
    return _route(HTTP_ROUTE, metadata, route, [rule])


def grpc_route(metadata: Mapping[str, Any], route: Mapping[str, Any], service: str, port: int) -> dict[str, Any]:
    """A GRPCRoute from ``route`` to ``service``:``port`` (every gRPC service and method)."""
    return _route(GRPC_ROUTE, metadata, route, [{"backendRefs": _backend(service, port)}])


def _route(
    kind: str, metadata: Mapping[str, Any], route: Mapping[str, Any], rules: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    meta = dict(metadata)
    meta["labels"] = {**(route.get("labels") or {}), **(meta.get("labels") or {})}
    if route.get("annotations"):
        meta["annotations"] = {**route["annotations"], **(meta.get("annotations") or {})}
    spec: dict[str, Any] = {"parentRefs": [_parent(route.get("gateway") or {})], "rules": [dict(r) for r in rules]}
    if route.get("hostnames"):
        spec["hostnames"] = list(route["hostnames"])
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


__all__ = ["API_VERSION", "GRPC_ROUTE", "HTTP_ROUTE", "GatewayRef", "RouteSpec", "grpc_route", "http_route", "url"]
