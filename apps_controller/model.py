"""What the apps controller reasons about: typed, immutable views of a SparkApplication, its owned
SparkDrivers and its status, read from and written back to the objects' JSON.

The views are the boundary between the kopf shell (which holds raw bodies from its indexes) and the
pure state machine in ``reconcile.py``. Field names in JSON are the CRD's (kubeflow v1beta2 style);
parsing is lenient (a missing or malformed field reads as "unknown"), serialisation omits empty
fields so that ``kubectl get -o yaml`` stays short.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum
from typing import Any, Final, TypeVar

from api.models import ApplicationState, AttemptOutcome, DriverPhase, RestartPolicyType, RunSpec
from core.reconciler import Refusal
from sparkop import labels
from sparkop.times import format_time, parse_time

JSON = dict[str, Any]
E = TypeVar("E", bound=Enum)

MAX_ATTEMPT_HISTORY: Final = 20
# Kubeflow's defaulting webhook sets both retry intervals to 5 s when a policy does not.
DEFAULT_RETRY_INTERVAL_SECONDS: Final = 5
DEFAULT_MAX_DRIVER_POD_REPLACEMENTS: Final = 3
# Keys of SparkApplication.spec that do not describe the run itself: changing them alone never re-runs.
NON_RUN_FIELDS: Final = frozenset({"suspend", "timeToLiveSeconds"})
# The run spec copied into a SparkDriver: api's RunSpec (docs/design.md, "SparkDriver").
RUN_SPEC_FIELDS: Final = tuple(RunSpec.model_fields)

TERMINAL_STATES: Final = frozenset({ApplicationState.COMPLETED, ApplicationState.FAILED})

# Condition types on SparkApplication.status.conditions (docs/state-machine.md, "Conditions"), in the
# order they are listed; ``Stuck`` mirrors the current SparkDriver's condition of that name.
CONDITION_SUBMITTED: Final = "Submitted"
CONDITION_RUNNING: Final = "Running"
CONDITION_STUCK: Final = "Stuck"
CONDITION_SUSPENDED: Final = "Suspended"
CONDITION_COMPLETED: Final = "Completed"
CONDITION_FAILED: Final = "Failed"
CONDITION_ORDER: Final = (
    CONDITION_SUBMITTED,
    CONDITION_RUNNING,
    CONDITION_STUCK,
    CONDITION_SUSPENDED,
    CONDITION_COMPLETED,
    CONDITION_FAILED,
)
MAX_MESSAGE: Final = 4096  # condition, attempt and lastError messages are cut to this


# ---------------------------------------------------------------------------------------------------
# lenient JSON readers


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return default


def _opt_int(value: Any) -> int | None:
    return None if value is None else _int(value, default=0)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(value).items() if v is not None}


def _compact(data: Mapping[str, Any]) -> JSON:
    """Drop None, empty strings, empty maps and empty lists."""
    return {k: v for k, v in data.items() if v is not None and v != "" and v != {} and v != []}


def _enum(kind: type[E], value: Any, default: E) -> E:
    found = _opt_enum(kind, value)
    return default if found is None else found


def _opt_enum(kind: type[E], value: Any) -> E | None:
    try:
        return None if value is None else kind(value)
    except ValueError:
        return None


def clip(text: str | None, limit: int = MAX_MESSAGE) -> str | None:
    return text[:limit] if text else text


# ---------------------------------------------------------------------------------------------------
# spec


@dataclass(frozen=True)
class RestartPolicy:
    type: RestartPolicyType = RestartPolicyType.NEVER
    on_failure_retries: int | None = None
    on_failure_retry_interval: int = DEFAULT_RETRY_INTERVAL_SECONDS
    on_submission_failure_retries: int | None = None
    on_submission_failure_retry_interval: int = DEFAULT_RETRY_INTERVAL_SECONDS
    max_driver_pod_replacements: int = DEFAULT_MAX_DRIVER_POD_REPLACEMENTS

    @classmethod
    def from_json(cls, data: Any) -> RestartPolicy:
        d = _map(data)
        return cls(
            type=_enum(RestartPolicyType, d.get("type", RestartPolicyType.NEVER), RestartPolicyType.NEVER),
            on_failure_retries=_opt_int(d.get("onFailureRetries")),
            on_failure_retry_interval=_int(d.get("onFailureRetryInterval"), DEFAULT_RETRY_INTERVAL_SECONDS),
            on_submission_failure_retries=_opt_int(d.get("onSubmissionFailureRetries")),
            on_submission_failure_retry_interval=_int(
                d.get("onSubmissionFailureRetryInterval"), DEFAULT_RETRY_INTERVAL_SECONDS
            ),
            max_driver_pod_replacements=_int(d.get("maxDriverPodReplacements"), DEFAULT_MAX_DRIVER_POD_REPLACEMENTS),
        )


def spec_hash(spec: Mapping[str, Any]) -> str:
    """Hash of the spec minus the fields that never re-run an app (suspend, timeToLiveSeconds)."""
    relevant = {k: v for k, v in spec.items() if k not in NON_RUN_FIELDS}
    text = json.dumps(relevant, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_spec(spec: Mapping[str, Any]) -> JSON:
    """The part of an app's spec a SparkDriver runs (deep-copied through JSON)."""
    picked = {k: spec[k] for k in RUN_SPEC_FIELDS if k in spec and spec[k] is not None}
    copied: JSON = json.loads(json.dumps(picked, default=str))
    return copied


