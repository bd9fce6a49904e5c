"""``SparkHistoryServer`` (``sparkop.io/v1alpha1``): Spark's own history server
(``org.apache.spark.deploy.history.HistoryServer``, in every Spark image) over a log directory, with
its Service and, optionally, an Ingress or a Gateway API HTTPRoute.

Apps name one (``SparkApplication.spec.historyServer``, or a server that declares itself its
namespace's default): sparkop then sets Spark's event-log properties on each run, so a run's UI stays
readable there after its driver is gone, and its status links to the page
(``<url>/history/<spark.app.id>/``).

Also here, shared by the history controller, the apps controller and ``sparkop validate``: the kind's
cross-field rules (CEL with their Python twins) and the pure reading of a server's spec into what an
app's run needs (:func:`event_log`) and where its pages are (:func:`base_url`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Final, Literal

from pydantic import Field

from sparkop.core.jsonread import mapping
from sparkop.domain import naming

from . import rules
from .models import Condition, ImagePullPolicy, KindObject, LastError, Model
from .routes import RouteSpec, url
from .types import (
    DNS1123_SUBDOMAIN_PATTERN,
    MAX_LIST,
    MAX_VALUE,
    EnvFromSource,
    EnvVar,
    IngressTLS,
    Memory,
    PodTemplateSpec,
    ResourceList,
    Str,
    StrMap,
    Time,
)

KIND: Final = "SparkHistoryServer"
SERVER_CLASS: Final = "org.apache.spark.deploy.history.HistoryServer"
DEFAULT_PORT: Final = 18080
PORT_NAME: Final = "history"
PORT_CONF: Final = "spark.history.ui.port"
LOG_DIR_CONF: Final = "spark.history.fs.logDirectory"
# Where a claim holding the logs is mounted, in the history server and in the drivers that write there.
MOUNT_PATH: Final = "/mnt/spark-history"
VOLUME_NAME: Final = "spark-history"
DEFAULT_MEMORY: Final = "1g"
# The server's container in its pod template (else the first): sparkop fills in its image, command, port.
CONTAINER: Final = "spark-history-server"
TEMPLATE_SPEC: Final = "spec.template.spec"


class HistoryState(enum.StrEnum):
    PROVISIONING = "Provisioning"
    READY = "Ready"
    NOT_READY = "NotReady"
    FAILED = "Failed"


class LogClaim(Model):
    """A PersistentVolumeClaim holding the event logs (ReadWriteMany where drivers run on other nodes)."""

    claimName: Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN_PATTERN)] = Field(
        description="Name of the claim, in the history server's namespace (apps that log there run in it too)."
    )
    path: Annotated[str, Field(max_length=1024, pattern=r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")] | None = Field(
        None,
        description="Directory within the claim (relative, no '..'); the history server creates it. Default: "
        "the claim's root.",
    )


class LogDirectory(Model):
    """Where the event logs are: a claim, or a Hadoop file-system URL (s3a://, hdfs://, abfs://, gs://)."""

    persistentVolumeClaim: LogClaim | None = Field(None, description="A PersistentVolumeClaim (one of the two).")
    url: Annotated[str, Field(max_length=1024, pattern=r"^[a-z][a-z0-9+.-]*://\S+$")] | None = Field(
        None,
        description="A Hadoop file-system URL, e.g. s3a://bucket/spark-events (one of the two). The image needs "
        "the file system's jars (hadoop-aws for s3a) and the server and the drivers its credentials: see env, "
        "envFrom and hadoopConf, and docs/history-server.md.",
    )


class HistoryService(Model):
    """The Service in front of the history server."""

    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] | None = Field(
        None, description="Service type (default ClusterIP)."
    )
    port: int | None = Field(None, ge=1, le=65535, description=f"Service port (default {DEFAULT_PORT}).")
    annotations: StrMap | None = Field(None, description="Annotations of the Service.")
    labels: StrMap | None = Field(None, description="Labels added to the Service.")


