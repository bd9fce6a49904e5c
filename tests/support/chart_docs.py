"""charts/sparkop's values.yaml as the source of its README's values table and of values.schema.json.

A value is documented by the comment above it that starts with ``# --`` (helm-docs' convention; the
comment lines after it continue it). The README's table between its markers is generated from those
comments and the defaults; the schema from the defaults' types, the descriptions, and the rules
below that a default cannot say (choices, ranges, the free-form Kubernetes objects). Both are kept
current by tests/unit/test_chart_docs.py (SPARKOP_UPDATE_SNAPSHOTS=1 rewrites them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sparkop.operator import DEFAULT_CONTROLLERS

CHART = Path(__file__).resolve().parents[2] / "charts" / "sparkop"
VALUES = CHART / "values.yaml"
SCHEMA = CHART / "values.schema.json"
README = CHART / "README.md"
TABLE_BEGIN = "<!-- values:begin (generated from values.yaml by tests/unit/test_chart_docs.py) -->"
TABLE_END = "<!-- values:end -->"

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_]+):")


@dataclass(frozen=True)
class Documented:
    path: str  # dotted, e.g. controller.leaderElection.enable
    description: str
    default: Any


def descriptions(text: str) -> dict[str, str]:
    """Each documented key's dotted path and its ``# --`` comment, joined into one line."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = [stripped.removeprefix("# --").strip()]
            continue
        if stripped.startswith("#"):
            if pending is not None:
                pending.append(stripped.lstrip("#").strip())
            continue
        match = _KEY.match(line)
        if match is None:
            continue  # a list item or a continuation of a value
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        if pending is not None:
            found[".".join(key for _, key in stack)] = " ".join(pending)
            pending = None
    return found