@dataclass(frozen=True)
class AppView:
    """The facts of one SparkApplication that the state machine reads (no status: see AppStatus)."""

    namespace: str
    name: str
    uid: str
    generation: int
    spec: Mapping[str, Any]
    deleting: bool = False
    spec_error: str | None = None  # the spec can never run (set by the shell's validation)

    @property
    def suspend(self) -> bool:
        return self.spec.get("suspend") is True

    @property
    def ttl_seconds(self) -> int | None:
        return _opt_int(self.spec.get("timeToLiveSeconds"))

    @property
    def policy(self) -> RestartPolicy:
        return RestartPolicy.from_json(self.spec.get("restartPolicy"))

    @property
    def spec_hash(self) -> str:
        return spec_hash(self.spec)

    @property
    def spark_conf(self) -> dict[str, str]:
        return _str_map(self.spec.get("sparkConf"))

    @property
    def ui_options(self) -> Mapping[str, Any]:
        """spec.sparkUIOptions as written (kubeflow v1beta2 names); ``ui.UIOptions`` reads it."""
        return _map(self.spec.get("sparkUIOptions"))

    @classmethod
    def from_body(cls, body: Mapping[str, Any], spec_error: str | None = None) -> AppView:
        meta = _map(body.get("metadata"))
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            generation=_int(meta.get("generation"), 1),
            spec=dict(_map(body.get("spec"))),
            deleting=bool(meta.get("deletionTimestamp")),
            spec_error=spec_error,
        )


