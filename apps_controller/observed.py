"""What one pass of the apps controller decides from: typed, immutable views of a SparkApplication,
its owned SparkDrivers and Spark UI objects, read from the objects the informer caches hold.

These are views, not a schema: the app's status is ``api.models.SparkApplicationStatus``
(``apps_controller.status``). Reading is lenient (a missing or malformed field reads as "unknown"):
a pass must never stop on what another version or a hand edit left in an object.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from sparkop.api.driver_view import SparkDriverView, spark_driver_fields
from sparkop.api.history import EventLog, base_url, event_log
from sparkop.api.models import (
    Condition,
    DriverPhase,
    ExecutorState,
    RestartPolicyType,
    RunSpec,
    SparkApplicationSpec,
    SparkApplicationStatus,
)
from sparkop.api.rules import SPEC_LEVEL_RETRIES, missing_image
from sparkop.apps_controller.status import CONDITION_QUEUED, CONDITION_STUCK
from sparkop.core.jsonread import enum_or, integer, mapping, opt_enum, opt_int, opt_str, str_map
from sparkop.core.jsontypes import JSON
from sparkop.core.owners import (
    OwnedView,
    controller_keys,
    controller_of,
    copy_json,
    owned_by,
    owned_identity,
)
from sparkop.core.plan import Refusal
from sparkop.core.specs import SpecError, unknown_fields
from sparkop.core.times import parse_time
from sparkop.domain import kinds, labels, naming
from sparkop.domain.kinds import ServedView, served_fields
from sparkop.domain.labels import GROUP

Key = tuple[str, str]  # (namespace, SparkApplication name): the key of the apps controller of its group
APP_KIND: Final = kinds.SPARK_APPLICATIONS.kind

# Kubeflow's defaulting webhook sets both retry intervals to 5 s when a policy does not.
DEFAULT_RETRY_INTERVAL_SECONDS: Final = 5
DEFAULT_MAX_DRIVER_POD_REPLACEMENTS: Final = 3
# Keys of SparkApplication.spec that do not describe the run itself: changing them alone never re-runs.
NON_RUN_FIELDS: Final = frozenset({"suspend", "timeToLiveSeconds", "historyServer"})
# The run spec copied into a SparkDriver: api's RunSpec (docs/design.md, "SparkDriver").
RUN_SPEC_FIELDS: Final = tuple(RunSpec.model_fields)


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
    on_infrastructure_failure_retries: int | None = None
    on_infrastructure_failure_retry_interval: int = DEFAULT_RETRY_INTERVAL_SECONDS

    @classmethod
    def from_json(cls, data: Any) -> RestartPolicy:
        d = mapping(data)
        return cls(
            type=enum_or(RestartPolicyType, d.get("type", RestartPolicyType.NEVER), RestartPolicyType.NEVER),
            on_failure_retries=opt_int(d.get("onFailureRetries")),
            on_failure_retry_interval=integer(d.get("onFailureRetryInterval"), DEFAULT_RETRY_INTERVAL_SECONDS),
            on_submission_failure_retries=opt_int(d.get("onSubmissionFailureRetries")),
            on_submission_failure_retry_interval=integer(
                d.get("onSubmissionFailureRetryInterval"), DEFAULT_RETRY_INTERVAL_SECONDS
            ),
            max_driver_pod_replacements=integer(d.get("maxDriverPodReplacements"), DEFAULT_MAX_DRIVER_POD_REPLACEMENTS),
            on_infrastructure_failure_retries=opt_int(d.get("onInfrastructureFailureRetries")),
            on_infrastructure_failure_retry_interval=integer(
                d.get("onInfrastructureFailureRetryInterval"), DEFAULT_RETRY_INTERVAL_SECONDS
            ),
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


@dataclass(frozen=True, kw_only=True)
class AppView(ServedView):
    """The facts of one SparkApplication that the state machine reads (its status: Observed.status)."""

    spec_error: SpecError | None = None  # what is wrong with the spec (set by the shell's validation)
    created: datetime | None = None  # metadata.creationTimestamp: where kubeflow's latencies start

    @property
    def suspend(self) -> bool:
        """spec.suspend. (An app that queues in Kueue is not suspended: each run waits for Kueue's
        admission of its Workload, see driver_controller.kueue.)"""
        return self.spec.get("suspend") is True

    @property
    def suspend_reason(self) -> str:
        return "spec.suspend is true"

    @property
    def ttl_seconds(self) -> int | None:
        return opt_int(self.spec.get("timeToLiveSeconds"))

    @property
    def policy(self) -> RestartPolicy:
        """spec.restartPolicy, with kubeflow's spec-level failureRetries and retryInterval in the
        restartPolicy fields they mean (the CRD refuses setting both)."""
        policy = dict(mapping(self.spec.get("restartPolicy")))
        for old, new in SPEC_LEVEL_RETRIES.items():
            if self.spec.get(old) is not None:
                policy.setdefault(new, self.spec[old])
        return RestartPolicy.from_json(policy)

    @property
    def spec_hash(self) -> str:
        return spec_hash(self.spec)

    @property
    def driver_pod_name(self) -> str:
        """The driver pod of each of its runs: spec.driver.podName, else kubeflow's ``<app>-driver``."""
        return naming.driver_pod_name(self.name, opt_str(mapping(self.spec.get("driver")).get("podName")))

    @property
    def spark_conf(self) -> dict[str, str]:
        return str_map(self.spec.get("sparkConf"))

    @property
    def history_ref(self) -> Mapping[str, Any]:
        """spec.historyServer as written."""
        return mapping(self.spec.get("historyServer"))

    @property
    def ui_options(self) -> Mapping[str, Any]:
        """spec.sparkUIOptions as written (kubeflow v1beta2 names); ``ui.UIOptions`` reads it."""
        return mapping(self.spec.get("sparkUIOptions"))

    @classmethod
    def from_body(cls, body: Mapping[str, Any], spec_error: SpecError | None = None) -> AppView:
        return cls(
            # An app without a generation (a body not from the API server) counts as its first.
            **served_fields(body, generation_default=1),
            spec_error=spec_error,
            created=parse_time(mapping(body.get("metadata")).get("creationTimestamp")),
        )


