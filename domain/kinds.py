"""The kinds sparkop reads and writes beyond Kubernetes' own: its four, and the batch schedulers'
pod groups (driver_controller.schedulers), served only where those schedulers are installed. Known to
the client layer (``core.kube.resource_of``) once this module is imported.
"""

from __future__ import annotations

from typing import Final

from core.kube import Resource, register_kinds
from domain.labels import GROUP, VERSION

SPARK_APPLICATIONS: Final = Resource(GROUP, VERSION, "sparkapplications", "SparkApplication")
SPARK_DRIVERS: Final = Resource(GROUP, VERSION, "sparkdrivers", "SparkDriver")
SCHEDULED_SPARK_APPLICATIONS: Final = Resource(
    GROUP, VERSION, "scheduledsparkapplications", "ScheduledSparkApplication"
)
SPARK_CONNECTS: Final = Resource(GROUP, VERSION, "sparkconnects", "SparkConnect")
# Optional: the driver controller watches them (their status says why a gang waits) wherever they are
# served, and starts all the same where they are not.
VOLCANO_POD_GROUPS: Final = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", optional=True)
COSCHEDULING_POD_GROUPS: Final = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", optional=True)

register_kinds(
    SPARK_APPLICATIONS,
    SPARK_DRIVERS,
    SCHEDULED_SPARK_APPLICATIONS,
    SPARK_CONNECTS,
    VOLCANO_POD_GROUPS,
    COSCHEDULING_POD_GROUPS,
)
