"""``SparkConnect`` (``sparkop.io/v1alpha1``): a long-running Spark Connect server with executors,
reached at a stable Service. The spec keeps the field names of kubeflow spark-operator's
``sparkoperator.k8s.io/v1alpha1`` SparkConnect (``sparkVersion``, ``image``, ``sparkConf``,
``hadoopConf``, ``server`` with its ``template`` and ``service``, ``executor``,
``dynamicAllocation``), so kubeflow's manifests move over by their apiVersion; the rest of its
fields are those of a SparkApplication with the same meaning.

The connect controller (``connect_controller``) runs each server as a SparkDriver (Spark's
``SparkConnectServer`` main class, submitted as spark-submit would submit ``--class ... spark-internal``)
and keeps the Service selecting the server that serves.

Also here: the kind's cross-field rules (CEL with their Python twins) and the reading of what the
server's SparkDriver is built from, shared by the controller and ``sparkop validate``.
"""

from __future__ import annotations

import dataclasses
import enum
from functools import partial
from typing import Annotated, Any, Final, Literal

from pydantic import Field, WithJsonSchema

from . import rules, spark_lines
from .models import (
    Condition,
    Deps,
    DynamicAllocation,
    ExecutorCounts,
    ExecutorFailurePolicy,
    ExecutorSpec,
    ImagePullPolicy,
    KindObject,
    LastError,
    Model,
    RouteSpec,
    SparkPodSpec,
    Timeouts,
)
from .types import (
    DNS1123_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_PATTERN,
    K8S_MARKER,
    MAX_LIST,
    MAX_VALUE,
    Str,
    StrMap,
    Time,
    Volume,
)

KIND: Final = "SparkConnect"
SERVER_CLASS: Final = "org.apache.spark.sql.connect.service.SparkConnectServer"
PORT_CONF: Final = "spark.connect.grpc.binding.port"
DEFAULT_PORT: Final = 15002
PORT_NAME: Final = "spark-connect"
UI_PORT: Final = 4040
FIRST_LINE: Final = spark_lines.SparkLine(4, 0)  # 3.5's distribution has no Connect server
DEFAULT_RETRIES: Final = 5
DEFAULT_RETRY_INTERVAL: Final = 10
MAX_RETRY_INTERVAL: Final = 300

# Marks a pod template whose pod-level securityContext also takes the container-level fields
# kubeflow's own sample sets there (see CONTAINER_SECURITY_AT_POD_LEVEL).
POD_LEVEL_CONTAINER_SECURITY: Final = "x-sparkop-pod-level-container-security"
CONTAINER_SECURITY_AT_POD_LEVEL: Final = ("capabilities", "allowPrivilegeEscalation")
"""Container-only securityContext fields kubeflow's SparkConnect sample writes into the pod's
securityContext (kubeflow's template is schemaless, and Kubernetes then drops them without a word).
sparkop accepts them there and applies them to the Spark container, where they mean something,
unless that container sets them itself; ``sparkop validate`` says so as a warning."""

ConnectPodTemplateSpec = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {"type": "object", K8S_MARKER: "io.k8s.api.core.v1.PodTemplateSpec", POD_LEVEL_CONTAINER_SECURITY: True}
    ),
]


class ConnectState(enum.StrEnum):
    PROVISIONING = "Provisioning"
    READY = "Ready"
    NOT_READY = "NotReady"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


class ServerOutcome(enum.StrEnum):
    RUNNING = "Running"
    EXITED = "Exited"  # the server process ended (any exit code): a failure, restarted by policy
    REPLACED = "Replaced"  # stopped by sparkop: a newer server took over after a spec change
    SUSPENDED = "Suspended"  # stopped by sparkop: spec.suspend
    DELETED = "Deleted"  # its SparkDriver was deleted by someone else


class ConnectServiceMeta(Model):
    """What of the Service's metadata a user sets."""

    name: Annotated[str, Field(max_length=63, pattern=DNS1123_LABEL_PATTERN)] | None = Field(
        None, description="Name of the Service (default <name>-server)."
    )
    labels: StrMap | None = Field(None, description="Labels added to the Service.")
    annotations: StrMap | None = Field(None, description="Annotations added to the Service.")


class ConnectServiceSpecFields(Model):
    """What of the Service's spec a user sets; its ports and selector are sparkop's."""

    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] | None = Field(
        None, description="Service type (default ClusterIP)."
    )
    loadBalancerClass: Str | None = Field(None, description="LoadBalancer implementation to use.")
    loadBalancerSourceRanges: list[Str] | None = Field(
        None, max_length=MAX_LIST, description="Client CIDRs a LoadBalancer lets in."
    )
    externalTrafficPolicy: Literal["Cluster", "Local"] | None = Field(
        None, description="Cluster or Local (NodePort and LoadBalancer)."
    )
    sessionAffinity: Literal["None", "ClientIP"] | None = Field(None, description="None or ClientIP.")


