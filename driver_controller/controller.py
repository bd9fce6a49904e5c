"""The driver controller's declaration for the skeleton (``core.controller``): the caches it reads
(the SparkDrivers, and the pods, ConfigMaps, Services, NetworkPolicies and batch schedulers'
PodGroups labelled for one, keys:
:data:`driver_controller.observed.Key`), an ``observe`` over them, and the pure ``decide``. Registered
by ``sparkop run --controllers driver``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from sparkop.api.models import DriverPhase, SparkDriver, SparkDriverStatus
from sparkop.core.controller import Controller, Own, Source, own_source, start
from sparkop.core.expectations import Learnt
from sparkop.core.jsontypes import JSON
from sparkop.core.owners import controller_of, same_controller
from sparkop.core.resources import CONFIGMAPS, NETWORK_POLICIES, PODS, SERVICES
from sparkop.core.runtime import COALESCE_SECONDS, Options, Runtime
from sparkop.domain import labels, naming
from sparkop.domain.kinds import (
    COSCHEDULING_POD_GROUPS,
    KUEUE_PRIORITY_CLASSES,
    KUEUE_RESOURCE_FLAVORS,
    KUEUE_WORKLOADS,
    NODES,
    SPARK_DRIVERS,
    VOLCANO_POD_GROUPS,
)
from sparkop.domain.status_waits import EXECUTOR_CHANGE_SECONDS
from sparkop.driver_controller import metrics
from sparkop.driver_controller.decide import decide
from sparkop.driver_controller.kueue_summaries import (
    priority_value,
    summarize_flavor,
    summarize_workload,
    trim_flavor,
    trim_priority_class,
    trim_workload,
    workload_view,
)
from sparkop.driver_controller.observed import (
    DriverView,
    Key,
    Limits,
    NameHolder,
    Observed,
    Settings,
    controller_key,
    owner_key,
)
from sparkop.driver_controller.podbuild import RenderOptions
from sparkop.driver_controller.summaries import (
    PodSummary,
    node_lost,
    pod_view,
    policy_view,
    summarize_object,
    summarize_pod,
    summarize_pod_group,
    summarize_policy,
    trim_node,
    trim_owned,
    trim_pod,
    trim_pod_group,
    trim_policy,
)
from sparkop.driver_controller.transitions import TRANSITIONS

log = logging.getLogger(__name__)


def pod_change_window(pod: JSON) -> float:
    """How soon a pod's change asks for its SparkDriver's pass. An executor's only moves counts: its pass
    may wait a moment and take the other executors' changes of that moment along (one write for a burst,
    domain.status_waits). The driver pod's own steps (Running, its end, its loss) are passed on within
    COALESCE_SECONDS."""
    role = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.SPARK_ROLE)
    return EXECUTOR_CHANGE_SECONDS if role == labels.ROLE_EXECUTOR else COALESCE_SECONDS


INDEX_DRIVERS = "sparkop_driver_sparkdrivers"
INDEX_PODS = "sparkop_driver_pods"
INDEX_CONFIGMAPS = "sparkop_driver_configmaps"
INDEX_SERVICES = "sparkop_driver_services"
INDEX_NETWORK_POLICIES = "sparkop_driver_networkpolicies"
INDEX_VOLCANO_POD_GROUPS = "sparkop_driver_volcano_podgroups"
INDEX_COSCHEDULING_POD_GROUPS = "sparkop_driver_coscheduling_podgroups"
INDEX_WORKLOADS = "sparkop_driver_workloads"
INDEX_FLAVORS = "sparkop_driver_resourceflavors"
INDEX_PRIORITY_CLASSES = "sparkop_driver_workloadpriorityclasses"
INDEX_DRIVER_PODS_BY_NAME = "sparkop_driver_pods_by_name"
INDEX_NODES = "sparkop_driver_nodes"
INDEX_LEFT_PODS = "sparkop_driver_kubeflow_left_pods"
EVERY = ("", "")  # the key the reference indexes file everything under
TERMINAL_PHASES: Final = frozenset(phase.value for phase in DriverPhase if phase.terminal)


def as_read(body: JSON) -> JSON:
    return body


def every(body: JSON) -> list[tuple[str, str]]:
    return [EVERY]


def by_name(body: JSON) -> list[tuple[str, str]]:
    meta = body.get("metadata") or {}
    return [(str(meta.get("namespace") or ""), str(meta.get("name") or ""))]


def driver_pod_by_name(body: JSON) -> list[tuple[str, str]]:
    """A driver pod filed by its name: who holds the name the next driver pod of a run needs."""
    role = ((body.get("metadata") or {}).get("labels") or {}).get(labels.SPARK_ROLE)
    return by_name(body) if role == labels.ROLE_DRIVER else []


def left_pod_keys(body: JSON) -> list[tuple[str, str]]:
    """A pod kubeflow's operator left, filed by its app (kubeflow's app-name label) in its namespace."""
    meta = body.get("metadata") or {}
    app = (meta.get("labels") or {}).get(labels.KUBEFLOW_APP_NAME)
    return [(str(meta.get("namespace") or ""), str(app))] if app else []


def labelled(
    index: str,
    resource: Any,
    summarize: Any,
    view: Any,
    trim: Any,
    within: Callable[[JSON], float] | None = None,
    own_changes_settle: bool = False,
    keys: Callable[[JSON], list[Key]] = controller_key,
) -> Source:
    """The Source of one kind a SparkDriver owns: selected on the server by the label's presence (nothing
    else of the kind is ever sent), filed under the SparkDriver its ownerReference names. Every
    SparkDriver has some of each: listed after the selections the other controllers read."""
    return Source(
        index,
        resource,
        keys,
        summarize,
        selector=labels.DRIVER,
        transform=trim,
        shared=True,
        view=view,
        within=within,
        own_changes_settle=own_changes_settle,
        many=True,
    )


@dataclass(frozen=True)
class Observer:
    """What the decision needs of one SparkDriver, from the caches (``observe``), and of one that is gone
    (``gone``: its pods may hold our finalizer)."""

    runtime: Runtime
    settings: Settings
    takes_over: bool = False  # kubeflow's group is served: a run may adopt a pod kubeflow's operator left

    def observe(self, own: Own[SparkDriverStatus]) -> Observed:
        driver = DriverView.read(own.body, own.status)
        pods = self.values(INDEX_PODS, own.key)
        holder = self.name_holder(own.key, driver, pods)
        observed = self.owned(own.key, driver, own.learnt, own.namespace_terminating, pods, holder)
        if self.takes_over and isinstance(driver.spec, SparkDriver) and driver.spec.spec.adoptDriverPod is not None:
            app = driver.spec.spec.appName or driver.name
            observed = replace(observed, left_pods=self.values(INDEX_LEFT_PODS, (own.key[0], app)))
        return observed

    def gone(self, key: Key, learnt: Learnt) -> Observed:
        terminating = self.runtime.namespace_terminating(key[0])
        return self.owned(key, None, learnt, terminating, self.values(INDEX_PODS, key), None)

    def owned(
        self,
        key: Key,
        driver: DriverView | None,
        learnt: Learnt,
        terminating: bool,
        pods: list[PodSummary],
        holder: NameHolder | None,
    ) -> Observed:
        values = self.values
        return Observed(
            driver,
            pods,
            values(INDEX_CONFIGMAPS, key),
            values(INDEX_SERVICES, key),
            self.settings,
            transient_error=learnt.transient,
            namespace_terminating=terminating,
            refusals=learnt.refusals,
            network_policies=values(INDEX_NETWORK_POLICIES, key),
            pod_groups=values(INDEX_VOLCANO_POD_GROUPS, key) + values(INDEX_COSCHEDULING_POD_GROUPS, key),
            workloads=values(INDEX_WORKLOADS, key),
            flavors={f.name: f for f in values(INDEX_FLAVORS, EVERY)},
            priority_classes=dict(values(INDEX_PRIORITY_CLASSES, EVERY)),
            name_holder=holder,
            lost_nodes=self.lost_nodes(pods, holder),
            logs=learnt.logs,
        )

    def values(self, index: str, key: Key) -> list[Any]:
        return list(self.runtime.filed(index, key))

    def name_holder(self, key: Key, driver: DriverView, pods: Sequence[PodSummary]) -> NameHolder | None:
        """Whoever's driver pod holds the name this SparkDriver's next one needs, when not its own
        (``pods``: its own, as observed)."""
        if not isinstance(driver.spec, SparkDriver):
            return None
        namespace = key[0]
        wanted = naming.driver_pod_name(driver.name, driver.spec.spec.driver.podName)
        if any(p.name == wanted and p.owner_uid == driver.uid for p in pods):
            return None  # its own pod holds it (the same cache: a name files one pod), nothing to look up
        pod: PodSummary | None = next(iter(self.values(INDEX_DRIVER_PODS_BY_NAME, (namespace, wanted))), None)
        if pod is None or pod.owner_uid == driver.uid:
            return None
        found = next(iter(self.values(INDEX_DRIVERS, (namespace, pod.driver))), None) if pod.driver else None
        holder = found if found is not None and str(found["metadata"].get("uid")) == pod.owner_uid else None
        if holder is None or holder["metadata"].get("deletionTimestamp"):
            return NameHolder(pod, pod.driver, going=True)
        ours, theirs = controller_of({"metadata": driver.spec.metadata}), controller_of(holder)
        same = ours is not None and theirs is not None and same_controller(ours, theirs)
        ended = str((holder.get("status") or {}).get("phase") or "") in TERMINAL_PHASES
        return NameHolder(pod, pod.driver, same_owner=same, ended=ended)

    def lost_nodes(self, pods: Sequence[PodSummary], holder: NameHolder | None) -> frozenset[str]:
        """The nodes known lost among those of the driver pods being deleted (asked only of those)."""
        deleting = {p.node_name for p in (*pods, *((holder.pod,) if holder else ())) if p.deleting and p.node_name}
        return frozenset(n for n in deleting if any(self.values(INDEX_NODES, ("", n))))


def settings_of(options: Options) -> Settings:
    """What every pass decides with, from the operator's options (sparkop run --driver-start-timeout ...)."""
    render = RenderOptions(
        driver_pdb=options.driver_pod_disruption_budget,
        pod_security=options.pod_security,
        node_loss_toleration_seconds=options.node_loss_toleration_seconds,
        max_executor_failures=options.max_executor_failures,
    )
    limits = Limits(
        driver_start=options.driver_start_timeout_seconds,
        driver_ready=options.driver_ready_timeout_seconds,
        executors_start=options.executors_start_timeout_seconds,
        deadline=options.active_deadline_seconds,
        max_failures=options.max_executor_failures,
        failure_window=options.executor_failures_window_seconds,
    )
    return Settings(
        unschedulable_timeout=options.unschedulable_timeout_seconds,
        render=render,
        timeouts=limits,
        max_tracked_executors=options.max_tracked_executors,
        log_tail_lines=options.driver_log_tail_lines,
    )


