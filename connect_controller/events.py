"""The Kubernetes Event reasons the connect controller posts on a SparkConnect."""

from __future__ import annotations

import enum


class Reason(enum.StrEnum):
    """The reasons of the Events posted on a SparkConnect (CamelCase, as Kubernetes' own)."""

    SERVER_STARTED = "ServerStarted"
    SERVER_READY = "ServerReady"
    SERVER_NOT_READY = "ServerNotReady"
    SERVER_EXITED = "ServerExited"
    SERVER_DELETED = "ServerDeleted"
    SERVER_REPLACED = "ServerReplaced"
    SERVER_REFUSED = "ServerRefused"
    SERVICE_SWITCHED = "ServiceSwitched"
    SUSPENDED = "Suspended"
    CONNECT_FAILED = "ConnectFailed"
    ROUTE_REMOVED = "GRPCRouteRemoved"
