"""Generate the CRDs from the pydantic models.

    python -m sparkop.api crds [DIR]        (the lead wires it as ``sparkop crds``)

The pydantic JSON schema is turned into a structural CRD schema: ``$ref``/``$defs`` inlined,
``Optional`` unwrapped, ``additionalProperties: false`` dropped (a structural schema rejects unknown
fields itself: the API server prunes them, or refuses them with strict field validation), titles
dropped, embedded Kubernetes objects (marked ``x-sparkop-k8s``) replaced by Kubernetes' own schema from
``api/k8s_schemas.json``, and the CEL rules of :mod:`api.rules` attached.

The generated YAML is committed under ``crds/`` (sparkop's group) and ``crds/kubeflow/`` (the
SparkApplication, ScheduledSparkApplication and SparkConnect of kubeflow's group, which
``sparkop run --kubeflow-api`` serves from the same models: kubeflow's names, short names, versions and
printer columns); a unit test fails when either is stale. The CRDs are larger than ``kubectl apply``'s
256 KiB last-applied annotation, so install them with ``kubectl apply --server-side`` (or
``kubectl create``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple

import yaml
from pydantic import BaseModel

from sparkop.core.resources import Resource
from sparkop.domain import kinds, labels
from sparkop.domain.kinds import API, KUBEFLOW_API, SPARKOP_API

from . import connect, history, k8s_openapi, rules, scheduled
from .models import SparkApplicationSpec, SparkApplicationStatus, SparkDriverSpec, SparkDriverStatus
from .types import K8S_MARKER

CRD_DIR: Final = Path(__file__).resolve().parent.parent / "crds"
# Where the kubeflow group's CRDs go, under a CRD directory.
KUBEFLOW_SUBDIR: Final = "kubeflow"
CATEGORY: Final = "spark"
# Kubernetes protects the groups under k8s.io: a CRD there needs the annotation naming where its API
# was approved. kubeflow's is kubeflow's own approval, which its CRDs carry; ours serve that same API.
API_APPROVAL: Final = {"api-approved.kubernetes.io": "https://github.com/kubeflow/spark-operator/pull/1298"}

_DROP: Final = {"title", "additionalProperties", "$defs"}


class _Converter:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.k8s = k8s_openapi.schemas()

    def convert(self, node: dict[str, Any]) -> dict[str, Any]:
        node = dict(node)
        description = node.pop("description", None)
        default = node.pop("default", None)
        if "$ref" in node:
            target = self.convert(self.defs[node.pop("$ref").rsplit("/", 1)[-1]])
            node.pop("$defs", None)
            out = {**target, **{k: v for k, v in node.items() if k not in _DROP}}
        elif "anyOf" in node and any(x == {"type": "null"} for x in node["anyOf"]):
            rest = [x for x in node.pop("anyOf") if x != {"type": "null"}]
            if len(rest) != 1:
                raise ValueError(f"unsupported union {rest}")
            out = self.convert({**rest[0], **{k: v for k, v in node.items() if k not in _DROP}})
        elif K8S_MARKER in node:
            out = copy.deepcopy(self.k8s[node[K8S_MARKER]])
            if node.get(connect.POD_LEVEL_CONTAINER_SECURITY):
                self._container_security_at_pod_level(out)
        else:
            out = {}
            for key, value in node.items():
                if key in _DROP and not (key == "additionalProperties" and isinstance(value, dict)):
                    continue
                if key == "properties":
                    out[key] = {k: self.convert(v) for k, v in value.items()}
                elif key in ("items", "additionalProperties"):
                    out[key] = self.convert(value)
                elif key == "const":
                    out["enum"] = [value]
                else:
                    out[key] = value
            if "enum" in out and "type" not in out:
                out["type"] = "string"
        if description:
            out["description"] = description
        if default is not None:
            out["default"] = default
        return out

    def _container_security_at_pod_level(self, template: dict[str, Any]) -> None:
        """Let a pod template's pod-level securityContext take the container fields kubeflow's
        SparkConnect sample sets there (api.connect.CONTAINER_SECURITY_AT_POD_LEVEL)."""
        container = self.k8s["io.k8s.api.core.v1.SecurityContext"]["properties"]
        pod = template["properties"]["spec"]["properties"]["securityContext"]["properties"]
        for name in connect.CONTAINER_SECURITY_AT_POD_LEVEL:
            pod[name] = copy.deepcopy(container[name])


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(mode="validation")
    return _Converter(raw.get("$defs", {})).convert(raw)


def rules_for(kind: str, group: str = labels.GROUP) -> tuple[rules.Rule, ...]:
    """Every cross-field rule of ``kind`` in ``group``'s CRD (CEL there, the same predicates in sparkop
    validate)."""
    if kind == connect.KIND:
        return tuple(r for r in connect.connect_rules() if group in r.groups)
    if kind == history.KIND:
        return history.history_rules()
    return scheduled.rules_for(kind, group)


def _attach_rules(kind: str, group: str, root: dict[str, Any]) -> None:
    for rule in rules_for(kind, group):
        for path in rule.paths:
            node = root
            for key in path:
                node = node["properties"][key]
            node.setdefault("x-kubernetes-validations", []).append(rule.crd_rule())


class Column(NamedTuple):
    """A printer column of ``kubectl get``; a wide one shows only with ``-o wide`` (priority 1)."""

    name: str
    json_path: str
    description: str
    type: str = "string"
    wide: bool = False


@dataclass(frozen=True)
class Kind:
    """What a kind's CRD says beyond the schema of its models."""

    resource: Resource  # in sparkop's group (domain.kinds): its kind and plural
    short_name: str
    spec: type[BaseModel]
    status: type[BaseModel]
    description: str
    columns: tuple[Column, ...]

    @property
    def plural(self) -> str:
        return self.resource.plural

    @property
    def singular(self) -> str:
        return self.resource.kind.lower()


