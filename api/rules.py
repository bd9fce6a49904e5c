"""Cross-field rules: one table, used twice.

Each :class:`Rule` carries the CEL expression the CRD generator puts into
``x-kubernetes-validations`` (the API server enforces it) and a Python predicate with the same
meaning that ``sparkop validate`` runs offline. They sit side by side so they cannot drift; the
integration tests submit every invalid manifest to a real API server and check both verdicts agree.

Predicates see the object at the rule's path *after* the CRD's defaults are applied, as CEL does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from sparkop.core.jsontypes import JSON
from sparkop.domain.labels import GROUP, KUBEFLOW_GROUP

from . import spark_lines

RESERVED_SPARK_CONF: Final = ("spark.driver.host", "spark.driver.bindAddress", "spark.kubernetes.driver.pod.name")
RETRY_FIELDS: Final = (
    "onFailureRetries",
    "onFailureRetryInterval",
    "onSubmissionFailureRetries",
    "onSubmissionFailureRetryInterval",
)

APP: Final = "SparkApplication"
DRIVER: Final = "SparkDriver"
BOTH: Final = (APP, DRIVER)


@dataclass(frozen=True)
class Rule:
    """A cross-field rule at ``path`` (property names from the object root, e.g. ("spec", "driver"))."""

    name: str
    kinds: tuple[str, ...]
    paths: tuple[tuple[str, ...], ...]
    cel: str
    message: str
    predicate: Callable[[JSON], bool]
    field_path: str | None = None  # CEL fieldPath, relative to the rule's object, e.g. ".mainClass"
    hint: str = ""  # how to fix it (offline messages)
    reason: str | None = None  # CEL reason (FieldValueInvalid when None)
    extra: dict[str, Any] = field(default_factory=dict)
    measure: Callable[[JSON], str] | None = None  # what was found, for the offline message (e.g. a size)
    # The served groups whose CRDs carry it (sparkop's SparkDriver: sparkop's group's rules).
    groups: frozenset[str] = frozenset({GROUP, KUBEFLOW_GROUP})

    def crd_rule(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.cel, "message": self.message}
        if self.field_path:
            out["fieldPath"] = self.field_path
        if self.reason:
            out["reason"] = self.reason
        return out


def _has(obj: JSON, *keys: str) -> bool:
    cur: Any = obj
    for key in keys:
        if not isinstance(cur, dict) or key not in cur:
            return False
        cur = cur[key]
    return True


def _at(obj: JSON, path: tuple[str, ...]) -> Any:
    cur: Any = obj
    for key in path:
        cur = cur.get(key) if isinstance(cur, dict) else None
    return cur


def _cel_has(path: tuple[str, ...]) -> str:
    return " && ".join("has(self." + ".".join(path[: i + 1]) + ")" for i in range(len(path)))


# What sparkop writes, one property per entry, into the driver's spark.properties ConfigMap, which
# the API server refuses above 1 MiB (1,048,576 bytes of keys and values). Free text of the spec that
# ends up there: maps (counted as key + value), texts and lists (each item; they are comma-joined).
INLINED_MAPS: Final = (
    ("sparkConf",),
    ("hadoopConf",),
    *((role, attr) for role in ("driver", "executor") for attr in ("labels", "annotations", "nodeSelector", "envVars")),
)
INLINED_TEXTS: Final = (("driver", "javaOptions"), ("executor", "javaOptions"))
INLINED_LISTS: Final = tuple(
    ("deps", attr) for attr in ("jars", "files", "pyFiles", "packages", "excludePackages", "repositories", "archives")
)
# The budget for those, in characters: 1,000,000 less a 100,000 margin for what sparkop adds to each
# entry (prefixes such as spark.kubernetes.driver.annotation., escapes, "=" and newlines) and its own
# ~60 properties. Characters, not bytes, because CEL's size() counts characters; a value full of
# multi-byte characters can still pass here and be refused when the driver is rendered, which checks
# the real size.
INLINED_PROPERTIES_BUDGET: Final = 1_000_000 - 100_000


def inlined_properties_size(spec: JSON) -> int:
    """Characters of the spec's free text that go into the driver's properties ConfigMap."""
    total = 0
    for path in INLINED_MAPS:
        mapping = _at(spec, path)
        if isinstance(mapping, dict):
            total += sum(len(k) + len(v) for k, v in mapping.items())
    for path in INLINED_TEXTS:
        text = _at(spec, path)
        if text is not None:
            total += len(text)
    for path in INLINED_LISTS:
        items = _at(spec, path)
        if isinstance(items, list):
            total += sum(len(x) for x in items)
    return total


def _inlined_properties_cel() -> str:
    terms = []
    for path in INLINED_MAPS:
        ref = "self." + ".".join(path)
        terms.append(f"({_cel_has(path)} ? {ref}.map(k, size(k) + size({ref}[k])).sum() : 0)")
    for path in INLINED_TEXTS:
        terms.append(f"({_cel_has(path)} ? size(self.{'.'.join(path)}) : 0)")
    for path in INLINED_LISTS:
        terms.append(f"({_cel_has(path)} ? self.{'.'.join(path)}.map(x, size(x)).sum() : 0)")
    return " + ".join(terms) + f" <= {INLINED_PROPERTIES_BUDGET}"


SPEC: Final = ("spec",)
SPARKOP_ONLY: Final = frozenset({GROUP})
KUBEFLOW_ONLY: Final = frozenset({KUBEFLOW_GROUP})

# The container image, as spark-submit resolves it for each role: the role's own property, else the
# common one. spec.image and spec.<role>.image are sparkop's (and kubeflow's) typed forms of them.
IMAGE_CONF: Final = "spark.kubernetes.container.image"
ROLES: Final = ("driver", "executor")


def role_image_conf(role: str) -> str:
    return f"spark.kubernetes.{role}.container.image"


def _image_for(spec: JSON, role: str) -> bool:
    conf = spec.get("sparkConf") or {}
    return "image" in spec or _has(spec, role, "image") or role_image_conf(role) in conf or IMAGE_CONF in conf


def _image_for_cel(role: str) -> str:
    conf = f"(has(self.sparkConf) && ('{IMAGE_CONF}' in self.sparkConf || '{role_image_conf(role)}' in self.sparkConf))"
    return f"(has(self.image) || (has(self.{role}) && has(self.{role}.image)) || {conf})"


def missing_image(spec: JSON) -> str | None:
    """Why a run of ``spec`` would have no container image (None: each role has one): what spark-submit
    would refuse before it submits, named by the fields that give one."""
    missing = [role for role in ROLES if not _image_for(spec, role)]
    if not missing:
        return None
    return (
        f"no container image for the {' and the '.join(missing)}: set spec.image (or spec.driver.image and "
        f"spec.executor.image), or sparkConf {IMAGE_CONF} (or {role_image_conf('driver')} and "
        f"{role_image_conf('executor')})"
    )


# The sparkConf keys kubeflow's admission webhook refuses (v2.5), with its reason: values the operator
# sets itself, credentials, and the image, which has its own fields. sparkop's CRD of kubeflow's group
# refuses them likewise (sparkop has no webhook: a CEL rule each); sparkop's own group keeps replacing the
# ones sparkop sets (driver_controller.submission.OWNED_PROPERTIES).
KUBEFLOW_DENIED_SPARK_CONF: Final = {
    **dict.fromkeys(
        (f"spark.kubernetes.authenticate.{role}.serviceAccountName" for role in ROLES),
        "configure the service account via the CRD spec instead",
    ),
    **dict.fromkeys(
        (
            f"spark.kubernetes.authenticate.{who}{what}"
            for who in ("", "driver.", "executor.")
            for what in ("oauthTokenFile", "oauthToken")
        ),
        "authentication credentials are managed by the operator",
    ),
    **dict.fromkeys(("spark.master", "spark.kubernetes.driver.master"), "this value is managed by the operator"),
    **dict.fromkeys((IMAGE_CONF, *(role_image_conf(role) for role in ROLES)), "use the image field on the CRD instead"),
}

# The batch schedulers sparkop knows (kubeflow's names; kube-scheduler is its scheduler-plugins one).
BATCH_SCHEDULERS: Final = ("volcano", "yunikorn", "kube-scheduler")
# Those whose own name the pods' schedulerName must carry.
NAMED_SCHEDULERS: Final = ("volcano", "yunikorn")
# Each batchSchedulerOptions field, and the schedulers that use it.
BATCH_SCHEDULER_OPTIONS: Final = {
    "queue": ("volcano", "yunikorn"),
    "priorityClassName": ("volcano",),
    "resources": ("volcano", "kube-scheduler"),
}
# kubeflow's spec-level retry fields and the restartPolicy field each means.
SPEC_LEVEL_RETRIES: Final = {"failureRetries": "onFailureRetries", "retryInterval": "onSubmissionFailureRetryInterval"}


def _cel_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{item}'" for item in items) + "]"


def _unique(items: list[Any]) -> bool:
    return len(items) == len(set(items))


def _cel_string(text: str) -> str:
    """``text`` as a CEL string literal: a regex's backslashes are not CEL escapes (``\\.`` is invalid
    CEL), so they are doubled, and quotes escaped."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _required_for_types(name: str, types: tuple[str, ...], key: str, languages: str, hint: str) -> Rule:
    """spec.<key> must be set when spec.type is one of ``types``: its CEL and its predicate from one list."""
    return Rule(
        name=name,
        kinds=BOTH,
        paths=(SPEC,),
        cel=f"!(self.type in {_cel_list(types)}) || has(self.{key})",
        message=f"{key} is required for {languages} applications",
        field_path=f".{key}",
        reason="FieldValueRequired",
        hint=hint,
        predicate=lambda spec: spec.get("type") not in types or key in spec,
    )


