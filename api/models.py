"""Pydantic models of sparkop's two kinds, ``SparkApplication`` and ``SparkDriver``
(``sparkop.io/v1alpha1``).

Attribute names are the manifest's camelCase JSON names, so ``model_dump(exclude_none=True)`` is
the manifest (``mode="json"`` for timestamps). ``SparkApplication.spec`` keeps the field names and
meanings of kubeflow spark-operator's ``sparkoperator.k8s.io/v1beta2``; see docs/api.md.

The models check types, enums, patterns and bounds. Cross-field rules (e.g. "retries only with
OnFailure/Always") live in :mod:`api.rules`, shared by the CRD (as CEL) and ``sparkop validate``;
the models do not enforce them, so that a controller can always read what the API server stored.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

from pydantic import ConfigDict, Field

from sparkop.core.conditions import transition_time
from sparkop.core.limits import MAX_TRACKED_CHILDREN
from sparkop.core.specs import Model as JsonModel
from sparkop.domain.labels import API_VERSION

from . import spark_lines
from .types import (
    DECIMAL_PATTERN,
    DNS1123_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_PATTERN,
    MAX_LIST,
    MAX_MAP,
    MAX_STR,
    MAX_VALUE,
    Affinity,
    Container,
    Cpu,
    EnvFromSource,
    EnvVar,
    HostAlias,
    IngressTLS,
    Lifecycle,
    Memory,
    ObjectMeta,
    PodDNSConfig,
    PodSecurityContext,
    PodTemplateSpec,
    ResourceList,
    SecurityContext,
    Str,
    StrMap,
    Text,
    Time,
    Toleration,
    Volume,
    VolumeMount,
)

__all__ = [
    "AdoptedPod",
    "ApplicationState",
    "ApplicationStateInfo",
    "AttemptOutcome",
    "AttemptRecord",
    "BatchSchedulerConfiguration",
    "Condition",
    "Deps",
    "DriverInfo",
    "DriverIngressConfiguration",
    "DriverPhase",
    "DriverPodInfo",
    "DriverSpec",
    "DynamicAllocation",
    "ExecutorCounts",
    "ExecutorFailure",
    "ExecutorFailurePolicy",
    "ExecutorSpec",
    "ExecutorState",
    "GPUSpec",
    "GatewayRef",
    "HistoryServerRef",
    "IncarnationOutcome",
    "IncarnationRecord",
    "KindObject",
    "LastError",
    "MonitoringSpec",
    "NameKey",
    "NamePath",
    "PendingTimeout",
    "Port",
    "PrometheusSpec",
    "RestartPolicy",
    "RestartPolicyType",
    "RouteSpec",
    "RunSpec",
    "SecretInfo",
    "SparkApplication",
    "SparkApplicationSpec",
    "SparkApplicationStatus",
    "SparkApplicationType",
    "SparkDriver",
    "SparkDriverSpec",
    "SparkDriverStatus",
    "SparkPodSpec",
    "SparkUIConfiguration",
    "Termination",
    "Timeouts",
]


def _list_map(key: str) -> dict[str, Any]:
    """A list of objects unique by ``key``, as Kubernetes declares its own such lists."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key]}


class Model(JsonModel):
    """Base of sparkop's own types: unknown fields are rejected; ``to_json`` is the manifest JSON of an
    object (camelCase, no unset optional fields)."""

    model_config = ConfigDict(extra="forbid", use_enum_values=False, validate_default=True)


SpecT = TypeVar("SpecT", bound=Model)
StatusT = TypeVar("StatusT", bound=Model)


