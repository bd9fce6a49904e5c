"""What a running operator's controllers share: the client, the informer caches and their indexes,
the work queues, and the namespaces being deleted. A controller's ``register(runtime)`` adds its
indexes, change handlers and queue here; ``core.manager`` runs them.
"""

from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client.registry import Collector

from sparkop.core.caches import CacheIndex, Caches, IndexKey, NotCurrent
from sparkop.core.informer import Informer, Transform
from sparkop.core.jsontypes import JSON
from sparkop.core.kube import Kube
from sparkop.core.limits import (
    DEFAULT_KUBE_API_BURST,
    DEFAULT_KUBE_API_QPS,
    DEFAULT_LOG_TAIL_LINES,
    DEFAULT_WORKERS,
    MAX_TRACKED_CHILDREN,
)
from sparkop.core.queue import Reconcile, WorkQueue
from sparkop.core.resources import NAMESPACES, Resource
from sparkop.core.selectors import LabelSelector
from sparkop.core.store import EventType

log = logging.getLogger(__name__)

# How long a change of an owned object may wait for others before its owner's pass: a pod going
# Pending -> Running and its executors appearing within this make one pass and one status write.
COALESCE_SECONDS: Final = 0.2
# Shared index values kept per index: about the children of the owners a burst keeps busy.
SHARED_VALUES_KEPT: Final = 2048
# Views of changed objects kept per handler: a change's old view is then the one its last change made.
VIEWS_KEPT: Final = 4096
# Each watched Namespace's labels, by name: what --namespace-selector is matched against.
NAMESPACE_LABELS_INDEX: Final = "namespace_labels"
Enqueue = Callable[[JSON], Iterable[Any]]
"""The keys an object's change asks to reconcile (its own key, or its owner's)."""
Ours = Callable[[EventType, JSON, Sequence[Any]], bool]
"""``ours(type, obj, keys)``: whether this change (of an object filed under ``keys``) is a queue's own."""


@dataclass(frozen=True)
class Options:
    """Operator-wide settings, from flags."""

    ingress_url_format: str | None = None
    ingress_class_name: str | None = None
    unschedulable_timeout_seconds: float = 300.0
    workers: int = DEFAULT_WORKERS
    # The client-side bound on the operator's requests (core.kube.RateLimit); qps 0: none.
    kube_api_qps: float = DEFAULT_KUBE_API_QPS
    kube_api_burst: int = DEFAULT_KUBE_API_BURST
    # kubeflow's --metrics-labels: object labels that become labels of the application metrics.
    metrics_labels: tuple[str, ...] = ()
    # A driver PodDisruptionBudget for the specs that do not say (spec.driverPodDisruptionBudget).
    driver_pod_disruption_budget: bool = False
    # tolerationSeconds of the node-loss taints for the specs that do not say (spec.nodeLossTolerationSeconds).
    node_loss_toleration_seconds: int | None = None
    # A Pod Security Standards profile whose requirements the Spark pods get where their spec is silent.
    pod_security: str = ""
    # Whether an app's Spark UI may get a Service of its own (kubeflow's --enable-ui-service).
    ui_service: bool = True
    # Defaults of each run's timeouts and its bound on failing executors, for the specs that do not say
    # (spec.timeouts, activeDeadlineSeconds, executorFailures); None or 0: none.
    driver_start_timeout_seconds: int | None = None
    driver_ready_timeout_seconds: int | None = None
    executors_start_timeout_seconds: int | None = None
    active_deadline_seconds: int | None = None
    max_executor_failures: int | None = None
    executor_failures_window_seconds: int = 600
    # --kubeflow-api: serve kubeflow's API group too, besides the operator's own (domain.kinds).
    kubeflow_api: bool = False
    # --max-tracked-executor-per-app: how many executors a status names one by one (kubeflow's flag).
    max_tracked_executors: int = MAX_TRACKED_CHILDREN
    # --driver-log-tail-lines: how many lines of an ended driver's log its record keeps; 0: none read.
    driver_log_tail_lines: int = DEFAULT_LOG_TAIL_LINES
    # --namespace-selector (kubeflow's jobNamespaceSelector): the served kinds' objects are acted on only in
    # the namespaces whose labels it selects, and in ``listed_namespaces`` (the --namespace ones: with a
    # selector, the caches watch every namespace).
    namespace_selector: LabelSelector | None = None
    listed_namespaces: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Source:
    """One cache the controller reads: ``resource`` (narrowed on the server by the label
    ``selector``), each object filed under ``keys(obj)`` as ``value(obj)`` in the index ``index``.
    Every change enqueues the keys of the object before and after it; for what the controller owns,
    only when ``view(obj)`` changed (when given), and coalesced with the other changes of a moment.
    ``transform``, ``shared`` and ``many``: see :meth:`Runtime.add_index`."""

    index: str
    resource: Resource
    keys: Callable[[JSON], Iterable[IndexKey]]
    value: Callable[[JSON], Any]
    selector: str | None = None
    transform: Transform | None = None
    shared: bool = False
    view: Callable[[JSON], Any] | None = None
    within: Callable[[JSON], float] | None = None
    """For what the controller owns: how soon a change of this object asks for its owner's pass (the
    changes meanwhile merged into it); None: :data:`COALESCE_SECONDS`."""
    own_changes_settle: bool = False
    """For what the controller owns: a change that only our own patch or delete of the object made
    (its watch event shows exactly the version that patch or delete left) decides nothing new, so it
    asks for no pass. True only where every patch the controller makes of the kind is settled by
    itself (a pod's finalizer released: the pass that released it decided everything else already)."""
    many: bool = False
    """One or more objects per app (a driver's pods, ConfigMaps, Services): the controllers that do not
    read them start before they are listed (:attr:`Runtime.listed_later`)."""


