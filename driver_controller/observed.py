"""What one pass of the driver controller decides from (:class:`Observed`): the SparkDriver as
``observe`` reads it (:class:`DriverView`: its spec parsed, or what is wrong with it, and its status),
and the summaries of the objects it owns (:mod:`driver_controller.summaries`, Kueue's in
:mod:`driver_controller.kueue_summaries`) as the driver controller's indexes hand them out, filed under
its key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from sparkop.api.models import MAX_TRACKED_EXECUTORS, SparkDriver, SparkDriverStatus
from sparkop.core.expectations import LogTail
from sparkop.core.limits import DEFAULT_LOG_TAIL_LINES
from sparkop.core.owners import controller_keys, reference_keys
from sparkop.core.plan import Refusal
from sparkop.core.specs import SpecError, lenient, unknown_fields
from sparkop.domain import labels
from sparkop.driver_controller.kueue_summaries import FlavorSummary, WorkloadSummary
from sparkop.driver_controller.podbuild import RenderOptions
from sparkop.driver_controller.render import parse
from sparkop.driver_controller.summaries import (
    DRIVER_KIND,
    Body,
    ObjectSummary,
    PodGroupSummary,
    PodSummary,
    PolicySummary,
)

Key = tuple[str, str]
"""(namespace, SparkDriver name). Every object a SparkDriver owns carries the sparkop.io/driver label (the
executor pod template puts it on executors too), so its pods, ConfigMaps and Services are watched with
that label as a server-side selector; each is filed under its SparkDriver's key by its ownerReference to
it (core.owners), and a pass counts as the SparkDriver's only what names its uid."""

controller_key = controller_keys(labels.GROUP, DRIVER_KIND)
"""The key of the SparkDriver that controls an object (its ConfigMaps, Services, driver pods, ...)."""
owner_key = reference_keys(labels.GROUP, DRIVER_KIND)
"""The keys of the SparkDrivers a pod belongs to: its driver pod's controller, or an executor's owner
(its driver pod controls it; the executor pod template's reference names the SparkDriver)."""


@dataclass(frozen=True)
class NameHolder:
    """The pod that holds the name a SparkDriver's next driver pod needs, when it is not one of its own
    (kubeflow's naming gives every run of an app the same driver pod name). ``driver``: the SparkDriver
    whose pod it is (its sparkop.io/driver label); ``same_owner``: that SparkDriver is controlled by the
    same object as this one (group, kind and uid: an earlier run of the same app or SparkConnect);
    ``ended``: its status is final, its pod's outcome and log tail recorded there; ``going``: that
    SparkDriver is gone or being deleted (the garbage collector takes the pod)."""

    pod: PodSummary
    driver: str | None
    same_owner: bool = False
    ended: bool = False
    going: bool = False


# ---------------------------------------------------------------------------------------------------
# what a pass decides from

DEFAULT_UNSCHEDULABLE_TIMEOUT: Final = 300.0
DEFAULT_FAILURE_WINDOW_SECONDS: Final = 600


@dataclass(frozen=True)
class Limits:
    """A run's timeouts, deadline and executor-failure bound, in seconds (None: none): the operator's
    defaults (``Settings.timeouts``: sparkop run --driver-start-timeout ...) and, where its spec says,
    a run's own (:func:`driver_controller.timeouts.limits`)."""

    driver_start: int | None = None
    driver_ready: int | None = None
    executors_start: int | None = None
    deadline: int | None = None
    max_failures: int | None = None
    failure_window: int = DEFAULT_FAILURE_WINDOW_SECONDS

    @property
    def bounds_failures(self) -> bool:
        return self.max_failures is not None

    @property
    def times_wanted(self) -> bool:
        """Whether a wait counts from the driver pod's times (else they are not written: a run without
        timeouts costs no write for them)."""
        return any(x is not None for x in (self.driver_start, self.driver_ready, self.executors_start))

    @property
    def any(self) -> bool:
        return self.times_wanted or self.deadline is not None or self.bounds_failures