class KindObject(Model, Generic[SpecT, StatusT]):
    """An object of one of sparkop's kinds as the API server holds it; each kind narrows ``apiVersion``
    and ``kind`` to its own."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=dict)
    spec: SpecT
    status: StatusT | None = None


# ---------------------------------------------------------------------------------------------
# enums


class SparkApplicationType(enum.StrEnum):
    """Language of the application."""

    JAVA = "Java"
    SCALA = "Scala"
    PYTHON = "Python"
    R = "R"


class RestartPolicyType(enum.StrEnum):
    """Whether an application that ended runs again: never, after a failure, or always."""

    NEVER = "Never"
    ON_FAILURE = "OnFailure"
    ALWAYS = "Always"


class ApplicationState(enum.StrEnum):
    """State of a SparkApplication (kubeflow spark-operator's values)."""

    NEW = "NEW"
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    SUCCEEDING = "SUCCEEDING"
    COMPLETED = "COMPLETED"
    FAILING = "FAILING"
    FAILED = "FAILED"
    SUBMISSION_FAILED = "SUBMISSION_FAILED"
    PENDING_RERUN = "PENDING_RERUN"
    INVALIDATING = "INVALIDATING"
    SUSPENDING = "SUSPENDING"
    SUSPENDED = "SUSPENDED"
    RESUMING = "RESUMING"
    UNKNOWN = "UNKNOWN"


class DriverPhase(enum.StrEnum):
    """Phase of a SparkDriver. Succeeded, Failed and SubmissionFailed are terminal."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUBMISSION_FAILED = "SubmissionFailed"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL_DRIVER_PHASES


# Asked several times in every pass: a set built once, not the members looked up on the class each time.
_TERMINAL_DRIVER_PHASES: Final = frozenset({DriverPhase.SUCCEEDED, DriverPhase.FAILED, DriverPhase.SUBMISSION_FAILED})


class ExecutorState(enum.StrEnum):
    """State of one executor pod (kubeflow's executorState values, from the pod's phase)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"


# How many executors a status names in executorState (kubeflow's --max-tracked-executor-per-app
# default): those with the lowest Spark executor ids. The map is written with every status write of an
# app and its SparkDriver, so it must not grow with a long run's executors without end.
MAX_TRACKED_EXECUTORS: Final = MAX_TRACKED_CHILDREN
ExecutorStates = Annotated[dict[str, ExecutorState], Field(max_length=MAX_TRACKED_EXECUTORS)]


# How much of the end of a driver pod's log its incarnation's record keeps (the pod itself goes).
LOG_TAIL_CHARS: Final = 4096


class IncarnationOutcome(enum.StrEnum):
    """How one driver-pod incarnation ended."""

    LOST = "Lost"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUBMISSION_FAILED = "SubmissionFailed"


class AttemptOutcome(enum.StrEnum):
    """How one run (SparkDriver) of an application ended; "Running" while it has not."""

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUBMISSION_FAILED = "SubmissionFailed"
    DELETED = "Deleted"
    INVALIDATED = "Invalidated"


ImagePullPolicy = Literal["Always", "Never", "IfNotPresent"]
DeployMode = Literal["cluster", "client", "in-cluster-client"]

# ---------------------------------------------------------------------------------------------
# small spec parts


class NamePath(Model):
    """A ConfigMap mounted into the pod at a path."""

    name: Annotated[str, Field(max_length=253, description="Name of the ConfigMap in the app's namespace.")]
    path: Annotated[str, Field(max_length=MAX_STR, description="Absolute directory to mount it at.")]


class SecretInfo(Model):
    """A Secret mounted into the pod at a path."""

    name: Annotated[str, Field(max_length=253, description="Name of the Secret in the app's namespace.")]
    path: Annotated[str, Field(max_length=MAX_STR, description="Absolute directory to mount it at.")]
    secretType: Annotated[
        Literal["GCPServiceAccount", "HadoopDelegationToken", "Generic"],
        Field(
            description="Generic: just mount it. GCPServiceAccount: also set GOOGLE_APPLICATION_CREDENTIALS "
            "to <path>/key.json. HadoopDelegationToken: also set HADOOP_TOKEN_FILE_LOCATION to "
            "<path>/hadoop.token."
        ),
    ]


class NameKey(Model):
    """A key of a Secret."""

    name: Annotated[str, Field(max_length=253, description="Name of the Secret.")]
    key: Annotated[str, Field(max_length=253, description="Key within the Secret.")]


class GPUSpec(Model):
    """GPUs requested by the pod (added to the Spark container's resource limits)."""

    name: Annotated[
        str, Field(max_length=253, description="Extended resource name, e.g. nvidia.com/gpu or amd.com/gpu.")
    ]
    quantity: Annotated[int, Field(ge=0, description="Number of GPUs to request.")]


class Port(Model):
    """An extra container port on the Spark container."""

    name: Annotated[str, Field(max_length=15, description="Port name (IANA_SVC_NAME, at most 15 chars).")]
    protocol: Annotated[Literal["TCP", "UDP", "SCTP"], Field(description="TCP, UDP or SCTP.")]
    containerPort: Annotated[int, Field(ge=1, le=65535, description="Port number, 1-65535.")]


class SparkPodSpec(Model):
    """What can be customised on the driver or the executor pods (kubeflow's SparkPodSpec)."""

    cores: int | None = Field(
        None,
        ge=1,
        description="CPU cores Spark uses for tasks: spark.driver.cores / spark.executor.cores. "
        "Also the pod's CPU request unless coreRequest is set. At least 1.",
    )
    coreRequest: Cpu | None = Field(
        None,
        description='CPU request of the pod as a Kubernetes quantity ("500m", "1.5"): '
        "spark.kubernetes.{driver,executor}.request.cores. Overrides cores for the request only.",
    )
    coreLimit: Cpu | None = Field(
        None,
        description='Hard CPU limit of the pod as a Kubernetes quantity ("1200m", "2"): '
        "spark.kubernetes.{driver,executor}.limit.cores. No limit when unset.",
    )
    memory: Memory | None = Field(
        None,
        description="JVM heap: spark.driver.memory / spark.executor.memory, in Spark's syntax: an integer "
        'with an optional unit k, m, g, t (or kb, mb, gb, tb), e.g. "512m", "2g"; no unit means MiB. '
        'Kubernetes-style "2Gi" and fractions are not accepted by Spark. The pod\'s memory request is '
        "memory + memoryOverhead.",
    )
    memoryOverhead: Memory | None = Field(
        None,
        description="Non-heap memory added to the pod's memory request: spark.driver.memoryOverhead / "
        "spark.executor.memoryOverhead, same syntax as memory. Default: memoryOverheadFactor x memory, "
        "at least 384m.",
    )
    gpu: GPUSpec | None = Field(None, description="GPUs to request for the Spark container.")
    image: Str | None = Field(
        None, description="Container image for this role; overrides spec.image. Required if spec.image is unset."
    )
    configMaps: list[NamePath] | None = Field(
        None, max_length=MAX_LIST, description="ConfigMaps to mount into the Spark container."
    )
    secrets: list[SecretInfo] | None = Field(
        None, max_length=MAX_LIST, description="Secrets to mount into the Spark container."
    )
    env: list[EnvVar] | None = Field(
        None,
        max_length=MAX_LIST,
        json_schema_extra=_list_map("name"),
        description="Environment variables of the Spark container (Kubernetes EnvVar).",
    )
    envVars: StrMap | None = Field(
        None, description="Deprecated (kubeflow): environment variables as a name-to-value map. Use env."
    )
    envFrom: list[EnvFromSource] | None = Field(
        None,
        max_length=MAX_LIST,
        description="ConfigMaps/Secrets whose keys become environment variables (Kubernetes EnvFromSource).",
    )
    envSecretKeyRefs: dict[str, NameKey] | None = Field(
        None,
        max_length=MAX_MAP,
        description="Deprecated (kubeflow): environment variable name to Secret key. Use env with "
        "valueFrom.secretKeyRef.",
    )
    labels: StrMap | None = Field(None, description="Labels added to the pod.")
    annotations: StrMap | None = Field(None, description="Annotations added to the pod.")
    volumeMounts: list[VolumeMount] | None = Field(
        None,
        max_length=MAX_LIST,
        json_schema_extra=_list_map("mountPath"),
        description="Mounts of volumes from spec.volumes into the Spark container (Kubernetes VolumeMount).",
    )
    affinity: Affinity | None = Field(None, description="Pod (anti-)affinity and node affinity of the pod.")
    tolerations: list[Toleration] | None = Field(
        None, max_length=MAX_LIST, description="Tolerations of the pod (Kubernetes Toleration)."
    )
    podSecurityContext: PodSecurityContext | None = Field(None, description="The pod's securityContext.")
    securityContext: SecurityContext | None = Field(None, description="The Spark container's securityContext.")
    schedulerName: Str | None = Field(None, description="Scheduler that schedules the pod.")
    sidecars: list[Container] | None = Field(
        None,
        max_length=32,
        json_schema_extra=_list_map("name"),
        description="Extra containers running next to the Spark container.",
    )
    initContainers: list[Container] | None = Field(
        None,
        max_length=32,
        json_schema_extra=_list_map("name"),
        description="Init containers that run to completion before the Spark container.",
    )
    hostNetwork: bool | None = Field(None, description="Run the pod in the node's network namespace.")
    nodeSelector: StrMap | None = Field(None, description="Node labels the pod must be scheduled onto.")
    dnsConfig: PodDNSConfig | None = Field(None, description="DNS settings of the pod.")
    terminationGracePeriodSeconds: int | None = Field(
        None, ge=0, description="Seconds the pod gets to stop after SIGTERM."
    )
    serviceAccount: Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN_PATTERN)] | None = Field(
        None,
        description="Service account of the pod. The driver's needs RBAC to create, watch and delete "
        "executor pods, ConfigMaps and Services (spark.kubernetes.authenticate.driver.serviceAccountName).",
    )
    hostAliases: list[HostAlias] | None = Field(
        None, max_length=MAX_LIST, description="Extra /etc/hosts entries of the pod."
    )
    shareProcessNamespace: bool | None = Field(
        None, description="Share one process namespace between the pod's containers."
    )
    runtimeClassName: Str | None = Field(None, description="RuntimeClass the pod runs with.")
    priorityClassName: Str | None = Field(None, description="PriorityClass of the pod.")
    template: PodTemplateSpec | None = Field(
        None,
        description="A pod template (Kubernetes PodTemplateSpec) Spark starts from for this role "
        "(spark.kubernetes.{driver,executor}.podTemplateFile); the fields above take precedence. "
        "Needs Spark 3.0 or later.",
    )
    javaOptions: Text | None = Field(
        None,
        description="Extra JVM options: spark.{driver,executor}.extraJavaOptions, e.g. GC or logging flags. "
        "Not for -Xmx (use memory).",
    )
    lifecycle: Lifecycle | None = Field(None, description="postStart/preStop hooks of the Spark container.")
    ports: list[Port] | None = Field(None, max_length=32, description="Extra ports exposed by the Spark container.")


