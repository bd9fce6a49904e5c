"""The kinds sparkop reads and writes beyond Kubernetes' own: its four, the batch schedulers' pod
groups (driver_controller.schedulers) and Kueue's Workloads and ResourceFlavors
(driver_controller.kueue), served only where those schedulers are installed. Known to
the client layer (``core.kube.resource_of``) once this module is imported.
"""

from __future__ import annotations

from typing import Final

from sparkop.core.resources import Resource, register_kinds
from sparkop.domain.labels import GROUP, VERSION

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
# Optional: the driver controller watches them (their status says why a gang waits) wherever they are
# served, and starts all the same where they are not.
VOLCANO_POD_GROUPS: Final = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", optional=True)
COSCHEDULING_POD_GROUPS: Final = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", optional=True)

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
    VOLCANO_POD_GROUPS,
    COSCHEDULING_POD_GROUPS,
    KUEUE_WORKLOADS,
    KUEUE_RESOURCE_FLAVORS,
    KUEUE_PRIORITY_CLASSES,
)
