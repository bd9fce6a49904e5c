"""The executors' NetworkPolicy of a Spark 4.2+ SparkDriver on a real control plane, with the real operator
(driver controller only) and the devcluster's Spark-driver simulator: created before the driver pod with
the spec, owner and labels spark-submit and sparkop give it; created again after ``kubectl delete``; put
back after an edit; gone once the driver has ended. (The devcluster's bridge CNI does not enforce
policies: what is checked is the object, not the traffic.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from sparkop.domain import labels

# The driver-controller-only operator fixture too.
from tests.support.cluster_drivers import driver_manifest, executors_owned, get, operator, wait_phase
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
__all__ = ["operator"]  # a fixture: used by name


def spark_43(name: str, **kwargs: Any) -> Obj:
    manifest = driver_manifest(name, **kwargs)
    manifest["spec"] |= {"sparkVersion": "4.3.0", "image": "apache/spark:4.3.0"}
    return manifest


def wanted_spec(app_id: str) -> Obj:
    """What NetworkPolicyFeatureStep asks for, as the API server stores it (policyTypes defaulted)."""
    app = {labels.SPARK_APP_SELECTOR: app_id}
    return {
        "podSelector": {"matchLabels": {labels.SPARK_ROLE: labels.ROLE_EXECUTOR, **app}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": app}}]}],
        "policyTypes": ["Ingress"],
    }


def policy(cluster: ClusterHandle, namespace: str, name: str) -> Obj | None:
    return get(cluster, namespace, "networkpolicy", name)


def running_with_policy(cluster: ClusterHandle, namespace: str, name: str) -> tuple[Obj, Obj]:
    """The SparkDriver's status once Running, its executors there, and its NetworkPolicy."""
    status = wait_phase(cluster, namespace, name, "Running")
    executors_owned(cluster, namespace, name, 1, 2)
    found = policy(cluster, namespace, f"{name}-1-policy")
    assert found is not None
    return status, found


def test_a_43_driver_gets_its_executors_policy_with_spec_owner_and_labels(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    crds.apply(spark_43("net", run_seconds=None, outcome=None), namespace)
    status, found = running_with_policy(crds, namespace, "net")
    app_id = status["sparkApplicationId"]
    assert found["spec"] == wanted_spec(app_id)
    meta = found["metadata"]
    assert meta["labels"] == {
        labels.SPARK_APP_SELECTOR: app_id,
        labels.MANAGED_BY: labels.MANAGER,
        labels.DRIVER: "net",
        labels.INCARNATION: "1",
    }
    sparkdriver = get(crds, namespace, "sparkdriver", "net")
    assert sparkdriver is not None
    assert [(r["kind"], r["name"], r["uid"], r["controller"]) for r in meta["ownerReferences"]] == [
        ("SparkDriver", "net", sparkdriver["metadata"]["uid"], True)
    ]
    # Its pod selector selects the app's executors, and admits what its driver pod carries.
    selector = ",".join(f"{key}={value}" for key, value in found["spec"]["podSelector"]["matchLabels"].items())
    selected = crds.kubectl_json("get", "pods", "-n", namespace, "-l", selector)["items"]
    assert sorted(p["metadata"]["name"] for p in selected) == sorted(
        p["metadata"]["name"] for p in executors_owned(crds, namespace, "net", 1, 2)
    )
    driver_pod = get(crds, namespace, "pod", "net-driver")
    assert driver_pod is not None and driver_pod["metadata"]["labels"][labels.SPARK_APP_SELECTOR] == app_id
    # Passes ran since (executors appeared): the policy as wanted was never written again.
    assert (policy(crds, namespace, "net-1-policy") or {})["metadata"]["resourceVersion"] == meta["resourceVersion"]
    assert "NetworkPolicyRestored" not in operator.logs()


def test_a_deleted_policy_is_created_again(crds: ClusterHandle, namespace: str, operator: OperatorProcess) -> None:
    crds.apply(spark_43("redo", run_seconds=None, outcome=None), namespace)
    status, first = running_with_policy(crds, namespace, "redo")
    crds.kubectl("delete", "networkpolicy", "redo-1-policy", "-n", namespace)

    def recreated() -> Obj | None:
        found = policy(crds, namespace, "redo-1-policy")
        return found if found is not None and found["metadata"]["uid"] != first["metadata"]["uid"] else None

    again = wait_for(recreated, timeout=15, interval=0.1, message="the NetworkPolicy created again")
    assert again["spec"] == wanted_spec(status["sparkApplicationId"])
    assert again["metadata"]["labels"] == first["metadata"]["labels"]
    assert wait_phase(crds, namespace, "redo", "Running")["incarnation"] == 1  # the driver pod was left alone
    assert "NetworkPolicy redo-1-policy created" in operator.logs()


@pytest.mark.parametrize(
    "edit",
    [
        {"spec": {"ingress": [{}]}},  # admit everything
        {"spec": {"podSelector": {"matchLabels": {labels.SPARK_APP_SELECTOR: None}}}},  # select every executor
        {"spec": {"policyTypes": ["Ingress", "Egress"]}},  # deny the executors' egress
        {"metadata": {"labels": {labels.INCARNATION: "7"}}},
        # Out of the operator's watch (it selects by this label): met on its create, and patched back.
        {"metadata": {"labels": {labels.DRIVER: None}}},
    ],
    ids=["ingress-opened", "selector-widened", "egress-denied", "label-changed", "driver-label-removed"],
)
def test_an_edited_policy_is_put_back(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess, edit: Obj
) -> None:
    crds.apply(spark_43("edit", run_seconds=None, outcome=None), namespace)
    status, first = running_with_policy(crds, namespace, "edit")
    crds.kubectl("patch", "networkpolicy", "edit-1-policy", "-n", namespace, "--type=merge", "-p", json.dumps(edit))

    def put_back() -> Obj | None:
        found = policy(crds, namespace, "edit-1-policy")
        if found is None or found["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]:
            return None
        ok = found["spec"] == wanted_spec(status["sparkApplicationId"])
        return found if ok and found["metadata"]["labels"] == first["metadata"]["labels"] else None

    restored = wait_for(put_back, timeout=15, interval=0.1, message="the edit put back")
    assert restored["metadata"]["uid"] == first["metadata"]["uid"]  # patched, not recreated


def test_the_policy_is_gone_once_the_driver_ended(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    crds.apply(spark_43("done", run_seconds=4, outcome="Succeeded"), namespace)
    running_with_policy(crds, namespace, "done")
    wait_phase(crds, namespace, "done", "Succeeded", timeout=30)
    ended = (get(crds, namespace, "sparkdriver", "done") or {})["metadata"]["resourceVersion"]
    wait_for(lambda: policy(crds, namespace, "done-1-policy") is None, timeout=15, interval=0.1,
             message="the NetworkPolicy deleted")  # fmt: skip
    assert "delete NetworkPolicy done-1-policy" in operator.logs()
    # Frozen: the delete wrote nothing to the ended SparkDriver.
    assert (get(crds, namespace, "sparkdriver", "done") or {})["metadata"]["resourceVersion"] == ended
