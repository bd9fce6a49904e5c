"""The renderer: a SparkDriver and a driver-pod incarnation -> the objects of that incarnation.

Pure and deterministic: the same SparkDriver (name, namespace, uid, spec) and incarnation always
give the same manifests, so a create retried after a crash meets 409 AlreadyExists with an
identical object instead of making a second one.

    render(driver, incarnation)  -> DriverObjects(pod, config_map, service, executor_template, properties,
                                                  metrics_config_map)
                                    raises InvalidSpec, or SpecTooLarge (an InvalidSpec) when a ConfigMap
                                    would exceed the API server's 1 MiB
    names(driver, incarnation)   -> IncarnationNames: the same objects' names, without rendering
    network_policy(driver, incarnation) -> the executors' NetworkPolicy as render builds it, or None,
                                    without rendering anything else (reconcile compares it every pass)

``submission`` maps the run spec to what spark-submit would receive (kubeflow's mapping);
``podbuild`` does what Spark's submission client does with it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import orjson

from sparkop.api import spark_lines
from sparkop.api.models import SparkDriver
from sparkop.api.spark_lines import SparkRelease
from sparkop.core.jsontypes import JSON
from sparkop.core.memo import Memo
from sparkop.domain import naming
from sparkop.driver_controller import schedulers
from sparkop.driver_controller.build import EXCLUDED_STEPS_KEY, build, makes_network_policy
from sparkop.driver_controller.monitoring import metrics_files
from sparkop.driver_controller.podbuild import DriverObjects, RenderOptions, network_policy_manifest, own
from sparkop.driver_controller.sparkconf import driver_ports
from sparkop.driver_controller.submission import InvalidSpec, Submission, submission
from sparkop.driver_controller.templates import owner_reference, sparkop_labels

__all__ = [
    "DriverObjects",
    "IncarnationNames",
    "InvalidSpec",
    "RenderOptions",
    "SpecTooLarge",
    "Submission",
    "has_network_policy",
    "names",
    "network_policy",
    "parse",
    "render",
    "spark_release",
    "submission",
]


# The API server refuses a ConfigMap whose data (keys and values, in bytes) exceeds 1 MiB.
CONFIGMAP_DATA_LIMIT: Final = 1024 * 1024
_LARGEST_SHOWN: Final = 3


class SpecTooLarge(InvalidSpec):
    """A rendered ConfigMap would exceed the API server's limit on its data: a spec error (the API
    server would refuse the object at run time), raised by :func:`render` before anything is created.
    ``field`` names the spec fields that fill that ConfigMap."""

    def __init__(self, field: str, config_map: str, size: int, largest: str = "") -> None:
        message = (
            f"{field}: too large, ConfigMap {config_map} would hold {size:,} bytes of data, "
            f"{size - CONFIGMAP_DATA_LIMIT:,} over the API server's limit of {CONFIGMAP_DATA_LIMIT:,} bytes (1 MiB)"
        )
        super().__init__(f"{message}; the largest: {largest}" if largest else message)
        self.field = field
        self.config_map = config_map
        self.size = size


def config_map_data_size(config_map: Mapping[str, Any]) -> int:
    """What the API server counts against the limit: the UTF-8 bytes of every key and value."""
    data: Mapping[str, str] = config_map.get("data") or {}
    return sum(len(key.encode()) + len(value.encode()) for key, value in data.items())


def _check_sizes(objects: DriverObjects) -> None:
    fields = {
        id(objects.config_map): "spec.sparkConf / spec.hadoopConf",
        id(objects.executor_template): "spec.executor (its pod template)",
        id(objects.metrics_config_map): "spec.monitoring",
    }
    for config_map in objects.config_maps:
        size = config_map_data_size(config_map)
        if size <= CONFIGMAP_DATA_LIMIT:
            continue
        largest = ""
        if config_map is objects.config_map:
            biggest = sorted(objects.properties.items(), key=lambda kv: -len(kv[1].encode()))[:_LARGEST_SHOWN]
            largest = ", ".join(f"{key} ({len(value.encode()):,} bytes)" for key, value in biggest)
        raise SpecTooLarge(fields[id(config_map)], config_map["metadata"]["name"], size, largest)


def parse(body: Mapping[str, Any]) -> SparkDriver:
    """A SparkDriver model from a manifest or a watched body (status ignored). A spec is validated
    once while it is in use (every pass of a SparkDriver parses it again, and a spec changes only with
    its generation), known by a digest of its JSON; the metadata is always the body's own."""
    spec = orjson.dumps([body.get("apiVersion"), body.get("kind"), body.get("spec")])
    version = hashlib.blake2b(spec, digest_size=16).digest()
    parsed = _PARSED.get(version)
    if parsed is None:
        parsed = _validate(body)
        _PARSED.put(version, parsed)
        return parsed
    # A shallow copy: the spec is shared, and no reader changes a model in place (render deep-copies
    # what it takes from the spec into the objects it builds).
    return parsed.model_copy(update={"metadata": body.get("metadata") or {}})