class ConnectService(Model):
    """The stable Service clients connect to (kubeflow: a Service object; here its user-set parts)."""

    metadata: ConnectServiceMeta | None = Field(None, description="Name, labels and annotations.")
    spec: ConnectServiceSpecFields | None = Field(None, description="Type and load-balancer settings.")


class ServerSpec(SparkPodSpec):
    """The Connect server: the driver of a Spark application that does not end."""

    template: ConnectPodTemplateSpec | None = Field(
        None,
        description="A pod template (Kubernetes PodTemplateSpec) the server pod starts from; its Spark "
        "container is the one named spark-kubernetes-driver (else the first). Its image is the server's "
        "when spec.image and server.image are unset. The fields above take precedence.",
    )
    service: ConnectService | None = Field(
        None, description="The stable Service in front of every server incarnation (default <name>-server)."
    )


class ConnectExecutorSpec(ExecutorSpec):
    """The executors of the Connect server."""

    template: ConnectPodTemplateSpec | None = Field(
        None,
        description="A pod template (Kubernetes PodTemplateSpec) executor pods start from; its container "
        "image is the executors' when spec.image and executor.image are unset.",
    )


class ConnectRestartPolicy(Model):
    """How a server that ended on its own is restarted: every end is a failure (a server never
    completes); a server that had been Ready for 10 minutes when it ended starts the count of failures
    in a row afresh."""

    onFailureRetries: int = Field(
        DEFAULT_RETRIES,
        ge=0,
        description="Restarts after failures in a row (servers that ended less than 10 minutes after becoming "
        "Ready, or before) before the SparkConnect is Failed.",
    )
    onFailureRetryInterval: int = Field(
        DEFAULT_RETRY_INTERVAL,
        ge=1,
        description=f"Seconds before the first restart; doubled for each further failure in a row, at most "
        f"{MAX_RETRY_INTERVAL}.",
    )


class SparkConnectSpec(Model):
    """A Spark Connect server (kubeflow spark-operator v1alpha1 SparkConnect fields, plus a few)."""

    sparkVersion: Str = Field(
        description="Spark version of the image, 4.0 or later (3.5's distribution has no Connect server); its "
        "line decides how the server pod is rendered.",
    )
    image: Str | None = Field(None, description="Container image of the server and the executors.")
    imagePullPolicy: ImagePullPolicy | None = Field(None, description="Always, Never or IfNotPresent.")
    imagePullSecrets: list[Annotated[str, Field(max_length=253)]] | None = Field(
        None, max_length=MAX_LIST, description="Secrets to pull the image with."
    )
    sparkConf: dict[str, Annotated[str, Field(max_length=MAX_VALUE)]] | None = Field(
        None,
        description=f"Spark properties of the server (--conf). {PORT_CONF} sets the gRPC port (default "
        f"{DEFAULT_PORT}).",
    )
    hadoopConf: dict[str, Annotated[str, Field(max_length=MAX_VALUE)]] | None = Field(
        None, description="Hadoop properties (spark.hadoop.<key>)."
    )
    sparkConfigMap: Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN_PATTERN)] | None = Field(
        None, description="ConfigMap of Spark configuration files, mounted as SPARK_CONF_DIR."
    )
    hadoopConfigMap: Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN_PATTERN)] | None = Field(
        None, description="ConfigMap of Hadoop configuration files, mounted as HADOOP_CONF_DIR."
    )
    volumes: list[Volume] | None = Field(
        None, max_length=MAX_LIST, description="Volumes the server and executors may mount."
    )
    deps: Deps | None = Field(None, description="Extra jars, files and Maven packages on the server's classpath.")
    server: ServerSpec = Field(default_factory=ServerSpec, description="The Connect server.")
    executor: ConnectExecutorSpec = Field(
        default_factory=ConnectExecutorSpec,
        description="The executors.",
    )
    dynamicAllocation: DynamicAllocation | None = Field(None, description="Dynamic allocation of executors.")
    nodeLossTolerationSeconds: int | None = Field(
        None,
        ge=0,
        le=86400,
        description="How long the server and executor pods stay bound to a node that stopped reporting before "
        "Kubernetes evicts them and a lost server is replaced (the unreachable and not-ready taints' "
        "tolerationSeconds). Unset: the operator's --node-loss-toleration-seconds, else Kubernetes' 300 s.",
    )
    suspend: bool | None = Field(None, description="true: stop the server (the Service stays); false or unset: run it.")
    timeouts: Timeouts | None = Field(
        None,
        description="How long each server's start may take (driverReadySeconds: its gRPC port answering); an "
        "expiry ends that server (DriverStartTimedOut, DriverReadyTimedOut, ...), which is restarted per "
        "restartPolicy. Unset: the operator's defaults. No run deadline applies to a server.",
    )
    executorFailures: ExecutorFailurePolicy | None = Field(
        None, description="A bound on the server's executors failing in a loop (ends that server)."
    )
    grpcRoute: RouteSpec | None = Field(
        None,
        description="A Gateway API GRPCRoute <name>-server-route to the stable Service, through the Gateway it "
        "names (its listener must take GRPCRoutes over HTTP/2: h2c or TLS). Changing it does not restart the server.",
    )
    restartPolicy: ConnectRestartPolicy | None = Field(
        None,
        description=f"Restarts of a server that ended on its own (default {DEFAULT_RETRIES} failures in a row, "
        f"{DEFAULT_RETRY_INTERVAL} s doubling).",
    )