def leaves(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every value that is not an object of named values: the table's rows."""
    found: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in FREE_OBJECTS:
            found.update(leaves(value, f"{path}."))
        else:
            found[path] = value
    return found


def documented(text: str) -> list[Documented]:
    values = yaml.safe_load(text)
    said = descriptions(text)
    return [Documented(path, said.get(path, ""), default) for path, default in leaves(values).items()]


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list", dict: "object"}[type(value)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def values_table(text: str) -> str:
    rows = ["| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    for value in documented(text):
        default = json.dumps(value.default, separators=(",", ":"))
        rows.append(f"| {value.path} | {_type(value.default)} | `{_cell(default)}` | {_cell(value.description)} |")
    return "\n".join(rows)


def readme_with_table(readme: str, text: str) -> str:
    before, _, rest = readme.partition(TABLE_BEGIN)
    _, _, after = rest.partition(TABLE_END)
    return f"{before}{TABLE_BEGIN}\n{values_table(text)}\n{TABLE_END}{after}"


# ---------------------------------------------------------------------------------------- schema

# Objects whose keys are Kubernetes' or the user's, not the chart's: any keys.
FREE_OBJECTS = frozenset(
    {
        "controller.affinity",
        "controller.podSecurityContext",
        "controller.securityContext",
        "controller.resources",
        "controller.livenessProbe",
        "controller.readinessProbe",
    }
)
# Objects of string values: labels, annotations, a node selector.
STRING_MAPS = frozenset(
    {
        "commonLabels",
        "commonAnnotations",
        "controller.labels",
        "controller.annotations",
        "controller.nodeSelector",
        "controller.serviceAccount.annotations",
        "controller.rbac.annotations",
        "controller.uiIngress.annotations",
        "spark.serviceAccount.annotations",
        "spark.rbac.annotations",
        "prometheus.podMonitor.labels",
        "prometheus.service.annotations",
        "prometheus.serviceMonitor.labels",
    }
)
# kubeflow's blocks for what sparkop does not have (its webhook, the webhook's certificates, the
# CRD-upgrade hook): a kubeflow values file's settings there are accepted whatever they are, unused.
KUBEFLOW_ONLY = frozenset({"webhook", "certManager", "hook"})
# `sparkop run`'s durations: seconds, or seconds or minutes with their unit (15, 15s, 1m).
DURATION = {
    "oneOf": [
        {"type": "number", "exclusiveMinimum": 0},
        {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?[sm]?$"},
    ]
}
KUBE_OBJECTS = {"type": "array", "items": {"type": "object"}}
RULES: dict[str, dict[str, Any]] = {
    "image.pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
    "image.pullSecrets": KUBE_OBJECTS,
    "controller.replicas": {"type": "integer", "minimum": 1},
    "controller.controllers": {
        "type": "array",
        "minItems": 1,
        "uniqueItems": True,
        "items": {"enum": list(DEFAULT_CONTROLLERS)},
    },
    "controller.workers": {"type": "integer", "minimum": 1},
    "controller.logLevel": {"enum": ["debug", "info", "warning", "error"]},
    "controller.logEncoder": {"enum": ["console", "json"]},
    "controller.revisionHistoryLimit": {"type": "integer", "minimum": 0},
    "controller.kubeApi.qps": {"type": "number", "minimum": 0},
    "controller.kubeApi.burst": {"type": "integer", "minimum": 1},
    "controller.unschedulableTimeout": {"type": "number", "exclusiveMinimum": 0},
    "controller.nodeLossTolerationSeconds": {"type": ["integer", "null"], "minimum": 0},
    "controller.driverLogTailLines": {"type": "integer", "minimum": 0},
    **{
        f"controller.timeouts.{name}": {"type": ["integer", "null"], "minimum": 0}
        for name in (
            "driverStartSeconds",
            "driverReadySeconds",
            "executorsStartSeconds",
            "activeDeadlineSeconds",
            "maxExecutorFailures",
        )
    },
    "controller.timeouts.executorFailuresWindowSeconds": {"type": "integer", "minimum": 1},
    "controller.podSecurity": {"enum": ["", "restricted"]},
    "controller.leaderElection.leaseDuration": DURATION,
    "controller.leaderElection.renewDeadline": DURATION,
    "controller.leaderElection.retryPeriod": DURATION,
    "controller.uiIngress.tls": KUBE_OBJECTS,
    "controller.batchScheduler.kubeSchedulerNames": {"type": "array", "items": {"type": "string"}},
    "controller.volumes": KUBE_OBJECTS,
    "controller.volumeMounts": KUBE_OBJECTS,
    "controller.env": KUBE_OBJECTS,
    "controller.envFrom": KUBE_OBJECTS,
    "controller.sidecars": KUBE_OBJECTS,
    "controller.tolerations": KUBE_OBJECTS,
    "controller.topologySpreadConstraints": KUBE_OBJECTS,
    "controller.podAntiAffinity": {"enum": ["", "soft", "hard"]},
    "controller.hostUsers": {"type": ["boolean", "null"]},
    "controller.podDisruptionBudget.minAvailable": {"type": ["integer", "string"]},
    "controller.extraArgs": {"type": "array", "items": {"type": "string"}},
    "controller.featureGates": {
        "type": "array",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "enabled"],
            "properties": {"name": {"type": "string"}, "enabled": {"type": "boolean"}},
        },
    },
    "controller.driverPodCreationGracePeriod": {"type": "string"},
    "controller.maxTrackedExecutorPerApp": {"type": "integer"},
    "controller.pprof.port": {"type": "integer"},
    "controller.workqueueRateLimiter.bucketQPS": {"type": "number"},
    "controller.workqueueRateLimiter.bucketSize": {"type": "integer"},
    "spark.jobNamespaces": {"type": "array", "items": {"type": "string"}},
    "prometheus.metrics.port": {"type": "integer", "minimum": 1, "maximum": 65535},
    "prometheus.metrics.endpoint": {"type": "string", "pattern": "^/"},
    "prometheus.podMonitor.podMetricsEndpoint.scheme": {"enum": ["http", "https"]},
    "prometheus.service.type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
    "prometheus.service.port": {"type": "integer", "minimum": 1, "maximum": 65535},
}
_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def _schema_of(path: str, value: Any, said: dict[str, str]) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    if path in said:
        schema["description"] = said[path]
    if path in RULES:
        schema.update(RULES[path])
    elif path in FREE_OBJECTS:
        schema["type"] = "object"
    elif path in STRING_MAPS:
        schema.update({"type": "object", "additionalProperties": {"type": "string"}})
    elif path in KUBEFLOW_ONLY:
        schema.update({"type": "object", "additionalProperties": True, "properties": {}})
        for key, inner in value.items():
            schema["properties"][key] = _schema_of(f"{path}.{key}", inner, said)
    elif isinstance(value, dict):
        schema.update({"type": "object", "additionalProperties": False, "properties": {}})
        for key, inner in value.items():
            schema["properties"][key] = _schema_of(f"{path}.{key}" if path else key, inner, said)
    elif value is None:
        raise ValueError(f"{path}: a null default needs a rule in tests/support/chart_docs.RULES")
    else:
        schema["type"] = _JSON_TYPES[type(value)]
        if isinstance(value, list) and not value:
            raise ValueError(f"{path}: an empty list needs a rule saying what it holds")
    return schema


def values_schema(text: str) -> dict[str, Any]:
    schema = _schema_of("", yaml.safe_load(text), descriptions(text))
    schema.pop("description", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Values of the sparkop chart (generated from values.yaml by tests/unit/test_chart_docs.py)",
        **schema,
    }


def schema_text(text: str) -> str:
    return json.dumps(values_schema(text), indent=2) + "\n"
