"""The renderer: a SparkDriver and a driver-pod incarnation -> the objects of that incarnation.

Pure and deterministic: the same SparkDriver (name, namespace, uid, spec) and incarnation always
give the same manifests, so a create retried after a crash meets 409 AlreadyExists with an
identical object instead of making a second one.

    render(driver, incarnation)  -> DriverObjects(pod, config_map, service, executor_template, properties)

``submission`` maps the run spec to what spark-submit would receive (kubeflow's mapping);
``podbuild`` does what Spark's submission client does with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.models import SparkDriver
from driver_controller.podbuild import DriverObjects, RenderOptions, build
from driver_controller.submission import InvalidSpec, Submission, submission

__all__ = ["DriverObjects", "InvalidSpec", "RenderOptions", "Submission", "parse", "render", "submission"]


def parse(body: Mapping[str, Any]) -> SparkDriver:
    """A SparkDriver model from a manifest or a watched body (status ignored)."""
    data = {k: body[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in body}
    return SparkDriver.model_validate(data)


def render(driver: SparkDriver, incarnation: int, options: RenderOptions | None = None) -> DriverObjects:
    """Everything driver-pod ``incarnation`` of ``driver`` needs. Raises InvalidSpec for a spec
    spark-submit would refuse."""
    return build(submission(driver, incarnation), options)