class ConnectServerStatus(Model):
    """The server that serves (kubeflow's fields, plus its SparkDriver and incarnation)."""

    podName: Annotated[str, Field(max_length=253)] | None = Field(None, description="Its pod.")
    podIp: Annotated[str, Field(max_length=64)] | None = Field(None, description="Its pod IP.")
    serviceName: Annotated[str, Field(max_length=253)] | None = Field(None, description="The stable Service.")
    driver: Annotated[str, Field(max_length=253)] | None = Field(
        None, description="The SparkDriver running it (<name>-server-<run>)."
    )
    incarnation: int | None = Field(None, ge=0, description="Its driver-pod incarnation within that SparkDriver.")


class ServerRun(Model):
    """One server run (one SparkDriver)."""

    run: int = Field(ge=1, description="Run number (never reused).")
    driver: Annotated[str, Field(max_length=253)] = Field(description="SparkDriver name.")
    uid: Annotated[str, Field(max_length=64)] | None = Field(
        None, description="uid of that SparkDriver, once seen (unset: created, not observed yet)."
    )
    outcome: ServerOutcome = Field(description="Running, Exited, Replaced, Suspended or Deleted.")
    reason: Annotated[str, Field(max_length=1024)] | None = Field(None, description="Why, CamelCase.")
    message: Annotated[str, Field(max_length=4096)] | None = Field(None, description="Details.")
    startTime: Time | None = Field(None, description="When its SparkDriver was created.")
    readyTime: Time | None = Field(None, description="When it first became Ready.")
    finishTime: Time | None = Field(None, description="When it ended.")


class SparkConnectStatus(Model):
    """What the Connect server is doing (kubeflow's fields, plus the runs and restarts)."""

    state: ConnectState | None = Field(None, description="Provisioning, Ready, NotReady, Failed or Suspended.")
    conditions: list[Condition] | None = Field(
        None, max_length=8, description="ServerPodReady: the serving server passes its gRPC readiness probe."
    )
    server: ConnectServerStatus | None = Field(None, description="The server that serves.")
    endpoint: Annotated[str, Field(max_length=512)] | None = Field(
        None, description="What clients connect to: sc://<service>.<namespace>.svc:<port>."
    )
    executors: ExecutorCounts = Field(
        default_factory=ExecutorCounts,
        description="Executor pods of the serving server, by state.",
    )
    observedGeneration: int | None = Field(None, ge=0, description="metadata.generation last acted on.")
    startTime: Time | None = Field(None, description="When the first server was started.")
    lastRun: int = Field(0, ge=0, description="Highest run number used so far; run numbers are never reused.")
    restarts: int = Field(
        0, ge=0, description="Servers that ended on their own or were deleted (each one restarted unless Failed)."
    )
    failuresInARow: int = Field(
        0,
        ge=0,
        description="Servers that ended in a row, none having served 10 minutes (bounded by onFailureRetries).",
    )
    nextRestartTime: Time | None = Field(None, description="When the next server starts, if waiting.")
    runs: list[ServerRun] | None = Field(None, max_length=16, description="The latest server runs, oldest first.")
    lastError: LastError | None = Field(None, description="Why the last server ended, or why none can start.")


class SparkConnect(KindObject[SparkConnectSpec, SparkConnectStatus]):
    """A Spark Connect server and the stable Service in front of it (in sparkop's group, or in kubeflow's)."""

    apiVersion: Literal["sparkop.io/v1alpha1", "sparkoperator.k8s.io/v1alpha1"] = "sparkop.io/v1alpha1"
    kind: Literal["SparkConnect"] = "SparkConnect"


# ------------------------------------------------------------------------------------------------
# rules

SPEC: Final = ("spec",)


def _template_image(spec: Any, role: str) -> bool:
    template = (spec.get(role) or {}).get("template") if isinstance(spec, dict) else None
    containers = ((template or {}).get("spec") or {}).get("containers") or []
    return any(isinstance(c, dict) and c.get("image") for c in containers)


def _image_for(spec: dict[str, Any], role: str) -> bool:
    return bool((spec.get(role) or {}).get("image")) or _template_image(spec, role)


