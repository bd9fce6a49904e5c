"""Extract the Kubernetes object schemas sparkop embeds (Volume, Container, PodTemplateSpec, ...) from
Kubernetes' own published OpenAPI v3 into ``api/k8s_schemas.json``.

    python -m sparkop.api.k8s_openapi --refresh [--source DIR]

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

K8S_VERSION: Final = "v1.34.12"
DEFAULT_SOURCE: Final = Path(f"/root/go/pkg/mod/k8s.io/kubernetes@{K8S_VERSION}/api/openapi-spec/v3")
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


def extract(source: Path = DEFAULT_SOURCE) -> dict[str, Any]:
    ex = Extractor(load_definitions(source))
    out: dict[str, Any] = {name: ex.definition(name) for name in ROOTS}
    out["ResourceList"] = {"type": "object", "additionalProperties": dict(QUANTITY)}
    return {
        "source": f"kubernetes {K8S_VERSION} api/openapi-spec/v3 ({', '.join(SOURCE_FILES)})",
        "generator": "python -m sparkop.api.k8s_openapi --refresh",
        "openRecursions": ex.open_recursions,
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
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="Kubernetes openapi-spec/v3 directory")
    args = parser.parse_args(argv)
    if not args.refresh:
        parser.print_help()
        return 0
    if not (args.source / SOURCE_FILES[0]).exists():
        print(f"{args.source / SOURCE_FILES[0]} not found (needs the Kubernetes Go module)", file=sys.stderr)
        return 1
    data = extract(args.source)
    OUTPUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