class HistoryIngress(Model):
    """An Ingress to the history server's Service."""

    host: Annotated[str, Field(max_length=253)] | None = Field(None, description="Host name (default: any).")
    path: Annotated[str, Field(max_length=1024, pattern=r"^/[^?#\s]*$")] | None = Field(
        None, description="Path prefix (default /); under a prefix the server writes its links below it."
    )
    ingressClassName: Str | None = Field(None, description="IngressClass.")
    annotations: StrMap | None = Field(None, description="Annotations of the Ingress.")
    tls: list[IngressTLS] | None = Field(None, max_length=16, description="TLS settings (Kubernetes IngressTLS).")


class SparkHistoryServerSpec(Model):
    """Spark's history server over one log directory."""

    image: Str = Field(description="A Spark image (its HistoryServer runs), e.g. apache/spark:4.0.5.")
    sparkVersion: Str | None = Field(None, description="Spark version of the image (shown; not needed to run).")
    imagePullPolicy: ImagePullPolicy | None = Field(None, description="Always, Never or IfNotPresent.")
    imagePullSecrets: list[Annotated[str, Field(max_length=253)]] | None = Field(
        None, max_length=32, description="Secrets to pull the image with."
    )
    logDirectory: LogDirectory = Field(description="Where the apps write their event logs and the server reads them.")
    sparkConf: dict[str, Annotated[str, Field(max_length=MAX_VALUE)]] | None = Field(
        None,
        max_length=256,
        description="Spark properties of the server (spark.history.*: its cleaner, retained applications, "
        f"...). {LOG_DIR_CONF} and {PORT_CONF} are sparkop's.",
    )
    hadoopConf: dict[str, Annotated[str, Field(max_length=MAX_VALUE)]] | None = Field(
        None, max_length=256, description="Hadoop properties (spark.hadoop.<key>), e.g. an object store's endpoint."
    )
    memory: Memory | None = Field(None, description=f"JVM heap (SPARK_DAEMON_MEMORY, default {DEFAULT_MEMORY}).")
    resources: ResourceList | None = Field(
        None, description="Requests of the server container (memory defaults to the heap plus 384 MiB)."
    )
    env: list[EnvVar] | None = Field(
        None, max_length=MAX_LIST, description="Environment of the server container, e.g. an object store's keys."
    )
    envFrom: list[EnvFromSource] | None = Field(
        None, max_length=MAX_LIST, description="Secrets or ConfigMaps whose keys become the server's environment."
    )
    template: PodTemplateSpec | None = Field(
        None,
        description="A pod template the server pod starts from (nodeSelector, tolerations, securityContext, "
        f"sidecars); its container named {CONTAINER} (else the first) is the server's. The API server's pod "
        f"template needs containers, each named: at least [{{name: {CONTAINER}}}].",
    )
    service: HistoryService | None = Field(None, description="The Service (default ClusterIP, port 18080).")
    ingress: HistoryIngress | None = Field(None, description="An Ingress to the Service.")
    httpRoute: RouteSpec | None = Field(None, description="A Gateway API HTTPRoute to the Service.")
    namespaceDefault: bool | None = Field(
        None,
        description="true: every SparkApplication of this namespace that names no history server logs here (of "
        "several defaults, the first by name).",
    )


class SparkHistoryServerStatus(Model):
    """What the history server is doing."""

    state: HistoryState | None = Field(None, description="Provisioning, Ready, NotReady or Failed.")
    url: Annotated[str, Field(max_length=1024)] | None = Field(
        None, description="Where its pages are: the route's or Ingress's address, else the Service's in the cluster."
    )
    serviceName: Annotated[str, Field(max_length=253)] | None = Field(None, description="Its Service.")
    eventLogDirectory: Annotated[str, Field(max_length=1024)] | None = Field(
        None, description="What the apps that log here set spark.eventLog.dir to."
    )
    readyReplicas: int = Field(0, ge=0, description="Server pods that are Ready.")
    conditions: list[Condition] | None = Field(None, max_length=8, description="Ready.")
    observedGeneration: int | None = Field(None, ge=0, description="metadata.generation last acted on.")
    lastError: LastError | None = Field(None, description="Why it is not Ready, or an object the API server refused.")
    startTime: Time | None = Field(None, description="When its Deployment was first created.")