KINDS: Final[dict[str, Kind]] = {
    kind.resource.kind: kind
    for kind in (
        Kind(
            kinds.SPARK_APPLICATIONS,
            "sparkapp",
            SparkApplicationSpec,
            SparkApplicationStatus,
            "A Spark application (kubeflow spark-operator v1beta2 fields). sparkop runs each attempt as a SparkDriver "
            "named <app>-<run> and starts new runs according to spec.restartPolicy.",
            (
                Column("State", ".status.applicationState.state", "Application state"),
                Column("Attempts", ".status.executionAttempts", "Runs counted against the restart policy", "integer"),
                Column("Driver", ".status.currentDriver", "SparkDriver of the current run"),
                Column("Incarnations", ".status.driverIncarnations", "Driver pods of the current run", "integer"),
                Column("Executors", ".status.executors.running", "Running executor pods", "integer"),
                Column("Spark", ".spec.sparkVersion", "Spark version (its line decides what the driver gets)"),
                Column("Start", ".status.lastSubmissionAttemptTime", "When the current run started", "date", wide=True),
                Column("Finish", ".status.terminationTime", "When the application finished", "date", wide=True),
            ),
        ),
        Kind(
            kinds.SPARK_DRIVERS,
            "sparkdrv",
            SparkDriverSpec,
            SparkDriverStatus,
            "One run of a Spark application: its driver pod (replaced, as a new incarnation, when lost), the "
            "driver's ConfigMap and Service, and its executors. Created by a SparkApplication for each run, or "
            "written by hand.",
            (
                Column("Phase", ".status.phase", "Pending, Running, Succeeded, Failed, SubmissionFailed"),
                Column("Pod", ".status.driverPod.name", "Current driver pod"),
                Column("Executors", ".status.executors.running", "Running executor pods", "integer"),
                Column("Attempt", ".spec.attempt", "Run of its SparkApplication", "integer"),
                Column("Incarnation", ".status.incarnation", "Current driver-pod incarnation", "integer"),
                Column("App-ID", ".status.sparkApplicationId", "spark.app.id", wide=True),
                Column(
                    "Spark", ".spec.sparkVersion", "Spark version (its line decides what the driver gets)", wide=True
                ),
            ),
        ),
        Kind(
            kinds.SCHEDULED_SPARK_APPLICATIONS,
            "scheduledsparkapp",
            scheduled.ScheduledSparkApplicationSpec,
            scheduled.ScheduledSparkApplicationStatus,
            "A SparkApplication template started on a cron schedule (kubeflow spark-operator v1beta2 fields, plus "
            "startingDeadlineSeconds). Each run is a SparkApplication named <name>-<scheduled minute>.",
            (
                Column("Schedule", ".spec.schedule", "Cron schedule"),
                Column("Suspend", ".spec.suspend", "No new runs while true", "boolean"),
                Column("Last Run", ".status.lastRun", "Scheduled time of the latest run", "date"),
                Column("Next Run", ".status.nextRun", "When the next run is due", "date"),
                Column("State", ".status.scheduleState", "Scheduled, Suspended or FailedValidation"),
                Column("Last Run Name", ".status.lastRunName", "SparkApplication of the latest run", wide=True),
            ),
        ),
        Kind(
            kinds.SPARK_CONNECTS,
            "sparkconn",
            connect.SparkConnectSpec,
            connect.SparkConnectStatus,
            "A long-running Spark Connect server (kubeflow spark-operator v1alpha1 SparkConnect fields) behind a "
            "stable Service. Each server run is a SparkDriver named <name>-server-<run>; a lost server pod is "
            "replaced inside its run, a server that ends is restarted per spec.restartPolicy.",
            (
                Column("State", ".status.state", "Provisioning, Ready, NotReady, Failed or Suspended"),
                Column("Server", ".status.server.podName", "Pod of the server that serves"),
                Column("Endpoint", ".status.endpoint", "sc:// address clients connect to"),
                Column("Executors", ".status.executors.running", "Running executor pods", "integer"),
                Column("Restarts", ".status.restarts", "Servers that ended and were restarted", "integer", wide=True),
                Column("Driver", ".status.server.driver", "SparkDriver of the server that serves", wide=True),
                Column("Spark", ".spec.sparkVersion", "Spark version", wide=True),
            ),
        ),
        Kind(
            kinds.SPARK_HISTORY_SERVERS,
            "sparkhist",
            history.SparkHistoryServerSpec,
            history.SparkHistoryServerStatus,
            "Spark's history server over a log directory (a PersistentVolumeClaim or an object-store URL), with its "
            "Service and an optional Ingress or HTTPRoute. SparkApplications that name it write their event logs "
            "there, and their status links to each run's page.",
            (
                Column("State", ".status.state", "Provisioning, Ready, NotReady or Failed"),
                Column("URL", ".status.url", "Where its pages are"),
                Column("Logs", ".status.eventLogDirectory", "spark.eventLog.dir of the apps that log here", wide=True),
                Column("Image", ".spec.image", "Spark image", wide=True),
            ),
        ),
    )
}


