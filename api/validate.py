"""Offline validation with the API server's verdict: ``sparkop validate FILE...`` (``-`` = stdin).

Each document is checked the way the API server checks a create with strict field validation
(``kubectl create --validate=strict``):

1. apiVersion and kind are ``sparkop.io/v1alpha1`` SparkApplication, SparkDriver, ScheduledSparkApplication or
   SparkConnect or SparkHistoryServer, or kubeflow's ``sparkoperator.k8s.io/v1beta2`` SparkApplication or
   ScheduledSparkApplication or ``sparkoperator.k8s.io/v1alpha1`` SparkConnect (served from the same
   models with ``sparkop run --kubeflow-api``, and checked against the same schema);
2. metadata: a DNS-1123 subdomain name (at most 253 characters), well-formed labels and
   annotation keys;
3. the CRD's openAPIV3Schema (generated from the same models as ``crds/``), evaluated with JSON
   Schema draft 7 — the draft whose semantics match OpenAPI v3 schemas — with the Kubernetes
   extensions handled as the API server does: unknown fields are errors (strict), except under
   ``x-kubernetes-preserve-unknown-fields``; ``x-kubernetes-int-or-string`` accepts integers and
   strings; ``x-kubernetes-list-type: map|set`` rejects duplicate keys/items;
4. the CRD's defaults are applied, then the cross-field rules of :mod:`api.rules` (the same table the
   CRD's CEL ``x-kubernetes-validations`` come from; a ScheduledSparkApplication's template gets the
   SparkApplication's, see :func:`api.crds.rules_for`);
5. a ScheduledSparkApplication's schedule and time zone are read as the controller reads them (the
   API server checks only the schedule's shape; the controller reports the rest as FailedValidation).

Besides errors, what the API server accepts but is likely a mistake is a warning (stderr; the exit
status stays 0): a ``sparkVersion`` of a Spark line sparkop does not know, and a ``sparkVersion`` whose
line is not the image tag's (:func:`api.spark_lines.spec_warnings`).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped]
from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError as SchemaError  # type: ignore[import-untyped]

from sparkop.domain import kinds, labels

from . import connect, crds, history, manifests, rules, scheduled, spark_lines
from .manifests import clip, one_line, quote
from .types import CPU_PATTERN, MEMORY_PATTERN

DNS1123_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE: Final = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_NAME: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

# ObjectMeta fields a client may send (strict validation rejects others).
METADATA_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "items": {"type": "object"}},
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer"},
        "creationTimestamp": {"type": ["string", "null"]},
        "deletionTimestamp": {"type": ["string", "null"]},
        "deletionGracePeriodSeconds": {"type": "integer"},
        "managedFields": {"type": "array", "items": {"type": "object"}},
        "selfLink": {"type": "string"},
    },
}

KUBEFLOW_GROUP: Final = labels.KUBEFLOW_GROUP

# kubeflow v1beta2 fields sparkop does not take, and what to do instead.
KUBEFLOW_UNSUPPORTED: Final = {
    "ingressURLFormat": "not supported by sparkop: create the UI Ingress yourself",
}

PATTERN_HINTS: Final = {
    MEMORY_PATTERN: "use Spark's memory syntax: an integer with an optional unit k, m, g, t, e.g. 512m or 2g "
    "(Kubernetes-style 512Mi and fractions like 1.5g are not accepted by Spark)",
    CPU_PATTERN: "use a Kubernetes CPU quantity, e.g. 500m, 1 or 1.5",
}


@dataclass(frozen=True)
class ValidationError:
    """One problem in one document."""

    source: str  # "file" or "file#2" for the second document
    kind: str | None
    name: str | None
    path: str  # field path, e.g. "spec.restartPolicy.type"; "" for the whole document
    message: str
    hint: str = ""

    def __str__(self) -> str:
        """One line, whatever the document holds (long names and values are cut)."""
        what = f"{clip(self.kind or '?', 64)}/{clip(self.name or '?')}: " if self.kind or self.name else ""
        where = f"{clip(self.path, 200)}: " if self.path else ""
        fix = f" (fix: {self.hint})" if self.hint else ""
        return one_line(f"{self.source}: {what}{where}{self.message}{fix}")


# A warning names user values (an image of up to 4096 characters); its line is cut to stay readable.
WARNING_CHARS: Final = 600


@dataclass(frozen=True)
class ValidationWarning:
    """What the API server accepts in one document but is likely a mistake."""

    source: str
    kind: str
    name: str | None
    message: str

    def __str__(self) -> str:
        what = f"{clip(self.kind, 64)}/{clip(self.name or '?')}"
        return f"{self.source}: {what}: warning: {clip(self.message, WARNING_CHARS)}"


# ------------------------------------------------------------------------------------------------
# schema preparation


def _strictify(node: Any) -> Any:
    """A copy of a CRD schema with unknown-field rejection made explicit for jsonschema."""
    if isinstance(node, list):
        return [_strictify(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strictify(v) for k, v in node.items()}
    if (
        node.get("type") == "object"
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _list_type(validator: Any, list_type: str, instance: Any, schema: dict[str, Any]) -> Iterator[SchemaError]:
    if not isinstance(instance, list):
        return
    if list_type == "set":
        seen: list[Any] = []
        for item in instance:
            if item in seen:
                yield SchemaError(f"duplicate value: {quote(item)}")
            seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        defaults = {k: schema.get("items", {}).get("properties", {}).get(k, {}).get("default") for k in keys}
        seen_keys: set[str] = set()
        for item in instance:
            if not isinstance(item, dict):
                continue
            key = json.dumps([item.get(k, defaults[k]) for k in keys], default=str)
            if key in seen_keys:
                yield SchemaError(f"duplicate entry with key {', '.join(keys)} = {clip(key)}")
            seen_keys.add(key)


def _int_or_string(validator: Any, value: bool, instance: Any, schema: dict[str, Any]) -> Iterator[SchemaError]:
    if value and (isinstance(instance, bool) or not isinstance(instance, int | str)):
        yield SchemaError(f"{quote(instance)} must be an integer or a string")


_Validator = jsonschema.validators.extend(
    Draft7Validator,
    {"x-kubernetes-list-type": _list_type, "x-kubernetes-int-or-string": _int_or_string},
)


@cache
def _crd_schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = crds.crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@cache
def _validator(kind: str) -> Any:
    schema = _strictify(copy.deepcopy(_crd_schema(kind)))
    schema["properties"]["metadata"] = METADATA_SCHEMA
    return _Validator(schema)


# ------------------------------------------------------------------------------------------------
# defaults and rules


def apply_defaults(schema: dict[str, Any], obj: Any) -> Any:
    """``obj`` with the schema's defaults filled in, as the API server does before CEL runs."""
    if isinstance(obj, dict):
        props = schema.get("properties")
        if props:
            for key, sub in props.items():
                if key not in obj and "default" in sub:
                    obj[key] = copy.deepcopy(sub["default"])
            for key, value in obj.items():
                if key in props:
                    obj[key] = apply_defaults(props[key], value)
        elif isinstance(schema.get("additionalProperties"), dict):
            for key, value in obj.items():
                obj[key] = apply_defaults(schema["additionalProperties"], value)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], x) for x in obj]
    return obj