class DriverSpec(SparkPodSpec):
    """The driver pod."""

    podName: Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN_PATTERN)] | None = Field(
        None,
        description="Name of the driver pod (kubeflow's): the same for every run and every driver-pod "
        "incarnation; a new one is created only once the last one's outcome is recorded and it is gone. "
        "Default <app>-driver (a SparkDriver written by hand: <name>-driver).",
    )
    kubernetesMaster: Str | None = Field(
        None,
        description="API server URL the driver uses to manage executors "
        "(spark.kubernetes.driver.master). Default https://kubernetes.default.svc.",
    )
    serviceAnnotations: StrMap | None = Field(
        None, description="Annotations added to the driver's headless Service (executors connect through it)."
    )
    serviceLabels: StrMap | None = Field(None, description="Labels added to the driver's headless Service.")


class ExecutorSpec(SparkPodSpec):
    """The executor pods."""

    instances: int | None = Field(
        None,
        ge=0,
        description="Number of executors: spark.executor.instances. With dynamic allocation, the initial "
        "number unless dynamicAllocation.initialExecutors is larger.",
    )
    deleteOnTermination: bool | None = Field(
        None,
        description="Delete executor pods when they end (spark.kubernetes.executor.deleteOnTermination, "
        "default true). false keeps failed executors for debugging.",
    )


class Deps(Model):
    """Dependencies distributed with the application (spark-submit --jars, --files, ...)."""

    jars: list[Str] | None = Field(None, max_length=MAX_LIST, description="Extra jars: spark.jars (--jars).")
    files: list[Str] | None = Field(
        None, max_length=MAX_LIST, description="Files placed in each pod's working directory: spark.files."
    )
    pyFiles: list[Str] | None = Field(
        None, max_length=MAX_LIST, description=".py, .zip or .egg files on the PYTHONPATH: spark.submit.pyFiles."
    )
    packages: list[Str] | None = Field(
        None,
        max_length=MAX_LIST,
        description="Maven coordinates groupId:artifactId:version resolved with Ivy: spark.jars.packages.",
    )
    excludePackages: list[Str] | None = Field(
        None,
        max_length=MAX_LIST,
        description="groupId:artifactId to exclude while resolving packages: spark.jars.excludes.",
    )
    repositories: list[Str] | None = Field(
        None, max_length=MAX_LIST, description="Extra Maven repositories for packages: spark.jars.repositories."
    )
    archives: list[Str] | None = Field(
        None,
        max_length=MAX_LIST,
        description="Archives extracted into each executor's working directory: spark.archives.",
    )


class DynamicAllocation(Model):
    """Spark dynamic allocation (spark.dynamicAllocation.*), with shuffle tracking (Spark 3.0+)."""

    enabled: bool | None = Field(None, description="Turn dynamic allocation on.")
    initialExecutors: int | None = Field(
        None, ge=0, description="Executors to start with: spark.dynamicAllocation.initialExecutors."
    )
    minExecutors: int | None = Field(None, ge=0, description="Lower bound: spark.dynamicAllocation.minExecutors.")
    maxExecutors: int | None = Field(None, ge=0, description="Upper bound: spark.dynamicAllocation.maxExecutors.")
    shuffleTrackingTimeout: int | None = Field(
        None,
        ge=0,
        description="Milliseconds an executor holding shuffle data is kept: "
        "spark.dynamicAllocation.shuffleTracking.timeout.",
    )


class PrometheusSpec(Model):
    """Expose metrics through the Prometheus JMX exporter java agent."""

    jmxExporterJar: Str = Field(description="Path of the JMX exporter jar inside the image.")
    port: int | None = Field(None, ge=1024, le=49151, description="Exporter HTTP port (default 8090).")
    portName: Str | None = Field(None, description="Name of the exporter port (default jmx-exporter).")
    configFile: Str | None = Field(
        None, description="Path of the exporter config inside the image; wins over configuration."
    )
    configuration: Text | None = Field(None, description="Exporter config content (YAML).")


class MonitoringSpec(Model):
    """Spark metrics."""

    exposeDriverMetrics: bool = Field(description="Expose the driver's metrics.")
    exposeExecutorMetrics: bool = Field(description="Expose the executors' metrics.")
    metricsProperties: Text | None = Field(None, description="Content of metrics.properties.")
    metricsPropertiesFile: Str | None = Field(
        None, description="Path of metrics.properties in the image (default /etc/metrics/conf/metrics.properties)."
    )
    prometheus: PrometheusSpec | None = Field(None, description="Prometheus JMX exporter settings.")


# Why a run ended when sparkop ended it (SparkDriver status.termination.reason; an attempt's reason).
DRIVER_START_TIMED_OUT: Final = "DriverStartTimedOut"
DRIVER_READY_TIMED_OUT: Final = "DriverReadyTimedOut"
EXECUTORS_START_TIMED_OUT: Final = "ExecutorsStartTimedOut"
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
EXECUTORS_CRASH_LOOPING: Final = "ExecutorsCrashLooping"
TIMEOUT_REASONS: Final = frozenset(
    {
        DRIVER_START_TIMED_OUT,
        DRIVER_READY_TIMED_OUT,
        EXECUTORS_START_TIMED_OUT,
        DEADLINE_EXCEEDED,
        EXECUTORS_CRASH_LOOPING,
    }
)
# Of those, the failures the infrastructure caused (restartPolicy.onInfrastructureFailureRetries).
INFRASTRUCTURE_FAILURES: Final = frozenset({DRIVER_START_TIMED_OUT, EXECUTORS_START_TIMED_OUT})


class Timeouts(Model):
    """How long each stage of a run's start may take (unset: the operator's default, sparkop run
    --driver-start-timeout and its siblings; 0: none). Each is counted from a time status records, so
    an operator restart neither resets nor doubles it, and its expiry ends the run with its own reason
    (the driver pod and executors are deleted), which the restart policy then judges."""

    driverStartSeconds: int | None = Field(
        None,
        ge=0,
        description="The driver container running within this many seconds of its pod's creation (scheduled, "
        "image pulled, volumes mounted); else the run fails with DriverStartTimedOut, an infrastructure failure "
        "(restartPolicy.onInfrastructureFailureRetries).",
    )
    driverReadySeconds: int | None = Field(
        None,
        ge=0,
        description="The driver pod Ready (its readiness probes pass: a Spark Connect server's gRPC port "
        "accepts connections) within this many seconds of its creation; else DriverReadyTimedOut.",
    )
    executorsStartSeconds: int | None = Field(
        None,
        ge=0,
        description="The run's executors running (executor.instances, or dynamicAllocation.minExecutors; at "
        "least one) within this many seconds of the driver's start; else ExecutorsStartTimedOut, an "
        "infrastructure failure.",
    )


class ExecutorFailurePolicy(Model):
    """A bound on executors that fail in a loop: more than maxFailures executor pods of one driver pod
    failed within windowSeconds fails the run with reason ExecutorsCrashLooping, naming the last one's
    error. While it is set, executor pods carry a finalizer until their outcome is counted (Spark deletes
    a failed executor pod within a second)."""

    maxFailures: int = Field(ge=1, description="Failed executor pods tolerated within the window.")
    windowSeconds: int = Field(600, ge=1, description="The sliding window, in seconds (default 600).")


