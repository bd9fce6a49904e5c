"""The Spark lines sparkop renders for, and what each line's submission client does differently.

``spec.sparkVersion`` names a Spark release (``4.3.0``); its *line* (``4.3``) decides what the driver
controller builds, because a line's ``spark-submit --deploy-mode cluster`` creates different objects
from the same inputs (a connect port since 4.1, an executor NetworkPolicy since 4.2, security
defaults since 4.3). Every such difference is one row of :data:`FEATURES`, and the renderer asks
``line.has(Feature.X)`` where the difference happens: one renderer, no copy per line.

A version of no known line is rendered as the nearest known one (a 3.4 app as 3.5, a 5.0 app as
4.3) and said so (:attr:`SparkRelease.warning`: a Warning Event on the SparkDriver, a warning from
``sparkop validate``); what is not a version at all is refused by the API server and ``sparkop
validate`` alike (:data:`VERSION_PATTERN`). Without ``sparkVersion`` the line is
:data:`DEFAULT_LINE`, as before lines were told apart.

Facts come from each line's submission client (``KubernetesDriverBuilder`` and its feature steps)
and are checked against real spark-submit of every line (tests/conformance).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from functools import total_ordering
from typing import Final


@total_ordering
@dataclass(frozen=True)
class SparkLine:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, SparkLine):
            return NotImplemented
        return (self.major, self.minor) < (other.major, other.minor)

    def has(self, feature: Feature) -> bool:
        """Whether this line's submission client does ``feature``."""
        since, until = feature.value[1], feature.value[2]
        return since <= self and (until is None or self <= until)


KNOWN_LINES: Final = (SparkLine(3, 5), SparkLine(4, 0), SparkLine(4, 1), SparkLine(4, 2), SparkLine(4, 3))
DEFAULT_LINE: Final = KNOWN_LINES[0]
NEWEST_LINE: Final = KNOWN_LINES[-1]
KNOWN_LINES_TEXT: Final = ", ".join(str(line) for line in KNOWN_LINES)

# A release as Spark names them: 3.5.9, 4.0.0-preview2, 4.3.0; a bare line (4.3) is taken too.
VERSION_PATTERN: Final = r"^([0-9]+)\.([0-9]+)(\.[0-9]+)?([-+][0-9A-Za-z.+-]*)?$"
_VERSION: Final = re.compile(VERSION_PATTERN)
VERSION_MESSAGE: Final = (
    "sparkVersion must be a Spark release such as 3.5.9 or 4.3.0 (the image's Spark); sparkop renders "
    f"the lines {KNOWN_LINES_TEXT}, and another version as the nearest of them, with a warning"
)


class Feature(enum.Enum):
    """(what it is, the first line that does it, the last line that does it or None)."""

    # BasicDriverFeatureStep: spark.driver.minMemoryOverhead bounds the driver's default overhead.
    MIN_MEMORY_OVERHEAD = ("spark.driver.minMemoryOverhead", SparkLine(4, 0), None)
    # MountVolumesFeatureStep: a hostPath volume's options.type reaches the pod (3.5 always writes "").
    HOST_PATH_TYPE = ("hostPath options.type", SparkLine(4, 0), None)
    # spark.kubernetes.pyspark.pythonVersion is written into the properties (kubeflow's pythonVersion).
    PYSPARK_PYTHON_VERSION = ("spark.kubernetes.pyspark.pythonVersion", SparkLine(3, 5), SparkLine(4, 0))
    # spark.kubernetes.driver.pod.excludedFeatureSteps: feature steps named by class are skipped.
    EXCLUDED_FEATURE_STEPS = ("spark.kubernetes.driver.pod.excludedFeatureSteps", SparkLine(4, 1), None)
    # BasicDriverFeatureStep and DriverServiceFeatureStep: a spark-connect port (spark.connect.grpc.binding.port).
    CONNECT_PORT = ("driver port and Service port spark-connect", SparkLine(4, 1), None)
    # DriverServiceFeatureStep: the spark-connect Service port says appProtocol grpc.
    CONNECT_APP_PROTOCOL = ("appProtocol grpc on the spark-connect Service port", SparkLine(4, 2), None)
    # NetworkPolicyFeatureStep: executors admit ingress only from pods of the same app.
    EXECUTOR_NETWORK_POLICY = ("executor NetworkPolicy <prefix>-policy", SparkLine(4, 2), None)
    # BasicDriverFeatureStep: securityContext.allowPrivilegeEscalation, false unless the properties say true.
    ALLOW_PRIVILEGE_ESCALATION = ("driver securityContext.allowPrivilegeEscalation", SparkLine(4, 3), None)
    # DriverServiceFeatureStep: spark.kubernetes.driver.service.publishNotReadyAddresses (default false).
    PUBLISH_NOT_READY_ADDRESSES = ("driver Service publishNotReadyAddresses", SparkLine(4, 3), None)


@dataclass(frozen=True)
class SparkRelease:
    """A spec's Spark: the version as written (for the spark-version label), the line rendered, and
    why that line differs from the version's own, if it does."""

    version: str
    line: SparkLine
    warning: str | None = None

    def has(self, feature: Feature) -> bool:
        return self.line.has(feature)


def line_of(version: str) -> SparkLine | None:
    """The line of a version string, or None when it is not one."""
    match = _VERSION.fullmatch(version)
    return SparkLine(int(match.group(1)), int(match.group(2))) if match else None


def nearest_known(line: SparkLine) -> SparkLine:
    """The known line whose rules apply to ``line``: itself when known, else the newest known line not
    after it, or the oldest known line for anything older than every known line."""
    earlier = [known for known in KNOWN_LINES if known <= line]
    return earlier[-1] if earlier else DEFAULT_LINE


# What the spark-version label says when a spec names no version (as before lines were told apart).
DEFAULT_VERSION: Final = "3.5.0"


def release(version: str | None) -> SparkRelease:
    """The release a spec's ``sparkVersion`` names. Raises ValueError for what is not a version (the
    CRD refuses those, so only a SparkDriver written around it gets here)."""
    if not version:
        return SparkRelease(DEFAULT_VERSION, DEFAULT_LINE)
    line = line_of(version)
    if line is None:
        raise ValueError(f"spec.sparkVersion {version!r}: {VERSION_MESSAGE}")
    known = nearest_known(line)
    if known == line:
        return SparkRelease(version, line)
    return SparkRelease(
        version,
        known,
        f"spec.sparkVersion {version}: Spark {line} is not a line sparkop knows ({KNOWN_LINES_TEXT}); "
        f"its driver is rendered as spark-submit {known} would create it",
    )


__all__ = [
    "DEFAULT_LINE",
    "KNOWN_LINES",
    "NEWEST_LINE",
    "VERSION_MESSAGE",
    "VERSION_PATTERN",
    "Feature",
    "SparkLine",
    "SparkRelease",
    "line_of",
    "nearest_known",
    "release",
]