# ---------------------------------------------------------------------------------------------------
# conditions and errors (metav1.Condition's shape; api.models.Condition / LastError)


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True", "False" or "Unknown"
    reason: str
    message: str | None = None
    last_transition_time: datetime | None = None
    observed_generation: int | None = None

    def to_json(self) -> JSON:
        return _compact(
            {
                "type": self.type,
                "status": self.status,
                "reason": self.reason,
                "message": self.message,
                "lastTransitionTime": format_time(self.last_transition_time),
                "observedGeneration": self.observed_generation,
            }
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Condition | None:
        kind, status = _opt_str(data.get("type")), _opt_str(data.get("status"))
        if kind is None or status not in ("True", "False", "Unknown"):
            return None
        return cls(
            type=kind,
            status=status,
            reason=_opt_str(data.get("reason")) or "Unknown",
            message=_opt_str(data.get("message")),
            last_transition_time=parse_time(data.get("lastTransitionTime")),
            observed_generation=_opt_int(data.get("observedGeneration")),
        )


def _conditions(value: Any) -> tuple[Condition, ...]:
    parsed = (Condition.from_json(c) for c in value or () if isinstance(c, Mapping))
    return tuple(c for c in parsed if c is not None)


@dataclass(frozen=True)
class LastError:
    """The last failure of the app: a run, a submission, the spec, or a Spark UI object refused."""

    reason: str
    message: str | None = None
    time: datetime | None = None

    def to_json(self) -> JSON:
        return _compact({"reason": self.reason, "message": self.message, "time": format_time(self.time)})

    @classmethod
    def from_json(cls, data: Any) -> LastError | None:
        d = _map(data)
        reason = _opt_str(d.get("reason"))
        if reason is None:
            return None
        return cls(reason=reason, message=_opt_str(d.get("message")), time=parse_time(d.get("time")))


# ---------------------------------------------------------------------------------------------------
# owned SparkDrivers


@dataclass(frozen=True)
class DriverView:
    """One owned SparkDriver as the apps controller sees it: identity, run, and its mirrored status."""

    name: str
    uid: str
    run: int
    owner_uid: str  # uid of the controller owner (a SparkApplication)
    app_generation: int
    spec_hash: str | None
    phase: DriverPhase | None = None
    deleting: bool = False
    pod_name: str | None = None
    spark_application_id: str | None = None
    web_ui_address: str | None = None
    incarnation: int = 0
    executors: Mapping[str, int] = field(default_factory=dict)
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    stuck: Condition | None = None  # the SparkDriver's Stuck condition (ImagePullBackOff, Unschedulable, ...)

    @property
    def finished(self) -> bool:
        return self.phase is not None and self.phase.terminal

    @property
    def accepted(self) -> bool:
        """Whether the API server accepted a driver pod of this SparkDriver: the run got past
        submission. The driver controller writes ``driverPod.name`` only after the pod's create
        succeeded, and SubmissionFailed when it was refused; a later incarnation means an earlier
        pod existed (a refused *replacement* is a failed run, not a failed submission)."""
        if self.phase is None:
            return False
        if self.incarnation > 1:
            return True
        if self.phase is DriverPhase.SUBMISSION_FAILED:
            return False
        return self.phase is not DriverPhase.PENDING or self.pod_name is not None

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> DriverView:
        meta = _map(body.get("metadata"))
        lbls = _map(meta.get("labels"))
        ann = _map(meta.get("annotations"))
        status = _map(body.get("status"))
        owner = _controller(meta)
        phase = _opt_enum(DriverPhase, status.get("phase"))
        term = _map(status.get("termination"))
        error = _map(status.get("lastError"))
        pod = _map(status.get("driverPod"))
        executors = {str(k): _int(v) for k, v in _map(status.get("executors")).items()}
        stuck = next((c for c in _conditions(status.get("conditions")) if c.type == CONDITION_STUCK), None)
        # A refused driver pod leaves no termination; its lastError says why.
        failed_early = phase is DriverPhase.SUBMISSION_FAILED or not term
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            run=_int(lbls.get(labels.RUN), 0),
            owner_uid=str(owner.get("uid", "")),
            app_generation=_int(ann.get(labels.APP_GENERATION), 0),
            spec_hash=_opt_str(ann.get(labels.SPEC_HASH)),
            phase=phase,
            deleting=bool(meta.get("deletionTimestamp")),
            pod_name=_opt_str(pod.get("name")),
            spark_application_id=_opt_str(status.get("sparkApplicationId")),
            web_ui_address=_opt_str(status.get("webUIAddress")),
            incarnation=_int(status.get("incarnation"), 0),
            executors=executors,
            exit_code=_opt_int(term.get("exitCode")),
            reason=_opt_str(term.get("reason")) or (_opt_str(error.get("reason")) if failed_early else None),
            message=_opt_str(term.get("message")) or (_opt_str(error.get("message")) if failed_early else None),
            stuck=stuck,
        )


