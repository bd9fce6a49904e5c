"""Extract the Kubernetes object schemas sparkop embeds (Volume, Container, PodTemplateSpec, ...) from
Kubernetes' own published OpenAPI v3 into ``api/k8s_schemas.json``.

    python -m sparkop.api.k8s_openapi --refresh [--source DIR ...]

The schemas are those of every Kubernetes release sparkop supports at once (:data:`K8S_VERSIONS`):
a field is embedded only if each of them serves it, and an enum keeps only the values all of them
take. A CRD embeds the schema once for every cluster, and the operator copies what it accepted into
pods: a field only a newer release knows would be dropped by an older API server, and an alpha field
of an older release may be gone from a newer one (1.35's ``PodSpec.workloadRef`` is not in 1.36),
so either would be accepted and then lost. Such a field is refused at apply time instead, naming it.

Each definition is written fully inlined (no ``$ref``) and made a *structural* CRD schema:

- ``$ref``/``allOf`` wrappers are resolved inline;
- IntOrString becomes ``x-kubernetes-int-or-string``; Quantity becomes int-or-string with
  Kubernetes' quantity pattern; Time becomes a date-time string;
- Kubernetes' own extensions that a CRD schema may not carry (patch strategy, unions, GVK) are
  dropped; list types (``x-kubernetes-list-type``/``-list-map-keys``) and map types are kept, so the
  API server enforces unique keys as it does for pods;
- descriptions are dropped: a CRD embeds Container about ten times and PodSpec twice, so the
  descriptions alone would push the CRD past etcd's request limit. Our own fields keep theirs;
- object and list defaults (``default: {}``) and Go zero-value defaults (``""``, ``0``) are dropped
  so that the API server does not add to what the user wrote; other scalar defaults (e.g.
  ContainerPort.protocol ``TCP``, needed as a list-map key) are kept;
- enums and ranges that Kubernetes enforces in Go validation but does not publish in OpenAPI are added
  from :data:`OVERLAY` (e.g. Toleration.operator), so a bad value is refused at create time instead of
  when Spark creates the pod.

Only ``k8s_schemas.json`` is read when CRDs are generated, so this module needs the Kubernetes source
(the Go module cache) only for ``--refresh``.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any, Final

# The Kubernetes releases sparkop supports, oldest first: the devcluster's (devcluster/gobuild/versions.env;
# a test holds them together).
K8S_VERSIONS: Final = ("v1.35.8", "v1.36.5", "v1.37.2")
DEFAULT_SOURCES: Final = tuple(
    Path(f"/root/go/pkg/mod/k8s.io/kubernetes@{version}/api/openapi-spec/v3") for version in K8S_VERSIONS
)
SOURCE_FILES: Final = ("api__v1_openapi.json", "apis__networking.k8s.io__v1_openapi.json")
OUTPUT: Final = Path(__file__).with_name("k8s_schemas.json")

ROOTS: Final = (
    "io.k8s.api.core.v1.Volume",
    "io.k8s.api.core.v1.VolumeMount",
    "io.k8s.api.core.v1.Toleration",
    "io.k8s.api.core.v1.Affinity",
    "io.k8s.api.core.v1.EnvVar",
    "io.k8s.api.core.v1.EnvFromSource",
    "io.k8s.api.core.v1.Container",
    "io.k8s.api.core.v1.PodTemplateSpec",
    "io.k8s.api.core.v1.PodSecurityContext",
    "io.k8s.api.core.v1.SecurityContext",
    "io.k8s.api.core.v1.Lifecycle",
    "io.k8s.api.core.v1.HostAlias",
    "io.k8s.api.core.v1.PodDNSConfig",
    "io.k8s.api.core.v1.ContainerPort",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.networking.v1.IngressTLS",
)

# Kubernetes' quantity syntax (k8s.io/apimachinery/pkg/api/resource), as controller-gen emits it.
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
QUANTITY: Final[dict[str, Any]] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": QUANTITY_PATTERN,
    "x-kubernetes-int-or-string": True,
}
DNS_LABEL: Final[dict[str, Any]] = {"maxLength": 63, "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}

# Constraints Kubernetes enforces in its Go validation (pkg/apis/core/validation) but does not
# publish in OpenAPI. Keyed by (definition, property).
OVERLAY: Final[dict[tuple[str, str], dict[str, Any]]] = {
    ("Toleration", "operator"): {"enum": ["", "Equal", "Exists"]},
    ("Toleration", "effect"): {"enum": ["", "NoSchedule", "PreferNoSchedule", "NoExecute"]},
    ("Container", "imagePullPolicy"): {"enum": ["Always", "Never", "IfNotPresent"]},
    ("Container", "terminationMessagePolicy"): {"enum": ["File", "FallbackToLogsOnError"]},
    ("Container", "name"): DNS_LABEL,
    ("ContainerPort", "protocol"): {"enum": ["TCP", "UDP", "SCTP"]},
    ("ContainerPort", "containerPort"): {"minimum": 1, "maximum": 65535},
    ("ContainerPort", "hostPort"): {"minimum": 0, "maximum": 65535},
    ("Volume", "name"): DNS_LABEL,
    ("VolumeMount", "mountPropagation"): {"enum": ["None", "HostToContainer", "Bidirectional"]},
    ("VolumeMount", "recursiveReadOnly"): {"enum": ["Disabled", "IfPossible", "Enabled"]},
    ("NodeSelectorRequirement", "operator"): {"enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]},
    ("LabelSelectorRequirement", "operator"): {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
    ("WeightedPodAffinityTerm", "weight"): {"minimum": 1, "maximum": 100},
    ("PreferredSchedulingTerm", "weight"): {"minimum": 1, "maximum": 100},
    ("PodSpec", "restartPolicy"): {"enum": ["Always", "OnFailure", "Never"]},
    ("PodSpec", "dnsPolicy"): {"enum": ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]},
    ("PodSpec", "preemptionPolicy"): {"enum": ["PreemptLowerPriority", "Never"]},
    ("SeccompProfile", "type"): {"enum": ["Unconfined", "RuntimeDefault", "Localhost"]},
    ("AppArmorProfile", "type"): {"enum": ["Unconfined", "RuntimeDefault", "Localhost"]},
    ("PodSecurityContext", "fsGroupChangePolicy"): {"enum": ["OnRootMismatch", "Always"]},
    ("PodSecurityContext", "supplementalGroupsPolicy"): {"enum": ["Merge", "Strict"]},
    ("PodSecurityContext", "seLinuxChangePolicy"): {"enum": ["MountOption", "Recursive"]},
    ("SecurityContext", "procMount"): {"enum": ["Default", "Unmasked"]},
    ("HTTPGetAction", "scheme"): {"enum": ["HTTP", "HTTPS"]},
    ("TopologySpreadConstraint", "whenUnsatisfiable"): {"enum": ["DoNotSchedule", "ScheduleAnyway"]},
    ("TopologySpreadConstraint", "nodeAffinityPolicy"): {"enum": ["Honor", "Ignore"]},
    ("TopologySpreadConstraint", "nodeTaintsPolicy"): {"enum": ["Honor", "Ignore"]},
    ("PersistentVolumeClaimSpec", "volumeMode"): {"enum": ["Filesystem", "Block"]},
    ("HostPathVolumeSource", "type"): {
        "enum": ["", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"]
    },
    ("EnvVar", "name"): {"minLength": 1},
}

# PodTemplateSpec.metadata: Spark merges only labels and annotations from a pod template's metadata
# (and ignores the name), so the rest of ObjectMeta (ownerReferences, managedFields, ...) is not
# offered here; unknown fields are rejected like everywhere else.
TEMPLATE_METADATA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

_KEEP: Final = {
    "type",
    "format",
    "properties",
    "items",
    "additionalProperties",
    "required",
    "enum",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
}


def _keep_default(value: Any) -> bool:
    """Keep only meaningful scalar defaults: Go's zero values ("", 0, false) mark non-pointer fields
    and object/list defaults would make the API server add empty objects the user never wrote."""
    return value is not None and not isinstance(value, dict | list) and value not in ("", 0, False)


class Extractor:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.open_recursions: list[str] = []

    def definition(self, name: str, stack: tuple[str, ...] = ()) -> dict[str, Any]:
        short = name.rsplit(".", 1)[-1]
        if name == "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
            return {"x-kubernetes-int-or-string": True}
        if name == "io.k8s.apimachinery.pkg.api.resource.Quantity":
            return dict(QUANTITY)
        if name in ("io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"):
            return {"type": "string", "format": "date-time"}
        if name == "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta":
            return copy.deepcopy(TEMPLATE_METADATA)
        if name in stack:
            # A recursive type cannot be inlined; keep that subtree open and say so. (None of the
            # core/v1 pod types recurse as of v1.34; this is a guard for future versions.)
            self.open_recursions.append(" -> ".join((*stack, name)))
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return self.node(self.defs[name], short, (*stack, name))

    def node(self, node: dict[str, Any], owner: str, stack: tuple[str, ...]) -> dict[str, Any]:
        if "$ref" in node:
            return self.definition(node["$ref"].rsplit("/", 1)[-1], stack)
        if "allOf" in node:
            if len(node["allOf"]) != 1:
                raise ValueError(f"unexpected allOf in {stack}")
            inner = self.node(node["allOf"][0], owner, stack)
            if _keep_default(node.get("default")):
                inner["default"] = node["default"]
            return inner
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "properties":
                props = {}
                for prop, sub in value.items():
                    schema = self.node(sub, owner, stack)
                    schema.update(OVERLAY.get((owner, prop), {}))
                    props[prop] = schema
                out["properties"] = props
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                out[key] = self.node(value, owner, stack)
            elif key == "default":
                if _keep_default(value):
                    out["default"] = value
            elif key in _KEEP:
                out[key] = value
        for key in out.get("x-kubernetes-list-map-keys", []):
            # A structural schema needs every list-map key required or defaulted; keep Kubernetes'
            # zero-value default for those (e.g. imagePullSecrets[].name: "").
            items = out["items"]
            prop = items["properties"][key]
            if key not in items.get("required", []) and "default" not in prop:
                prop["default"] = {"string": "", "integer": 0}[prop["type"]]
        if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
            # An object Kubernetes leaves open (none in the pod types today).
            out["x-kubernetes-preserve-unknown-fields"] = True
        return out


def load_definitions(source: Path) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for name in SOURCE_FILES:
        defs.update(json.loads((source / name).read_text())["components"]["schemas"])
    return defs


def common(first: dict[str, Any], *others: dict[str, Any]) -> dict[str, Any]:
    """What each of the schemas accepts: the properties all of them have (each again in common), the
    enum values all of them take; the rest as in `first` (the oldest release's)."""
    out = dict(first)
    if "properties" in first:
        shared = [name for name in first["properties"] if all(name in o.get("properties", {}) for o in others)]
        out["properties"] = {
            name: common(first["properties"][name], *(o["properties"][name] for o in others)) for name in shared
        }
        if "required" in first:
            out["required"] = [name for name in first["required"] if name in out["properties"]]
    for key in ("items", "additionalProperties"):
        if isinstance(first.get(key), dict) and all(isinstance(o.get(key), dict) for o in others):
            out[key] = common(first[key], *(o[key] for o in others))
    if "enum" in first:
        out["enum"] = [value for value in first["enum"] if all(value in o.get("enum", [value]) for o in others)]
    return out


def extract(sources: tuple[Path, ...] = DEFAULT_SOURCES) -> dict[str, Any]:
    extractors = [Extractor(load_definitions(source)) for source in sources]
    out: dict[str, Any] = {name: common(*(ex.definition(name) for ex in extractors)) for name in ROOTS}
    out["ResourceList"] = {"type": "object", "additionalProperties": dict(QUANTITY)}
    return {
        "source": (
            f"kubernetes {', '.join(K8S_VERSIONS)} api/openapi-spec/v3 ({', '.join(SOURCE_FILES)}): "
            "the fields and enum values all of them serve"
        ),
        "generator": "python -m sparkop.api.k8s_openapi --refresh",
        "openRecursions": sorted({recursion for ex in extractors for recursion in ex.open_recursions}),
        "definitions": out,
    }


_cache: dict[str, Any] | None = None


def schemas() -> dict[str, Any]:
    """The committed definitions (name -> structural schema)."""
    global _cache
    if _cache is None:
        _cache = json.loads(OUTPUT.read_text())["definitions"]
    return _cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkop.api.k8s_openapi", description=__doc__.split("\n\n")[0])
    parser.add_argument("--refresh", action="store_true", help=f"regenerate {OUTPUT.name}")
    parser.add_argument(
        "--source",
        type=Path,
        nargs="+",
        default=list(DEFAULT_SOURCES),
        help=f"Kubernetes openapi-spec/v3 directories, one per release of {', '.join(K8S_VERSIONS)}",
    )
    args = parser.parse_args(argv)
    if not args.refresh:
        parser.print_help()
        return 0
    missing = [source / SOURCE_FILES[0] for source in args.source if not (source / SOURCE_FILES[0]).exists()]
    if missing:
        hint = "needs the Kubernetes Go modules: go mod download k8s.io/kubernetes@<version>"
        print(f"{', '.join(map(str, missing))} not found ({hint})", file=sys.stderr)
        return 1
    data = extract(tuple(args.source))
    OUTPUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