class SparkHistoryServer(KindObject[SparkHistoryServerSpec, SparkHistoryServerStatus]):
    """Spark's history server over a log directory, and the Service (Ingress, HTTPRoute) in front of it."""

    apiVersion: Literal["sparkop.io/v1alpha1"] = "sparkop.io/v1alpha1"
    kind: Literal["SparkHistoryServer"] = "SparkHistoryServer"


# ------------------------------------------------------------------------------------------------
# what a server's spec means for the apps that log there (pure: the apps controller reads it too)


@dataclass(frozen=True)
class EventLog:
    """Where a run writes its event log: ``directory`` (spark.eventLog.dir), and for a claim the volume
    the driver mounts and the directory inside it (``path``, "" for the claim's root)."""

    directory: str
    claim: str | None = None
    path: str = ""


def event_log(spec: Mapping[str, Any]) -> EventLog | None:
    """The event-log target of a server's spec (None when it names none: the CRD refuses that)."""
    directory = mapping(spec.get("logDirectory"))
    claim = mapping(directory.get("persistentVolumeClaim"))
    if claim.get("claimName"):
        sub = str(claim.get("path") or "").strip("/")
        return EventLog(f"file://{MOUNT_PATH}/{sub}" if sub else f"file://{MOUNT_PATH}", str(claim["claimName"]), sub)
    if directory.get("url"):
        return EventLog(str(directory["url"]))
    return None


def driver_mount(target: EventLog) -> dict[str, str]:
    """How a driver mounts the claim ``target`` is on: only the directory it logs to, as a ``subPath``,
    at the path spark.eventLog.dir names. The kubelet makes a missing subPath directory before the
    container starts, so a driver never finds its log directory missing (Spark exits at start when
    it is), whether or not the history server is up yet, or exists at all."""
    if not target.path:
        return {"name": VOLUME_NAME, "mountPath": MOUNT_PATH}
    return {"name": VOLUME_NAME, "mountPath": f"{MOUNT_PATH}/{target.path}", "subPath": target.path}


def service_name(name: str) -> str:
    return naming.history_service_name(name)


def service_port(spec: Mapping[str, Any]) -> int:
    port = mapping(spec.get("service")).get("port")
    return port if isinstance(port, int) and 1 <= port <= 65535 else DEFAULT_PORT


def ui_port(spec: Mapping[str, Any]) -> int:
    """The port the server listens on (spark.history.ui.port, else 18080)."""
    value = str(mapping(spec.get("sparkConf")).get(PORT_CONF) or "").strip()
    return int(value) if value.isdigit() and 1 <= int(value) <= 65535 else DEFAULT_PORT


def proxy_base(spec: Mapping[str, Any]) -> str:
    """The path prefix the server's pages live under (an HTTPRoute's or Ingress's), "" for none."""
    route, ingress = mapping(spec.get("httpRoute")), mapping(spec.get("ingress"))
    path = route.get("path") if route else ingress.get("path")
    return str(path or "").rstrip("/")


def base_url(namespace: str, name: str, spec: Mapping[str, Any]) -> str:
    """Where a user opens the server: its HTTPRoute's or Ingress's address when they name a host, else
    its Service's, in the cluster (``sparkop ui`` forwards to it from outside)."""
    route = mapping(spec.get("httpRoute"))
    if route and (found := url(route)):
        return found
    ingress = mapping(spec.get("ingress"))
    if ingress.get("host"):
        scheme = "https" if ingress.get("tls") else "http"
        return f"{scheme}://{ingress['host']}{str(ingress.get('path') or '').rstrip('/')}"
    return f"http://{service_name(name)}.{namespace}.svc:{service_port(spec)}"


def app_url(base: str, spark_application_id: str) -> str:
    """The history page of one run (one driver-pod incarnation: one spark.app.id)."""
    return f"{base.rstrip('/')}/history/{spark_application_id}/"


# ------------------------------------------------------------------------------------------------
# rules


def _template_restart_policy(spec: Mapping[str, Any]) -> str:
    return str(mapping(mapping(spec.get("template")).get("spec")).get("restartPolicy") or "Always")