# The printer columns of kubeflow's own CRDs (v2.5), so `kubectl get` of the kubeflow group looks as its
# users know it (its types too: a string where sparkop's column has a number or a date); sparkop's columns
# follow them with `-o wide`.
_KUBEFLOW_COLUMNS: Final[dict[str, tuple[Column, ...]]] = {
    "SparkApplication": (
        Column("Suspend", ".spec.suspend", "No new run while true", "boolean"),
        Column("Status", ".status.applicationState.state", "Application state"),
        Column("Attempts", ".status.executionAttempts", "Runs counted against the restart policy"),
        Column("Start", ".status.lastSubmissionAttemptTime", "When the current run started"),
        Column("Finish", ".status.terminationTime", "When the application finished"),
    ),
    scheduled.KIND: (
        Column("Schedule", ".spec.schedule", "Cron schedule"),
        Column("TimeZone", ".spec.timeZone", "Time zone of the schedule"),
        Column("Suspend", ".spec.suspend", "No new runs while true"),
        Column("Last Run", ".status.lastRun", "Scheduled time of the latest run", "date"),
        Column("Last Run Name", ".status.lastRunName", "SparkApplication of the latest run"),
    ),
    connect.KIND: (
        Column("Status", ".status.state", "Provisioning, Ready, NotReady, Failed or Suspended"),
        Column("PodName", ".status.server.podName", "Pod of the server that serves"),
    ),
}


def _columns(kind: str, api: API) -> list[dict[str, Any]]:
    ours = KINDS[kind].columns
    if api is SPARKOP_API:
        columns = list(ours)
    else:
        theirs = _KUBEFLOW_COLUMNS[kind]
        shown = {column.json_path for column in theirs}
        columns = [*theirs, *(column._replace(wide=True) for column in ours if column.json_path not in shown)]
    out: list[dict[str, Any]] = [
        {
            "name": column.name,
            "type": column.type,
            "jsonPath": column.json_path,
            "description": column.description,
            **({"priority": 1} if column.wide else {}),
        }
        for column in columns
    ]
    age = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    if api is KUBEFLOW_API and kind == connect.KIND:
        out.insert(0, age)  # kubeflow's SparkConnect shows its age first
    else:
        out.insert(len([column for column in columns if not column.wide]), age)
    return out


