"""Batch schedulers, as kubeflow's spark-operator integrates them (internal/scheduler/{volcano,yunikorn,
kubescheduler}): what a SparkDriver's ``batchScheduler`` adds to its driver pod, its executor pod
template, and the pod group a scheduler reads.

* ``volcano``: a ``scheduling.volcano.sh/v1beta1`` PodGroup, minMember 1 (in cluster mode the driver
  is scheduled first; its executors join the group later), minResources the driver's requests plus
  the initial executors' (or ``batchSchedulerOptions.resources``), queue and priorityClassName from
  ``batchSchedulerOptions``; ``schedulerName: volcano`` and ``scheduling.k8s.io/group-name`` on the
  driver and executor pods.
* ``yunikorn``: no object: YuniKorn reads the pods. ``schedulerName: yunikorn``, the queue (the
  ``queue`` label kubeflow sets, and the ``yunikorn.apache.org/queue`` annotation YuniKorn prefers),
  ``yunikorn.apache.org/app-id`` (the run's spark.app.id, which Spark also puts in
  ``spark-app-selector``), each pod's ``yunikorn.apache.org/task-group-name``, and on the driver, the
  originating pod, the task-group definitions in ``yunikorn.apache.org/task-groups`` (JSON, YuniKorn's
  TaskGroup: name, minMember, minResource, nodeSelector, tolerations, affinity, labels). No executor
  task group when no executor starts with the driver (YuniKorn refuses minMember 0).
* ``kube-scheduler``: a scheduler-plugins coscheduling ``scheduling.x-k8s.io/v1alpha1`` PodGroup,
  minMember 1 and minResources as above, and the ``scheduling.x-k8s.io/pod-group`` label on the pods.
  The pods keep ``driver/executor.schedulerName`` (the scheduler that runs the Coscheduling plugin).

The PodGroup is the SparkDriver's (controller ownerReference, deleted with it), one per run whatever
the driver-pod incarnation: the pods of a replacement incarnation join the same group.

Pure functions of the submission; no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from sparkop.api.models import SparkDriver
from sparkop.core.jsontypes import JSON
from sparkop.domain import labels, naming
from sparkop.driver_controller import sparkconf
from sparkop.driver_controller.submission import InvalidSpec

VOLCANO: Final = "volcano"
YUNIKORN: Final = "yunikorn"
KUBE_SCHEDULER: Final = "kube-scheduler"
POD_GROUP_SCHEDULERS: Final = frozenset({VOLCANO, KUBE_SCHEDULER})

VOLCANO_API_VERSION: Final = "scheduling.volcano.sh/v1beta1"
VOLCANO_GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"  # volcano.sh/apis KubeGroupNameAnnotationKey
COSCHEDULING_API_VERSION: Final = "scheduling.x-k8s.io/v1alpha1"
COSCHEDULING_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"  # scheduler-plugins PodGroupLabel

# https://yunikorn.apache.org/docs/user_guide/labels_and_annotations_in_yunikorn/
YUNIKORN_APP_ID: Final = "yunikorn.apache.org/app-id"
YUNIKORN_QUEUE: Final = "yunikorn.apache.org/queue"
YUNIKORN_QUEUE_LABEL: Final = "queue"  # what kubeflow sets (YuniKorn's older, still honoured form)
YUNIKORN_TASK_GROUP_NAME: Final = "yunikorn.apache.org/task-group-name"
YUNIKORN_TASK_GROUPS: Final = "yunikorn.apache.org/task-groups"
# kubeflow's names, those of YuniKorn's gang-scheduling example for Spark.
DRIVER_TASK_GROUP: Final = "spark-driver"
EXECUTOR_TASK_GROUP: Final = "spark-executor"

MEMORY_OVERHEAD_MIN_MIB: Final = 384
_CPU = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(m?)$")


@dataclass
class PodPart:
    """What a scheduler adds to one role's pods."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    scheduler_name: str | None = None

    def apply(self, pod: JSON) -> None:
        """Into a pod or pod template (``metadata`` and ``spec`` exist or are made)."""
        meta = pod.setdefault("metadata", {})
        if self.labels:
            meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        if self.annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations}
        if self.scheduler_name:
            pod.setdefault("spec", {})["schedulerName"] = self.scheduler_name