# ---------------------------------------------------------------------------------------------------
# owned SparkDrivers


@dataclass(frozen=True, kw_only=True)
class DriverView(SparkDriverView):
    """One owned SparkDriver as the apps controller sees it: identity, run, and its mirrored status."""

    app_generation: int
    spark_application_id: str | None = None
    web_ui_address: str | None = None
    executor_state: Mapping[str, ExecutorState] = field(default_factory=dict)
    stuck: Condition | None = None  # the SparkDriver's Stuck condition (ImagePullBackOff, Unschedulable, ...)
    queued: Condition | None = None  # the SparkDriver's Queued condition (its gang waits for a batch scheduler)
    history_url: str | None = None  # the history server its runs log to (the sparkop.io/history-url annotation)

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
    def from_body(cls, body: Mapping[str, Any], group: str = GROUP) -> DriverView:
        """A SparkDriver as the apps controller of ``group``'s SparkApplications sees it."""
        ann = mapping(mapping(body.get("metadata")).get("annotations"))
        status = mapping(body.get("status"))
        return cls(
            **spark_driver_fields(body, group, APP_KIND, error_beside_termination=False),
            app_generation=integer(ann.get(labels.APP_GENERATION), 0),
            spark_application_id=opt_str(status.get("sparkApplicationId")),
            web_ui_address=opt_str(status.get("webUIAddress")),
            executor_state={
                str(k): state
                for k, v in mapping(status.get("executorState")).items()
                if (state := opt_enum(ExecutorState, v)) is not None
            },
            stuck=_condition_of(status.get("conditions"), CONDITION_STUCK),
            queued=_condition_of(status.get("conditions"), CONDITION_QUEUED),
            history_url=opt_str(ann.get(labels.HISTORY_URL)),
        )


