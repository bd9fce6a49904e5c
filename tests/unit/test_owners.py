"""One owner rule (core.owners): an object is filed under its owner's key by an ownerReference naming
the owner's group and kind, and counts as the owner's only by its uid; a label never decides."""

from __future__ import annotations

from typing import Any

from sparkop.core.owners import controller_keys, controller_of, reference_keys, reference_to
from sparkop.domain import labels
from sparkop.driver_controller.observed import controller_key, owner_key
from sparkop.driver_controller.summaries import summarize_object, summarize_pod
from tests.support.driver_objects import UID, executor, objects

DRIVER = {"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkDriver", "name": "pi", "uid": UID}
KUBEFLOW = {**DRIVER, "apiVersion": "sparkoperator.k8s.io/v1beta2"}
POD = {"apiVersion": "v1", "kind": "Pod", "name": "pi-1-driver", "uid": "pod-1"}


def body(*refs: dict[str, Any], driver_label: str | None = "pi") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "namespace": "ns", "ownerReferences": list(refs)}
    if driver_label is not None:
        meta["labels"] = {labels.DRIVER: driver_label}
    return {"kind": "ConfigMap", "metadata": meta}


def test_the_controller_reference_names_group_kind_and_uid() -> None:
    controlled = body({**DRIVER, "controller": True})
    assert controller_of(controlled, "sparkop.io", "SparkDriver", UID) is not None
    assert controller_of(controlled, "sparkop.io", "SparkDriver", "another") is None
    assert controller_of(body({**KUBEFLOW, "controller": True}), "sparkop.io", "SparkDriver") is None
    assert controller_of(body({**DRIVER, "controller": False}), "sparkop.io", "SparkDriver") is None


def test_a_plain_reference_is_found_beside_another_controller() -> None:
    executor_pod = body({**DRIVER, "controller": False}, {**POD, "controller": True})
    assert reference_to(executor_pod, "sparkop.io", "SparkDriver", UID) is not None
    assert reference_to(executor_pod, "sparkop.io", "SparkDriver", "another") is None
    assert reference_to(body({**KUBEFLOW, "controller": False}), "sparkop.io", "SparkDriver") is None
    assert reference_keys("sparkop.io", "SparkDriver")(executor_pod) == [("ns", "pi")]
    assert controller_keys("sparkop.io", "SparkDriver")(executor_pod) == []


def test_a_driver_files_its_children_by_their_reference_to_it_not_by_label() -> None:
    controlled = body({**DRIVER, "controller": True})
    assert controller_key(controlled) == [("ns", "pi")]
    # The label alone (an object of someone else's, or one whose reference was removed) files nothing.
    assert controller_key(body()) == [] and owner_key(body()) == []
    # Labelled for another name, it is still filed under the SparkDriver its reference names.
    assert controller_key(body({**DRIVER, "controller": True}, driver_label="other")) == [("ns", "pi")]
    # kubeflow's SparkApplication controller names a kind of ours in another group: not ours.
    assert controller_key(body({**KUBEFLOW, "controller": True})) == []


def test_what_a_driver_counts_as_its_own_is_what_names_its_uid() -> None:
    pod, cms, svcs = objects()
    assert summarize_pod(pod).owner_uid == UID  # its driver pod: controlled
    assert summarize_pod(executor(1)).owner_uid == UID  # an executor: its driver pod controls it
    assert summarize_pod(executor(2, adopted=True)).owner_uid == UID
    assert {c.owner_uid for c in cms} == {UID} and {s.owner_uid for s in svcs} == {UID}
    # A ConfigMap that only references the SparkDriver (not its controller) is not one of its own.
    assert summarize_object(body({**DRIVER, "controller": False})).owner_uid == ""
    assert summarize_object(body({**DRIVER, "uid": "earlier", "controller": True})).owner_uid == "earlier"