# The specs of the SparkDrivers in flight, parsed (a pass costs a fifth less when its spec is not
# validated again).
_PARSED: Memo[bytes, SparkDriver] = Memo(2048)


def _validate(body: Mapping[str, Any]) -> SparkDriver:
    data = {k: body[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in body}
    return SparkDriver.model_validate(data)


def render(driver: SparkDriver, incarnation: int, options: RenderOptions | None = None) -> DriverObjects:
    """Everything driver-pod ``incarnation`` of ``driver`` needs. Raises InvalidSpec for a spec
    spark-submit would refuse, SpecTooLarge for one whose ConfigMaps the API server would refuse."""
    objects = build(submission(driver, incarnation), options)
    _check_sizes(objects)
    return objects


@dataclass(frozen=True)
class IncarnationNames:
    """What ``render`` names for one incarnation, known without rendering (reconcile checks what
    exists by these, and renders only when something is missing)."""

    pod: str
    service: str
    config_maps: frozenset[str]
    web_ui_address: str  # <service>.<namespace>.svc:<spark.ui.port>
    pod_group: str | None = None  # the batch scheduler's PodGroup, when it needs one
    network_policy: str | None = None  # the executors' NetworkPolicy, when the app's Spark line makes one


def names(driver: SparkDriver, incarnation: int) -> IncarnationNames:
    name, namespace = driver.metadata["name"], driver.metadata["namespace"]
    config_maps = {
        naming.driver_configmap_name(name, incarnation),
        naming.executor_template_configmap_name(name, incarnation),
    }
    if metrics_files(driver.spec.monitoring):
        config_maps.add(naming.metrics_configmap_name(name, incarnation))
    service = naming.driver_service_name(name, incarnation)
    # Only spec.sparkConf sets the UI port: nothing sparkop or Spark's submission client adds does.
    ui_port = driver_ports(driver.spec.sparkConf or {})[2]
    needs_group = driver.spec.batchScheduler in schedulers.POD_GROUP_SCHEDULERS
    return IncarnationNames(
        pod_group=naming.pod_group_name(name) if needs_group else None,
        network_policy=naming.network_policy_name(name, incarnation) if has_network_policy(driver) else None,
        pod=naming.driver_pod_name(name, driver.spec.driver.podName),
        service=service,
        config_maps=frozenset(config_maps),
        web_ui_address=f"{service}.{namespace}.svc:{ui_port}",
    )


def spark_release(driver: SparkDriver) -> SparkRelease | None:
    """The Spark release ``submission`` renders ``driver`` for (its ``release``: the line, and the warning
    when the version's line is unknown), or None when spec.sparkVersion is no version (render refuses it)."""
    return _release(driver.spec.sparkVersion)


@lru_cache(maxsize=256)
def _release(version: str | None) -> SparkRelease | None:
    # A cluster runs a handful of versions, and working out the nearest known line of one costs more
    # than the rest of what a pass asks of it.
    try:
        return spark_lines.release(version)
    except ValueError:
        return None


def has_network_policy(driver: SparkDriver) -> bool:
    """Whether spark-submit of ``driver``'s Spark line creates the executors' NetworkPolicy: 4.2+, unless
    ``spark.kubernetes.driver.pod.excludedFeatureSteps`` lists NetworkPolicyFeatureStep. Decided as
    ``build.build`` decides it; only spec.sparkConf sets that property (no typed field does)."""
    return _makes_network_policy(driver.spec.sparkVersion, (driver.spec.sparkConf or {}).get(EXCLUDED_STEPS_KEY, ""))


@lru_cache(maxsize=256)
def _makes_network_policy(version: str | None, listed: str) -> bool:
    # Asked on every pass, with the few versions and step lists a cluster has.
    release = _release(version)
    return release is not None and makes_network_policy(release, listed)


def network_policy(driver: SparkDriver, incarnation: int) -> JSON | None:
    """Incarnation ``incarnation``'s executor NetworkPolicy exactly as :func:`render` builds it, or None
    when the app's Spark line makes none. Built from the SparkDriver's identity alone, in microseconds:
    reconcile compares the policy it observes with this one on every pass, and a render costs a third
    of a millisecond. tests/unit/test_driver_network_policy.py holds it equal to ``render(...).network_policy``."""
    if not has_network_policy(driver):
        return None
    meta = driver.metadata
    name, namespace = str(meta["name"]), str(meta["namespace"])
    policy = network_policy_manifest(name, namespace, incarnation, naming.spark_app_id(str(meta["uid"]), incarnation))
    own(policy, namespace, sparkop_labels(driver, incarnation), owner_reference(driver, controller=True))
    return policy