def port_of(spark_conf: Any) -> int | None:
    """The server's gRPC port: sparkConf's, else the default; None when sparkConf's is not a port."""
    value = (spark_conf or {}).get(PORT_CONF) if isinstance(spark_conf, dict) else None
    if value is None:
        return DEFAULT_PORT
    text = str(value).strip()
    return int(text) if text.isdigit() and 1 <= int(text) <= 65535 else None


def _role_image_cel(role: str) -> str:
    return (
        f"(has(self.{role}) && ((has(self.{role}.image) && self.{role}.image != '') || "
        f"(has(self.{role}.template) && has(self.{role}.template.spec) && "
        f"self.{role}.template.spec.containers.exists(c, has(c.image) && c.image != ''))))"
    )


_SPARK_4_CEL: Final = "!self.sparkVersion.matches('^[0-3][.]')"


def _spark_4(spec: dict[str, Any]) -> bool:
    version = spec.get("sparkVersion")
    line = spark_lines.line_of(version) if isinstance(version, str) else None
    return line is None or line >= FIRST_LINE  # an unreadable version: spark-version-is-a-version says it


# The SparkConnect's own rules (those it shares with the SparkApplication follow): all on its spec.
_own_rule: Final = partial(rules.Rule, kinds=(KIND,), paths=(SPEC,))
_OWN_RULES: Final = (
    _own_rule(
        name="connect-needs-spark-4",
        cel=_SPARK_4_CEL,
        message="SparkConnect needs Spark 4.0 or later: Spark 3.5's distribution has no Connect server",
        field_path=".sparkVersion",
        hint="use a Spark 4 image and set spec.sparkVersion to its version, e.g. 4.0.5",
        predicate=_spark_4,
    ),
    _own_rule(
        name="connect-image-required",
        cel=f"has(self.image) || ({_role_image_cel('server')} && {_role_image_cel('executor')})",
        message="an image is required: set spec.image, or the server's and the executors' (image or their "
        "template's container image)",
        field_path=".image",
        reason="FieldValueRequired",
        hint="set spec.image, e.g. apache/spark:4.0.1",
        predicate=lambda s: "image" in s or (_image_for(s, "server") and _image_for(s, "executor")),
    ),
    _own_rule(
        name="connect-port-is-a-port",
        cel=f"!has(self.sparkConf) || !('{PORT_CONF}' in self.sparkConf) || "
        f"(self.sparkConf['{PORT_CONF}'].matches('^[0-9]{{1,5}}$') && int(self.sparkConf['{PORT_CONF}']) >= 1 && "
        f"int(self.sparkConf['{PORT_CONF}']) <= 65535)",
        message=f"sparkConf {PORT_CONF} must be a port number, 1-65535",
        field_path=".sparkConf",
        hint=f"set spec.sparkConf['{PORT_CONF}'] to a port such as {DEFAULT_PORT}, or remove it",
        predicate=lambda s: port_of(s.get("sparkConf")) is not None,
    ),
)

# kubeflow's webhook refuses the same sparkConf keys of a SparkConnect as of a SparkApplication.
KUBEFLOW_DENIED_PREFIX: Final = "kubeflow-denied-spark-conf-"
# The SparkApplication rules that read only fields a SparkConnect has, at the same paths.
_SHARED_RULES: Final = (
    "reserved-spark-conf",
    "spark-version-is-a-version",
    "min-le-max-executors",
    "initial-within-bounds",
)


def connect_rules() -> tuple[rules.Rule, ...]:
    shared = tuple(
        dataclasses.replace(r, kinds=(KIND,))
        for r in rules.RULES
        if r.name in _SHARED_RULES or r.name.startswith(KUBEFLOW_DENIED_PREFIX)
    )
    return (*shared, *_OWN_RULES)


def spec_warnings(spec: dict[str, Any]) -> list[str]:
    """What ``sparkop validate`` says of a SparkConnect spec besides its errors."""
    out = list(spark_lines.spec_warnings(spec))
    for role in ("server", "executor"):
        template = (spec.get(role) or {}).get("template") or {}
        pod_security = ((template.get("spec") or {}).get("securityContext")) or {}
        moved = [f for f in CONTAINER_SECURITY_AT_POD_LEVEL if f in pod_security]
        if moved:
            out.append(
                f"spec.{role}.template.spec.securityContext: {', '.join(moved)} are container fields; sparkop applies "
                f"them to the Spark container's securityContext (Kubernetes would ignore them on the pod)"
            )
    return out


__all__ = [
    "DEFAULT_PORT",
    "KIND",
    "SERVER_CLASS",
    "ConnectState",
    "ServerOutcome",
    "SparkConnect",
    "SparkConnectSpec",
    "SparkConnectStatus",
    "connect_rules",
    "port_of",
    "spec_warnings",
]
