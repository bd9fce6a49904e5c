"""The one rule for a condition's lastTransitionTime (Kubernetes API conventions)."""

from __future__ import annotations

from typing import TypeVar

Time = TypeVar("Time")


def transition_time(old_status: str | None, old_time: Time | None, new_status: str, now: Time) -> Time:
    """The lastTransitionTime to record: the old one while the status stays the same, else ``now``."""
    if old_time and old_status == new_status:
        return old_time
    return now
