"""A SparkDriver as the controllers that own one read it (the apps controller its runs, the connect
controller its servers): which run it is, the spec it runs, and what its status says of its driver pod
and how it ended. Read leniently from the informer caches; each controller's view adds what it alone
reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sparkop.api.models import DriverPhase
from sparkop.core.jsonread import integer, mapping, opt_enum, opt_int, opt_str
from sparkop.core.owners import OwnedView, owned_identity
from sparkop.core.times import parse_time
from sparkop.domain import labels


@dataclass(frozen=True, kw_only=True)
class SparkDriverView(OwnedView):
    """What every owner reads of a SparkDriver (:func:`spark_driver_fields`)."""

    run: int  # its sparkop.io/run label: the run number within its owner
    spec_hash: str | None  # its sparkop.io/spec-hash annotation: the owner's spec it runs
    created: datetime | None = None  # metadata.creationTimestamp
    phase: DriverPhase | None = None
    pod_name: str | None = None
    incarnation: int = 0
    executors: Mapping[str, int] = field(default_factory=dict)
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None

    @property
    def finished(self) -> bool:
        return self.phase is not None and self.phase.terminal


def spark_driver_fields(
    body: Mapping[str, Any], group: str, owner_kind: str, *, error_beside_termination: bool
) -> dict[str, Any]:
    """:class:`SparkDriverView`'s fields of a SparkDriver owned by a ``group`` ``owner_kind``.

    ``reason`` and ``message`` are the driver container's termination's, else its ``lastError``'s: a
    refused driver pod leaves no termination, and its lastError says why. ``error_beside_termination``
    False reads the lastError only then (SubmissionFailed, or no termination), so that a later error of
    the SparkDriver's own is not taken for how its run ended."""
    meta = mapping(body.get("metadata"))
    status = mapping(body.get("status"))
    phase = opt_enum(DriverPhase, status.get("phase"))
    term = mapping(status.get("termination"))
    error = mapping(status.get("lastError"))
    if not error_beside_termination and term and phase is not DriverPhase.SUBMISSION_FAILED:
        error = {}
    return {
        **owned_identity(body, group, owner_kind),
        "run": integer(mapping(meta.get("labels")).get(labels.RUN)),
        "spec_hash": opt_str(mapping(meta.get("annotations")).get(labels.SPEC_HASH)),
        "created": parse_time(meta.get("creationTimestamp")),
        "phase": phase,
        "pod_name": opt_str(mapping(status.get("driverPod")).get("name")),
        "incarnation": integer(status.get("incarnation")),
        "executors": {str(k): integer(v) for k, v in mapping(status.get("executors")).items()},
        "exit_code": opt_int(term.get("exitCode")),
        "reason": opt_str(term.get("reason")) or opt_str(error.get("reason")),
        "message": opt_str(term.get("message")) or opt_str(error.get("message")),
    }


__all__ = ["SparkDriverView", "spark_driver_fields"]
