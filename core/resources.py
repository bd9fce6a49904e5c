"""The REST resources the client layer reads and writes: :class:`Resource` (enough to build a kind's
paths without discovery), the built-in kinds sparkop uses, and the table of every kind a write may
name (:func:`resource_of`), to which ``domain.kinds`` adds sparkop's own on import
(:func:`register_kinds`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sparkop.core.jsontypes import JSON


@dataclass(frozen=True)
class Resource:
    """A REST resource: enough to build its paths without discovery."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    # A kind the cluster may not serve, or this operator may not be allowed to read (a batch
    # scheduler's CRD): its informer takes a 404 or 403 for an empty, current cache and looks for the
    # kind again now and then (core.informer.ABSENT_POLL_S), so that the controllers that read it
    # still start, and see the kind once it is installed.
    optional: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [root]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        if sub:
            parts.append(sub)
        return "/".join(parts)


PODS: Final = Resource("", "v1", "pods", "Pod")
CONFIGMAPS: Final = Resource("", "v1", "configmaps", "ConfigMap")
SERVICES: Final = Resource("", "v1", "services", "Service")
EVENTS: Final = Resource("", "v1", "events", "Event")
NAMESPACES: Final = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
INGRESSES: Final = Resource("networking.k8s.io", "v1", "ingresses", "Ingress")
# Spark 4.2+'s executor NetworkPolicy, a SparkDriver's child like its Service. Optional: an operator
# installed without rights on NetworkPolicies (the chart's controller.networkPolicy.enable: false)
# still starts; only an app that needs one fails, at submission, with the API server's refusal.
NETWORK_POLICIES: Final = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", optional=True)
POD_DISRUPTION_BUDGETS: Final = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
# A SparkHistoryServer's server.
DEPLOYMENTS: Final = Resource("apps", "v1", "deployments", "Deployment")

# Every kind a client of this module writes: the built-in ones here, the operator's own
# (domain.kinds) added with register_kinds when their module is imported.
_BY_KIND: Final[dict[tuple[str, str], Resource]] = {
    (r.api_version, r.kind): r
    for r in (
        PODS,
        CONFIGMAPS,
        SERVICES,
        EVENTS,
        NAMESPACES,
        INGRESSES,
        NETWORK_POLICIES,
        POD_DISRUPTION_BUDGETS,
        DEPLOYMENTS,
    )
}


def register_kinds(*resources: Resource) -> None:
    """Make ``resources`` known to :func:`resource_of` (and so to the Applier's writes)."""
    for resource in resources:
        _BY_KIND[(resource.api_version, resource.kind)] = resource


def known_kind(api_version: str, kind: str) -> Resource | None:
    """The resource of a kind of the table (None: not known)."""
    return _BY_KIND.get((api_version, kind))


def resource_of(body: JSON) -> Resource:
    try:
        return _BY_KIND[(body["apiVersion"], body["kind"])]
    except KeyError:
        raise ValueError(f"not a known kind: {body.get('apiVersion')}/{body.get('kind')}") from None


__all__ = [
    "CONFIGMAPS",
    "DEPLOYMENTS",
    "EVENTS",
    "INGRESSES",
    "NAMESPACES",
    "NETWORK_POLICIES",
    "PODS",
    "POD_DISRUPTION_BUDGETS",
    "SERVICES",
    "Resource",
    "known_kind",
    "register_kinds",
    "resource_of",
]
