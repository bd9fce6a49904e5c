"""The one place that reads and writes Kubernetes timestamps (RFC 3339, UTC)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_time(value: Any) -> datetime | None:
    """A timezone-aware datetime from an API timestamp (or a datetime); None when absent or unreadable."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)  # since Python 3.11 it reads RFC 3339's "Z" too
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _utc(value: datetime) -> datetime:
    # Most stamps are UTC already: converting them again is most of the cost of writing one (a
    # status write formats every stamp it holds).
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def format_micro_time(value: datetime) -> str:
    """A MicroTime (a Lease's renewTime, an Event's eventTime): the API server requires all six
    sub-second digits."""
    return _utc(value).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def format_time(value: datetime | None) -> str | None:
    """RFC 3339 in UTC; sub-second digits only when there are any (retry waits are checked to well
    under a second, while most stamps come from the API server in whole seconds)."""
    if value is None:
        return None
    return _utc(value).replace(tzinfo=None).isoformat() + "Z"
