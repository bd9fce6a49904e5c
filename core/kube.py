"""The one Kubernetes client layer.

Every write sparkop makes goes through here, so the rules for tolerated errors live in one place:
a create that meets 409 AlreadyExists succeeded when the existing object has the same controller
owner (names are deterministic: it is our own retried create), a delete that meets 404 succeeded,
and a status write carries the resourceVersion it was computed from so that a decision made on a
stale view is refused (409 Conflict) and recomputed instead of overwriting newer facts. A namespace
being deleted stops the work in it quietly (NamespaceTerminating).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal
from urllib.parse import urlencode

import aiohttp
import orjson
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import Counter
from yarl import URL

from sparkop.core import names

# What the API server's answers mean (core.errors), named here too for the client's callers.
from sparkop.core.errors import LOG_TAIL_TIMEOUT_SECONDS, describe_controller, namespace_terminating, refusal
from sparkop.core.errors import Conflict as Conflict
from sparkop.core.errors import Fenced as Fenced
from sparkop.core.errors import NamespaceTerminating as NamespaceTerminating
from sparkop.core.errors import Occupied as Occupied
from sparkop.core.errors import Refused as Refused
from sparkop.core.errors import Rules as Rules
from sparkop.core.errors import Taken as Taken
from sparkop.core.errors import transient_error as transient_error
from sparkop.core.jsontypes import JSON
from sparkop.core.leader import default_namespace
from sparkop.core.owners import controller_of

# The client's vocabulary, defined beside it and named here too: the kinds it reads and writes, and what a
# port-forward hands back (core.resources, core.portforward).
from sparkop.core.portforward import PORT_FORWARD_PROTOCOL as PORT_FORWARD_PROTOCOL
from sparkop.core.portforward import PortForward as PortForward
from sparkop.core.portforward import PortForwardError as PortForwardError
from sparkop.core.portforward import port_forward_refusal
from sparkop.core.requester import NO_TIMEOUT
from sparkop.core.resources import CONFIGMAPS as CONFIGMAPS
from sparkop.core.resources import EVENTS as EVENTS
from sparkop.core.resources import INGRESSES as INGRESSES
from sparkop.core.resources import NAMESPACES as NAMESPACES
from sparkop.core.resources import NETWORK_POLICIES as NETWORK_POLICIES
from sparkop.core.resources import POD_DISRUPTION_BUDGETS as POD_DISRUPTION_BUDGETS
from sparkop.core.resources import PODS as PODS
from sparkop.core.resources import SERVICES as SERVICES
from sparkop.core.resources import Resource as Resource
from sparkop.core.resources import known_kind, resource_of

log = logging.getLogger(__name__)

PatchType = Literal["merge", "json", "strategic"]


# What this client calls itself: its user agent's product, the component that reports its Events.
COMPONENT: Final = "sparkop"


def _user_agent() -> str:
    try:
        return f"{COMPONENT}/{importlib.metadata.version('sparkop')}"
    except importlib.metadata.PackageNotFoundError:
        return COMPONENT


USER_AGENT: Final = _user_agent()

_CONTENT_TYPES: Final[dict[PatchType, str]] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> JSON:
    """An RFC 7386 merge patch turning ``old`` into ``new`` (removed keys become null)."""
    patch: JSON = {key: None for key in old.keys() - new.keys()}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            sub = merge_patch(before, value)
            if sub:
                patch[key] = sub
        elif value != before:
            patch[key] = value
    return patch


async def _read_the_environment_once(api: client.ApiClient) -> None:
    """kubernetes_asyncio opens its aiohttp session with ``trust_env``, so every request looks up the
    proxy variables and reads ~/.netrc on a worker thread: under load, a fifth of the operator's CPU
    (bench/throughput.py). The proxy for the API server's URL is looked up here, once, and pinned on
    the client; ~/.netrc only ever supplies Basic credentials, which the API server does not take."""
    rest = api.rest_client
    if not rest.proxy:
        try:
            proxy, auth = aiohttp.helpers.get_env_proxy_for_url(URL(api.configuration.host or ""))
        except LookupError:
            pass
        else:
            rest.proxy = str(proxy)
            if auth is not None:
                rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": auth.encode()}
    trusting = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(
        connector=trusting.connector, trust_env=False, read_bufsize=trusting._read_bufsize
    )
    # The connector now belongs to the new session alone: closing the old one must leave it open.
    trusting._connector_owner = False
    await trusting.close()


THROTTLED_SECONDS = Counter(
    "sparkop_kube_client_throttled_seconds_total",
    "Seconds requests waited for the client-side rate limit (--kube-api-qps, --kube-api-burst)",
)


class RateLimit:
    """A token bucket over the operator's requests (not its watches, not its leader lease): at most
    ``burst`` at once, refilled at ``qps`` per second. Each request reserves a token, waiting its turn
    when none is left, so requests go out in the order they asked. ``qps`` 0: no limit.

    The API server's Priority and Fairness shares its capacity fairly between clients; this is the
    operator's own bound, so that a burst of thousands of apps does not arrive as one herd."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()

    async def take(self) -> None:
        if self.qps <= 0:
            return
        now = time.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now
        self._tokens -= 1
        if self._tokens < 0:
            wait = -self._tokens / self.qps
            THROTTLED_SECONDS.inc(wait)
            await asyncio.sleep(wait)


