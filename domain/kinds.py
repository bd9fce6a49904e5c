"""The kinds sparkop reads and writes beyond Kubernetes' own: its four, the same three user-facing
kinds in kubeflow's group (served with ``sparkop run --kubeflow-api``: :data:`KUBEFLOW_API`), the batch
schedulers' pod groups (driver_controller.schedulers) and Kueue's Workloads and ResourceFlavors
(driver_controller.kueue), served only where those schedulers are installed. Known to the client layer
(``core.kube.resource_of``) once this module is imported.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sparkop.core.jsonread import integer, mapping
from sparkop.core.owners import ObjectView, identity
from sparkop.core.resources import Resource, register_kinds
from sparkop.domain.labels import API_VERSION, GROUP, KUBEFLOW_GROUP, VERSION

SPARK_APPLICATIONS: Final = Resource(GROUP, VERSION, "sparkapplications", "SparkApplication")
SPARK_DRIVERS: Final = Resource(GROUP, VERSION, "sparkdrivers", "SparkDriver")
SCHEDULED_SPARK_APPLICATIONS: Final = Resource(
    GROUP, VERSION, "scheduledsparkapplications", "ScheduledSparkApplication"
)
SPARK_CONNECTS: Final = Resource(GROUP, VERSION, "sparkconnects", "SparkConnect")
# Optional for the apps controller, which reads the history servers its apps name: apps still run where
# an older CRD set lacks the kind.
SPARK_HISTORY_SERVERS: Final = Resource(GROUP, VERSION, "sparkhistoryservers", "SparkHistoryServer", optional=True)
# Gateway API's routes (gateway.networking.k8s.io/v1), served where its CRDs are installed.
HTTP_ROUTES: Final = Resource("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute", optional=True)
GRPC_ROUTES: Final = Resource("gateway.networking.k8s.io", "v1", "grpcroutes", "GRPCRoute", optional=True)

# kubeflow spark-operator's versions of the same kinds: its SparkApplication and
# ScheduledSparkApplication are v1beta2, its SparkConnect v1alpha1.
KUBEFLOW_APP_VERSION: Final = "v1beta2"
KUBEFLOW_CONNECT_VERSION: Final = "v1alpha1"
KUBEFLOW_SPARK_APPLICATIONS: Final = Resource(
    KUBEFLOW_GROUP, KUBEFLOW_APP_VERSION, "sparkapplications", "SparkApplication"
)
KUBEFLOW_SCHEDULED_SPARK_APPLICATIONS: Final = Resource(
    KUBEFLOW_GROUP, KUBEFLOW_APP_VERSION, "scheduledsparkapplications", "ScheduledSparkApplication"
)
KUBEFLOW_SPARK_CONNECTS: Final = Resource(KUBEFLOW_GROUP, KUBEFLOW_CONNECT_VERSION, "sparkconnects", "SparkConnect")


@dataclass(frozen=True)
class API:
    """One API group whose SparkApplications, ScheduledSparkApplications and SparkConnects the operator
    serves, from the same models and with the same controllers: sparkop's own, and kubeflow's with
    ``--kubeflow-api``. Their SparkDrivers are sparkop's kind whatever the group (``naming.driver_name``
    keeps the two groups' SparkDriver names apart). ``name`` tells the groups apart in queue, index and
    metric names."""

    name: str
    group: str
    applications: Resource
    scheduled: Resource
    connects: Resource

    @property
    def kinds(self) -> tuple[Resource, Resource, Resource]:
        return (self.applications, self.scheduled, self.connects)

    def resource(self, kind: str) -> Resource | None:
        """This group's resource of ``kind`` (None: not one of its kinds)."""
        return next((r for r in self.kinds if r.kind == kind), None)

    def named(self, name: str) -> str:
        """``name`` (of a controller, its queue or an index) for this group's controller: sparkop's keeps
        the plain name, another group's ends with ``_<its name>``."""
        return name if self.group == GROUP else f"{name}_{self.name}"

    def log(self, log: logging.Logger) -> logging.Logger:
        """``log`` for this group's controller: another group's child logger says whose "ns/pi" a line is."""
        return log if self.group == GROUP else log.getChild(self.name)