@dataclass
class Scheduling:
    """A SparkDriver's batch scheduling: its pod group (None: none is needed) and what its pods carry."""

    pod_group: JSON | None = None
    driver: PodPart = field(default_factory=PodPart)
    executor: PodPart = field(default_factory=PodPart)


# --- resources, as the pods will request them ------------------------------------------------------


def millicores(quantity: str) -> int:
    """A Kubernetes CPU quantity ("500m", "1.5", "2") in millicores."""
    match = _CPU.match(quantity.strip())
    if match is None:
        raise ValueError(f"not a CPU quantity: {quantity!r}")
    number, milli = Decimal(match.group(1)), match.group(2)
    return int(number if milli else number * 1000)


def cpu_quantity(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


@dataclass(frozen=True)
class Requests:
    """One pod's requests: CPU in millicores, memory in MiB."""

    cpu_milli: int
    memory_mib: int

    def times(self, n: int) -> Requests:
        return Requests(self.cpu_milli * n, self.memory_mib * n)

    def plus(self, other: Requests) -> Requests:
        return Requests(self.cpu_milli + other.cpu_milli, self.memory_mib + other.memory_mib)

    def as_resources(self) -> dict[str, str]:
        return {"cpu": cpu_quantity(self.cpu_milli), "memory": f"{self.memory_mib}Mi"}


def driver_requests(container: Mapping[str, Any]) -> Requests:
    """The rendered driver container's requests (podbuild computes them exactly as Spark does)."""
    requests = (container.get("resources") or {}).get("requests") or {}
    memory = str(requests.get("memory", "0Mi"))
    return Requests(millicores(str(requests.get("cpu", "1"))), int(memory.removesuffix("Mi") or 0))


def executor_requests(conf: Mapping[str, str], resource_type: str, min_overhead_conf: bool) -> Requests:
    """An executor pod's requests as Spark's BasicExecutorFeatureStep computes them: CPU from
    spark.kubernetes.executor.request.cores or spark.executor.cores; memory heap + overhead (explicit,
    else max(factor x heap, 384 MiB)) + spark.executor.pyspark.memory for Python."""
    cpu = conf.get("spark.kubernetes.executor.request.cores") or str(int(conf.get("spark.executor.cores", "1")))
    heap = sparkconf.byte_string_as_mib(conf.get("spark.executor.memory", "1g"))
    explicit = conf.get("spark.executor.memoryOverhead")
    if explicit is not None:
        overhead = sparkconf.byte_string_as_mib(explicit)
    else:
        general = conf.get("spark.kubernetes.memoryOverheadFactor")
        default = float(general) if general is not None else (0.4 if resource_type != "java" else 0.1)
        factor = float(conf.get("spark.executor.memoryOverheadFactor", default))
        minimum = MEMORY_OVERHEAD_MIN_MIB
        if min_overhead_conf and "spark.executor.minMemoryOverhead" in conf:
            minimum = sparkconf.byte_string_as_mib(conf["spark.executor.minMemoryOverhead"])
        overhead = max(int(factor * heap), minimum)
    pyspark = conf.get("spark.executor.pyspark.memory") if resource_type == "python" else None
    extra = sparkconf.byte_string_as_mib(pyspark) if pyspark else 0
    return Requests(millicores(cpu), heap + overhead + extra)


def initial_executors(conf: Mapping[str, str]) -> int:
    """How many executors the driver asks for at start (Spark's SchedulerBackendUtils, as kubeflow's
    GetInitialExecutorNumber): with dynamic allocation the largest of min, initial and instances;
    otherwise spark.executor.instances (default 2)."""
    if sparkconf.parse_bool(conf.get("spark.dynamicAllocation.enabled")):
        keys = ("spark.dynamicAllocation.minExecutors", "spark.dynamicAllocation.initialExecutors")
        values = [int(conf.get(k, "0")) for k in (*keys, "spark.executor.instances")]
        return max(values)
    return int(conf.get("spark.executor.instances", "2"))


@dataclass(frozen=True)
class PodSetRequests:
    """What a run asks of a queue (Kueue's Workload pod sets): one driver pod, and the executors that
    start with it, each with its requests."""

    driver: Requests
    executor: Requests
    executors: int


def pod_set_requests(
    conf: Mapping[str, str], resource_type: str, min_overhead_conf: bool, driver_container: Mapping[str, Any]
) -> PodSetRequests:
    return PodSetRequests(
        driver_requests(driver_container),
        executor_requests(conf, resource_type, min_overhead_conf),
        initial_executors(conf),
    )


# --- the schedulers ----------------------------------------------------------------------------------


def pod_group_labels(driver: SparkDriver) -> dict[str, str]:
    """sparkop's labels of an object that spans the SparkDriver's incarnations."""
    meta = driver.metadata
    result = {labels.MANAGED_BY: labels.MANAGER, labels.DRIVER: naming.label_value(meta["name"])}
    app = (meta.get("labels") or {}).get(labels.APP)
    if app:
        result[labels.APP] = app
    return result


def run_object(
    driver: SparkDriver, api_version: str, kind: str, name: str, owner: JSON, spec: JSON, **more_labels: str
) -> JSON:
    """An object of the SparkDriver's run, one for all its incarnations (its PodGroup, its Kueue
    Workload): named ``name``, with sparkop's labels (and ``more_labels``), owned by ``owner``."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": driver.metadata["namespace"],
            "labels": {**pod_group_labels(driver), **more_labels},
            "ownerReferences": [dict(owner)],
        },
        "spec": spec,
    }


def _pod_group(driver: SparkDriver, api_version: str, owner: JSON, spec: JSON) -> JSON:
    return run_object(driver, api_version, "PodGroup", naming.pod_group_name(driver.metadata["name"]), owner, spec)


def _min_resources(driver: SparkDriver, total: Requests) -> JSON:
    options = driver.spec.batchSchedulerOptions
    if options is not None and options.resources:
        return {str(k): str(v) for k, v in options.resources.items()}
    return total.as_resources()


def _volcano(driver: SparkDriver, owner: JSON, total: Requests) -> Scheduling:
    spec: JSON = {"minMember": 1, "minResources": _min_resources(driver, total)}
    options = driver.spec.batchSchedulerOptions
    if options is not None and options.queue:
        spec["queue"] = options.queue
    if options is not None and options.priorityClassName:
        spec["priorityClassName"] = options.priorityClassName
    group = _pod_group(driver, VOLCANO_API_VERSION, owner, spec)
    name = group["metadata"]["name"]
    return Scheduling(
        pod_group=group,
        driver=PodPart(annotations={VOLCANO_GROUP_ANNOTATION: name}, scheduler_name=VOLCANO),
        executor=PodPart(annotations={VOLCANO_GROUP_ANNOTATION: name}, scheduler_name=VOLCANO),
    )


def _coscheduling(driver: SparkDriver, owner: JSON, total: Requests) -> Scheduling:
    spec: JSON = {"minMember": 1, "minResources": _min_resources(driver, total)}
    group = _pod_group(driver, COSCHEDULING_API_VERSION, owner, spec)
    name = group["metadata"]["name"]
    return Scheduling(
        pod_group=group,
        driver=PodPart(labels={COSCHEDULING_GROUP_LABEL: name}),
        executor=PodPart(labels={COSCHEDULING_GROUP_LABEL: name}),
    )


def _task_group(
    name: str,
    members: int,
    requests: Requests,
    pod: JSON,
    node_selector: Mapping[str, str],
    role_labels: Mapping[str, str],
) -> JSON:
    """YuniKorn's TaskGroup (yunikorn-k8shim pkg/cache/amprotocol.go), as kubeflow marshals it:
    empty fields left out."""
    group: JSON = {"name": name, "minMember": members, "minResource": requests.as_resources()}
    if node_selector:
        group["nodeSelector"] = dict(node_selector)
    spec = pod.get("spec") or {}
    for key in ("tolerations", "affinity"):
        if spec.get(key):
            group[key] = spec[key]
    if role_labels:
        group["labels"] = dict(role_labels)
    return group


def _yunikorn(
    driver: SparkDriver,
    app_id: str,
    driver_pod: JSON,
    executor_template: JSON,
    requests: tuple[Requests, Requests],
    executors: int,
) -> Scheduling:
    options = driver.spec.batchSchedulerOptions
    queue = options.queue if options is not None else None
    common: dict[str, str] = {YUNIKORN_APP_ID: app_id}
    queue_labels: dict[str, str] = {}
    if queue:
        common[YUNIKORN_QUEUE] = queue
        queue_labels[YUNIKORN_QUEUE_LABEL] = queue
    spec = driver.spec
    driver_labels = {**(spec.driver.labels or {}), **queue_labels}
    groups = [
        _task_group(
            DRIVER_TASK_GROUP,
            1,
            requests[0],
            driver_pod,
            (driver_pod.get("spec") or {}).get("nodeSelector") or {},
            driver_labels,
        )
    ]
    if executors > 0:
        executor_labels = {**(spec.executor.labels or {}), **queue_labels}
        selector = {**(spec.nodeSelector or {}), **(spec.executor.nodeSelector or {})}
        groups.append(
            _task_group(EXECUTOR_TASK_GROUP, executors, requests[1], executor_template, selector, executor_labels)
        )
    return Scheduling(
        driver=PodPart(
            labels=queue_labels,
            annotations={
                **common,
                YUNIKORN_TASK_GROUP_NAME: DRIVER_TASK_GROUP,
                YUNIKORN_TASK_GROUPS: json.dumps(groups, sort_keys=True, separators=(",", ":")),
            },
            scheduler_name=YUNIKORN,
        ),
        executor=PodPart(
            labels=dict(queue_labels),
            annotations={**common, YUNIKORN_TASK_GROUP_NAME: EXECUTOR_TASK_GROUP},
            scheduler_name=YUNIKORN,
        ),
    )


def scheduling(
    driver: SparkDriver,
    *,
    owner: JSON,
    app_id: str,
    conf: Mapping[str, str],
    resource_type: str,
    min_overhead_conf: bool,
    driver_pod: JSON,
    driver_container: Mapping[str, Any],
    executor_template: JSON,
) -> Scheduling:
    """What ``driver.spec.batchScheduler`` adds (nothing without one). ``driver_pod`` is the driver pod
    as rendered so far (its node selector, tolerations, affinity), ``driver_container`` its Spark
    container with its requests, ``conf`` the submission's Spark properties."""
    name = driver.spec.batchScheduler
    if not name:
        return Scheduling()
    asked = pod_set_requests(conf, resource_type, min_overhead_conf, driver_container)
    executors = asked.executors
    requests = (asked.driver, asked.executor)
    total = requests[0].plus(requests[1].times(executors))
    if name == VOLCANO:
        return _volcano(driver, owner, total)
    if name == KUBE_SCHEDULER:
        return _coscheduling(driver, owner, total)
    if name == YUNIKORN:
        return _yunikorn(driver, app_id, driver_pod, executor_template, requests, executors)
    # The CRD refuses any other value (api.rules); a SparkDriver read from elsewhere is refused here.
    raise InvalidSpec(f"spec.batchScheduler {name!r} is not one of {VOLCANO}, {YUNIKORN}, {KUBE_SCHEDULER}")
