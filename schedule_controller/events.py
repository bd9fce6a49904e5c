"""The Kubernetes Event reasons the schedule controller posts on a ScheduledSparkApplication."""

from __future__ import annotations

import enum


class Reason(enum.StrEnum):
    """The reasons of the Events posted on a ScheduledSparkApplication (CamelCase, as Kubernetes' own)."""

    RUN_STARTED = "RunStarted"
    RUN_SKIPPED = "RunSkipped"
    RUN_MISSED = "RunMissed"
    RUN_REPLACED = "RunReplaced"
    RUN_REFUSED = "RunRefused"
    RUN_PRUNED = "RunPruned"
    INVALID_SCHEDULE = "InvalidSchedule"
