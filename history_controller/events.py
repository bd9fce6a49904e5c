"""The Kubernetes Event reasons the history controller posts on a SparkHistoryServer."""

from __future__ import annotations

import enum


class Reason(enum.StrEnum):
    """The reasons of the Events posted on a SparkHistoryServer (CamelCase, as Kubernetes' own), and of
    the writes that make its objects (ENSURED, REMOVED: in the decision log)."""

    SERVER_READY = "HistoryServerReady"
    SERVER_NOT_READY = "HistoryServerNotReady"
    OBJECT_REFUSED = "HistoryServerRefused"
    ENSURED = "HistoryServer"
    REMOVED = "HistoryServerRouteRemoved"
