"""driver_controller.adoption: a SparkDriver of a run taken over from kubeflow's operator claims the driver
pod kubeflow's spark-submit made, and its executors, and follows that pod as its first incarnation, never
creating one of its own while it lives."""

from __future__ import annotations

from typing import Any

from sparkop.core.expectations import LogTail
from sparkop.core.plan import Create, Patch, Plan, ReadLog
from sparkop.domain import labels
from sparkop.driver_controller.decide import decide
from sparkop.driver_controller.observed import Observed
from sparkop.driver_controller.summaries import summarize_pod
from tests.support.driver_objects import NOW, UID, driver, running, terminated

APP_UID = "uid-app"
POD_UID = "uid-kubeflow-pod"
SELECTOR = "spark-kubeflow-1"


def adopting(status: dict[str, Any] | None = None) -> dict[str, Any]:
    body = driver(status)
    body["spec"]["appName"] = "pi"
    body["spec"]["adoptDriverPod"] = {"name": "pi-driver", "uid": POD_UID}
    return body


def kubeflow_pod(name: str, uid: str, role: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "resourceVersion": "41",
            "labels": {
                labels.SPARK_ROLE: role,
                labels.SPARK_APP_SELECTOR: SELECTOR,
                labels.KUBEFLOW_APP_NAME: "pi",
                labels.KUBEFLOW_LAUNCHED: "true",
                **({labels.SPARK_EXEC_ID: "1"} if role == labels.ROLE_EXECUTOR else {}),
            },
            "ownerReferences": [{**owner, "controller": True}],
        },
        "spec": {"containers": [{"name": "spark-kubernetes-driver"}]},
    }


APP_REF = {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "name": "pi", "uid": APP_UID}
KUBEFLOW_DRIVER = kubeflow_pod("pi-driver", POD_UID, labels.ROLE_DRIVER, APP_REF)
KUBEFLOW_EXECUTOR = kubeflow_pod(
    "pi-exec-1",
    "uid-exec",
    labels.ROLE_EXECUTOR,
    {"apiVersion": "v1", "kind": "Pod", "name": "pi-driver", "uid": POD_UID},
)