class RestartPolicy(Model):
    """When a finished or failed run of the application is started again, as a new SparkDriver.

    Independent of this, a driver pod that is lost before it finishes (deleted, evicted, preempted,
    node lost) is replaced within the same run up to maxDriverPodReplacements times."""

    type: RestartPolicyType = Field(
        RestartPolicyType.NEVER,
        description="Never: run once. OnFailure: start a new run after a failed run or failed submission, "
        "up to onFailureRetries / onSubmissionFailureRetries times. Always: start a new run after every "
        "run, successful or not, without limit (as kubeflow's Always; for long-running apps); the retry "
        "intervals still apply.",
    )
    onSubmissionFailureRetries: int | None = Field(
        None,
        ge=0,
        description="How many times to retry a run whose driver pod could not be created (only with "
        "OnFailure or Always). Unset: no retries.",
    )
    onFailureRetries: int | None = Field(
        None,
        ge=0,
        description="How many times to start a new run after a failed run (only with OnFailure or Always). "
        "Unset: no retries.",
    )
    onSubmissionFailureRetryInterval: int | None = Field(
        None,
        ge=1,
        description="Seconds to wait before retrying a failed submission (only with OnFailure or Always).",
    )
    onFailureRetryInterval: int | None = Field(
        None,
        ge=1,
        description="Seconds to wait before starting a new run after a failed run (only with OnFailure or Always).",
    )
    onInfrastructureFailureRetries: int | None = Field(
        None,
        ge=0,
        description="sparkop addition (the Apache operator's OnInfrastructureFailure): how many runs that failed "
        "because of the infrastructure (DriverStartTimedOut: unschedulable, image not pulled; "
        "ExecutorsStartTimedOut) are started again, with any type (Never too), counted apart from "
        "onFailureRetries in status.infrastructureFailures. Unset: such a run is a failure like any other.",
    )
    onInfrastructureFailureRetryInterval: int | None = Field(
        None, ge=1, description="Seconds before the run that follows an infrastructure failure (default 5)."
    )
    maxDriverPodReplacements: int = Field(
        3,
        ge=0,
        description="sparkop addition: how many times, within one run, a driver pod that is lost before it "
        "finishes (deleted, evicted, preempted, node lost) is replaced by a new driver pod. Not counted "
        "as a failed run. 0: a lost driver pod fails the run.",
    )


class BatchSchedulerConfiguration(Model):
    """kubeflow's options for the batch scheduler named by batchScheduler. Each scheduler takes only
    the options it uses; one it would not use is refused (see api.rules)."""

    queue: Str | None = Field(
        None,
        description="Queue the application is submitted to: the Volcano PodGroup's spec.queue, or YuniKorn's "
        "queue label and yunikorn.apache.org/queue annotation on the pods. Not for kube-scheduler.",
    )
    priorityClassName: Str | None = Field(
        None, description="PriorityClass of the Volcano PodGroup (spec.priorityClassName). Volcano only."
    )
    resources: ResourceList | None = Field(
        None,
        description="Resources the pod group must be able to get before its pods are scheduled "
        "(minResources), instead of the sum of the driver's and the initial executors' requests. "
        "Volcano and kube-scheduler (coscheduling) only.",
    )


class DriverIngressConfiguration(Model):
    """A Service (and Ingress) exposing one port of the driver pod (kubeflow's driverIngressOptions)."""

    servicePort: int = Field(
        ge=1,
        le=65535,
        description="Port of the Service, and the driver container port it forwards to. Unique among "
        "driverIngressOptions; names the objects <app>-driver-<port> and <app>-ing-<port>.",
    )
    servicePortName: Str | None = Field(None, description="Name of the Service port (default driver-ing-<port>).")
    serviceType: Literal["ClusterIP", "NodePort", "LoadBalancer"] | None = Field(
        None, description="Type of the Service (default ClusterIP)."
    )
    serviceAnnotations: StrMap | None = Field(None, description="Annotations of the Service.")
    serviceLabels: StrMap | None = Field(None, description="Labels of the Service.")
    ingressURLFormat: Annotated[str, Field(min_length=1, max_length=MAX_STR)] = Field(
        description="URL of the Ingress: [scheme://]host[/path]; {{$appName}}, {{$appNamespace}} and {{$appId}} "
        "(the current run's spark.app.id) are substituted. A path makes a path-based rule with nginx's "
        "rewrite-target, as kubeflow does. Unique among driverIngressOptions."
    )
    ingressAnnotations: StrMap | None = Field(None, description="Annotations of the Ingress.")
    ingressTLS: list[IngressTLS] | None = Field(
        None, max_length=32, description="TLS settings of the Ingress (Kubernetes IngressTLS)."
    )


# A hostname as Gateway API takes it: a DNS name, optionally with one leading wildcard label.
ROUTE_HOSTNAME_PATTERN: Final = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
ROUTE_PATH_PATTERN: Final = r"^/[^?#\s]*$"

_DNSLabel = Annotated[str, Field(max_length=63, pattern=DNS1123_LABEL_PATTERN)]
_Hostname = Annotated[str, Field(max_length=253, pattern=ROUTE_HOSTNAME_PATTERN)]


class GatewayRef(Model):
    """The Gateway a route attaches to (a parentRef of kind Gateway)."""

    name: Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN_PATTERN)] = Field(
        description="Name of the Gateway."
    )
    namespace: _DNSLabel | None = Field(
        None, description="Namespace of the Gateway (default: the route's own); its listener must allow routes from it."
    )
    sectionName: _DNSLabel | None = Field(None, description="The Gateway listener to attach to (default: any).")
    port: int | None = Field(None, ge=1, le=65535, description="The Gateway port to attach to (default: any).")


class RouteSpec(Model):
    """A Gateway API route for this object, through a Gateway the cluster runs."""

    gateway: GatewayRef = Field(description="The Gateway the route attaches to.")
    hostnames: list[_Hostname] | None = Field(
        None, max_length=16, description="Host names the route answers for (default: any the listener takes)."
    )
    path: Annotated[str, Field(max_length=MAX_STR, pattern=ROUTE_PATH_PATTERN)] | None = Field(
        None,
        description="Path prefix (HTTPRoute only, default /). Under a prefix the Spark UI writes its links "
        "below it (spark.ui.proxyBase) and the route strips it (a URLRewrite filter).",
    )
    annotations: StrMap | None = Field(None, description="Annotations of the route.")
    labels: StrMap | None = Field(None, description="Labels added to the route.")


