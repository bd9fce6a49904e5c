"""The API server's answers as sparkop reads them, in one place: which errors are refusals a retry
will not fix (:class:`Refused`, :class:`Taken`), which a retry may get past (:func:`transient_error`),
which are the work queue's to handle (:class:`Conflict`, :class:`Occupied`), and the Applier's rules
built on them (:class:`Rules`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from sparkop.core.jsontypes import JSON
from sparkop.core.plan import Refusal
from sparkop.core.resources import Resource, resource_of
from sparkop.core.times import format_time

# How long a read of the end of a pod's log may take (the API server asks the pod's kubelet).
LOG_TAIL_TIMEOUT_SECONDS: Final = 10.0


class Conflict(Exception):
    """The object changed since it was read; recompute from a fresh view."""


class Refused(Exception):
    """The API server refused a write for a reason a retry will not fix (400, 403, 422)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class Taken(Refused):
    """A create met 409 AlreadyExists, and the object of that name is not ours: its controller is not
    the manifest's controller owner. Never adopted, never taken for a retried create of our own."""

    def __init__(self, kind: str, name: str, holder: str) -> None:
        message = f"{kind} {name} already exists and is not ours ({holder}); delete it or choose another name"
        super().__init__(409, "AlreadyExists", message)


class Occupied(Conflict):
    """A create met 409 AlreadyExists on an object that is on its way out (being deleted, or its
    controller owner is gone and the garbage collector has yet to remove it): try again later."""


class Fenced(Exception):
    """A write refused before it was sent: this replica is not the leader (or no longer may act as
    one: its lease was not renewed within the renew deadline). See ``core.leader``."""


class NamespaceTerminating(Exception):
    """The namespace is being deleted: creates in it are refused (403) and its objects are going.
    Controllers stop their work in it quietly."""

    def __init__(self, namespace: str) -> None:
        super().__init__(f"namespace {namespace} is terminating")
        self.namespace = namespace


def api_status(exc: ApiException) -> dict[str, Any]:
    try:
        status = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


def refusal(exc: ApiException) -> Refused:
    status = api_status(exc)
    return Refused(exc.status or 0, status.get("reason") or str(exc.reason), status.get("message") or str(exc))


def namespace_terminating(exc: ApiException) -> bool:
    """Whether the API server refused a write because its namespace is being deleted (403 with a
    ``NamespaceTerminating`` cause)."""
    if exc.status != 403:
        return False
    causes = (api_status(exc).get("details") or {}).get("causes") or ()
    return any(isinstance(c, dict) and c.get("type") == "NamespaceTerminating" for c in causes)


def transient_error(exc: BaseException | None, doing: str) -> JSON | None:
    """A lastError {reason, message, time} for an error a retry may get past: 5xx or 429 from the API
    server, a timeout, a lost connection. None for anything else."""
    if isinstance(exc, ApiException) and (exc.status == 429 or (exc.status or 0) >= 500):
        status = api_status(exc)
        default = "TooManyRequests" if exc.status == 429 else "InternalError"
        reason = str(status.get("reason") or default)
        text = f"{doing}: {exc.status} {reason}: {status.get('message') or exc.reason or ''}"
    elif isinstance(exc, TimeoutError):
        reason, text = "Timeout", f"{doing}: the API server did not answer in time"
    elif isinstance(exc, (aiohttp.ClientError, ConnectionError)):
        reason, text = "ConnectionError", f"{doing}: {exc}"
    else:
        return None
    return {"reason": reason, "message": text[:32768], "time": format_time(datetime.now(UTC))}


class Rules:
    """sparkop's error rules for ``core.applier.Applier`` (a ``core.applier.Rules``): which API errors a
    retry may get past, which are refusals the next pass is told of, which are the queue's."""

    def resource(self, api_version: str, kind: str) -> Resource:
        return resource_of({"apiVersion": api_version, "kind": kind})

    def refusal(self, exc: BaseException) -> Refusal | None:
        if isinstance(exc, Refused):
            return Refusal(exc.status, exc.reason, exc.message)
        return None

    def transient(self, exc: BaseException, doing: str) -> JSON | None:
        return transient_error(exc, doing)

    def stale(self, exc: BaseException) -> bool:
        return isinstance(exc, Conflict) and not isinstance(exc, Occupied)

    def for_the_queue(self, exc: BaseException) -> bool:
        return isinstance(exc, Conflict)

    def unreadable(self, exc: BaseException) -> str:
        if isinstance(exc, ApiException):
            status = api_status(exc)
            return f"{exc.status} {status.get('reason') or exc.reason}: {status.get('message') or ''}".strip()[:1024]
        if isinstance(exc, TimeoutError):
            return f"no answer within {LOG_TAIL_TIMEOUT_SECONDS:g} s"
        return f"{type(exc).__name__}: {exc}"[:1024]


def describe_controller(ref: Mapping[str, Any] | None) -> str:
    if ref is None:
        return "it has no controller"
    return f"its controller is {ref.get('kind')} {ref.get('name')}, uid {ref.get('uid')}"


__all__ = [
    "Conflict",
    "Fenced",
    "NamespaceTerminating",
    "Occupied",
    "Refused",
    "Rules",
    "Taken",
    "api_status",
    "describe_controller",
    "namespace_terminating",
    "refusal",
    "transient_error",
]