@dataclass(frozen=True)
class Settings:
    unschedulable_timeout: float = DEFAULT_UNSCHEDULABLE_TIMEOUT
    render: RenderOptions = field(default_factory=RenderOptions)
    timeouts: Limits = field(default_factory=Limits)  # the operator's defaults
    # How many executors status.executorState names (--max-tracked-executor-per-app).
    max_tracked_executors: int = MAX_TRACKED_EXECUTORS
    # How many lines of an ended driver container's log its record keeps (--driver-log-tail-lines); 0: none.
    log_tail_lines: int = DEFAULT_LOG_TAIL_LINES


@dataclass(frozen=True)
class DriverView:
    """The SparkDriver a pass decides for: its spec parsed (or what is wrong with it) and its status read
    leniently (a status written by another version never stops a pass)."""

    name: str
    uid: str
    generation: int | None
    deleting: bool
    spec: SparkDriver | SpecError
    status: SparkDriverStatus

    @classmethod
    def read(cls, body: Body, status: SparkDriverStatus) -> DriverView:
        """The SparkDriver ``body``, whose status the skeleton read (``core.controller.Own``)."""
        meta = body.get("metadata") or {}
        spec: SparkDriver | SpecError
        try:
            spec = parse(body)
        except ValueError as exc:
            unknown = unknown_fields(exc) if isinstance(exc, ValidationError) else ()
            spec = SpecError(f"the SparkDriver does not parse: {exc}", unknown)
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            generation=meta.get("generation"),
            deleting=bool(meta.get("deletionTimestamp")),
            spec=spec,
            status=status,
        )


@dataclass(frozen=True)
class Observed:
    """One SparkDriver and what it owns, as the indexes see them. ``driver`` is None when the
    SparkDriver is gone and only its leftovers (pods holding our finalizer) remain."""

    driver: DriverView | None
    pods: Sequence[PodSummary] = ()
    config_maps: Sequence[ObjectSummary] = ()
    services: Sequence[ObjectSummary] = ()
    settings: Settings = field(default_factory=Settings)
    # A transient error (5xx, timeout) the handler met applying an earlier plan, as a lastError
    # {reason, message, time}: recorded in status by the next pass that gets through.
    transient_error: Mapping[str, Any] | None = None
    # The namespace is being deleted: only let its pods go (their finalizer would hold it up).
    namespace_terminating: bool = False
    # Creates of this SparkDriver the API server refused, by core.plan.refusal_key.
    refusals: Mapping[str, Refusal] = field(default_factory=dict)
    # The executors' NetworkPolicies (Spark 4.2+) labelled for this SparkDriver.
    network_policies: Sequence[PolicySummary] = ()
    # The batch scheduler's PodGroups labelled for this SparkDriver (where their kinds are served).
    pod_groups: Sequence[PodGroupSummary] = ()
    # Kueue (where it is installed): the Workloads labelled for this SparkDriver, and what the queue's
    # admission and priority name: every ResourceFlavor and WorkloadPriorityClass value, by name.
    workloads: Sequence[WorkloadSummary] = ()
    flavors: Mapping[str, FlavorSummary] = field(default_factory=dict)
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    # Another SparkDriver's driver pod holding the name this one's next driver pod needs (kubeflow's
    # naming: one name for every run of an app, and every incarnation of a run).
    name_holder: NameHolder | None = None
    # The nodes known lost (their kubelet stopped reporting) among those of its driver pods being deleted.
    lost_nodes: frozenset[str] = frozenset()
    # The ends of driver pods' logs an earlier plan read (core.plan.ReadLog), by pod uid.
    logs: Mapping[str, LogTail] = field(default_factory=dict)
    # The pods kubeflow's operator left for this SparkDriver's app (its driver's and its executors), read
    # only for a SparkDriver that adopts one (spec.adoptDriverPod: driver_controller.adoption).
    left_pods: Sequence[PodSummary] = ()

    @classmethod
    def of(cls, body: Body | None, *args: Any, **kwargs: Any) -> Observed:
        """What ``observe`` makes of the SparkDriver ``body`` (None: gone) and the rest of the fields (its
        status read as the skeleton reads it)."""
        driver = DriverView.read(body, lenient(SparkDriverStatus, body.get("status"))) if body is not None else None
        return cls(driver, *args, **kwargs)
