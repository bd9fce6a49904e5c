"""The renderer: a SparkDriver and a driver-pod incarnation -> the objects of that incarnation.

Pure and deterministic: the same SparkDriver (name, namespace, uid, spec) and incarnation always
give the same manifests, so a create retried after a crash meets 409 AlreadyExists with an
identical object instead of making a second one.

    render(driver, incarnation)  -> DriverObjects(pod, config_map, service, executor_template, properties,
                                                  metrics_config_map)
    names(driver, incarnation)   -> IncarnationNames: the same objects' names, without rendering

``submission`` maps the run spec to what spark-submit would receive (kubeflow's mapping);
``podbuild`` does what Spark's submission client does with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api.models import SparkDriver
from driver_controller.podbuild import DriverObjects, RenderOptions, build, driver_ports
from driver_controller.submission import InvalidSpec, Submission, metrics_files, submission
from sparkop import naming

__all__ = [
    "DriverObjects",
    "IncarnationNames",
    "InvalidSpec",
    "RenderOptions",
    "Submission",
    "names",
    "parse",
    "render",
    "submission",
]


def parse(body: Mapping[str, Any]) -> SparkDriver:
    """A SparkDriver model from a manifest or a watched body (status ignored)."""
    data = {k: body[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in body}
    return SparkDriver.model_validate(data)


def render(driver: SparkDriver, incarnation: int, options: RenderOptions | None = None) -> DriverObjects:
    """Everything driver-pod ``incarnation`` of ``driver`` needs. Raises InvalidSpec for a spec
    spark-submit would refuse."""
    return build(submission(driver, incarnation), options)


@dataclass(frozen=True)
class IncarnationNames:
    """What ``render`` names for one incarnation, known without rendering (reconcile checks what
    exists by these, and renders only when something is missing)."""

    pod: str
    service: str
    config_maps: frozenset[str]
    web_ui_address: str  # <service>.<namespace>.svc:<spark.ui.port>


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
    return IncarnationNames(
        pod=naming.driver_pod_name(name, incarnation),
        service=service,
        config_maps=frozenset(config_maps),
        web_ui_address=f"{service}.{namespace}.svc:{ui_port}",
    )
