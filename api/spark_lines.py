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
:data:`DEFAULT_LINE`, as before lines were told apart. The version is what the user says the image
holds; ``sparkop validate`` and ``sparkop status`` warn when an image's tag says otherwise
(:func:`spec_warnings`).

Facts come from each line's submission client (``KubernetesDriverBuilder`` and its feature steps)
and are checked against real spark-submit of every line (tests/conformance).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import total_ordering
from typing import Any, Final


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
# The version is also the pods' spark-version label: a suffix keeps to a label value's characters and
# ends (the field's maxLength keeps it to a label value's 63 characters).
VERSION_PATTERN: Final = r"^([0-9]+)\.([0-9]+)(\.[0-9]+)?(-[0-9A-Za-z]([-0-9A-Za-z.]*[0-9A-Za-z])?)?$"
VERSION_MAX_LENGTH: Final = 63
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
    # BasicDriverFeatureStep: SPARK_USER is the proxy user when there is one (before: the submitting user).
    PROXY_USER_IS_SPARK_USER = ("SPARK_USER from --proxy-user", SparkLine(4, 3), None)
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


def release(version: str | None, field: str = "spec.sparkVersion") -> SparkRelease:
    """The release a spec's ``sparkVersion`` names. Raises ValueError for what is not a version (the
    CRD refuses those, so only a SparkDriver written around it gets here). ``field`` is where the
    version was written, for the messages (a ScheduledSparkApplication's is spec.template.sparkVersion)."""
    if not version:
        return SparkRelease(DEFAULT_VERSION, DEFAULT_LINE)
    line = line_of(version)
    if line is None:
        raise ValueError(f"{field} {version!r}: {VERSION_MESSAGE}")
    known = nearest_known(line)
    if known == line:
        return SparkRelease(version, line)
    return SparkRelease(
        version,
        known,
        f"{field} {version}: Spark {line} is not a line sparkop knows ({KNOWN_LINES_TEXT}); "
        f"its driver is rendered as spark-submit {known} would create it",
    )


# An image tag that names a Spark release, as apache/spark's do: 4.3.0, 4.3.0-python3,
# 3.5.3-scala2.12-java17-ubuntu, v3.1.1 (kubeflow's old images). Three numbers, so that tags such as
# latest, 2024-06 or 17 say nothing.
_IMAGE_TAG_VERSION: Final = re.compile(r"v?(?P<version>(?P<major>[0-9]+)\.(?P<minor>[0-9]+)\.[0-9]+)(-.*)?")


def image_release(image: str) -> tuple[str, SparkLine] | None:
    """(version, line) of the Spark an image reference names, or None when it names none.

    Only an image whose repository's own name says Spark (apache/spark, spark, bitnami/spark,
    myorg/spark-etl) is read: the tag of an image of one's own (myorg/etl:2.1.0) versions that image,
    not the Spark inside it."""
    reference = image.split("@", 1)[0]  # a digest says nothing about the version
    repository, colon, tag = reference.rpartition(":")
    if not colon or "/" in tag:  # no tag, or the colon was a registry's port (localhost:5000/spark)
        return None
    if "spark" not in repository.rsplit("/", 1)[-1].lower():
        return None
    match = _IMAGE_TAG_VERSION.fullmatch(tag)
    if match is None:
        return None
    return match["version"], SparkLine(int(match["major"]), int(match["minor"]))


# The fields a run spec names its images in: the driver's and the executors' own override spec.image.
_IMAGE_FIELDS: Final = (("image",), ("driver", "image"), ("executor", "image"))


def spec_warnings(spec: Mapping[str, Any], where: str = "spec") -> list[str]:
    """What ``sparkop validate`` and ``sparkop status`` warn of in a run spec at ``where`` (spec, or a
    ScheduledSparkApplication's spec.template), none of which the API server refuses:

    * a sparkVersion of no known line, rendered as the nearest known one;
    * a sparkVersion (or its absence, which means line 3.5) whose line is not the line of an image
      that names its Spark: the driver would be built as the wrong spark-submit builds it.

    Nothing is said of what is not a version (the API server refuses it) or of fields of the wrong
    type (the schema does)."""
    version = spec.get("sparkVersion")
    field = f"{where}.sparkVersion"
    if version is not None and not isinstance(version, str):
        return []
    try:
        written = release(version, field)
    except ValueError:
        return []
    warnings = [written.warning] if written.warning else []
    own_line = line_of(version) if version else DEFAULT_LINE
    said = f"{field} {version} (line {own_line})" if version else f"{field} is not set (line {own_line})"
    for path in _IMAGE_FIELDS:
        image: Any = spec
        for key in path:
            image = image.get(key) if isinstance(image, Mapping) else None
        found = image_release(image) if isinstance(image, str) else None
        if found is None or found[1] == own_line:
            continue
        warnings.append(
            f"{said} but {where}.{'.'.join(path)} {image} is Spark {found[1]}: the driver is rendered as "
            f"spark-submit {written.line} would create it; set sparkVersion to the image's version"
        )
    return warnings


__all__ = [
    "DEFAULT_LINE",
    "KNOWN_LINES",
    "NEWEST_LINE",
    "VERSION_MESSAGE",
    "VERSION_PATTERN",
    "Feature",
    "SparkLine",
    "SparkRelease",
    "image_release",
    "line_of",
    "nearest_known",
    "release",
    "spec_warnings",
]