class HistoryServerRef(Model):
    """The SparkHistoryServer a run writes its event log to (spark.eventLog.*), and whose page its status
    links to once the run has a spark.app.id."""

    name: Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN_PATTERN)] | None = Field(
        None, description="Name of the SparkHistoryServer (default: its namespace's default server, if any)."
    )
    namespace: Annotated[str, Field(max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")] | None = Field(
        None,
        description="Its namespace (default: the app's). Only for a server whose log directory is an URL: a "
        "claim is mounted by the driver, so it must be in the app's namespace.",
    )
    enabled: bool | None = Field(
        None, description="false: no event log, not even to the namespace's default server (default true)."
    )


class SparkUIConfiguration(Model):
    """The Service (and Ingress) exposing the Spark UI."""

    servicePort: int | None = Field(
        None, ge=1, le=65535, description="Service port of the UI (target port is spark.ui.port)."
    )
    servicePortName: Str | None = Field(None, description="Name of the UI service port (default spark-driver-ui-port).")
    serviceType: Literal["ClusterIP", "NodePort", "LoadBalancer"] | None = Field(
        None, description="Type of the UI Service (default ClusterIP)."
    )
    serviceAnnotations: StrMap | None = Field(None, description="Annotations of the UI Service.")
    serviceLabels: StrMap | None = Field(None, description="Labels of the UI Service.")
    ingressAnnotations: StrMap | None = Field(None, description="Annotations of the UI Ingress.")
    ingressTLS: list[IngressTLS] | None = Field(
        None, max_length=32, description="TLS settings of the UI Ingress (Kubernetes IngressTLS)."
    )
    httpRoute: RouteSpec | None = Field(
        None,
        description="A Gateway API HTTPRoute <app>-ui-route to the UI Service while a run is active, through the "
        "Gateway it names (a path prefix sets spark.ui.proxyBase on the driver).",
    )


# ---------------------------------------------------------------------------------------------
# run spec and the two specs


class RunSpec(Model):
    """Everything needed to run a Spark application once: shared by SparkApplication and SparkDriver."""

    type: SparkApplicationType = Field(description="Language of the application: Java, Scala, Python or R.")
    sparkVersion: Str | None = Field(
        None,
        max_length=spark_lines.VERSION_MAX_LENGTH,
        description="Spark version of the image, e.g. 4.3.0 (also the pods' spark-version label). Its line "
        "(4.3) selects what sparkop creates for the driver: the objects that line's spark-submit "
        f"--deploy-mode cluster creates. Known lines: {spark_lines.KNOWN_LINES_TEXT}; a version of "
        "another line (3.4.1, 5.0.0) is accepted and rendered as the nearest known line, with a warning "
        "(sparkop validate, sparkop status); what is not a version (latest, 4.x) is refused. Unset: line "
        f"{spark_lines.DEFAULT_LINE}. The image still decides what runs: keep the two the same.",
    )
    proxyUser: Str | None = Field(
        None, description="User to impersonate when running the application (spark-submit --proxy-user)."
    )
    image: Str | None = Field(
        None,
        description="Container image of the driver and executors, e.g. apache/spark:3.5.7. Required unless "
        "both driver.image and executor.image are set.",
    )
    imagePullPolicy: ImagePullPolicy | None = Field(
        None, description="Pull policy of the Spark containers: Always, Never or IfNotPresent."
    )
    imagePullSecrets: list[Annotated[str, Field(max_length=253)]] | None = Field(
        None, max_length=32, description="Names of Secrets used to pull the images."
    )
    mainClass: Str | None = Field(
        None,
        description="Fully qualified main class, e.g. org.apache.spark.examples.SparkPi. Required for Java "
        "and Scala; not used for Python and R.",
    )
    mainApplicationFile: Str | None = Field(
        None,
        description="The application jar, .py or .R file, e.g. "
        "local:///opt/spark/examples/jars/spark-examples_2.12-3.5.7.jar (local:// = inside the image). "
        "May be unset only for Java/Scala when the main class is on the image's classpath.",
    )
    arguments: list[Text] | None = Field(
        None, max_length=MAX_LIST, description="Arguments passed to the application's main."
    )
    sparkConf: dict[str, Annotated[str, Field(max_length=MAX_VALUE)]] | None = Field(
        None,
        max_length=MAX_MAP,
        description="Spark properties, as spark-submit --conf key=value. Fields of this spec win over "
        "the same properties here. spark.driver.host and spark.driver.bindAddress are set by sparkop "
        "and rejected here.",
    )
    hadoopConf: dict[str, Annotated[str, Field(max_length=MAX_VALUE)]] | None = Field(
        None,
        max_length=MAX_MAP,
        description="Hadoop properties; each key is passed as spark.hadoop.<key>.",
    )
    sparkConfigMap: Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN_PATTERN)] | None = Field(
        None,
        description="ConfigMap with Spark config files (e.g. log4j2.properties), mounted in all pods with "
        "SPARK_CONF_DIR pointing to it.",
    )
    hadoopConfigMap: Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN_PATTERN)] | None = Field(
        None,
        description="ConfigMap with Hadoop config files (e.g. core-site.xml), mounted in all pods with "
        "HADOOP_CONF_DIR pointing to it.",
    )
    nodeSelector: StrMap | None = Field(
        None,
        description="Deprecated (kubeflow): node selector of both driver and executors. Use "
        "driver.nodeSelector / executor.nodeSelector; not allowed together with them.",
    )
    volumes: list[Volume] | None = Field(
        None,
        max_length=MAX_LIST,
        json_schema_extra=_list_map("name"),
        description="Volumes (Kubernetes Volume) the driver and executors can mount with volumeMounts.",
    )
    driver: DriverSpec = Field(
        default_factory=DriverSpec, json_schema_extra={"default": {}}, description="The driver pod."
    )
    executor: ExecutorSpec = Field(
        default_factory=ExecutorSpec, json_schema_extra={"default": {}}, description="The executor pods."
    )
    deps: Deps | None = Field(None, description="Extra jars, files, Python files and Maven packages.")
    dynamicAllocation: DynamicAllocation | None = Field(
        None, description="Scale executors with the workload (Spark dynamic allocation)."
    )
    monitoring: MonitoringSpec | None = Field(None, description="Spark metrics and Prometheus export.")
    pythonVersion: Literal["2", "3"] | None = Field(
        None, description="Major Python version for Python apps (spark.kubernetes.pyspark.pythonVersion)."
    )
    memoryOverheadFactor: Annotated[str, Field(pattern=DECIMAL_PATTERN, max_length=16)] | None = Field(
        None,
        description="Fraction of memory added as non-heap overhead when memoryOverhead is unset, as a "
        'decimal string, e.g. "0.1" (Spark\'s default 0.1 for JVM apps, 0.4 for Python/R): '
        "spark.kubernetes.memoryOverheadFactor.",
    )

    batchScheduler: Str | None = Field(
        None,
        description="Batch scheduler of the driver and executor pods, as kubeflow's: volcano (a Volcano PodGroup "
        "owned by the SparkDriver, schedulerName volcano and the group annotation on the pods), yunikorn "
        "(YuniKorn's queue, app id and task-group labels and annotations, schedulerName yunikorn) or "
        "kube-scheduler (a scheduler-plugins coscheduling PodGroup and its pod-group label; the pods keep "
        "driver/executor.schedulerName). Any other value is refused. Kueue is not a batchScheduler: label the "
        "SparkApplication with kueue.x-k8s.io/queue-name.",
    )
    batchSchedulerOptions: BatchSchedulerConfiguration | None = Field(
        None, description="Queue, priorityClassName and resources for the batch scheduler (only with batchScheduler)."
    )
    driverPodDisruptionBudget: bool | None = Field(
        None,
        description="kubeflow's: a PodDisruptionBudget (minAvailable 1) selecting the driver pod, owned by the "
        "SparkDriver, so that a voluntary eviction (kubectl drain, a cluster autoscaler) waits for the driver "
        "instead of taking it (a node that is lost is not stopped by it). Unset: the operator's "
        "--driver-pod-disruption-budget (off unless set).",
    )
    nodeLossTolerationSeconds: int | None = Field(
        None,
        ge=0,
        le=86400,
        description="How long the driver and executor pods stay bound to a node that stopped reporting "
        "(tolerationSeconds of the node.kubernetes.io/unreachable and not-ready NoExecute taints) before "
        "Kubernetes evicts them and a lost driver is replaced: shorter trades a wait for a rerun of the "
        "driver's work. Tolerations of those keys in driver/executor.tolerations win. Unset: the operator's "
        "--node-loss-toleration-seconds, else Kubernetes' default (300 s, the DefaultTolerationSeconds "
        "admission plugin).",
    )

    timeouts: Timeouts | None = Field(
        None,
        description="sparkop addition: how long the driver's start, its readiness and the executors' start may take.",
    )
    activeDeadlineSeconds: int | None = Field(
        None,
        ge=0,
        description="A run (each SparkDriver) still going this many seconds after it was created is stopped "
        "(driver pod and executors deleted) and fails with DeadlineExceeded (Job's field). Unset: the operator's "
        "--active-deadline, else none; 0: none.",
    )
    executorFailures: ExecutorFailurePolicy | None = Field(
        None,
        description="sparkop addition: a bound on executors failing in a loop. Unset: the operator's "
        "--max-executor-failures, else none.",
    )

    def run_spec(self) -> RunSpec:
        """A deep copy of just the run-spec part (e.g. of a SparkApplicationSpec)."""
        data = self.model_dump(include=set(RunSpec.model_fields), exclude_none=True)
        return RunSpec.model_validate(data)


