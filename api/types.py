"""Shared field types: embedded Kubernetes objects, quantities, times.

Embedded Kubernetes objects are plain ``dict[str, Any]`` in Python. Their JSON schema is a marker
(``x-sparkop-k8s: <definition name>``) that the CRD generator (:mod:`api.crds`) replaces with the
definition from Kubernetes' own OpenAPI, as extracted into ``api/k8s_schemas.json``
(:mod:`api.k8s_openapi`). The API server, and ``sparkop validate`` offline, then enforce them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Final

from pydantic import BeforeValidator, Field, PlainSerializer, WithJsonSchema

from sparkop.core.times import format_time, parse_time

K8S_MARKER: Final = "x-sparkop-k8s"

# Spark's own memory syntax, as spark.driver.memory / spark.executor.memory / *.memoryOverhead
# accept it (JavaUtils.byteStringAs): an integer with an optional, case-insensitive unit
# b, k, kb, m, mb, g, gb, t, tb, p, pb. No unit means MiB. Kubernetes-style "512Mi" and fractions
# ("1.5g") are NOT accepted by Spark, so they are rejected here.
MEMORY_PATTERN: Final = r"^[0-9]+([kKmMgGtTpP][bB]?|[bB])?$"
# A Kubernetes CPU quantity as spark.kubernetes.{driver,executor}.{request,limit}.cores accept it:
# "1", "0.5", "500m".
CPU_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)m?$"
# A non-negative decimal number, e.g. "0.1".
DECIMAL_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)$"
# DNS-1123 label / subdomain (Kubernetes object names).
DNS1123_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

# Bounds that keep CEL rule cost estimates within the API server's budget and objects small.
MAX_MAP: Final = 256  # sparkConf, hadoopConf, labels, annotations, ...
MAX_LIST: Final = 256  # arguments, deps lists, volumes, env, ...
MAX_STR: Final = 4096  # ordinary strings (paths, images, names)
MAX_VALUE: Final = 65536  # free text: sparkConf values, metrics properties, javaOptions


def k8s(definition: str) -> WithJsonSchema:
    """JSON-schema marker for an embedded Kubernetes object of OpenAPI ``definition``
    (e.g. ``io.k8s.api.core.v1.Volume``)."""
    return WithJsonSchema({"type": "object", K8S_MARKER: definition})


Volume = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.Volume")]
VolumeMount = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.VolumeMount")]
Toleration = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.Toleration")]
Affinity = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.Affinity")]
EnvVar = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.EnvVar")]
EnvFromSource = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.EnvFromSource")]
Container = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.Container")]
PodTemplateSpec = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.PodTemplateSpec")]
PodSecurityContext = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.PodSecurityContext")]
SecurityContext = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.SecurityContext")]
Lifecycle = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.Lifecycle")]
HostAlias = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.HostAlias")]
PodDNSConfig = Annotated[dict[str, Any], k8s("io.k8s.api.core.v1.PodDNSConfig")]
IngressTLS = Annotated[dict[str, Any], k8s("io.k8s.api.networking.v1.IngressTLS")]
ResourceList = Annotated[dict[str, Any], k8s("ResourceList")]
ObjectMeta = dict[str, Any]

Str = Annotated[str, Field(max_length=MAX_STR)]
Text = Annotated[str, Field(max_length=MAX_VALUE)]
StrMap = Annotated[dict[str, Text], Field(max_length=MAX_MAP)]
Memory = Annotated[str, Field(pattern=MEMORY_PATTERN, max_length=32)]
Cpu = Annotated[str, Field(pattern=CPU_PATTERN, max_length=32)]


def _parse_time(value: Any) -> Any:
    return parse_time(value) or value  # unreadable: let pydantic say why


def _format_time(value: datetime) -> str:
    return format_time(value) or ""


Time = Annotated[
    datetime,
    BeforeValidator(_parse_time),
    PlainSerializer(_format_time, return_type=str, when_used="always"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""An RFC3339 timestamp in UTC, written by core.times (the one timestamp format of the project)."""


def now() -> datetime:
    """The current time, truncated to seconds (what survives a round trip through status)."""
    return datetime.now(UTC).replace(microsecond=0)
