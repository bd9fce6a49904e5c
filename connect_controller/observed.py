"""What one pass of the connect controller decides from: a SparkConnect, the SparkDrivers that run
its servers and its stable Service, read leniently from the informer caches."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sparkop.api.connect import DEFAULT_RETRIES, DEFAULT_RETRY_INTERVAL, KIND, SparkConnectStatus
from sparkop.api.driver_view import SparkDriverView, spark_driver_fields
from sparkop.core.jsonread import mapping, opt_str
from sparkop.core.owners import ObservedOwn, OwnedView, controller_keys, owned_by, owned_identity
from sparkop.domain import labels
from sparkop.domain.kinds import ServedView, served_fields
from sparkop.domain.labels import GROUP

Key = tuple[str, str]  # (namespace, SparkConnect name)

# Fields whose change never restarts the server.
NON_RUN_FIELDS: Final = frozenset({"suspend", "restartPolicy", "grpcRoute"})


def spec_hash(spec: Mapping[str, Any]) -> str:
    """Hash of the spec minus what never restarts a server (suspend, the restart policy)."""
    relevant = {k: v for k, v in spec.items() if k not in NON_RUN_FIELDS}
    text = json.dumps(relevant, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class ConnectView(ServedView):
    """The facts of one SparkConnect a pass reads (its status: Observed.status)."""

    # spec.restartPolicy, read leniently with kubeflow's defaults: failures in a row a server may end
    # with before the SparkConnect is Failed, and the first backoff's seconds.
    failure_retries: int = DEFAULT_RETRIES
    failure_retry_interval: int = DEFAULT_RETRY_INTERVAL

    @property
    def spec_hash(self) -> str:
        return spec_hash(self.spec)

    @property
    def suspended(self) -> bool:
        return self.spec.get("suspend") is True

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ConnectView:
        fields = served_fields(body)
        policy = mapping(fields["spec"].get("restartPolicy"))
        retries, interval = policy.get("onFailureRetries"), policy.get("onFailureRetryInterval")
        return cls(
            **fields,
            failure_retries=retries if isinstance(retries, int) and retries >= 0 else DEFAULT_RETRIES,
            failure_retry_interval=interval if isinstance(interval, int) and interval >= 1 else DEFAULT_RETRY_INTERVAL,
        )


@dataclass(frozen=True, kw_only=True)
class ServerView(SparkDriverView):
    """One SparkDriver that runs (or ran) a server of a SparkConnect."""

    pod_ip: str | None = None
    ready: bool = False

    @property
    def live(self) -> bool:
        return not self.finished and not self.deleting

    @classmethod
    def from_body(cls, body: Mapping[str, Any], group: str = GROUP) -> ServerView:
        """A SparkDriver as the connect controller of ``group``'s SparkConnects sees it."""
        pod = mapping(mapping(body.get("status")).get("driverPod"))
        return cls(
            # A server's lastError says why it ended even beside its termination.
            **spark_driver_fields(body, group, KIND, error_beside_termination=True),
            pod_ip=opt_str(pod.get("podIP")),
            ready=pod.get("ready") is True,
        )


@dataclass(frozen=True, kw_only=True)
class ServiceView(OwnedView):
    """The stable Service (or any Service a SparkConnect controls), or its GRPCRoute (``kind``)."""

    selector: Mapping[str, str]
    kind: str = "Service"
    api_version: str = "v1"

    @classmethod
    def from_body(cls, body: Mapping[str, Any], group: str = GROUP) -> ServiceView:
        """A Service as the connect controller of ``group``'s SparkConnects sees it."""
        return cls(
            **owned_identity(body, group, KIND),
            selector={str(k): str(v) for k, v in mapping(mapping(body.get("spec")).get("selector")).items()},
            kind=str(body.get("kind") or "Service"),
            api_version=str(body.get("apiVersion") or "v1"),
        )


@dataclass(frozen=True)
class Observed(ObservedOwn[SparkConnectStatus]):
    """Everything one pass decides from. ``servers`` and ``services``: those filed under this key
    (only those whose controller is this object's uid count). ``body``: the object as listed, for
    the ownerReference of what it creates."""

    connect: ConnectView
    servers: Sequence[ServerView] = ()
    services: Sequence[ServiceView] = ()

    @property
    def owned_servers(self) -> tuple[ServerView, ...]:
        """Our servers, by run."""
        return owned_by(self.servers, self.connect.uid, lambda s: s.run)

    def service(self, name: str, kind: str = "Service") -> ServiceView | None:
        return next((s for s in owned_by(self.services, self.connect.uid) if (s.kind, s.name) == (kind, name)), None)


def owner_keys(group: str = labels.GROUP) -> Callable[[Mapping[str, Any]], list[Key]]:
    """How the connect controller of ``group`` files its servers and Service: under their controller
    owner's key."""
    return controller_keys(group, KIND)