RULES: Final[tuple[Rule, ...]] = (
    Rule(
        name="cluster-mode-only",
        kinds=(APP,),
        paths=(SPEC,),
        cel="self.mode == 'cluster'",
        message="only mode: cluster is supported (the driver runs in its own pod); "
        "client and in-cluster-client are not",
        field_path=".mode",
        hint="remove spec.mode or set it to cluster",
        predicate=lambda s: s.get("mode", "cluster") == "cluster",
    ),
    _required_for_types(
        "main-class-for-jvm",
        ("Java", "Scala"),
        "mainClass",
        "Java and Scala",
        "set spec.mainClass to the fully qualified main class, e.g. org.apache.spark.examples.SparkPi",
    ),
    _required_for_types(
        "main-file-for-python-r",
        ("Python", "R"),
        "mainApplicationFile",
        "Python and R",
        "set spec.mainApplicationFile, e.g. local:///opt/spark/examples/src/main/python/pi.py",
    ),
    Rule(
        name="image-required",
        kinds=BOTH,
        paths=(SPEC,),
        cel=" && ".join(_image_for_cel(role) for role in ROLES),
        message="an image is required: set spec.image, or both spec.driver.image and spec.executor.image, or "
        f"sparkConf {IMAGE_CONF}",
        field_path=".image",
        reason="FieldValueRequired",
        hint="set spec.image, e.g. apache/spark:3.5.7",
        predicate=lambda s: all(_image_for(s, role) for role in ROLES),
        # kubeflow's CRD takes an app without one (its spark-submit then fails): the apps controller says
        # why that app cannot run (missing_image).
        groups=SPARKOP_ONLY,
    ),
    *(
        Rule(
            name=f"kubeflow-denied-spark-conf-{key}",
            kinds=(APP,),
            paths=(SPEC,),
            cel=f"!has(self.sparkConf) || !('{key}' in self.sparkConf)",
            message=f'sparkConf key "{key}" is not allowed: {why}',
            field_path=".sparkConf",
            reason="FieldValueForbidden",
            hint=f"remove {key} from spec.sparkConf",
            predicate=lambda s, key=key: key not in (s.get("sparkConf") or {}),  # type: ignore[misc]
            groups=KUBEFLOW_ONLY,
        )
        for key, why in KUBEFLOW_DENIED_SPARK_CONF.items()
    ),
    Rule(
        name="reserved-spark-conf",
        kinds=BOTH,
        paths=(SPEC,),
        cel="!has(self.sparkConf) || (" + " && ".join(f"!('{k}' in self.sparkConf)" for k in RESERVED_SPARK_CONF) + ")",
        message="sparkConf must not set " + ", ".join(RESERVED_SPARK_CONF) + ": sparkop sets them for each driver pod",
        field_path=".sparkConf",
        reason="FieldValueForbidden",
        hint="remove these keys from spec.sparkConf",
        predicate=lambda s: not any(k in (s.get("sparkConf") or {}) for k in RESERVED_SPARK_CONF),
    ),
    Rule(
        name="node-selector-exclusive",
        kinds=BOTH,
        paths=(SPEC,),
        cel="!has(self.nodeSelector) || ((!has(self.driver) || !has(self.driver.nodeSelector)) && "
        "(!has(self.executor) || !has(self.executor.nodeSelector)))",
        message="spec.nodeSelector (deprecated) cannot be combined with driver.nodeSelector or executor.nodeSelector",
        field_path=".nodeSelector",
        reason="FieldValueForbidden",
        hint="move spec.nodeSelector into spec.driver.nodeSelector and spec.executor.nodeSelector",
        predicate=lambda s: (
            "nodeSelector" not in s
            or (not _has(s, "driver", "nodeSelector") and not _has(s, "executor", "nodeSelector"))
        ),
    ),
    Rule(
        name="retries-need-restart",
        kinds=(APP,),
        paths=(("spec", "restartPolicy"),),
        cel="self.type != 'Never' || (" + " && ".join(f"!has(self.{f})" for f in RETRY_FIELDS) + ")",
        message="onFailureRetries, onFailureRetryInterval, onSubmissionFailureRetries and "
        "onSubmissionFailureRetryInterval only apply with type OnFailure or Always",
        field_path=".type",
        hint="set restartPolicy.type to OnFailure (or Always), or remove the retry fields",
        predicate=lambda r: r.get("type", "Never") != "Never" or not any(f in r for f in RETRY_FIELDS),
    ),
    Rule(
        name="min-le-max-executors",
        kinds=BOTH,
        paths=(("spec", "dynamicAllocation"),),
        cel="!has(self.minExecutors) || !has(self.maxExecutors) || self.minExecutors <= self.maxExecutors",
        message="minExecutors must not exceed maxExecutors",
        field_path=".minExecutors",
        hint="lower minExecutors or raise maxExecutors",
        predicate=lambda d: not ("minExecutors" in d and "maxExecutors" in d) or d["minExecutors"] <= d["maxExecutors"],
    ),
    Rule(
        name="initial-within-bounds",
        kinds=BOTH,
        paths=(("spec", "dynamicAllocation"),),
        cel="!has(self.initialExecutors) || ((!has(self.minExecutors) || self.initialExecutors >= "
        "self.minExecutors) && (!has(self.maxExecutors) || self.initialExecutors <= self.maxExecutors))",
        message="initialExecutors must lie between minExecutors and maxExecutors",
        field_path=".initialExecutors",
        hint="set initialExecutors within [minExecutors, maxExecutors]",
        predicate=lambda d: (
            "initialExecutors" not in d
            or (
                ("minExecutors" not in d or d["initialExecutors"] >= d["minExecutors"])
                and ("maxExecutors" not in d or d["initialExecutors"] <= d["maxExecutors"])
            )
        ),
    ),
    Rule(
        name="batch-scheduler-known",
        kinds=BOTH,
        paths=(SPEC,),
        cel="!has(self.batchScheduler) || self.batchScheduler in " + _cel_list(BATCH_SCHEDULERS),
        message="batchScheduler must be one of " + ", ".join(BATCH_SCHEDULERS) + " (Kueue: label the "
        "SparkApplication with kueue.x-k8s.io/queue-name instead)",
        field_path=".batchScheduler",
        hint="set spec.batchScheduler to " + ", ".join(BATCH_SCHEDULERS) + ", or remove it",
        predicate=lambda s: "batchScheduler" not in s or s["batchScheduler"] in BATCH_SCHEDULERS,
    ),
    Rule(
        name="batch-scheduler-options-need-scheduler",
        kinds=BOTH,
        paths=(SPEC,),
        cel="!has(self.batchSchedulerOptions) || has(self.batchScheduler)",
        message="batchSchedulerOptions only apply with batchScheduler",
        field_path=".batchSchedulerOptions",
        reason="FieldValueForbidden",
        hint="set spec.batchScheduler (" + ", ".join(BATCH_SCHEDULERS) + "), or remove spec.batchSchedulerOptions",
        predicate=lambda s: "batchSchedulerOptions" not in s or "batchScheduler" in s,
    ),
    *(
        Rule(
            name=f"batch-scheduler-option-{option}",
            kinds=BOTH,
            paths=(SPEC,),
            cel=f"!has(self.batchSchedulerOptions) || !has(self.batchSchedulerOptions.{option}) || "
            f"!has(self.batchScheduler) || self.batchScheduler in {_cel_list(takers)}",
            message=f"batchSchedulerOptions.{option} is used only by " + " and ".join(takers),
            field_path=f".batchSchedulerOptions.{option}",
            reason="FieldValueForbidden",
            hint=f"remove spec.batchSchedulerOptions.{option}",
            predicate=lambda s, option=option, takers=takers: (  # type: ignore[misc]
                option not in (s.get("batchSchedulerOptions") or {})
                or "batchScheduler" not in s
                or s["batchScheduler"] in takers
            ),
        )
        for option, takers in BATCH_SCHEDULER_OPTIONS.items()
    ),
    *(
        Rule(
            name=f"batch-scheduler-names-the-{role}-scheduler",
            kinds=BOTH,
            paths=(SPEC,),
            cel=f"!has(self.batchScheduler) || !(self.batchScheduler in {_cel_list(NAMED_SCHEDULERS)}) || "
            f"!has(self.{role}) || !has(self.{role}.schedulerName) || self.{role}.schedulerName == self.batchScheduler",
            message=f"{role}.schedulerName must not differ from batchScheduler: volcano and yunikorn schedule the "
            "pods themselves",
            field_path=f".{role}.schedulerName",
            reason="FieldValueForbidden",
            hint=f"remove spec.{role}.schedulerName",
            predicate=lambda s, role=role: (  # type: ignore[misc]
                s.get("batchScheduler") not in NAMED_SCHEDULERS
                or (s.get(role) or {}).get("schedulerName") in (None, s["batchScheduler"])
            ),
        )
        for role in ("driver", "executor")
    ),
    *(
        Rule(
            name=f"{old}-needs-restart",
            kinds=(APP,),
            paths=(SPEC,),
            cel=f"!has(self.{old}) || (has(self.restartPolicy) && has(self.restartPolicy.type) && "
            "self.restartPolicy.type != 'Never')",
            message=f"{old} (kubeflow's {new}) only applies with restartPolicy type OnFailure or Always",
            field_path=f".{old}",
            hint=f"set spec.restartPolicy.type to OnFailure (or Always), or remove spec.{old}",
            predicate=lambda s, old=old: (  # type: ignore[misc]
                old not in s or (s.get("restartPolicy") or {}).get("type", "Never") != "Never"
            ),
        )
        for old, new in SPEC_LEVEL_RETRIES.items()
    ),
    *(
        Rule(
            name=f"{old}-or-{new}",
            kinds=(APP,),
            paths=(SPEC,),
            cel=f"!has(self.{old}) || !has(self.restartPolicy) || !has(self.restartPolicy.{new})",
            message=f"{old} and restartPolicy.{new} say the same thing: set one of them",
            field_path=f".{old}",
            reason="FieldValueForbidden",
            hint=f"remove spec.{old} (restartPolicy.{new} is the same)",
            predicate=lambda s, old=old, new=new: (  # type: ignore[misc]
                old not in s or new not in (s.get("restartPolicy") or {})
            ),
        )
        for old, new in SPEC_LEVEL_RETRIES.items()
    ),
    Rule(
        name="driver-ingress-url-formats-unique",
        kinds=(APP,),
        paths=(SPEC,),
        cel="!has(self.driverIngressOptions) || self.driverIngressOptions.all(x, "
        "self.driverIngressOptions.exists_one(y, y.ingressURLFormat == x.ingressURLFormat))",
        message="driverIngressOptions: each entry needs its own ingressURLFormat",
        field_path=".driverIngressOptions",
        reason="FieldValueDuplicate",
        hint="give every spec.driverIngressOptions entry a different ingressURLFormat",
        predicate=lambda s: _unique([o.get("ingressURLFormat") for o in s.get("driverIngressOptions") or ()]),
    ),
    Rule(
        name="inlined-properties-fit-a-configmap",
        kinds=BOTH,
        paths=(SPEC,),
        cel=_inlined_properties_cel(),
        message="sparkConf, hadoopConf, the driver's and executor's labels, annotations, nodeSelector, envVars "
        f"and javaOptions, and the deps lists together must stay within {INLINED_PROPERTIES_BUDGET} characters: "
        "sparkop writes them into the driver's properties ConfigMap, which the API server refuses above 1 MiB",
        field_path=".sparkConf",
        hint="move large values into files (a ConfigMap of your own mounted with spec.sparkConfigMap or "
        "spec.hadoopConfigMap, or the image)",
        predicate=lambda s: inlined_properties_size(s) <= INLINED_PROPERTIES_BUDGET,
        measure=lambda s: f"they have {inlined_properties_size(s)} characters",
    ),
    Rule(
        name="spark-version-is-a-version",
        kinds=BOTH,
        paths=(SPEC,),
        cel=f"!has(self.sparkVersion) || self.sparkVersion.matches({_cel_string(spark_lines.VERSION_PATTERN)})",
        message=spark_lines.VERSION_MESSAGE,
        field_path=".sparkVersion",
        hint="set spec.sparkVersion to the image's Spark version, e.g. 4.3.0, or remove it to render line "
        f"{spark_lines.DEFAULT_LINE}",
        predicate=lambda s: "sparkVersion" not in s or spark_lines.line_of(s["sparkVersion"]) is not None,
    ),
)


def rules_at(kind: str, path: tuple[str, ...]) -> list[Rule]:
    return [r for r in RULES if kind in r.kinds and path in r.paths]
