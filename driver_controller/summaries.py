"""What the driver controller's caches keep of the objects a SparkDriver owns (its pods, ConfigMaps,
Services, NetworkPolicies, PodGroups) and of the nodes its driver pods run on, and the summaries a pass
reads of them (:class:`PodSummary`, ...), each with the uid of the SparkDriver that owns it (core.owners).

A summary holds only what reconcile reads, and reconcile never needs to LIST. Pure functions of a
watched body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final

from sparkop.core.jsontypes import JSON
from sparkop.core.owners import controller_of, read_references, reference_to
from sparkop.core.times import parse_time
from sparkop.domain import kinds, labels
from sparkop.driver_controller.templates import DRIVER_CONTAINER, EXECUTOR_CONTAINER

Body = Mapping[str, Any]
DRIVER_KIND: Final = kinds.SPARK_DRIVERS.kind

# Container waiting reasons that mean "this will not start by itself".
STUCK_WAITING: Final = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)
# Pod status reasons and DisruptionTarget reasons that mean the pod was taken away, not that the
# application ended.
DISRUPTION_REASONS: Final = frozenset(
    {
        "Evicted",
        "Preempted",
        "Preempting",
        "NodeLost",
        "NodeShutdown",
        "Terminated",
        "UnexpectedAdmissionError",
        "OutOfcpu",
        "OutOfmemory",
        "OutOfpods",
    }
)


@dataclass(frozen=True)
class Terminated:
    exit_code: int | None
    reason: str | None
    message: str | None
    finished_at: datetime | None


@dataclass(frozen=True)
class ObjectSummary:
    """A ConfigMap or Service (or any owned object): enough to find stale ones."""

    kind: str
    namespace: str
    name: str
    uid: str
    incarnation: int
    owner_uid: str  # the uid of the SparkDriver that owns it (core.owners)
    deleting: bool


@dataclass(frozen=True)
class PolicySummary:
    """The executors' NetworkPolicy of an incarnation: enough to find a stale one, and its labels and
    spec, which a pass compares with the policy it wants (an edit is put back). The index hands the
    same summary to every pass while the object is unchanged: readers never change it."""

    namespace: str
    name: str
    uid: str
    resource_version: str  # a restoring patch's precondition
    incarnation: int
    owner_uid: str  # the uid of the SparkDriver that owns it (core.owners)
    deleting: bool
    labels: Mapping[str, str]
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class PodSummary:
    namespace: str
    name: str
    uid: str
    resource_version: str
    role: str  # "driver" | "executor" | ""
    incarnation: int
    owner_uid: str  # the uid of the SparkDriver that owns it: controls a driver pod, references an executor
    finalizers: tuple[str, ...]
    phase: str
    created: datetime | None
    deletion_requested: datetime | None  # deletionTimestamp minus the grace period
    reason: str | None  # status.reason (Evicted, ...)
    message: str | None
    disruption: str | None  # DisruptionTarget condition reason, when True
    unschedulable_since: datetime | None
    unschedulable_message: str | None
    waiting_reason: str | None  # of the Spark container, when stuck
    waiting_message: str | None
    terminated: Terminated | None  # of the Spark container
    init_failure: Terminated | None
    node_name: str | None
    pod_ip: str | None
    start_time: datetime | None
    ready: bool = False  # the Ready condition: every container passes its readiness probe
    scheduled_at: datetime | None = None  # the PodScheduled condition's turn to True: bound to its node
    executor_id: int | None = None  # an executor's Spark executor id (its spark-exec-id label)
    driver: str | None = None  # the SparkDriver it was made for (its sparkop.io/driver label)
    app_selector: str | None = None  # its spark-app-selector label: the spark.app.id of its driver

    @property
    def deleting(self) -> bool:
        return self.deletion_requested is not None

    @property
    def finished(self) -> bool:
        """The Spark container (or the pod) has ended."""
        return self.phase in ("Succeeded", "Failed") or self.terminated is not None


def trim_node(body: JSON) -> JSON:
    """What the Node cache keeps: its name and whether its kubelet still reports (the Ready condition's
    status), not its images, addresses and capacities."""
    meta = body.get("metadata") or {}
    ready = [
        {"type": "Ready", "status": c.get("status")}
        for c in (body.get("status") or {}).get("conditions") or ()
        if c.get("type") == "Ready"
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {k: meta[k] for k in ("name", "uid", "resourceVersion") if k in meta},
        "status": {"conditions": ready},
    }


def node_lost(body: Body) -> bool:
    """A node whose kubelet stopped reporting (Ready Unknown, as the node lifecycle controller marks it):
    its pods' containers will never be confirmed stopped, so their deletion never completes by itself."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "Unknown"
        for c in (body.get("status") or {}).get("conditions") or ()
    )