class SparkApplicationSpec(RunSpec):
    """A Spark application as kubeflow spark-operator v1beta2 describes it, plus sparkop's restart
    handling. Each run is a SparkDriver named <app>-<run>."""

    mode: DeployMode = Field(
        "cluster",
        description="Deploy mode. Only cluster (the driver runs in a pod) is supported; client and "
        "in-cluster-client are rejected.",
    )
    restartPolicy: RestartPolicy = Field(
        default_factory=RestartPolicy,
        json_schema_extra={"default": {}},
        description="Whether and when to start a new run after a run ends, and how many lost driver pods "
        "are replaced within a run.",
    )
    suspend: bool | None = Field(
        None,
        description="true: stop the current run (its driver and executors are deleted) and start no new "
        "one until set back to false, which starts a new run.",
    )
    timeToLiveSeconds: int | None = Field(
        None,
        ge=0,
        description="Delete the SparkApplication this many seconds after it finished (COMPLETED or FAILED).",
    )
    sparkUIOptions: SparkUIConfiguration | None = Field(
        None, description="Service, Ingress and HTTPRoute exposing the Spark UI."
    )
    historyServer: HistoryServerRef | None = Field(
        None,
        description="The SparkHistoryServer each run writes its event log to, so its UI outlives its driver; "
        "status.attempts[].historyURL links to its page. Unset: the namespace's default server, if one says so. "
        "Changing it does not restart a run.",
    )
    driverIngressOptions: list[DriverIngressConfiguration] | None = Field(
        None,
        max_length=16,
        json_schema_extra=_list_map("servicePort"),
        description="Services and Ingresses exposing ports of the driver pod while a run is active, one of each "
        "per entry (kubeflow's driverIngressOptions); owned by the SparkApplication and put back when edited "
        "or deleted, like the Spark UI's.",
    )
    failureRetries: int | None = Field(
        None,
        ge=0,
        description="kubeflow v1beta2: the number of times to retry a failed application before giving up; "
        "the same as restartPolicy.onFailureRetries (only with restartPolicy OnFailure or Always, not "
        "together with onFailureRetries).",
    )
    retryInterval: int | None = Field(
        None,
        ge=1,
        description="kubeflow v1beta2: seconds between submission retries; the same as "
        "restartPolicy.onSubmissionFailureRetryInterval (only with restartPolicy OnFailure or Always, not "
        "together with onSubmissionFailureRetryInterval).",
    )


class AdoptedPod(Model):
    """A driver pod another operator's spark-submit made (kubeflow's, in a live swap), which a run goes on
    with as its first incarnation instead of creating one (docs/migrating-from-kubeflow.md)."""

    name: Annotated[str, Field(max_length=253)] = Field(description="Pod name.")
    uid: Annotated[str, Field(max_length=64)] = Field(description="Pod uid: only this pod is adopted.")


class SparkDriverSpec(RunSpec):
    """One run of a Spark application: created by a SparkApplication for each run, or by hand."""

    appName: Annotated[str, Field(max_length=253)] | None = Field(
        None, description="spark.app.name (default: metadata.name)."
    )
    attempt: int = Field(1, ge=1, description="Which run of its SparkApplication this is; 1 when written by hand.")
    maxDriverPodReplacements: int = Field(
        3,
        ge=0,
        description="How many times a driver pod lost before it finishes (deleted, evicted, preempted, "
        "node lost) is replaced by a new incarnation. 0: a lost driver pod fails the SparkDriver.",
    )
    adoptDriverPod: AdoptedPod | None = Field(
        None,
        description="The driver pod of this run another operator made (set by the apps controller when it "
        "takes over kubeflow's running app): its first incarnation is that pod, followed to its end, never "
        "created anew while it lives.",
    )


# ---------------------------------------------------------------------------------------------
# status parts


class ExecutorCounts(Model):
    """Executor pods of the current run, counted by phase."""

    pending: int = Field(0, ge=0, description="Executor pods not yet running.")
    running: int = Field(0, ge=0, description="Executor pods running.")
    succeeded: int = Field(0, ge=0, description="Executor pods that exited 0.")
    failed: int = Field(0, ge=0, description="Executor pods that failed.")
    unknown: int = Field(0, ge=0, description="Executor pods whose state is unknown.")


class Condition(Model):
    """A condition, in metav1.Condition's shape."""

    type: Annotated[str, Field(max_length=316, description="Condition type, CamelCase, e.g. Ready.")]
    status: Annotated[Literal["True", "False", "Unknown"], Field(description="True, False or Unknown.")]
    reason: Annotated[str, Field(max_length=1024)] | None = Field(
        None, description="Machine-readable CamelCase reason for the last transition."
    )
    message: Annotated[str, Field(max_length=32768)] | None = Field(None, description="Human-readable details.")
    lastTransitionTime: Time | None = Field(None, description="When status last changed.")
    observedGeneration: int | None = Field(None, ge=0, description="metadata.generation the condition is for.")


def with_condition(
    conditions: Sequence[Condition] | None,
    kind: str,
    status: Literal["True", "False", "Unknown"],
    reason: str,
    message: str | None,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    """``conditions`` with the one of type ``kind`` replaced (moved to the end) or added, for
    ``generation``; its lastTransitionTime stays while its status does (``core.conditions``)."""
    old = next((c for c in conditions or () if c.type == kind), None)
    old_status, old_time = (old.status, old.lastTransitionTime) if old else (None, None)
    new = Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        lastTransitionTime=transition_time(old_status, old_time, status, now),
        observedGeneration=generation,
    )
    return [*(c for c in conditions or () if c.type != kind), new]