def driver_controller(runtime: Runtime) -> Controller[Observed, SparkDriverStatus]:
    options = runtime.options
    observer = Observer(runtime, settings_of(options), takes_over=options.kubeflow_api)
    # What kubeflow's operator left (with --kubeflow-api): the pods a run taken over adopts, by their app.
    left = (
        (Source(INDEX_LEFT_PODS, PODS, left_pod_keys, summarize_pod, selector=labels.KUBEFLOW_LEFT_PODS),)
        if options.kubeflow_api
        else ()
    )
    pod_group_parts = (summarize_pod_group, summarize_pod_group, trim_pod_group)
    return Controller(
        name="driver",
        # As read: every read of the cache is already a copy of its own (core.informer.Store).
        own=own_source(INDEX_DRIVERS, SPARK_DRIVERS, as_read),
        owned=(
            # The only patch of a pod is our finalizer's release, and a delete is of a pod the pass is
            # done with: the echo of either asks for no pass.
            labelled(
                INDEX_PODS,
                PODS,
                summarize_pod,
                pod_view,
                trim_pod,
                pod_change_window,
                own_changes_settle=True,
                keys=owner_key,  # an executor: its driver pod controls it, the SparkDriver owns it
            ),
            labelled(INDEX_CONFIGMAPS, CONFIGMAPS, summarize_object, summarize_object, trim_owned),
            labelled(INDEX_SERVICES, SERVICES, summarize_object, summarize_object, trim_owned),
            labelled(INDEX_NETWORK_POLICIES, NETWORK_POLICIES, summarize_policy, policy_view, trim_policy),
            # Optional kinds (domain.kinds): watched where their schedulers are installed.
            labelled(INDEX_VOLCANO_POD_GROUPS, VOLCANO_POD_GROUPS, *pod_group_parts),
            labelled(INDEX_COSCHEDULING_POD_GROUPS, COSCHEDULING_POD_GROUPS, *pod_group_parts),
            labelled(INDEX_WORKLOADS, KUEUE_WORKLOADS, summarize_workload, workload_view, trim_workload),
        ),
        # Kueue's cluster-scoped configuration (optional kinds): what an admission and a priority name.
        # The driver pods by name (who holds the name a run's next driver pod needs) and the Nodes (is a
        # deleted driver pod's node lost?), looked up, never a reason for a pass by themselves.
        reads=(
            Source(
                INDEX_DRIVER_PODS_BY_NAME,
                PODS,
                driver_pod_by_name,
                summarize_pod,
                selector=labels.DRIVER,
                transform=trim_pod,
                shared=True,
            ),
            Source(INDEX_NODES, NODES, by_name, node_lost, transform=trim_node),
            *left,
            Source(INDEX_FLAVORS, KUEUE_RESOURCE_FLAVORS, every, summarize_flavor, transform=trim_flavor),
            Source(
                INDEX_PRIORITY_CLASSES, KUEUE_PRIORITY_CLASSES, every, priority_value, transform=trim_priority_class
            ),
        ),
        observe=observer.observe,
        gone=observer.gone,
        decide=decide,
        status=SparkDriverStatus,
        log=log,
        record=TRANSITIONS.record,
    )


def register(runtime: Runtime) -> tuple[Controller[Observed, SparkDriverStatus]]:
    """``sparkop run --controllers driver``: the driver controller's caches, change handlers and work
    queue, and its metrics."""
    declared = driver_controller(runtime)
    start(runtime, declared)
    runtime.collectors.append(metrics.collector(runtime, metrics.EXECUTORS_INDEX, runtime.options.metrics_labels))
    return (declared,)