def crd(kind: str, api: API = SPARKOP_API) -> dict[str, Any]:
    """The CustomResourceDefinition of ``kind`` in ``api``'s group, as a dict."""
    info = KINDS[kind]
    resource = api.resource(kind) if api is not SPARKOP_API else None
    if api is not SPARKOP_API and resource is None:
        raise ValueError(f"{api.group} has no {kind}: SparkDrivers are sparkop's own kind")
    version = resource.version if resource is not None else labels.VERSION
    api_version = f"{api.group}/{version}"
    spec = _schema(info.spec)
    status = _schema(info.status)
    root: dict[str, Any] = {
        "type": "object",
        "description": info.description if api is SPARKOP_API else _kubeflow_description(kind, api),
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": _api_version_description(kind, api, api_version)},
            "kind": {"type": "string", "description": kind},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    _attach_rules(kind, api.group, root)
    metadata: dict[str, Any] = {
        "name": f"{info.plural}.{api.group}",
        "labels": {labels.MANAGED_BY: labels.MANAGER},
    }
    if api is not SPARKOP_API:
        metadata["annotations"] = dict(API_APPROVAL)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": api.group,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": info.plural,
                "singular": info.singular,
                "shortNames": [info.short_name],
                "categories": [CATEGORY],
            },
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": _columns(kind, api),
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def _api_version_description(kind: str, api: API, api_version: str) -> str:
    if api is not SPARKOP_API:
        return (
            f"{api_version}: kubeflow spark-operator's {kind}, run by sparkop (`sparkop run --kubeflow-api`); "
            f"the same as a {labels.GROUP} {kind}."
        )
    kubeflow = KUBEFLOW_API.resource(kind)
    if kubeflow is None:
        return labels.API_VERSION
    return (
        f"{labels.API_VERSION}. A kubeflow {kubeflow.api_version} {kind} works with only this changed, or "
        "unchanged where the operator serves kubeflow's group too (--kubeflow-api)."
    )


def _kubeflow_description(kind: str, api: API) -> str:
    runs = {
        "SparkApplication": "Each run is a SparkDriver (sparkop.io) named <app>-<run>-kf.",
        scheduled.KIND: "Each run is a SparkApplication of this group named <name>-<scheduled minute>.",
        connect.KIND: "Each server run is a SparkDriver (sparkop.io) named <name>-server-<run>-kf.",
    }[kind]
    return (
        f"kubeflow spark-operator's {kind} ({api.group}), run by sparkop from the same model as sparkop's own. {runs}"
    )


def crds(api: API = SPARKOP_API) -> dict[str, dict[str, Any]]:
    """File name -> CRD, for every kind of ``api``'s group (sparkop's: its four; kubeflow's: the three
    that are kubeflow's kinds too)."""
    served = list(KINDS) if api is SPARKOP_API else [k for k in KINDS if api.resource(k) is not None]
    return {f"{api.group}_{KINDS[k].plural}.yaml": crd(k, api) for k in served}


def _by_directory(directory: str | Path) -> list[tuple[Path, dict[str, dict[str, Any]]]]:
    """Where each group's CRDs go under ``directory``: sparkop's in it, kubeflow's in its kubeflow/."""
    out = Path(directory)
    return [(out, crds(SPARKOP_API)), (out / KUBEFLOW_SUBDIR, crds(KUBEFLOW_API))]


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def render(obj: dict[str, Any]) -> str:
    header = "# Generated by `sparkop crds` (python -m sparkop.api crds) from api/models.py. Do not edit.\n"
    return header + yaml.dump(obj, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def write_crds(directory: str | Path = CRD_DIR) -> list[Path]:
    """Write every CRD into ``directory`` (kubeflow's group's into its kubeflow/); returns the paths."""
    written = []
    for out, generated in _by_directory(directory):
        out.mkdir(parents=True, exist_ok=True)
        for name, obj in generated.items():
            path = out / name
            path.write_text(render(obj))
            written.append(path)
    return written


def stale(directory: str | Path = CRD_DIR) -> list[str]:
    """Paths (under ``directory``) of committed CRD files that differ from what the models generate."""
    root = Path(directory)
    return [
        str((out / name).relative_to(root))
        for out, generated in _by_directory(directory)
        for name, obj in generated.items()
        if not (out / name).exists() or (out / name).read_text() != render(obj)
    ]


def main(out: str | Path = CRD_DIR, check: bool = False) -> int:
    """``sparkop crds [--out DIR] [--check]``: write the CRDs, or with ``check`` exit 1 when the files in
    ``out`` are stale (missing or different from what the models generate)."""
    if check:
        names = stale(out)
        for name in names:
            print(f"{Path(out) / name} is stale: run `sparkop crds --out {out}`")
        return 1 if names else 0
    for path in write_crds(out):
        print(f"wrote {path}")
    return 0