@dataclass(frozen=True)
class LogReading:
    """What of a pod's log the pods/log endpoint sends: kubectl logs' --container, --follow, --tail,
    --since and --timestamps."""

    container: str | None = None  # None: the pod's only container
    follow: bool = False
    tail: int | None = None  # the last N lines; None: all
    since_seconds: int | None = None
    timestamps: bool = False

    def query(self) -> list[tuple[str, str]]:
        query = [("follow", "true")] if self.follow else []
        if self.container:
            query.append(("container", self.container))
        if self.tail is not None:
            query.append(("tailLines", str(self.tail)))
        if self.since_seconds is not None:
            query.append(("sinceSeconds", str(self.since_seconds)))
        if self.timestamps:
            query.append(("timestamps", "true"))
        return query


class Kube:
    """Async access to the API server, with sparkop's error rules."""

    def __init__(self, api: client.ApiClient, namespace: str = "default") -> None:
        self.api = api
        # The namespace kubectl would use without -n: the context's, in a pod its own, else default.
        self.namespace = namespace
        # With leader election: whether this replica may write now. Asked before every request that
        # is not a GET, so that a leader past its renew deadline writes nothing, whatever it is doing.
        self.fence: Callable[[], bool] | None = None
        self.limit = RateLimit(0, 1)

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> Kube:
        configuration = client.Configuration()
        if kubeconfig is None and "KUBECONFIG" not in os.environ and "KUBERNETES_SERVICE_HOST" in os.environ:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            namespace = default_namespace()
        else:
            loader = await config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
            # The loader's current context is a plain dict: {"name": ..., "context": {"namespace": ...}}.
            current = loader.current_context or {}
            namespace = (current.get("context") or {}).get("namespace") or "default"
        api = client.ApiClient(configuration)
        # The API server's audit log and APF see who is asking: sparkop, not a generic Python client.
        api.user_agent = USER_AGENT
        await _read_the_environment_once(api)
        return cls(api, namespace)

    async def close(self) -> None:
        await self.api.close()

    async def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        *,
        body: Any = None,
        content_type: str = "application/json",
        client_timeout: aiohttp.ClientTimeout = NO_TIMEOUT,
        accept: str = "application/json",
    ) -> aiohttp.ClientResponse:
        """The one request path (the informers' LISTs and WATCHes, the leader's Lease, every call
        below): the request on the client's own session, connector, proxy and credentials, the
        answer unread; no rate limit and no fence (:meth:`_call` adds them for the controllers'
        writes). Without the generated client's per-request work (sanitizing the body object by
        object, copying parameters): a third of the request path's CPU under load."""
        session, url, headers, extra = await self._connection(path, query)
        headers["Accept"] = accept
        if body is not None:
            headers["Content-Type"] = content_type
        data = None if body is None else orjson.dumps(body)
        return await session.request(method, url, headers=headers, data=data, timeout=client_timeout, **extra)

    async def _connection(
        self, path: str, query: Sequence[tuple[str, Any]] = ()
    ) -> tuple[aiohttp.ClientSession, str, dict[str, str], dict[str, Any]]:
        """What every request to the API server goes with: the client's own session (its connector:
        the TLS context with the CA and client certificate), the URL, the default headers with the
        credentials, and the proxy settings."""
        api = self.api
        headers = dict(api.default_headers)
        # Asked per request: a token from an exec plugin or a projected service account is refreshed.
        await api.update_params_for_auth(headers, [], ["BearerToken"])
        url = f"{api.configuration.host}{path}"
        if query:
            url += "?" + urlencode(list(query))
        rest = api.rest_client
        extra: dict[str, Any] = {}
        if rest.proxy:
            extra["proxy"] = rest.proxy
            if rest.proxy_headers:
                extra["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            extra["server_hostname"] = rest.server_hostname
        session: aiohttp.ClientSession = rest.pool_manager
        return session, url, headers, extra

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
        decode: bool = True,
    ) -> JSON:
        """One request; the answer decoded when ``decode`` ({} otherwise: a create or Event whose
        answer nobody reads is not parsed). ApiException for an answer that is not 2xx."""
        await self.limit.take()
        if method != "GET" and self.fence is not None and not self.fence():
            raise Fenced(f"refusing {method} {path}: this replica does not hold a valid leader lease")
        response = await self.request(method, path, query or [], body=body, content_type=content_type)
        try:
            data = await response.read()
        finally:
            response.release()
        if not 200 <= response.status < 300:
            error = ApiException(status=response.status, reason=response.reason)
            error.body = data
            error.headers = response.headers
            raise error
        if not decode or not data:
            return {}
        result = orjson.loads(data)
        return result if isinstance(result, dict) else {}

    async def get(self, resource: Resource, namespace: str | None, name: str) -> JSON | None:
        try:
            return await self._call("GET", resource.path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def served_in_group(self, resource: Resource) -> set[str]:
        """The resources the API server serves now in ``resource``'s group and version (its CRD
        exists and is established): one request answers for every kind of the group."""
        root = f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"
        try:
            listing = await self._call("GET", root)
        except ApiException as exc:
            if exc.status == 404:
                return set()
            raise
        return {str(r.get("name")) for r in listing.get("resources", []) if isinstance(r, dict)}

    async def list(
        self, resource: Resource, namespace: str | None, *, selector: str | None = None, fields: str | None = None
    ) -> list[JSON]:
        """For tools and tests. Controllers read from the informer caches instead."""
        return list((await self.listing(resource, namespace, selector=selector, fields=fields)).get("items", []))

    async def listing(
        self, resource: Resource, namespace: str | None, *, selector: str | None = None, fields: str | None = None
    ) -> JSON:
        """The List object itself (its items and the resourceVersion a watch starts from), for tools."""
        query = [("labelSelector", selector)] if selector else []
        if fields:
            query.append(("fieldSelector", fields))
        return await self._call("GET", resource.path(namespace), query=query)

    async def watch(
        self, resource: Resource, namespace: str | None, resource_version: str, *, selector: str | None = None
    ) -> AsyncIterator[JSON]:
        """The watch events after ``resource_version`` ({"type": ..., "object": ...}), as they arrive,
        until the server ends the watch; for tools (``sparkop list -w``). The controllers' watches are
        core.informer's. ApiException when the watch is refused."""
        query = [("watch", "true"), ("resourceVersion", resource_version)]
        if selector:
            query.append(("labelSelector", selector))
        response = await self.request("GET", resource.path(namespace), query)
        try:
            if not 200 <= response.status < 300:
                error = ApiException(status=response.status, reason=response.reason)
                error.body = await response.read()
                raise error
            pending = b""
            # One event per line; a line may be longer than aiohttp's readline allows, so split here.
            async for chunk in response.content.iter_any():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        event = orjson.loads(line)
                        if isinstance(event, dict):
                            yield event
        finally:
            response.release()

    async def pod_log(self, namespace: str, name: str, reading: LogReading) -> AsyncIterator[bytes]:
        """A pod container's log from the API server's pods/log endpoint, in chunks as they arrive (with
        ``reading.follow``, until the container ends). ApiException when the log cannot be read."""
        query = reading.query()
        response = await self.request("GET", PODS.path(namespace, name, "log"), query, accept="*/*")
        try:
            # Unread, the response is not checked by the client: an error status is ours to raise.
            if not 200 <= response.status < 300:
                error = ApiException(status=response.status, reason=response.reason)
                error.body = await response.read()
                raise error
            async for chunk in response.content.iter_any():
                yield chunk
        finally:
            response.release()

    async def pod_log_tail(self, namespace: str, name: str, *, container: str | None, lines: int, limit: int) -> str:
        """The last ``lines`` lines of a pod container's log (at most ``limit`` characters, the end kept),
        read once. ApiException when the log cannot be read (the pod's node is gone, say)."""
        query = LogReading(container, tail=lines).query()
        # The API server asks the pod's kubelet, which a lost node's never answers.
        timeout = aiohttp.ClientTimeout(total=LOG_TAIL_TIMEOUT_SECONDS)
        response = await self.request(
            "GET", PODS.path(namespace, name, "log"), query, accept="*/*", client_timeout=timeout
        )
        try:
            data = await response.read()
            if not 200 <= response.status < 300:
                error = ApiException(status=response.status, reason=response.reason)
                error.body = data
                raise error
        finally:
            response.release()
        return data.decode(errors="replace")[-limit:]

    async def port_forward(self, namespace: str, pod: str, port: int) -> PortForward:
        """A new TCP connection to ``port`` of ``pod``, as ``kubectl port-forward`` opens one per
        accepted connection: a WebSocket to the pods/portforward subresource, on the client's own
        session, connector (its TLS context: CA, client certificate), proxy and credentials, as
        :meth:`request` sends every other request. PortForwardError when the API server refuses
        (its status in ``.status``) or the WebSocket cannot be opened."""
        session, url, headers, extra = await self._connection(
            PODS.path(namespace, pod, "portforward"), [("ports", port)]
        )
        target = f"{namespace}/{pod}:{port}"
        try:
            # No heartbeat of ours: the server's pings are answered (autoping), and an idle
            # client connection must stay open as long as the client keeps it.
            ws = await session.ws_connect(url, protocols=(PORT_FORWARD_PROTOCOL,), headers=headers, **extra)
        except aiohttp.WSServerHandshakeError as exc:
            raise PortForwardError(port_forward_refusal(exc.status, target, pod, namespace), exc.status) from exc
        if ws.protocol != PORT_FORWARD_PROTOCOL:
            # Without the subprotocol the server would speak another framing: data would be misread.
            await ws.close()
            raise PortForwardError(f"the API server did not agree to {PORT_FORWARD_PROTOCOL} forwarding {target}")
        return PortForward(ws, target)

    async def create(self, body: JSON) -> bool:
        """Create ``body``. True if created, False if it already existed as ours (a retried create).

        When ``body`` has a controller owner, an existing object of that name is ours only if it has
        the same controller (by uid); otherwise :class:`Taken` (a refusal), or :class:`Occupied` when
        it is on its way out. NamespaceTerminating when the namespace is being deleted."""
        resource = resource_of(body)
        namespace = body["metadata"].get("namespace")
        try:
            await self._call("POST", resource.path(namespace), body=body, decode=False)
        except ApiException as exc:
            if exc.status == 409:
                await self._check_ours(resource, body)
                return False
            if namespace_terminating(exc):
                raise NamespaceTerminating(str(namespace)) from exc
            # 404: the kind is not served (a batch scheduler's PodGroup without its CRD).
            if exc.status in (400, 403, 404, 422):
                raise refusal(exc) from exc
            raise
        return True

    async def _check_ours(self, resource: Resource, body: JSON) -> None:
        """After a 409 on creating ``body``: return if the existing object has ``body``'s controller."""
        ours = controller_of(body)
        if ours is None:
            return  # nothing to tell our object from another: names alone are ours
        meta = body["metadata"]
        namespace, name = meta.get("namespace"), meta["name"]
        existing = await self.get(resource, namespace, name)
        if existing is None:
            raise Occupied(f"{resource.kind} {name} was deleted after it refused our create")
        theirs = controller_of(existing)
        if theirs is not None and theirs.get("uid") == ours.get("uid"):
            return
        if (existing.get("metadata") or {}).get("deletionTimestamp") or await self._owner_gone(theirs, namespace):
            raise Occupied(f"{resource.kind} {name} is being removed; its name will be free again")
        raise Taken(resource.kind, name, describe_controller(theirs))

    async def _owner_gone(self, ref: Mapping[str, Any] | None, namespace: str | None) -> bool:
        """Whether ``ref`` names an owner that no longer exists (the garbage collector will remove
        its dependents). Unknown owner kinds are taken to exist."""
        if ref is None:
            return False
        resource = known_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        if resource is None:
            return False
        owner = await self.get(resource, namespace if resource.namespaced else None, str(ref.get("name")))
        return owner is None or (owner.get("metadata") or {}).get("uid") != ref.get("uid")

    async def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation: Literal["Background", "Foreground", "Orphan"] = "Background",
        grace_seconds: int | None = None,
    ) -> JSON | None:
        """Delete by name (and uid, so a same-named successor is never hit): the API server's answer
        (the object as the deletion left it: a pod given its grace period shows deletionTimestamp at a
        new resourceVersion), or None if it was gone already. ``grace_seconds`` 0 removes a pod at once,
        without waiting for its kubelet (one that will never answer: its node is lost)."""
        options: JSON = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            options["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        try:
            answer = await self._call("DELETE", resource.path(namespace, name), body=options)
        except ApiException as exc:
            if exc.status == 404 or (exc.status == 409 and uid):
                return None
            raise
        return answer

    async def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> JSON | None:
        """Patch; None when the object is gone. A failed json-patch ``test`` or a stale
        resourceVersion raises Conflict."""
        try:
            return await self._call(
                "PATCH",
                resource.path(namespace, name, subresource),
                body=patch,
                content_type=_CONTENT_TYPES[patch_type],
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 409 or (exc.status == 422 and patch_type == "json"):
                raise Conflict(str(exc.reason)) from exc
            raise

    async def patch_status(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        *,
        old: Mapping[str, Any],
        new: Mapping[str, Any],
        resource_version: str,
    ) -> JSON | None:
        """Turn status ``old`` into ``new``, both as of ``resource_version``: if the object changed
        since, the write is refused (Conflict) rather than overwrite facts the decision never saw.
        None when the object is gone."""
        patch = {"metadata": {"resourceVersion": resource_version}, "status": merge_patch(old, new)}
        return await self.patch(resource, namespace, name, patch, subresource="status")

    async def event(self, regarding: JSON, *, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        """Post a core/v1 Event on ``regarding``; a lost Event is logged, never fatal."""
        meta = regarding["metadata"]
        now = datetime.now(UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "namespace": meta["namespace"],
                "name": names.event_name(meta["name"], int(now.timestamp() * 1e9)),
            },
            "involvedObject": {
                "apiVersion": regarding["apiVersion"],
                "kind": regarding["kind"],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": os.environ.get("HOSTNAME", COMPONENT),
            "firstTimestamp": stamp.split(".")[0] + "Z",
            "lastTimestamp": stamp.split(".")[0] + "Z",
            "eventTime": stamp,
            "action": reason,
            "count": 1,
        }
        try:
            await self._call("POST", EVENTS.path(meta["namespace"]), body=body, decode=False)
        except ApiException as exc:
            # An Event lost with its namespace is no news; anything else may hide a problem.
            level = logging.DEBUG if namespace_terminating(exc) else logging.WARNING
            log.log(level, "event %s on %s/%s not posted: %s", reason, meta["namespace"], meta["name"], exc.reason)