@dataclass(frozen=True)
class OwnedObject:
    """A Service or Ingress controlled by a SparkApplication (the Spark UI), as the watch index holds
    it: found by its controller ownerReference, whatever status says (a crash between its create and
    the status write must not leak it)."""

    api_version: str
    kind: str
    name: str
    uid: str
    owner_uid: str
    deleting: bool = False

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> OwnedObject:
        meta = _map(body.get("metadata"))
        return cls(
            api_version=str(body.get("apiVersion", "")),
            kind=str(body.get("kind", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            owner_uid=str(_controller(meta).get("uid", "")),
            deleting=bool(meta.get("deletionTimestamp")),
        )


def _controller(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """The SparkApplication controller ownerReference of an object's metadata ({} when none)."""
    return next(
        (
            ref
            for ref in meta.get("ownerReferences") or ()
            if isinstance(ref, Mapping) and ref.get("controller") and ref.get("kind") == "SparkApplication"
        ),
        {},
    )


# ---------------------------------------------------------------------------------------------------
# status


@dataclass(frozen=True)
class AttemptRecord:
    """One run of the app, keyed by run number.

    ``attempt`` is the run's number among the execution attempts: set, and executionAttempts
    incremented, in the one status write that first records that the run's driver pod was accepted
    (or that it finished without a failed submission). A pass that finds it set never counts the run
    again. A run we stop ourselves (suspend, superseded) before it finished is given back: the
    write that records it Invalidated clears ``attempt`` and decrements the counter."""

    run: int
    driver: str
    outcome: AttemptOutcome = AttemptOutcome.RUNNING
    attempt: int | None = None
    reason: str | None = None
    message: str | None = None
    start_time: datetime | None = None
    finish_time: datetime | None = None

    @property
    def finished(self) -> bool:
        return self.outcome is not AttemptOutcome.RUNNING

    @property
    def counted(self) -> bool:
        return self.attempt is not None

    def to_json(self) -> JSON:
        return _compact(
            {
                "run": self.run,
                "attempt": self.attempt,
                "driver": self.driver,
                "outcome": self.outcome.value,
                "reason": self.reason,
                "message": self.message,
                "startTime": format_time(self.start_time),
                "finishTime": format_time(self.finish_time),
            }
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttemptRecord:
        return cls(
            run=_int(data.get("run")),
            driver=str(data.get("driver", "")),
            outcome=_enum(AttemptOutcome, data.get("outcome", AttemptOutcome.RUNNING), AttemptOutcome.RUNNING),
            attempt=_opt_int(data.get("attempt")),
            reason=_opt_str(data.get("reason")),
            message=_opt_str(data.get("message")),
            start_time=parse_time(data.get("startTime")),
            finish_time=parse_time(data.get("finishTime")),
        )


@dataclass(frozen=True)
class DriverInfo:
    pod_name: str | None = None
    web_ui_service_name: str | None = None
    web_ui_address: str | None = None
    web_ui_port: int | None = None
    web_ui_ingress_name: str | None = None
    web_ui_ingress_address: str | None = None

    def to_json(self) -> JSON:
        return _compact(
            {
                "podName": self.pod_name,
                "webUIServiceName": self.web_ui_service_name,
                "webUIAddress": self.web_ui_address,
                "webUIPort": self.web_ui_port,
                "webUIIngressName": self.web_ui_ingress_name,
                "webUIIngressAddress": self.web_ui_ingress_address,
            }
        )

    @classmethod
    def from_json(cls, data: Any) -> DriverInfo:
        d = _map(data)
        return cls(
            pod_name=_opt_str(d.get("podName")),
            web_ui_service_name=_opt_str(d.get("webUIServiceName")),
            web_ui_address=_opt_str(d.get("webUIAddress")),
            web_ui_port=_opt_int(d.get("webUIPort")),
            web_ui_ingress_name=_opt_str(d.get("webUIIngressName")),
            web_ui_ingress_address=_opt_str(d.get("webUIIngressAddress")),
        )


@dataclass(frozen=True)
class AppStatus:
    """SparkApplication.status. Everything the state machine needs to survive a restart is here."""

    state: ApplicationState = ApplicationState.NEW
    error_message: str | None = None
    observed_generation: int = 0
    spark_application_id: str | None = None
    last_submission_attempt_time: datetime | None = None
    termination_time: datetime | None = None
    driver_info: DriverInfo = field(default_factory=DriverInfo)
    execution_attempts: int = 0
    submission_attempts: int = 0
    last_run: int = 0
    current_driver: str | None = None
    driver_incarnations: int = 0
    executors: Mapping[str, int] = field(default_factory=dict)
    next_attempt_time: datetime | None = None
    attempts: tuple[AttemptRecord, ...] = ()
    conditions: tuple[Condition, ...] = ()
    last_error: LastError | None = None

    @property
    def current(self) -> AttemptRecord | None:
        """The attempt record of run ``last_run`` (always kept: history drops the oldest first)."""
        for record in reversed(self.attempts):
            if record.run == self.last_run:
                return record
        return None

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def with_attempt(self, record: AttemptRecord) -> AppStatus:
        """Insert or replace the record of ``record.run``; keep the newest MAX_ATTEMPT_HISTORY."""
        others = [r for r in self.attempts if r.run != record.run]
        history = sorted([*others, record], key=lambda r: r.run)[-MAX_ATTEMPT_HISTORY:]
        return replace(self, attempts=tuple(history))

    def to_json(self) -> JSON:
        return _compact(
            {
                "applicationState": _compact({"state": self.state.value, "errorMessage": self.error_message}),
                "observedGeneration": self.observed_generation,
                "sparkApplicationId": self.spark_application_id,
                "lastSubmissionAttemptTime": format_time(self.last_submission_attempt_time),
                "terminationTime": format_time(self.termination_time),
                "driverInfo": self.driver_info.to_json(),
                "executionAttempts": self.execution_attempts,
                "submissionAttempts": self.submission_attempts,
                "lastRun": self.last_run,
                "currentDriver": self.current_driver,
                "driverIncarnations": self.driver_incarnations,
                "executors": dict(self.executors),
                "nextAttemptTime": format_time(self.next_attempt_time),
                "attempts": [r.to_json() for r in self.attempts],
                "conditions": [c.to_json() for c in self.conditions],
                "lastError": self.last_error.to_json() if self.last_error else None,
            }
        )

    @classmethod
    def from_json(cls, data: Any) -> AppStatus:
        d = _map(data)
        app_state = _map(d.get("applicationState"))
        state = _enum(ApplicationState, app_state.get("state") or ApplicationState.NEW, ApplicationState.UNKNOWN)
        attempts = tuple(
            sorted(
                (AttemptRecord.from_json(a) for a in d.get("attempts") or () if isinstance(a, Mapping)),
                key=lambda r: r.run,
            )
        )
        return cls(
            state=state,
            error_message=_opt_str(app_state.get("errorMessage")),
            observed_generation=_int(d.get("observedGeneration")),
            spark_application_id=_opt_str(d.get("sparkApplicationId")),
            last_submission_attempt_time=parse_time(d.get("lastSubmissionAttemptTime")),
            termination_time=parse_time(d.get("terminationTime")),
            driver_info=DriverInfo.from_json(d.get("driverInfo")),
            execution_attempts=_int(d.get("executionAttempts")),
            submission_attempts=_int(d.get("submissionAttempts")),
            last_run=_int(d.get("lastRun")),
            current_driver=_opt_str(d.get("currentDriver")),
            driver_incarnations=_int(d.get("driverIncarnations")),
            executors={str(k): _int(v) for k, v in _map(d.get("executors")).items()},
            next_attempt_time=parse_time(d.get("nextAttemptTime")),
            attempts=attempts,
            conditions=_conditions(d.get("conditions")),
            last_error=LastError.from_json(d.get("lastError")),
        )


@dataclass(frozen=True)
class UIConfig:
    """Operator-wide Spark UI settings (kubeflow's --enable-ui-service / --ingress-url-format)."""

    service: bool = True
    ingress_url_format: str | None = None  # e.g. "{{$appName}}.{{$appNamespace}}.example.com"
    ingress_class_name: str | None = None


@dataclass(frozen=True)
class Observed:
    """Everything one reconcile pass decides from. ``drivers`` and ``ui_objects`` are the SparkDrivers
    and the Spark UI Services/Ingresses whose controller owner is this app (any stale entry owned by an
    older app of the same name is ignored). ``refusals`` are the creates of this app the API server
    refused, by ``core.reconciler.refusal_key`` (remembered by the Applier; lost with the process, when
    the create is simply tried again). ``namespace_terminating``: the app's namespace is being deleted."""

    app: AppView
    status: AppStatus
    drivers: Sequence[DriverView] = ()
    ui: UIConfig = field(default_factory=UIConfig)
    refusals: Mapping[str, Refusal] = field(default_factory=dict)
    ui_objects: Sequence[OwnedObject] = ()
    namespace_terminating: bool = False

    @property
    def owned(self) -> tuple[DriverView, ...]:
        return tuple(sorted((d for d in self.drivers if d.owner_uid == self.app.uid), key=lambda d: d.run))

    @property
    def owned_ui(self) -> tuple[OwnedObject, ...]:
        return tuple(sorted((o for o in self.ui_objects if o.owner_uid == self.app.uid), key=lambda o: o.kind))
