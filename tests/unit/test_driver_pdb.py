"""The driver's PodDisruptionBudget (spec.driverPodDisruptionBudget, kubeflow's field, and the
operator's --driver-pod-disruption-budget default): rendered with the driver's objects, owned by the
SparkDriver, the same for every incarnation, selecting only its driver pods."""

from __future__ import annotations

from typing import Any

import pytest

from sparkop.domain import labels
from sparkop.driver_controller.podbuild import RenderOptions
from sparkop.driver_controller.render import parse, render
from tests.support.driver_objects import spark_pi_driver

UID = "0b4c3d9e-0000-4000-8000-00000000bdb1"


def driver(**spec: Any) -> dict[str, Any]:
    manifest = spark_pi_driver(uid=UID, **spec)
    manifest["metadata"]["labels"] = {labels.APP: "pi"}
    return manifest


@pytest.mark.parametrize(
    ("asked", "default", "made"),
    [(None, False, False), (True, False, True), (None, True, True), (False, True, False), (False, False, False)],
)
def test_the_spec_decides_and_the_operator_default_fills_in(asked: bool | None, default: bool, made: bool) -> None:
    spec = {} if asked is None else {"driverPodDisruptionBudget": asked}
    objects = render(parse(driver(**spec)), 1, RenderOptions(driver_pdb=default))
    assert (objects.pod_disruption_budget is not None) is made


def test_one_budget_for_every_incarnation_selecting_only_the_driver_pods() -> None:
    first = render(parse(driver(driverPodDisruptionBudget=True)), 1).pod_disruption_budget
    second = render(parse(driver(driverPodDisruptionBudget=True)), 2)
    assert first is not None and first == second.pod_disruption_budget
    assert first["metadata"]["name"] == "pi-1-driver-pdb"
    assert first["spec"]["minAvailable"] == 1
    selector = first["spec"]["selector"]["matchLabels"]
    assert selector == {labels.DRIVER: "pi-1", labels.SPARK_ROLE: labels.ROLE_DRIVER}
    pod_labels = second.pod["metadata"]["labels"]
    assert all(pod_labels[k] == v for k, v in selector.items()), "it selects the driver pod"
    (owner,) = first["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("SparkDriver", UID, True)
    assert labels.INCARNATION not in first["metadata"]["labels"]
    assert first["metadata"]["labels"][labels.APP] == "pi"
