"""How long the Spark pods stay bound to a node that stopped reporting (spec.nodeLossTolerationSeconds
and the operator's --node-loss-toleration-seconds): NoExecute tolerations of the unreachable and
not-ready taints on the driver pod and the executor template; a toleration the spec gives for those
keys wins, and with neither set nothing is added (Kubernetes' own 300 s applies)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkop.api.validate import validate_document
from sparkop.driver_controller import nodeloss
from sparkop.driver_controller.podbuild import RenderOptions
from sparkop.driver_controller.render import parse, render
from tests.support.driver_objects import spark_pi_driver

UNREACHABLE, NOT_READY = "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"


def tolerations(spec: dict[str, Any], options: RenderOptions | None = None) -> tuple[list[Any], list[Any]]:
    objects = render(parse(spark_pi_driver(**spec)), 1, options)
    assert objects.executor_template is not None, "sparkop always passes an executor template down"
    (text,) = objects.executor_template["data"].values()
    template = json.loads(text)
    return objects.pod["spec"].get("tolerations", []), template["spec"].get("tolerations", [])


def node_loss(found: list[Any]) -> dict[str, int]:
    return {t["key"]: t["tolerationSeconds"] for t in found if t.get("key") in (UNREACHABLE, NOT_READY)}


@pytest.mark.parametrize(
    ("asked", "default", "expected"), [(None, None, None), (20, None, 20), (None, 45, 45), (0, 45, 0), (60, 10, 60)]
)
def test_the_spec_decides_and_the_operator_default_fills_in(
    asked: int | None, default: int | None, expected: int | None
) -> None:
    spec = {} if asked is None else {"nodeLossTolerationSeconds": asked}
    driver, executor = tolerations(spec, RenderOptions(node_loss_toleration_seconds=default))
    wanted = {} if expected is None else {UNREACHABLE: expected, NOT_READY: expected}
    assert node_loss(driver) == wanted and node_loss(executor) == wanted
    for toleration in driver + executor:
        assert (toleration["operator"], toleration["effect"]) == ("Exists", "NoExecute")


def test_a_toleration_the_spec_gives_for_a_node_loss_key_wins() -> None:
    own = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 900}
    spec = {"nodeLossTolerationSeconds": 15, "driver": {"tolerations": [own]}, "executor": {"tolerations": [own]}}
    driver, executor = tolerations(spec)
    assert node_loss(driver) == node_loss(executor) == {UNREACHABLE: 900, NOT_READY: 15}
    assert driver.count(own) == 1


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "key": st.sampled_from(["", UNREACHABLE, NOT_READY, "dedicated"]),
                "operator": st.sampled_from(["Exists", "Equal"]),
                "effect": st.sampled_from(["", "NoExecute", "NoSchedule"]),
            }
        ),
        max_size=4,
    ),
    st.integers(min_value=0, max_value=86400),
)
def test_every_node_loss_taint_is_decided_once_and_nothing_given_is_changed(given_: list[Any], seconds: int) -> None:
    pod: dict[str, Any] = {"spec": {"tolerations": [dict(t) for t in given_]}}
    nodeloss.tolerate(pod, seconds)
    after = pod["spec"]["tolerations"]
    assert after[: len(given_)] == given_, "the spec's tolerations stay as they were, first"
    for key in (UNREACHABLE, NOT_READY):
        deciding = [t for t in after if nodeloss._covers(t, key)]
        assert deciding, f"{key} is tolerated by something"
        added = [t for t in after[len(given_) :] if t["key"] == key]
        assert len(added) == (0 if any(nodeloss._covers(t, key) for t in given_) else 1)


def test_the_field_is_validated_with_a_clear_message() -> None:
    app = {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkApplication",
        "metadata": {"name": "pi"},
        "spec": {**spark_pi_driver()["spec"], "nodeLossTolerationSeconds": -5},
    }
    problems = [str(p) for p in validate_document(app)]
    assert any("spec.nodeLossTolerationSeconds" in p and "0" in p for p in problems), problems