def claimed(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` after the claim, as the driver controller's pod cache then holds it."""
    meta = pod["metadata"]
    ref = {"apiVersion": labels.API_VERSION, "kind": "SparkDriver", "name": "pi", "uid": UID, "controller": False}
    finalizers = [labels.DRIVER_OUTCOME_FINALIZER] if meta["labels"][labels.SPARK_ROLE] == labels.ROLE_DRIVER else []
    return {
        **pod,
        "metadata": {
            **meta,
            "resourceVersion": "42",
            "labels": {**meta["labels"], labels.DRIVER: "pi", labels.INCARNATION: "1"},
            "ownerReferences": [*meta["ownerReferences"], ref],
            "finalizers": finalizers,
        },
    }


def plan_for(
    status: dict[str, Any] | None, left: list[dict[str, Any]], owned: list[dict[str, Any]] = (), **observed: Any
) -> Plan[Any]:  # type: ignore[assignment]
    pods = [summarize_pod(p) for p in owned]
    return decide(Observed.of(adopting(status), pods, left_pods=[summarize_pod(p) for p in left], **observed), NOW)


def test_kubeflows_running_driver_pod_and_executor_are_claimed_and_followed_as_incarnation_1() -> None:
    plan = plan_for(None, [running(KUBEFLOW_DRIVER), running(KUBEFLOW_EXECUTOR)])
    claims = [a for a in plan.before_status if isinstance(a, Patch)]
    assert sorted(c.name for c in claims) == ["pi-driver", "pi-exec-1"]
    for claim in claims:
        ops = claim.body
        assert ops[:2] == [
            {"op": "test", "path": "/metadata/uid", "value": POD_UID if claim.name == "pi-driver" else "uid-exec"},
            {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
        ]
        added = {op["path"]: op["value"] for op in ops[2:]}
        assert added["/metadata/labels/sparkop.io~1driver"] == "pi"
        assert added["/metadata/labels/sparkop.io~1incarnation"] == "1"
        assert "/metadata/labels/app.kubernetes.io~1managed-by" not in added  # stays in kubeflow's selection
        reference = added["/metadata/ownerReferences/-"]
        assert (reference["kind"], reference["uid"], reference["controller"]) == ("SparkDriver", UID, False)
        assert ("/metadata/finalizers" in added) == (claim.name == "pi-driver")
    assert not [a for a in (*plan.before_status, *plan.after_status) if isinstance(a, Create)]
    assert plan.status is not None
    assert plan.status.incarnation == 1 and plan.status.phase is not None and plan.status.phase.value == "Running"
    assert plan.status.driverPod is not None and plan.status.driverPod.uid == POD_UID
    assert plan.status.sparkApplicationId == SELECTOR
    assert plan.status.executors.running == 1
    assert plan.requeue_after is not None  # executors its driver makes later are claimed too


def test_once_claimed_nothing_is_patched_or_created_again() -> None:
    first = plan_for(None, [running(KUBEFLOW_DRIVER), running(KUBEFLOW_EXECUTOR)])
    assert first.status is not None
    pods = [claimed(running(KUBEFLOW_DRIVER)), claimed(running(KUBEFLOW_EXECUTOR))]
    plan = plan_for(first.status.to_json(), pods, pods)
    actions = (*plan.before_status, *plan.after_status)
    assert not [a for a in actions if isinstance(a, Patch | Create)], actions
    assert plan.status is None or plan.status.phase == first.status.phase


def test_the_claimed_pods_end_is_its_outcome_recorded_with_its_log_tail() -> None:
    first = plan_for(None, [running(KUBEFLOW_DRIVER)])
    assert first.status is not None
    ended = claimed(terminated(KUBEFLOW_DRIVER, 0))
    reading = plan_for(first.status.to_json(), [ended], [ended])
    assert [a for a in reading.before_status if isinstance(a, ReadLog)]
    logs = {POD_UID: LogTail("Pi is roughly 3.14")}
    plan = plan_for(first.status.to_json(), [ended], [ended], logs=logs)
    assert plan.status is not None and plan.status.phase is not None and plan.status.phase.value == "Succeeded"
    [record] = plan.status.incarnations or []
    assert (record.incarnation, record.outcome.value, record.logTail) == (1, "Succeeded", "Pi is roughly 3.14")
    assert not [a for a in (*plan.before_status, *plan.after_status) if isinstance(a, Create)]


def test_a_pod_gone_before_its_claim_is_a_lost_incarnation_replaced_by_one_of_sparkops() -> None:
    plan = plan_for(None, [])
    assert plan.status is not None
    [record] = plan.status.incarnations or []
    assert (record.incarnation, record.outcome.value, record.reason) == (1, "Lost", "PodMissing")
    assert plan.status.incarnation == 2
    assert not [a for a in plan.before_status if isinstance(a, Patch)]


def test_another_pod_of_the_name_is_never_claimed() -> None:
    # kubeflow's earlier run's pod, or anyone's: not the uid the run adopts.
    other = kubeflow_pod("pi-driver", "uid-another", labels.ROLE_DRIVER, APP_REF)
    plan = plan_for(None, [running(other)])
    assert not [a for a in plan.before_status if isinstance(a, Patch)]


def test_a_pod_on_its_way_out_is_followed_as_lost_not_claimed() -> None:
    going = {**running(KUBEFLOW_DRIVER)}
    going["metadata"] = {
        **going["metadata"],
        "deletionTimestamp": "2026-01-01T11:59:30Z",
        "deletionGracePeriodSeconds": 30,
    }
    plan = plan_for(None, [going], logs={POD_UID: LogTail("killed")})
    assert not [a for a in plan.before_status if isinstance(a, Patch)]
    assert plan.status is not None
    [record] = plan.status.incarnations or []
    assert (record.incarnation, record.outcome.value, record.reason) == (1, "Lost", "Deleted")


def test_a_claimed_pod_that_failed_without_a_message_is_told_by_the_end_of_its_log() -> None:
    """kubeflow's spark-submit sets no FallbackToLogsOnError: the adopted driver's failure would say only
    "exit code 1" (the swap test's failing runs: their cause went with the namespace)."""
    first = plan_for(None, [running(KUBEFLOW_DRIVER)])
    assert first.status is not None
    ended = claimed(terminated(KUBEFLOW_DRIVER, 1))
    log = "INFO SparkContext: Running Spark version 3.5.9\nTraceback (most recent call last):\nValueError: boom\n"
    plan = plan_for(first.status.to_json(), [ended], [ended], logs={POD_UID: LogTail(log)})
    assert plan.status is not None and plan.status.termination is not None
    assert (plan.status.termination.exitCode, plan.status.termination.message) == (1, log.rstrip("\n"))
    [record] = plan.status.incarnations or []
    assert (record.outcome.value, record.logTail) == ("Failed", log)