class LastError(Model):
    """The last error sparkop hit while reconciling the object (cleared on success)."""

    reason: Annotated[str, Field(max_length=1024)] = Field(description="Machine-readable CamelCase reason.")
    message: Annotated[str, Field(max_length=32768)] | None = Field(None, description="Details.")
    time: Time | None = Field(None, description="When it happened.")


class Termination(Model):
    """How the driver container ended."""

    exitCode: int | None = Field(None, description="Exit code of the Spark container.")
    reason: Annotated[str, Field(max_length=1024)] | None = Field(
        None, description="Container termination reason, e.g. Completed, Error, OOMKilled."
    )
    message: Annotated[str, Field(max_length=32768)] | None = Field(
        None, description="Termination message (tail of the driver's log when available)."
    )
    finishedAt: Time | None = Field(None, description="When the container ended.")


class DriverPodInfo(Model):
    """The current driver pod."""

    name: Annotated[str, Field(max_length=253)] | None = Field(None, description="Pod name.")
    uid: Annotated[str, Field(max_length=64)] | None = Field(None, description="Pod uid.")
    phase: Annotated[str, Field(max_length=32)] | None = Field(None, description="Pod phase.")
    nodeName: Annotated[str, Field(max_length=253)] | None = Field(None, description="Node it runs on.")
    podIP: Annotated[str, Field(max_length=64)] | None = Field(None, description="Pod IP.")
    startTime: Time | None = Field(None, description="When the kubelet acknowledged the pod.")
    ready: bool | None = Field(None, description="The pod is Ready: its containers pass their readiness probes.")
    createdTime: Time | None = Field(None, description="When the pod was created (the start of its timeouts).")
    runningTime: Time | None = Field(None, description="When its driver container was first seen running.")
    readyTime: Time | None = Field(None, description="When it was first seen Ready.")


class PendingTimeout(Model):
    """The next timeout of the run, and when it expires unless what it waits for happens first."""

    reason: Annotated[str, Field(max_length=64)] = Field(description="The reason the run would fail with.")
    time: Time = Field(description="When it expires.")


class ExecutorFailure(Model):
    """A failed executor pod, counted by spec.executorFailures."""

    pod: Annotated[str, Field(max_length=253)] = Field(description="The executor pod.")
    time: Time | None = Field(None, description="When it was seen failed.")
    exitCode: int | None = Field(None, description="Exit code of its container.")
    reason: Annotated[str, Field(max_length=1024)] | None = Field(None, description="Its container's reason.")
    message: Annotated[str, Field(max_length=2048)] | None = Field(None, description="Its termination message.")


class IncarnationRecord(Model):
    """One ended driver-pod incarnation."""

    incarnation: int = Field(ge=1, description="Incarnation number.")
    podName: Annotated[str, Field(max_length=253)] | None = Field(None, description="Its driver pod.")
    outcome: IncarnationOutcome = Field(description="Lost, Succeeded, Failed or SubmissionFailed.")
    reason: Annotated[str, Field(max_length=1024)] | None = Field(None, description="Why, CamelCase.")
    message: Annotated[str, Field(max_length=4096)] | None = Field(None, description="Details.")
    time: Time | None = Field(None, description="When it ended.")
    logTail: Annotated[str, Field(max_length=LOG_TAIL_CHARS)] | None = Field(
        None,
        description="The end of its driver container's log, read before the pod could go (the next pod of "
        "the same name replaces it), or why it could not be read.",
    )


class SparkDriverStatus(Model):
    """Observed state of a SparkDriver."""

    phase: DriverPhase | None = Field(
        None,
        description="Pending (no driver pod running yet), Running, then Succeeded, Failed, or "
        "SubmissionFailed (the API server refused the driver pod). Terminal phases never change.",
    )
    observedGeneration: int | None = Field(None, ge=0, description="metadata.generation last acted on.")
    incarnation: int = Field(0, ge=0, description="Current driver-pod incarnation (1, 2, ...); 0 before the first pod.")
    driverPod: DriverPodInfo | None = Field(None, description="The current driver pod.")
    sparkApplicationId: Annotated[str, Field(max_length=256)] | None = Field(
        None, description="spark.app.id of the current incarnation."
    )
    webUIAddress: Annotated[str, Field(max_length=512)] | None = Field(
        None, description="host:port of the Spark UI of the current incarnation."
    )
    executors: ExecutorCounts = Field(
        default_factory=ExecutorCounts,
        json_schema_extra={"default": {}},
        description="Executor pods by phase.",
    )
    executorState: ExecutorStates | None = Field(
        None,
        description="State of each executor pod of the current incarnation, by pod name (kubeflow's values: "
        "PENDING, RUNNING, COMPLETED, FAILED, UNKNOWN), the executors with the lowest Spark executor ids "
        "up to the operator's --max-tracked-executor-per-app. An executor that is gone keeps its last "
        "state; one gone before it finished is UNKNOWN while the driver runs.",
    )
    termination: Termination | None = Field(None, description="How the last driver pod ended.")
    incarnations: list[IncarnationRecord] | None = Field(
        None, max_length=10, description="The last (at most 10) ended driver-pod incarnations, oldest first."
    )
    queueEvictions: int | None = Field(
        None,
        ge=0,
        description="How often Kueue evicted this run's Workload (preempted, its ClusterQueue stopped, ...): each "
        "stopped the driver pod and its executors, and the next admission started a new incarnation. Not a "
        "failure, and not counted against maxDriverPodReplacements.",
    )
    executorsStartedTime: Time | None = Field(
        None, description="When the current incarnation's executors were first all running (spec.timeouts)."
    )
    nextTimeout: PendingTimeout | None = Field(None, description="The run's next timeout, while one is pending.")
    executorFailures: list[ExecutorFailure] | None = Field(
        None,
        max_length=64,
        description="The current incarnation's failed executor pods in spec.executorFailures' window, oldest first.",
    )
    conditions: list[Condition] | None = Field(None, max_length=8, description="Conditions.")
    lastError: LastError | None = Field(
        None,
        description="Why the driver failed to submit (InvalidSpec, SubmissionFailed), or the last transient API "
        "error (5xx, timeout) that slowed it down, kept until the phase changes.",
    )
    startTime: Time | None = Field(None, description="When the first driver pod was created.")
    completionTime: Time | None = Field(None, description="When a terminal phase was reached.")


class ApplicationStateInfo(Model):
    """Overall state of the application (kubeflow's applicationState)."""

    state: ApplicationState = Field(description="State: NEW, SUBMITTED, RUNNING, COMPLETED, FAILED, ...")
    errorMessage: Annotated[str, Field(max_length=32768)] | None = Field(
        None, description="Why it failed, when it did."
    )


class DriverInfo(Model):
    """The current driver (kubeflow's driverInfo)."""

    podName: Annotated[str, Field(max_length=253)] | None = Field(None, description="Current driver pod.")
    webUIServiceName: Annotated[str, Field(max_length=253)] | None = Field(
        None, description="Service exposing the Spark UI."
    )
    webUIAddress: Annotated[str, Field(max_length=512)] | None = Field(None, description="host:port of the UI.")
    webUIPort: int | None = Field(None, ge=0, le=65535, description="UI service port.")
    webUIIngressName: Annotated[str, Field(max_length=253)] | None = Field(None, description="UI Ingress.")
    webUIIngressAddress: Annotated[str, Field(max_length=512)] | None = Field(None, description="UI Ingress address.")


