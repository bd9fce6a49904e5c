"""What one pass of the driver controller has established so far, as frozen :class:`Facts`, and the
result of each step of its decision (:mod:`driver_controller.decide`): :class:`Continue` with the facts
it adds, or :class:`Stop` with them and the reason the decision goes no further.

A step never changes the facts it was given: every method here returns new facts. The status a pass
decides is the status as read (``read``), copied with the parts a step replaces (``status``; an update
that replaces nothing keeps it, so a pass that changed nothing ends with ``status is read``); the actions
and events it plans accumulate in ``plan``. The spec (``driver``) is the one the pass parsed, for every
step; where Kueue's admission places the pods, that is a fact of its own (``placed``), which only the
renderer reads. The incarnation's objects are rendered at most once a pass (:meth:`Facts.render`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, Final, Literal, TypeVar

from sparkop.api.models import (
    LOG_TAIL_CHARS,
    DriverPhase,
    IncarnationOutcome,
    SparkDriver,
    SparkDriverStatus,
)
from sparkop.core.frozen import evolve
from sparkop.core.owners import controller_of, owned_by
from sparkop.core.plan import Action, Plan, ReadLog
from sparkop.domain import kinds, labels, naming
from sparkop.driver_controller import events
from sparkop.driver_controller.observed import Observed
from sparkop.driver_controller.render import DriverObjects, IncarnationNames, names, render
from sparkop.driver_controller.status import ended, with_record, with_submission_failed
from sparkop.driver_controller.summaries import PodSummary
from sparkop.driver_controller.templates import spark_container_name

T = TypeVar("T")

# The status fields that tell of one driver-pod incarnation: a new incarnation starts without them.
INCARNATION_FIELDS: Final = ("driverPod", "executorsStartedTime", "executorFailures", "termination", "executorState")


class Why(enum.StrEnum):
    """Why a decision went no further (a :class:`Stop`'s reason)."""

    ENDED = "the driver has ended"
    FINISHED = "the driver pod finished"
    WAITING_FOR_KUEUE = "the run waits for Kueue"
    REFUSED = "the API server refused an object of the incarnation"
    INVALID_SPEC = "the spec cannot run"
    TIMED_OUT = "a timeout or the bound on failing executors ended the run"
    READING_LOG = "the end of a driver pod's log is read before its outcome is recorded"
    NAME_TAKEN = "another live owner's pod holds the driver pod's name"
    ADOPTED = "the incarnation's driver pod and objects were made by another operator's spark-submit"


@dataclass(frozen=True)
class Facts:
    """What one pass knows of a SparkDriver that parsed."""

    observed: Observed
    driver: SparkDriver
    now: datetime
    read: SparkDriverStatus  # the status as observed
    status: SparkDriverStatus  # as decided so far: ``read`` with the parts the steps replaced
    owned_pods: tuple[PodSummary, ...]
    plan: Plan[SparkDriverStatus]  # the actions and events decided so far (status: set at the end)
    # The SparkDriver's identity, as observe read it: every step asks for it (plain fields: a
    # cached_property costs a lock the first time each pass).
    name: str
    uid: str
    generation: int | None
    incarnation: int = 0
    placed: SparkDriver | None = None  # the spec with Kueue's admission's placement: what pods render from
    rendered: DriverObjects | None = None  # the incarnation's objects, once rendered

    @classmethod
    def first(cls, observed: Observed, driver: SparkDriver, now: datetime, plan: Plan[SparkDriverStatus]) -> Facts:
        view = observed.driver
        assert view is not None
        status = view.status
        return cls(
            observed,
            driver,
            now,
            status,
            status,
            owned_by(observed.pods, view.uid),
            plan,
            view.name,
            view.uid,
            view.generation,
        )

    # -- reading -----------------------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return ended(self.status)

    @cached_property
    def names(self) -> IncarnationNames:
        """What the current incarnation's objects are called (worked out once per incarnation)."""
        return names(self.driver, self.incarnation)

    @property
    def pod_name(self) -> str:
        """What its driver pods are called: the same for every incarnation (kubeflow's naming)."""
        return naming.driver_pod_name(self.name, self.driver.spec.driver.podName)

    def driver_pod(self, incarnation: int) -> PodSummary | None:
        """Its driver pod of ``incarnation``, by the incarnation label (every incarnation's pod has the
        same name, one at a time; a pod made by an older version of sparkop has another)."""
        return next(
            (p for p in self.owned_pods if p.incarnation == incarnation and p.role != labels.ROLE_EXECUTOR), None
        )

    def log_tail(self, pod: PodSummary | None) -> tuple[Facts, str | None]:
        """The end of ``pod``'s log for its incarnation's record, or why it could not be read; None while
        it is being read (a ReadLog is planned: the decision follows at once, with it); "" when the operator
        keeps none (--driver-log-tail-lines 0: nothing is read)."""
        lines = self.observed.settings.log_tail_lines
        if lines == 0:
            return self, ""
        if pod is None:
            return self, "(unavailable: the pod was gone before its log was read)"
        if pod.node_name in self.observed.lost_nodes:
            # Its kubelet serves no log any more: asking would only wait for a timeout, holding up the
            # replacement (and the pod's removal, which frees its name).
            return self, f"(unavailable: its node {pod.node_name} is lost)"
        tail = self.observed.logs.get(pod.uid)
        if tail is not None:
            return self, tail.text if tail.text is not None else f"(unavailable: {tail.error})"
        container = spark_container_name(self.driver.spec.sparkConf, "driver")
        read = ReadLog(pod.name, pod.uid, container, lines, LOG_TAIL_CHARS, "RecordOutcome")
        return (self if read in self.plan.reads else self.before(read)), None

    def owned(self, items: Iterable[T]) -> tuple[T, ...]:
        """Of ``items`` (filed under this SparkDriver's key), those it owns."""
        return owned_by(items, self.uid)

    @cached_property
    def app_controlled(self) -> bool:
        """A SparkApplication (of either served group) controls this SparkDriver (and restates its run's
        events)."""
        meta = {"metadata": self.driver.metadata}
        return any(controller_of(meta, api.group, api.applications.kind) is not None for api in kinds.APIS)

    def _with(self, **changes: Any) -> Facts:
        facts = evolve(self, **changes)
        if "incarnation" in changes:
            facts.__dict__.pop("names", None)  # worked out again for the new incarnation
        return facts

    # -- status (a copy with the parts replaced, never changed in place) -----------------------------

    def update(self, **fields: Any) -> Facts:
        """Status fields (by their JSON names) set. Setting what is there already keeps these facts (and
        their status: a pass that changes nothing ends with the status as read, known by identity); most
        of a pass's updates are such, and a copy of the status costs more than the rest of the update."""
        status = self.status
        if all(_same(name, getattr(status, name), value) for name, value in fields.items()):
            return self
        return self._with(status=status.model_copy(update=fields))

    def record(
        self,
        incarnation: int,
        pod_name: str,
        outcome: IncarnationOutcome,
        reason: str,
        message: str,
        log_tail: str | None = None,
    ) -> Facts:
        """The incarnation's record in status.incarnations (once: an incarnation ends once), with the end
        of its driver pod's log."""
        status = with_record(self.status, incarnation, pod_name, outcome, reason, message, self.now, log_tail)
        return self._with(status=status)

    def at_incarnation(self, incarnation: int) -> Facts:
        """The current incarnation is ``incarnation`` (what is named after it follows)."""
        if incarnation == self.incarnation:
            return self
        return self._with(incarnation=incarnation, rendered=None)

    def with_pods(self, pods: Sequence[PodSummary]) -> Facts:
        """``pods`` among its own, as they are once claimed (a driver pod it adopts: driver_controller.adoption)."""
        return self._with(owned_pods=(*self.owned_pods, *pods)) if pods else self

    def admitted(self, placed: SparkDriver) -> Facts:
        """Kueue admitted the run: its pods render from ``placed`` (the spec with the admission's placement)."""
        return self._with(placed=placed, rendered=None)

    def start_incarnation(self, incarnation: int) -> Facts:
        """A new incarnation, Pending, with no driver pod yet."""
        return self.at_incarnation(incarnation).update(
            incarnation=incarnation,
            phase=DriverPhase.PENDING,
            **dict.fromkeys(INCARNATION_FIELDS),
            startTime=self.status.startTime or self.now,
            sparkApplicationId=naming.spark_app_id(self.uid, incarnation),
        )

    def invalid_spec(self, message: str) -> Facts:
        """A spec spark-submit would refuse: SubmissionFailed, nothing created."""
        status = with_submission_failed(
            self.status, self.now, events.Reason.INVALID_SPEC, message, self.incarnation, self.pod_name
        )
        return self._with(status=status).event("Warning", events.Reason.INVALID_SPEC, message)

    def refused(self, reason: str, message: str) -> Facts:
        """The API server refused an object of the incarnation: SubmissionFailed over the status as read
        (what this pass had worked out of the incarnation is not kept: a later pass of the stale one
        records it), no driver pod; the apps controller decides whether to run again."""
        status = refusal_status(self.read, self.pod_name, self.generation, self.now, self.incarnation, reason, message)
        return self._with(status=status)

    # -- the plan ----------------------------------------------------------------------------------

    def event(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> Facts:
        if reason in events.RESTATED_BY_APP and self.app_controlled:
            return self
        return self._with(plan=self.plan.with_event(type_, reason, message))

    def before(self, *actions: Action) -> Facts:
        """Actions before the status write (creates: status names only what the API server accepted)."""
        return self._with(plan=self.plan.with_before(*actions)) if actions else self

    def after(self, *actions: Action) -> Facts:
        """Actions after the status write (patches, deletes: once status holds what they depend on)."""
        return self._with(plan=self.plan.with_after(*actions)) if actions else self

    def requeue(self, seconds: float) -> Facts:
        return self._with(plan=self.plan.requeue(seconds))

    def render(self) -> tuple[Facts, DriverObjects]:
        """The current incarnation's objects, rendered once a pass (from ``placed`` once Kueue admitted
        the run). Raises ``render.InvalidSpec`` (or ValueError) for a spec spark-submit would refuse."""
        if self.rendered is None:
            objects = render(self.placed or self.driver, self.incarnation, self.observed.settings.render)
            return self._with(rendered=objects), objects
        return self, self.rendered


def _same(name: str, current: Any, value: Any) -> bool:
    """Whether setting status field ``name`` to ``value`` over ``current`` leaves the status as it is,
    written and read alike: of the same type (a str is not its StrEnum member) and equal; for
    ``executors``, whose JSON is the counts that were set (``SparkDriverStatus.to_json``), with the same
    fields set."""
    if current is value:
        return True
    if type(current) is not type(value) or current != value:
        return False
    return name != "executors" or current.model_fields_set == value.model_fields_set


def refusal_status(
    status: SparkDriverStatus,
    pod_name: str,
    generation: int | None,
    now: datetime,
    incarnation: int,
    reason: str,
    message: str,
) -> SparkDriverStatus:
    """``status`` (as read) after the API server refused one of the incarnation's objects: the
    incarnation SubmissionFailed, no driver pod."""
    status = status.model_copy(update={"incarnation": incarnation, "driverPod": None})
    if generation is not None:
        status = status.model_copy(update={"observedGeneration": generation})
    return with_submission_failed(status, now, reason, message, incarnation, pod_name)


@dataclass(frozen=True)
class Continue:
    """The step is done: the next one runs on ``facts``."""

    facts: Facts


@dataclass(frozen=True)
class Stop:
    """The decision goes no further than this step (why: ``reason``); the closing steps run on ``facts``."""

    facts: Facts
    reason: Why


Outcome = Continue | Stop
Step = Callable[[Facts], Outcome]
"""One row of the decision: the facts so far -> what it adds, and whether the next row runs."""
Closing = Callable[[Facts], Facts]
"""One row of what every pass that parsed ends with, however far its decision went."""


def stop_if_ended(facts: Facts) -> Outcome:
    """Continue, unless the driver has ended (its status is final: nothing more is started)."""
    return Stop(facts, Why.ENDED) if facts.ended else Continue(facts)


def run(steps: Sequence[Step], facts: Facts) -> tuple[Facts, Stop | None]:
    """Run ``steps`` in order until one stops: the facts they established, and the stop (None: all ran)."""
    for step in steps:
        outcome = step(facts)
        facts = outcome.facts
        if isinstance(outcome, Stop):
            return facts, outcome
    return facts, None


__all__ = [
    "Closing",
    "Continue",
    "Facts",
    "Outcome",
    "Step",
    "Stop",
    "Why",
    "refusal_status",
    "run",
    "stop_if_ended",
]