@dataclass(frozen=True)
class PodGroupSummary:
    """A batch scheduler's PodGroup (Volcano's or scheduler-plugins' coscheduling): what its status
    says of the gang (``phase``, and the condition of Volcano's that says why it waits)."""

    api_version: str
    name: str
    uid: str
    owner_uid: str  # the uid of the SparkDriver that owns it (core.owners)
    phase: str
    reason: str | None = None
    message: str | None = None


def _trimmed_meta(body: Body) -> JSON:
    meta = body.get("metadata") or {}
    return {k: v for k, v in meta.items() if k not in ("managedFields", "annotations")}


def kept(body: Body, **parts: Any) -> JSON:
    """What a cache keeps of an object: its apiVersion, kind and metadata (but the managedFields and
    annotations nothing reads), and ``parts``."""
    return {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"), "metadata": _trimmed_meta(body), **parts}


def trim_pod(body: JSON) -> JSON:
    """What the pod cache keeps: what :func:`summarize_pod` reads (a pod's spec, its volumes and
    environment, are most of it, and never read: 10,000 finished apps' driver pods stay cached)."""
    spec = body.get("spec") or {}
    kept_spec = {"containers": [{"name": c.get("name")} for c in spec.get("containers") or ()]}
    if spec.get("nodeName"):
        kept_spec["nodeName"] = spec["nodeName"]
    return {
        "apiVersion": body.get("apiVersion", "v1"),
        "kind": body.get("kind", "Pod"),
        "metadata": _trimmed_meta(body),
        "spec": kept_spec,
        "status": body.get("status") or {},
    }


# What a ConfigMap's or Service's metadata keeps in the cache (see trim_owned).
OWNED_META: Final = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp", "finalizers")


def trim_owned(body: JSON) -> JSON:
    """What the ConfigMap and Service caches keep: what :func:`summarize_object` and the keys filing it
    under its SparkDriver read (a driver's ConfigMaps hold its Spark properties and pod template:
    kilobytes each, never read back). Of the metadata, its identity, sparkop's own labels and who owns
    it: a finished app's two ConfigMaps and Service are cached for as long as it is kept, and the other
    labels (Spark's app selector, the managed-by label) and timestamps were much of what they held."""
    meta = body.get("metadata") or {}
    kept: JSON = {k: meta[k] for k in OWNED_META if k in meta}
    kept["labels"] = {k: v for k, v in (meta.get("labels") or {}).items() if k.startswith(labels.GROUP + "/")}
    kept["ownerReferences"] = read_references(body)
    return {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"), "metadata": kept}


def trim_policy(body: JSON) -> JSON:
    """What the NetworkPolicy cache keeps: what :func:`summarize_policy` reads (its spec is a few
    hundred bytes, and a pass compares it with the wanted one)."""
    return kept(body, spec=body.get("spec") or {})


def trim_pod_group(body: JSON) -> JSON:
    """What the PodGroup caches keep: metadata and status (the spec is ours, never read back)."""
    return kept(body, status=body.get("status") or {})


def summarize_pod_group(body: Body) -> PodGroupSummary:
    """Volcano writes why a gang waits as an ``Unschedulable`` condition (reason NotEnoughResources,
    the message the scheduler also puts on the pods), refreshed every scheduling cycle with a new
    transitionID and time, which this summary leaves out; scheduler-plugins' PodGroup has a phase
    and counts, no condition."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    waiting: Body = next(
        (c for c in status.get("conditions") or () if c.get("type") == "Unschedulable" and c.get("status") == "True"),
        {},
    )
    return PodGroupSummary(
        api_version=str(body.get("apiVersion", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        owner_uid=controlling_driver(body),
        phase=str(status.get("phase") or "Pending"),
        reason=waiting.get("reason") or None,
        message=waiting.get("message") or None,
    )


def pod_view(body: Body) -> PodSummary:
    """What a pass reads of a pod, but for its resourceVersion: two versions with the same view ask
    for the same decisions (patches carry their own preconditions on the fields they change)."""
    return replace(summarize_pod(body), resource_version="")


def _incarnation(meta: Body) -> int:
    try:
        return int((meta.get("labels") or {}).get(labels.INCARNATION, "0"))
    except ValueError:
        return 0


def summarize_object(body: Body) -> ObjectSummary:
    meta = body.get("metadata") or {}
    return ObjectSummary(
        kind=str(body.get("kind", "")),
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        incarnation=_incarnation(meta),
        owner_uid=controlling_driver(body),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def summarize_policy(body: Body) -> PolicySummary:
    meta = body.get("metadata") or {}
    return PolicySummary(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        resource_version=str(meta.get("resourceVersion", "")),
        incarnation=_incarnation(meta),
        owner_uid=controlling_driver(body),
        deleting=bool(meta.get("deletionTimestamp")),
        # The body is the reader's own decoded copy (core.informer.Store): nothing else holds these.
        labels=dict(meta.get("labels") or {}),
        spec=body.get("spec") or {},
    )


def policy_view(body: Body) -> PolicySummary:
    """What a pass reads of a NetworkPolicy, but for its resourceVersion: a write that leaves labels
    and spec as they were (an annotation, an ownerReference the GC drops) asks for no pass."""
    return replace(summarize_policy(body), resource_version="")


def _terminated(state: Body | None) -> Terminated | None:
    term = (state or {}).get("terminated")
    if not term:
        return None
    return Terminated(
        exit_code=term.get("exitCode"),
        reason=term.get("reason"),
        message=term.get("message"),
        finished_at=parse_time(term.get("finishedAt")),
    )


def _spark_status(statuses: list[Body], role: str, containers: list[Body]) -> Body | None:
    """The Spark container's status. A driver pod's Spark container is its last one (Spark appends it
    after the template's others, under the name spark.kubernetes.driver.podTemplateContainerName
    chose); the kubelet lists statuses by name, not in that order."""
    if role == labels.ROLE_DRIVER:
        wanted = str(containers[-1].get("name")) if containers else DRIVER_CONTAINER
    else:
        wanted = EXECUTOR_CONTAINER
    for status in statuses:
        if status.get("name") == wanted:
            return status
    return statuses[-1] if role == labels.ROLE_DRIVER and statuses else (statuses[0] if statuses else None)


def summarize_pod(body: Body) -> PodSummary:
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    pod_labels = meta.get("labels") or {}
    role = pod_labels.get(labels.SPARK_ROLE, "")
    deletion = parse_time(meta.get("deletionTimestamp"))
    if deletion is not None:
        deletion -= timedelta(seconds=int(meta.get("deletionGracePeriodSeconds") or 0))
    disruption = None
    unschedulable_since = None
    unschedulable_message = None
    ready = False
    scheduled_at = None
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            scheduled_at = parse_time(cond.get("lastTransitionTime"))
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            disruption = cond.get("reason") or "DisruptionTarget"
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            unschedulable_since = parse_time(cond.get("lastTransitionTime"))
            unschedulable_message = cond.get("message")
    containers = list(status.get("containerStatuses") or ())
    spark = _spark_status(containers, role, list((body.get("spec") or {}).get("containers") or ()))
    waiting = (spark or {}).get("state", {}).get("waiting") or {}
    waiting_reason = waiting.get("reason") if waiting.get("reason") in STUCK_WAITING else None
    init_failure = None
    for init in status.get("initContainerStatuses") or ():
        term = _terminated(init.get("state"))
        if term is not None and term.exit_code not in (None, 0):
            init_failure = Terminated(
                term.exit_code,
                "InitContainerFailed",
                f"init container {init.get('name')}: {term.reason}",
                term.finished_at,
            )
    return PodSummary(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        resource_version=str(meta.get("resourceVersion", "")),
        role=role,
        incarnation=_incarnation(meta),
        owner_uid=_owning_driver(body),
        finalizers=tuple(meta.get("finalizers") or ()),
        phase=status.get("phase") or "Pending",
        created=parse_time(meta.get("creationTimestamp")),
        deletion_requested=deletion,
        reason=status.get("reason"),
        message=status.get("message"),
        disruption=disruption,
        unschedulable_since=unschedulable_since,
        unschedulable_message=unschedulable_message,
        waiting_reason=waiting_reason,
        waiting_message=waiting.get("message") if waiting_reason else None,
        terminated=_terminated((spark or {}).get("state")),
        init_failure=init_failure,
        node_name=(body.get("spec") or {}).get("nodeName"),
        pod_ip=status.get("podIP"),
        start_time=parse_time(status.get("startTime")),
        ready=ready,
        scheduled_at=scheduled_at,
        executor_id=_executor_id(pod_labels) if role == labels.ROLE_EXECUTOR else None,
        driver=pod_labels.get(labels.DRIVER),
        app_selector=pod_labels.get(labels.SPARK_APP_SELECTOR),
    )


def _executor_id(pod_labels: Body) -> int | None:
    value = pod_labels.get(labels.SPARK_EXEC_ID)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def controlling_driver(body: Body) -> str:
    """The uid of the SparkDriver that controls ``body`` (empty: none)."""
    return str((controller_of(body, labels.GROUP, DRIVER_KIND) or {}).get("uid") or "")


def _owning_driver(body: Body) -> str:
    return str((reference_to(body, labels.GROUP, DRIVER_KIND) or {}).get("uid") or "")