class AttemptRecord(Model):
    """One run (SparkDriver) of the application."""

    run: int = Field(ge=1, description="Run number (never reused).")
    attempt: int | None = Field(
        None,
        ge=1,
        description="Its number among the execution attempts (executionAttempts when its driver pod was "
        "accepted); unset for a failed submission or a run stopped by suspend.",
    )
    driver: Annotated[str, Field(max_length=253)] = Field(description="SparkDriver name.")
    outcome: AttemptOutcome = Field(description="Running, Succeeded, Failed, SubmissionFailed, Deleted, Invalidated.")
    reason: Annotated[str, Field(max_length=1024)] | None = Field(None, description="Why, CamelCase.")
    message: Annotated[str, Field(max_length=4096)] | None = Field(None, description="Details.")
    exitCode: int | None = Field(None, description="Its last driver container's exit code, when it ended with one.")
    startTime: Time | None = Field(None, description="When the SparkDriver was created.")
    finishTime: Time | None = Field(None, description="When it ended.")
    sparkApplicationId: Annotated[str, Field(max_length=256)] | None = Field(
        None, description="spark.app.id of its (last) driver pod."
    )
    historyURL: Annotated[str, Field(max_length=1024)] | None = Field(
        None, description="Its page in the history server it logged to (spec.historyServer)."
    )
    adoptedPod: AdoptedPod | None = Field(
        None, description="The driver pod another operator made that this run went on with (a live swap)."
    )


class SparkApplicationStatus(Model):
    """Observed state of a SparkApplication (kubeflow v1beta2 names where the meaning is the same)."""

    applicationState: ApplicationStateInfo | None = Field(None, description="Overall state.")
    observedGeneration: int | None = Field(None, ge=0, description="metadata.generation last acted on.")
    sparkApplicationId: Annotated[str, Field(max_length=256)] | None = Field(
        None, description="spark.app.id of the current driver."
    )
    submissionID: Annotated[str, Field(max_length=64)] | None = Field(
        None,
        description="Unique id of the current run: its SparkDriver's uid, also the driver and executor pods' "
        "sparkoperator.k8s.io/submission-id label (kubeflow's submissionID).",
    )
    lastSubmissionAttemptTime: Time | None = Field(None, description="When the current run was started.")
    terminationTime: Time | None = Field(None, description="When the application finished.")
    driverInfo: DriverInfo | None = Field(None, description="The current driver.")
    executionAttempts: int = Field(
        0,
        ge=0,
        description="Runs whose driver pod the API server accepted, counted as soon as it is (1 while the "
        "first run runs); OnFailure retries a failed run while executionAttempts <= onFailureRetries.",
    )
    submissionAttempts: int = Field(
        0,
        ge=0,
        description="SparkDrivers created for the current execution attempt (each a submission, refused or "
        "not); OnFailure retries a failed submission while submissionAttempts <= onSubmissionFailureRetries.",
    )
    infrastructureFailures: int = Field(
        0,
        ge=0,
        description="Runs that failed because of the infrastructure (DriverStartTimedOut, ExecutorsStartTimedOut) "
        "while restartPolicy.onInfrastructureFailureRetries is set: counted here instead of executionAttempts.",
    )
    lastRun: int = Field(0, ge=0, description="Highest run number used so far; run numbers are never reused.")
    currentDriver: Annotated[str, Field(max_length=253)] | None = Field(
        None, description="Name of the SparkDriver of the current (or last) run."
    )
    driverIncarnations: int = Field(
        0, ge=0, description="Driver-pod incarnation of the current run (replacements of lost driver pods + 1)."
    )
    executors: ExecutorCounts = Field(
        default_factory=ExecutorCounts,
        json_schema_extra={"default": {}},
        description="Executor pods of the current run by phase.",
    )
    executorState: ExecutorStates | None = Field(
        None,
        description="State of each executor pod of the current run by pod name, as its SparkDriver reports it "
        "(kubeflow's executorState: PENDING, RUNNING, COMPLETED, FAILED, UNKNOWN), bounded by the operator's "
        "--max-tracked-executor-per-app.",
    )
    nextAttemptTime: Time | None = Field(None, description="When the next run will be started, if waiting.")
    attempts: list[AttemptRecord] | None = Field(
        None, max_length=20, description="The last (at most 20) runs, oldest first."
    )
    conditions: list[Condition] | None = Field(
        None,
        max_length=8,
        description="Submitted, Running, Stuck (the current SparkDriver's, e.g. ImagePullBackOff or "
        "Unschedulable), Suspended, Completed, Failed; see docs/state-machine.md.",
    )
    lastError: LastError | None = Field(
        None,
        description="The last failure: of a run, a submission (with the API server's message), the spec, or "
        "the Spark UI objects. Kept after a later run succeeds; cleared when the spec changes.",
    )

    def to_json(self) -> dict[str, Any]:
        """The JSON written to the API server: no None, no empty string, map or list (``kubectl get -o
        yaml`` stays short), timestamps by core.times; ``executors`` as the current driver reported
        them, absent when nothing runs; NEW as no state, as kubeflow's ``ApplicationStateNew`` is ``""``
        (a NEW with an errorMessage keeps both: the CRD requires a state in applicationState). kubeflow's
        clients read an absent state as "not started yet": Airflow's ``SparkKubernetesOperator`` waits
        while it is absent or SUBMITTED and reads the pod ``<app>-driver`` on any other, so a NEW
        written while the run's pod does not exist yet (a queued run, or the moment before the pod is
        created) would fail its task. Read back, an absent state is NEW
        (``apps_controller.status.as_read``)."""
        data = self.model_dump(mode="json", exclude_none=True)
        if data.get("applicationState") == {"state": ApplicationState.NEW.value}:
            del data["applicationState"]
        executors = self.executors.model_dump(mode="json", exclude_unset=True)
        if executors:
            data["executors"] = executors
        else:
            data.pop("executors", None)
        compacted: dict[str, Any] = _compact(data)
        return compacted


def _compact(value: Any) -> Any:
    if isinstance(value, dict):
        pairs = ((k, _compact(v)) for k, v in value.items())
        return {k: v for k, v in pairs if v is not None and v != "" and v != {} and v != []}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# top-level kinds


class SparkApplication(KindObject[SparkApplicationSpec, SparkApplicationStatus]):
    """A Spark application: sparkop starts a SparkDriver for each run and restarts it per restartPolicy.
    In sparkop's group, or (``sparkop run --kubeflow-api``) in kubeflow's."""

    apiVersion: Literal["sparkop.io/v1alpha1", "sparkoperator.k8s.io/v1beta2"] = "sparkop.io/v1alpha1"
    kind: Literal["SparkApplication"] = "SparkApplication"


class SparkDriver(KindObject[SparkDriverSpec, SparkDriverStatus]):
    """One run of a Spark application: a driver pod (replaced when lost) and its executors."""

    apiVersion: Literal["sparkop.io/v1alpha1"] = "sparkop.io/v1alpha1"
    kind: Literal["SparkDriver"] = "SparkDriver"


assert SparkApplication.model_fields["apiVersion"].default == API_VERSION