SPEC: Final = ("spec",)
# The SparkHistoryServer's rules: all on its spec.
_own_rule: Final = partial(rules.Rule, kinds=(KIND,), paths=(SPEC,))
_OWN_RULES: Final = (
    _own_rule(
        name="history-one-log-directory",
        cel="has(self.logDirectory.persistentVolumeClaim) != has(self.logDirectory.url)",
        message="logDirectory needs exactly one of persistentVolumeClaim and url",
        field_path=".logDirectory",
        hint="set spec.logDirectory.persistentVolumeClaim.claimName, or spec.logDirectory.url (e.g. s3a://bucket/logs)",
        predicate=lambda s: (
            ("persistentVolumeClaim" in (s.get("logDirectory") or {})) != ("url" in (s.get("logDirectory") or {}))
        ),
    ),
    _own_rule(
        name="history-one-way-in",
        cel="!(has(self.ingress) && has(self.httpRoute))",
        message="ingress and httpRoute are two ways in: set one",
        field_path=".httpRoute",
        hint="remove spec.ingress or spec.httpRoute",
        predicate=lambda s: not ("ingress" in s and "httpRoute" in s),
    ),
    _own_rule(
        name="history-claim-path-stays-inside",
        cel="!has(self.logDirectory.persistentVolumeClaim) || !has(self.logDirectory.persistentVolumeClaim.path) || "
        "!self.logDirectory.persistentVolumeClaim.path.split('/').exists(p, p == '..' || p == '.')",
        message="logDirectory.persistentVolumeClaim.path must stay inside the claim (no '.' or '..')",
        field_path=".logDirectory.persistentVolumeClaim.path",
        hint="use a relative directory such as spark-events",
        predicate=lambda s: (
            not any(
                part in (".", "..")
                for part in str(
                    ((s.get("logDirectory") or {}).get("persistentVolumeClaim") or {}).get("path") or ""
                ).split("/")
            )
        ),
    ),
    _own_rule(
        name="history-reserved-conf",
        cel=f"!has(self.sparkConf) || !('{LOG_DIR_CONF}' in self.sparkConf)",
        message=f"sparkConf {LOG_DIR_CONF} is set by sparkop from logDirectory",
        field_path=".sparkConf",
        hint=f"remove {LOG_DIR_CONF}; set spec.logDirectory instead",
        predicate=lambda s: LOG_DIR_CONF not in (s.get("sparkConf") or {}),
    ),
    # What the API server refuses of the server's Deployment, refused at the server itself (it would
    # otherwise be accepted, then Failed with the Deployment's refusal).
    _own_rule(
        name="history-template-restarts-always",
        cel="!has(self.template) || !has(self.template.spec) || !has(self.template.spec.restartPolicy) || "
        "self.template.spec.restartPolicy == 'Always'",
        message="the server's pod runs in a Deployment, whose pods restart Always",
        field_path=".template.spec.restartPolicy",
        hint="remove spec.template.spec.restartPolicy",
        predicate=lambda s: _template_restart_policy(s) == "Always",
    ),
)


def history_rules() -> tuple[rules.Rule, ...]:
    return _OWN_RULES


def required_hint(path: str, missing: str) -> str | None:
    """The fix for a field the pod template's schema (Kubernetes' PodTemplateSpec, as the API server
    checks it) requires at ``path``, or None where the generic one says enough. A template written
    for its node selector or tolerations alone lacks the containers the schema requires."""
    if path == TEMPLATE_SPEC and missing == "containers":
        return (
            f"add containers: [{{name: {CONTAINER}}}] to {TEMPLATE_SPEC} (the server's container: sparkop fills in "
            "its image, command and port)"
        )
    if re.fullmatch(rf"{re.escape(TEMPLATE_SPEC)}\.(init)?[cC]ontainers\[\d+\]", path) and missing == "name":
        return f"name the container: {CONTAINER} for the server's own, any other name for one beside it"
    return None


__all__ = [
    "CONTAINER",
    "DEFAULT_PORT",
    "KIND",
    "SERVER_CLASS",
    "EventLog",
    "HistoryState",
    "SparkHistoryServer",
    "SparkHistoryServerSpec",
    "SparkHistoryServerStatus",
    "app_url",
    "base_url",
    "driver_mount",
    "event_log",
    "history_rules",
    "required_hint",
]