@dataclass(frozen=True, kw_only=True)
class OwnedObject(OwnedView):
    """A Service or Ingress controlled by a SparkApplication (the Spark UI), as the watch index holds
    it: found by its controller ownerReference, whatever status says (a crash between its create and
    the status write must not leak it). ``labels``, ``annotations`` and ``spec`` are what a pass
    compares with the object it wants, to put back what someone edited."""

    api_version: str
    kind: str
    resource_version: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    spec: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_body(cls, body: Mapping[str, Any], group: str = GROUP) -> OwnedObject:
        """A Spark UI object as the apps controller of ``group``'s SparkApplications sees it."""
        meta = mapping(body.get("metadata"))
        return cls(
            **owned_identity(body, group, APP_KIND),
            api_version=str(body.get("apiVersion", "")),
            kind=str(body.get("kind", "")),
            resource_version=opt_str(meta.get("resourceVersion")),
            labels=str_map(meta.get("labels")),
            annotations=str_map(meta.get("annotations")),
            # a copy: the informer's objects are shared, and replaced rather than edited
            spec=copy.deepcopy(dict(mapping(body.get("spec")))),
        )


def _condition_of(conditions: Any, kind: str) -> Condition | None:
    """A SparkDriver's condition of type ``kind``, when it has a readable one."""
    for data in conditions if isinstance(conditions, list) else ():
        if isinstance(data, Mapping) and data.get("type") == kind:
            try:
                return Condition.model_validate(data)
            except ValidationError:
                return None
    return None


@dataclass(frozen=True)
class ForeignDriver:
    """A driver pod another operator made (kubeflow's spark-submit: not labelled as sparkop's), as the apps
    controller sees it when it takes over an app that operator was running (``apps_controller.takeover``)."""

    name: str
    uid: str
    controller_uid: str | None  # the uid of its controller ownerReference
    submission_id: str | None  # its sparkoperator.k8s.io/submission-id label

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ForeignDriver:
        meta = mapping(body.get("metadata"))
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            controller_uid=opt_str(mapping(controller_of(body)).get("uid")),
            submission_id=opt_str(mapping(meta.get("labels")).get(labels.KUBEFLOW_SUBMISSION_ID)),
        )


def left_driver_keys(body: Mapping[str, Any]) -> list[Key]:
    """The key a driver pod kubeflow's operator left is filed under: its app's (kubeflow's app-name label)
    in its namespace. Executors are the driver controller's to claim, not the app's."""
    meta = mapping(body.get("metadata"))
    pod_labels = mapping(meta.get("labels"))
    app = opt_str(pod_labels.get(labels.KUBEFLOW_APP_NAME))
    if app is None or pod_labels.get(labels.SPARK_ROLE) != labels.ROLE_DRIVER:
        return []
    return [(str(meta.get("namespace", "")), app)]


# Under this name a namespace's default history server is filed too (api.history's namespaceDefault).
DEFAULT_HISTORY_SERVER: Final = ""


@dataclass(frozen=True)
class HistoryServerView:
    """A SparkHistoryServer as an app's run needs it: where to write the event log and where its pages
    are (both from its spec alone, :mod:`api.history`)."""

    namespace: str
    name: str
    event_log: EventLog | None
    url: str
    default: bool = False

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> HistoryServerView:
        meta = mapping(body.get("metadata"))
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        spec = mapping(body.get("spec"))
        return cls(
            namespace=namespace,
            name=name,
            event_log=event_log(spec),
            url=base_url(namespace, name, spec),
            default=spec.get("namespaceDefault") is True and not meta.get("deletionTimestamp"),
        )


def history_keys(body: Mapping[str, Any]) -> list[Key]:
    """A history server's own key, and its namespace's default key when it says it is the default."""
    view = HistoryServerView.from_body(body)
    own = (view.namespace, view.name)
    return [own, (view.namespace, DEFAULT_HISTORY_SERVER)] if view.default else [own]


@dataclass(frozen=True)
class HistoryChoice:
    """The history server an app's runs log to: ``server`` (None: none), or ``missing``, why the one
    it names cannot be used now."""

    server: HistoryServerView | None = None
    missing: str | None = None