SPARKOP_API: Final = API("sparkop", GROUP, SPARK_APPLICATIONS, SCHEDULED_SPARK_APPLICATIONS, SPARK_CONNECTS)
KUBEFLOW_API: Final = API(
    "kubeflow",
    KUBEFLOW_GROUP,
    KUBEFLOW_SPARK_APPLICATIONS,
    KUBEFLOW_SCHEDULED_SPARK_APPLICATIONS,
    KUBEFLOW_SPARK_CONNECTS,
)
APIS: Final = (SPARKOP_API, KUBEFLOW_API)


@dataclass(frozen=True, kw_only=True)
class ServedView(ObjectView):
    """What a pass reads of an object of a served group (a SparkApplication, ScheduledSparkApplication or
    SparkConnect): its metadata (``core.owners.ObjectView``), generation and spec as written, and its
    apiVersion, sparkop's group or kubeflow's (``--kubeflow-api``): the group the ownerReferences of
    what it creates name."""

    generation: int
    spec: Mapping[str, Any]
    api_version: str = API_VERSION

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


def served_fields(body: Mapping[str, Any], *, generation_default: int = 0) -> dict[str, Any]:
    """:class:`ServedView`'s fields of an object, read leniently: ``core.owners.identity``'s, its
    generation (``generation_default`` when it has none), its spec (a copy of its top level) and its
    apiVersion (sparkop's when it has none)."""
    meta = mapping(body.get("metadata"))
    return {
        **identity(body),
        "generation": integer(meta.get("generation"), generation_default),
        "spec": dict(mapping(body.get("spec"))),
        "api_version": str(body.get("apiVersion") or API_VERSION),
    }


def served_apis(kubeflow: bool) -> tuple[API, ...]:
    """The groups an operator serves: sparkop's, and kubeflow's too with ``--kubeflow-api``."""
    return APIS if kubeflow else (SPARKOP_API,)


def api_of(api_version: str, kind: str) -> API | None:
    """The served group whose ``kind`` is ``api_version`` (a manifest's), or None."""
    return next((a for a in APIS if (r := a.resource(kind)) is not None and r.api_version == api_version), None)


# Optional: the driver controller watches them (their status says why a gang waits) wherever they are
# served, and starts all the same where they are not.
VOLCANO_POD_GROUPS: Final = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", optional=True)
COSCHEDULING_POD_GROUPS: Final = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", optional=True)

# The driver controller reads whether a driver pod's node is lost (a pod there is deleted at once, grace 0,
# so that the next pod of its name can be created); optional: without the right to read Nodes, it waits.
NODES: Final = Resource("", "v1", "nodes", "Node", namespaced=False, optional=True)

# Kueue's (v0.17, API v1beta2): a SparkDriver labelled with a queue name owns a Workload, and runs once
# Kueue admits it; the ResourceFlavors its admission names say where its pods go.
KUEUE_WORKLOADS: Final = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", optional=True)
KUEUE_RESOURCE_FLAVORS: Final = Resource(
    "kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False, optional=True
)
KUEUE_PRIORITY_CLASSES: Final = Resource(
    "kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass", namespaced=False, optional=True
)

register_kinds(
    SPARK_APPLICATIONS,
    SPARK_DRIVERS,
    SCHEDULED_SPARK_APPLICATIONS,
    SPARK_CONNECTS,
    SPARK_HISTORY_SERVERS,
    HTTP_ROUTES,
    GRPC_ROUTES,
    KUBEFLOW_SPARK_APPLICATIONS,
    KUBEFLOW_SCHEDULED_SPARK_APPLICATIONS,
    KUBEFLOW_SPARK_CONNECTS,
    VOLCANO_POD_GROUPS,
    COSCHEDULING_POD_GROUPS,
    KUEUE_WORKLOADS,
    KUEUE_RESOURCE_FLAVORS,
    KUEUE_PRIORITY_CLASSES,
)