def _rule_errors(kind: str, doc: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(field path, message, hint) of each cross-field rule of the document's group's CRD that the
    defaulted document breaks."""
    defaulted = apply_defaults(_crd_schema(kind), copy.deepcopy(doc))
    group = _api_group(str(doc.get("apiVersion")))
    for rule in crds.rules_for(kind, group if group == KUBEFLOW_GROUP else labels.GROUP):
        for path in rule.paths:
            node: Any = defaulted
            for key in path:
                node = node.get(key) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                continue
            try:
                ok = rule.predicate(node)
            except (TypeError, KeyError, AttributeError):
                continue  # ill-typed input: the schema errors already say why
            if not ok:
                found = f" ({rule.measure(node)})" if rule.measure else ""
                yield ".".join(path) + (rule.field_path or ""), rule.message + found, rule.hint


# ------------------------------------------------------------------------------------------------
# the checks


def _path(error: SchemaError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{clip(part)}" if out else clip(part))
    return out


def _size(instance: Any) -> str:
    if isinstance(instance, str):
        return f"{len(instance)} characters"
    if isinstance(instance, dict):
        return f"{len(instance)} entries"
    if isinstance(instance, list):
        return f"{len(instance)} items"
    return quote(instance)


# What each bound says; the instance is never echoed whole (it may be 1 MiB).
_BOUNDS: Final = {
    "maxLength": "at most {bound} characters",
    "minLength": "at least {bound} characters",
    "maxItems": "at most {bound} items",
    "minItems": "at least {bound} items",
    "maxProperties": "at most {bound} entries",
    "minProperties": "at least {bound} entries",
}


def _required_hint(kind: str, path: str, missing: str) -> str:
    found = history.required_hint(path, missing) if kind == history.KIND else None
    return found or f"add {missing}"


def _schema_error(kind: str, error: SchemaError) -> tuple[str, str, str]:
    path = _path(error)
    if error.validator == "additionalProperties":
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        names = ", ".join(quote(u) for u in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        where = path or "the top level"
        hints = [f"{u}: {KUBEFLOW_UNSUPPORTED[u]}" for u in unknown if u in KUBEFLOW_UNSUPPORTED]
        hint = "; ".join(hints) or f"remove it or fix its spelling (see `kubectl explain` for {where})"
        return path, f"unknown field {names}", hint
    if error.validator == "enum":
        allowed = ", ".join(json.dumps(x) for x in error.validator_value)
        return path, f"{quote(error.instance)} is not allowed", f"use one of {allowed}"
    if error.validator == "pattern":
        hint = PATTERN_HINTS.get(error.validator_value, f"match {error.validator_value}")
        return path, f"{quote(error.instance)} is malformed", hint
    if error.validator == "required":  # named at the missing field, as the API server names it
        absent = [str(r) for r in error.validator_value if r not in error.instance]  # one error for each
        missing = next((r for r in absent if error.message.startswith(repr(r))), absent[0] if absent else "")
        where = f"{path}.{clip(missing)}" if path else clip(missing)
        return where, "required value", _required_hint(kind, path, missing)
    if error.validator == "type":
        return path, f"{quote(error.instance)} is not of type {error.validator_value}", ""
    if error.validator in _BOUNDS:
        bound = _BOUNDS[error.validator].format(bound=error.validator_value)
        return path, f"{quote(error.instance)} has {_size(error.instance)}, must have {bound}", ""
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        words = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
        return path, f"{quote(error.instance)} must be {words[error.validator]} {error.validator_value}", ""
    return path, clip(error.message, 200), ""


def _metadata_errors(meta: Any) -> Iterator[tuple[str, str, str]]:
    if not isinstance(meta, dict):
        yield "metadata", "metadata is required", "add metadata.name"
        return
    name = meta.get("name")
    if not name and not meta.get("generateName"):
        yield "metadata.name", "name or generateName is required", "add metadata.name"
    if isinstance(name, str) and name:
        if len(name) > 253:
            yield "metadata.name", f"must be no more than 253 characters (is {len(name)})", "shorten the name"
        elif not DNS1123_SUBDOMAIN.match(name):
            yield (
                "metadata.name",
                f"{quote(name)} is not a DNS-1123 subdomain",
                "use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
            )
    for key, value in (meta.get("labels") or {}).items() if isinstance(meta.get("labels"), dict) else ():
        if not _qualified(key):
            yield f"metadata.labels[{clip(key)}]", "invalid label key", "use [prefix/]name, name at most 63 characters"
        if isinstance(value, str) and (len(value) > 63 or not LABEL_VALUE.match(value)):
            yield (
                f"metadata.labels[{clip(key)}]",
                f"invalid label value {quote(value)}",
                "at most 63 characters [A-Za-z0-9._-], starting and ending alphanumeric",
            )
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for key in annotations:
            if not _qualified(key):
                yield f"metadata.annotations[{clip(key)}]", "invalid annotation key", "use [prefix/]name"


def _qualified(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(QUALIFIED_NAME.match(name))


def _api_group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def skip_note(doc: Any) -> str | None:
    """Why ``doc`` is passed over (a kind that is not sparkop's, e.g. the ConfigMap an app mounts,
    next to it in the same file), or None when sparkop checks it."""
    if not isinstance(doc, dict):
        return None
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
        return None
    if _api_group(api_version) in (labels.GROUP, KUBEFLOW_GROUP):
        return None
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return one_line(f"skipped {clip(kind, 64)}/{clip(name) if isinstance(name, str) else '?'}: not a sparkop kind")


def _api_version_error(api_version: Any, kind: Any) -> tuple[str, str] | None:
    """(message, hint) when ``apiVersion`` is neither sparkop's nor kubeflow's for ``kind``, or None."""
    if api_version == labels.API_VERSION:
        return None
    if isinstance(api_version, str) and isinstance(kind, str) and kinds.api_of(api_version, kind) is not None:
        return None
    hint = f"change apiVersion to {labels.API_VERSION}"
    if not isinstance(api_version, str) or not api_version:
        return "apiVersion is required", f"set apiVersion: {labels.API_VERSION}"
    if _api_group(api_version) == KUBEFLOW_GROUP:
        resource = kinds.KUBEFLOW_API.resource(kind) if isinstance(kind, str) else None
        if resource is not None:
            return (
                f"kubeflow serves {clip(kind, 64)} as {resource.api_version}, not {quote(api_version)}",
                f"{hint} (or to kubeflow's {resource.api_version}, served with --kubeflow-api)",
            )
        if isinstance(kind, str) and kind in crds.KINDS:
            return f"{clip(kind, 64)} is sparkop's own kind, not kubeflow's", hint
        return f"{quote(api_version)} is kubeflow spark-operator's apiVersion", hint
    return (
        f"unsupported apiVersion {quote(api_version)}: sparkop serves {labels.API_VERSION} (and kubeflow's "
        f"{KUBEFLOW_GROUP} with --kubeflow-api)",
        hint,
    )


def validate_document(doc: Any, source: str = "<input>") -> list[ValidationError]:
    """Errors of one parsed document (empty when the API server would accept it)."""
    if not isinstance(doc, dict):
        return [ValidationError(source, None, None, "", f"a document must be a mapping (an object), not {quote(doc)}")]
    kind = doc.get("kind")
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    name = name if isinstance(name, str) else None

    def err(path: str, message: str, hint: str = "") -> ValidationError:
        return ValidationError(source, kind if isinstance(kind, str) else None, name, path, message, hint)

    wrong_version = _api_version_error(doc.get("apiVersion"), kind)
    if wrong_version:
        return [err("apiVersion", *wrong_version)]
    if not isinstance(kind, str) or kind not in crds.KINDS:
        return [err("kind", f"unsupported kind {quote(kind)}", f"use one of {', '.join(crds.KINDS)}")]

    errors = [err(*e) for e in _metadata_errors(meta)]
    schema_errors = sorted(_validator(kind).iter_errors(doc), key=lambda e: (_path(e), e.message))
    errors += [err(*_schema_error(kind, e)) for e in schema_errors]
    errors += [err(*e) for e in _rule_errors(kind, doc)]
    if kind == scheduled.KIND:
        errors += [err(*e) for e in scheduled.schedule_errors(doc)]
    return errors


def document_warnings(doc: Any, source: str = "<input>") -> list[ValidationWarning]:
    """Warnings of one parsed document of a sparkop kind (none for what is not one: its errors say why)."""
    if not isinstance(doc, dict) or _api_version_error(doc.get("apiVersion"), doc.get("kind")) is not None:
        return []
    kind = doc.get("kind")
    if not isinstance(kind, str) or kind not in crds.KINDS:
        return []
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    spec = doc.get("spec")
    where = "spec"
    if kind == scheduled.KIND:  # its runs' spec is the template
        spec = spec.get("template") if isinstance(spec, dict) else None
        where = ".".join(scheduled.TEMPLATE)
    if not isinstance(spec, dict) or kind == history.KIND:  # a history server reads logs of any line
        return []
    messages = connect.spec_warnings(spec) if kind == connect.KIND else spark_lines.spec_warnings(spec, where)
    no_image = rules.missing_image(spec) if kind != connect.KIND else None
    if no_image is not None:  # kubeflow's group's CRD takes it, as kubeflow's does (sparkop's refuses it)
        messages.append(f"{where}: no run of it can start: {no_image}")
    return [ValidationWarning(source, kind, name if isinstance(name, str) else None, m) for m in messages]


@dataclass(frozen=True)
class Checked:
    """A document of a file, checked: skipped (``note``), unreadable, invalid or valid, and what it is
    warned of."""

    source: str
    body: Any
    errors: list[ValidationError]
    note: str | None = None  # why it was passed over
    warnings: list[ValidationWarning] = field(default_factory=list)


def check(documents: Iterable[manifests.Document]) -> list[Checked]:
    """Every non-empty document checked; those of other kinds are passed over with a note."""
    out: list[Checked] = []
    for doc in documents:
        if doc.problem is not None:
            out.append(Checked(doc.source, None, [ValidationError(doc.source, None, None, "", doc.problem)]))
        elif doc.body is None:
            continue
        elif (note := skip_note(doc.body)) is not None:
            out.append(Checked(doc.source, doc.body, [], note))
        else:
            errors = validate_document(doc.body, doc.source)
            out.append(Checked(doc.source, doc.body, errors, warnings=document_warnings(doc.body, doc.source)))
    return out


def validate_documents(docs: Iterable[Any], source: str = "<input>") -> list[ValidationError]:
    """Errors of all documents (``None`` documents, i.e. empty YAML documents, and documents of
    other kinds, see :func:`skip_note`, are skipped)."""
    parsed = [manifests.Document(manifests.source_of(source, i), manifests.as_json(d)) for i, d in enumerate(docs, 1)]
    return [e for checked in check(parsed) for e in checked.errors]


def main(argv: list[str] | None = None) -> int:
    """``sparkop validate FILE...``: 0 when all documents are valid, 1 when some are not, 2 when a
    file (or a document of it) cannot be read or parsed. One line per problem, naming the document;
    documents of other kinds (a ConfigMap next to the app) are passed over with a note on stderr, and
    warnings go there too (they change no exit status)."""
    parser = argparse.ArgumentParser(
        prog="sparkop validate",
        description="Check SparkApplication/SparkDriver manifests offline, with the API server's verdict.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML files (multi-document); - reads stdin")
    parser.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    args = parser.parse_args(argv)
    status = 0
    for path in args.files:
        try:
            source, documents = manifests.read(path)
        except OSError as exc:
            print(f"{path}: cannot read: {one_line(exc.strerror or str(exc))}", file=sys.stderr)
            status = 2
            continue
        if any(d.problem is not None for d in documents):
            status = 2
        checked = check(documents)
        for item in checked:
            if item.note:
                print(f"{item.source}: {item.note}", file=sys.stderr)
            for error in item.errors:
                print(error)
            for warning in item.warnings:
                print(warning, file=sys.stderr)
        if any(item.errors for item in checked):
            status = max(status, 1)
        elif not args.quiet:
            valid = sum(1 for item in checked if not item.note)
            skipped = len(checked) - valid
            warned = sum(len(item.warnings) for item in checked)
            print(
                f"{source}: {valid} document{'s' if valid != 1 else ''} valid"
                + (f", {skipped} of other kinds skipped" if skipped else "")
                + (f", {warned} warning{'s' if warned != 1 else ''}" if warned else "")
            )
    return status