def choose_history(app: AppView, lookup: Callable[[Key], Sequence[HistoryServerView]]) -> HistoryChoice:
    """The history server of ``app``'s runs: the one spec.historyServer names, else its namespace's
    default (the first by name), else none; ``lookup`` reads the history servers filed under a key."""
    ref = app.history_ref
    if ref.get("enabled") is False:
        return HistoryChoice()
    name = opt_str(ref.get("name"))
    if name is None:
        defaults = sorted(lookup((app.namespace, DEFAULT_HISTORY_SERVER)), key=lambda v: v.name)
        return HistoryChoice(defaults[0] if defaults else None)
    namespace = opt_str(ref.get("namespace")) or app.namespace
    found = next(iter(lookup((namespace, name))), None)
    if found is None:
        return HistoryChoice(missing=f"SparkHistoryServer {namespace}/{name} (spec.historyServer) does not exist")
    if found.event_log is not None and found.event_log.claim is not None and namespace != app.namespace:
        return HistoryChoice(
            missing=f"SparkHistoryServer {namespace}/{name} keeps its logs on claim {found.event_log.claim}, which a "
            f"driver in namespace {app.namespace} cannot mount: name a server of {app.namespace}, or one whose "
            "logDirectory is an URL"
        )
    return HistoryChoice(found)


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
    refused, by ``core.plan.refusal_key`` (remembered by the Applier; lost with the process, when
    the create is simply tried again). ``namespace_terminating``: the app's namespace is being deleted."""

    app: AppView
    status: SparkApplicationStatus  # as apps_controller.status.read_status reads it
    drivers: Sequence[DriverView] = ()
    ui: UIConfig = field(default_factory=UIConfig)
    refusals: Mapping[str, Refusal] = field(default_factory=dict)
    ui_objects: Sequence[OwnedObject] = ()
    namespace_terminating: bool = False
    history: HistoryChoice = field(default_factory=HistoryChoice)
    # The driver pods kubeflow's operator left for this app (a live swap; only with --kubeflow-api).
    left: Sequence[ForeignDriver] = ()

    @property
    def owned(self) -> tuple[DriverView, ...]:
        return owned_by(self.drivers, self.app.uid, lambda d: d.run)

    @property
    def owned_ui(self) -> tuple[OwnedObject, ...]:
        return owned_by(self.ui_objects, self.app.uid, lambda o: o.kind)


# ---------------------------------------------------------------------------------------------------
# what the shell's indexes file under an app's key


owner_keys_by_group: Final = {group: controller_keys(group, APP_KIND) for group in (GROUP, labels.KUBEFLOW_GROUP)}


def owner_keys(body: Mapping[str, Any], group: str = GROUP) -> list[Key]:
    """The key an owned object (a SparkDriver, a Spark UI object) is filed and enqueued under by the apps
    controller of ``group``: its controller owner's, when that is a SparkApplication of ``group``.
    Ownership, not a label, links an app to its SparkDrivers and UI objects: a label can be edited away.
    The group counts: an app ``pi`` of sparkop's group and one of kubeflow's are two apps."""
    return owner_keys_by_group[group](body)


def app_snapshot(body: Mapping[str, Any]) -> JSON:
    """What the apps index hands out of a SparkApplication (a copy: the cache's objects are shared, and
    a pass writes its new status into its own)."""
    meta = mapping(body.get("metadata"))
    # labels: the metrics recorded for a written status are labelled from them, as kubeflow's are.
    keep = (
        "name",
        "namespace",
        "uid",
        "generation",
        "resourceVersion",
        "deletionTimestamp",
        "creationTimestamp",
        "labels",
    )
    return {
        "apiVersion": body.get("apiVersion", labels.API_VERSION),
        "kind": APP_KIND,
        "metadata": {k: meta[k] for k in keep if k in meta},
        "spec": copy_json(body.get("spec") or {}),
        "status": copy_json(body.get("status") or {}),
    }


@dataclass
class SpecErrors:
    """What is wrong with an app's spec (None: nothing), checked once per uid and generation."""

    seen: dict[tuple[str, int], SpecError | None] = field(default_factory=dict)

    def __call__(self, body: Mapping[str, Any]) -> SpecError | None:
        meta = body["metadata"]
        key = (str(meta.get("uid")), int(meta.get("generation") or 0))
        if key not in self.seen:
            try:
                SparkApplicationSpec.model_validate(body.get("spec") or {})
                # kubeflow's group's CRD takes an app without an image (as kubeflow's does); none of its
                # runs could start.
                no_image = missing_image(copy_json(body.get("spec") or {}))
                self.seen[key] = None if no_image is None else SpecError(no_image, ())
            except ValidationError as exc:
                message = "; ".join(f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
                self.seen[key] = SpecError(message, unknown_fields(exc, "spec"))
        return self.seen[key]