@dataclass
class Runtime:
    """What the handlers and reconcilers of a running operator share."""

    kube: Kube
    options: Options = field(default_factory=Options)
    namespaces: Sequence[str] = ()
    queues: list[WorkQueue[Any]] = field(default_factory=list)
    # Namespaces being deleted: the controllers leave everything in them alone (their objects are
    # going, and a driver vanishing with its namespace is not a failure). Kept by a Namespace watch,
    # and by the API server's 403 NamespaceTerminating for the moment before the watch says so.
    terminating_namespaces: set[str] = field(default_factory=set)
    indexes: dict[str, CacheIndex[Any]] = field(default_factory=dict)
    # Prometheus collectors a controller adds in its register(runtime): served on /metrics next to
    # the default registry, collected on the operator's event loop (so they may read the caches).
    collectors: list[Collector] = field(default_factory=list)
    # The informers each queue is enqueued from (by queue name): what its reconciles read, so what
    # must have listed before the queue starts.
    sources: dict[str, list[Informer]] = field(default_factory=dict)
    # The selections of which every app has one or more objects: listed once the others have
    # (core.caches.Caches.run), so a start is not slowed for the controllers that do not read them.
    listed_later: list[Informer] = field(default_factory=list)

    @functools.cached_property
    def caches(self) -> Caches:
        return Caches(self.kube, self.namespaces)

    def index(self, name: str) -> CacheIndex[Any]:
        """A registered index by name: ``index(name).get(key)`` is the list of values filed under
        ``key`` (None if none); it raises ``core.caches.NotCurrent`` while a cache is re-listing."""
        return self.indexes[name]

    def filed(self, index: str, key: IndexKey) -> tuple[Any, ...]:
        """The values filed under ``key`` in the index ``index`` (none: empty); ``NotCurrent`` as
        :meth:`index`'s ``get``."""
        return tuple(self.index(index).get(key) or ())

    def ensure_holds(self, index: str, key: IndexKey, uid: str) -> None:
        """Before creating on behalf of the object ``uid`` filed under ``key``: it must still be in the
        cache and the cache continuous (``NotCurrent`` otherwise, and the queue looks again shortly on a
        fresh view). An object deleted during a watch gap leaves the cache with the re-list, so nothing
        is ever created for it from a stale view."""
        if not self.index(index).holds(key, uid):
            raise NotCurrent(f"{index}: {key} of uid {uid} is no longer in the cache")

    def add_index(self, source: Source) -> CacheIndex[Any]:
        """Observe ``source.resource`` (narrowed on the server by the label ``source.selector``), filed by
        ``source.keys`` in the index ``source.index``; ``transform``: what of each object the cache keeps
        (see ``core.caches.Caches.informers``); ``shared``: ``value`` makes what no reader changes (a frozen
        summary), so the values last read are kept and handed out again while their object is unchanged
        (``core.caches.CacheIndex.memo``); ``many``: one or more per app (a driver's pods, ConfigMaps,
        Services): listed after the other selections (``listed_later``)."""
        name = source.index
        if name in self.indexes:
            raise ValueError(f"index {name!r} is already registered")
        memo = SHARED_VALUES_KEPT if source.shared else 0
        index = self.caches.index(
            name, source.resource, source.keys, source.value, source.selector, source.transform, memo
        )
        self.indexes[name] = index
        if source.many:
            self.listed_later += [i for i in index.informers if i not in self.listed_later]
        return index

    def enqueue_on_change(
        self,
        resource: Resource,
        queue: WorkQueue[Any],
        keys: Enqueue,
        *,
        selector: str | None = None,
        view: Callable[[JSON], Any] | None = None,
        coalesce: bool = False,
        within: Callable[[JSON], float] | None = None,
        ours: Ours | None = None,
    ) -> None:
        """On every change of the selection, enqueue the keys of the object before and after it.

        ``coalesce``: for what a key owns (its children): a change asks for a pass within
        COALESCE_SECONDS, merged with the other changes meanwhile, rather than at once. Otherwise the
        creation of an object with no status yet (one no pass has acted on) is enqueued as new, ahead
        of the other keys (see ``core.queue``). ``within``: the window for a change of this object, where
        COALESCE_SECONDS is too short (what only counts progress may wait for a later pass). ``ours``:
        told of every change; True for a change a pass of the queue's made itself and decided with
        (the creation of an object it owns, the status it wrote), which asks for no pass.

        ``view``: all the controller reads of such an object (what its index files). A change that
        leaves the view as it was (a kubelet refreshing a condition's probe time) cannot change a
        decision, so it asks for no pass; creations and deletions always do.

        The queue starts once every selection it is enqueued from has listed (``sources``): a
        controller enqueues on what it reads, so it waits for its own caches, not every cache."""

        views: OrderedDict[str, tuple[str, Any]] = OrderedDict()

        def viewed(obj: JSON) -> Any:
            """``view(obj)``, computed once per version: a change's old version is its last change's new."""
            assert view is not None
            meta = obj.get("metadata") or {}
            uid, version = str(meta.get("uid")), str(meta.get("resourceVersion"))
            kept = views.get(uid)
            if kept is not None and kept[0] == version:
                views.move_to_end(uid)
                return kept[1]
            views[uid] = (version, seen := view(obj))
            views.move_to_end(uid)
            if len(views) > VIEWS_KEPT:
                views.popitem(last=False)
            return seen

        def handler(type_: EventType, obj: JSON, old: JSON | None) -> None:
            filed = list(keys(obj))
            if ours is not None and ours(type_, obj, filed):
                return
            if type_ == "DELETED":
                views.pop(str((obj.get("metadata") or {}).get("uid")), None)
            elif type_ == "MODIFIED" and old is not None and view is not None and viewed(old) == viewed(obj):
                return
            # An object created with no status yet is one no controller has acted on: its pass goes
            # ahead of those that bring other objects' status up to date.
            new = type_ == "ADDED" and not coalesce and not obj.get("status")
            window = within(obj) if within is not None else COALESCE_SECONDS
            for key in {*filed, *(keys(old) if old is not None else ())}:
                if coalesce:
                    queue.enqueue_soon(key, window)
                else:
                    queue.enqueue(key, new=new)

        self.caches.on_change(resource, handler, label_selector=selector)
        self.read_by(queue, resource, selector)

    def read_by(self, queue: WorkQueue[Any], resource: Resource, selector: str | None = None) -> None:
        """``queue``'s reconciles read this selection, though it is not enqueued from it: the queue
        starts once it has listed too."""
        sources = self.sources.setdefault(queue.name, [])
        sources += [i for i in self.caches.informers(resource, selector) if i not in sources]

    def queue(self, name: str, reconcile: Reconcile[Any]) -> WorkQueue[Any]:
        queue: WorkQueue[Any] = WorkQueue(
            name,
            reconcile,
            workers=self.options.workers,
            on_namespace_terminating=lambda namespace: self.namespace_going(namespace, "a create was refused"),
        )
        self.queues.append(queue)
        return queue

    def namespace_selected(self, namespace: str) -> bool:
        """Whether the served kinds' objects in ``namespace`` are acted on: every namespace without
        --namespace-selector; with it, those --namespace lists and those whose labels, as the Namespace
        cache holds them now, it selects (``NotCurrent`` while that cache lists)."""
        selector = self.options.namespace_selector
        if selector is None or namespace in self.options.listed_namespaces:
            return True
        return any(selector.matches(labels) for labels in self.filed(NAMESPACE_LABELS_INDEX, (namespace,)))

    def namespace_terminating(self, namespace: str) -> bool:
        return namespace in self.terminating_namespaces

    def namespace_going(self, name: str, seen: str) -> None:
        if name not in self.terminating_namespaces:
            log.info("namespace %s is being deleted (%s): the controllers leave what is in it alone", name, seen)
            self.terminating_namespaces.add(name)

    def observe_namespace(self, name: str, body: Mapping[str, Any] | None) -> None:
        """Track a Namespace from its watch events (``body`` None: it is gone)."""
        meta = (body or {}).get("metadata") or {}
        phase = ((body or {}).get("status") or {}).get("phase")
        if body is not None and (meta.get("deletionTimestamp") or phase == "Terminating"):
            self.namespace_going(name, "its watch")
        else:
            self.terminating_namespaces.discard(name)


def register_namespaces(runtime: Runtime) -> None:
    """Watch Namespaces (only the served ones when the operator serves some), for
    ``Runtime.terminating_namespaces``."""

    def on_namespace(type_: EventType, body: JSON, _: JSON | None) -> None:
        name = str((body.get("metadata") or {}).get("name") or "")
        runtime.observe_namespace(name, None if type_ == "DELETED" else body)

    runtime.caches.on_change(NAMESPACES, on_namespace)
    if runtime.options.namespace_selector is not None:
        runtime.add_index(Source(NAMESPACE_LABELS_INDEX, NAMESPACES, _namespace_name, _namespace_labels))


def _namespace_name(body: JSON) -> list[tuple[str]]:
    return [(str((body.get("metadata") or {}).get("name") or ""),)]


def _namespace_labels(body: JSON) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((body.get("metadata") or {}).get("labels") or {}).items()}
