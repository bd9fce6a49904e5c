"""Batch schedulers (issue 15): the PodGroups, the pods' scheduler names, labels and annotations the
renderer builds, YuniKorn's annotations read back the way YuniKorn reads them, and the driver
reconcile creating the PodGroup before the driver pod."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from sparkop.api.models import SparkDriver
from sparkop.core.plan import Create, Refusal, refusal_key
from sparkop.driver_controller import schedulers
from sparkop.driver_controller.decide import decide
from sparkop.driver_controller.observed import Observed
from sparkop.driver_controller.render import DriverObjects, names, render
from tests.support.batch_schedulers import parse_task_groups

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
UID = "0b4c3d9e-0000-4000-8000-000000000001"


def driver(**spec: Any) -> SparkDriver:
    base: dict[str, Any] = {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": "local:///x.jar",
        "driver": {"cores": 1, "memory": "512m"},
        "executor": {"instances": 2, "cores": 1, "memory": "512m"},
    }
    meta = {"name": "pi-1", "namespace": "ns", "uid": UID, "labels": {"sparkop.io/app": "pi"}}
    return SparkDriver.model_validate({"metadata": meta, "spec": {**base, **spec}})


def executor_template(objects: DriverObjects) -> dict[str, Any]:
    assert objects.executor_template is not None
    template: dict[str, Any] = json.loads(objects.executor_template["data"]["podspec-configmap-key"])
    return template


# --- volcano ---------------------------------------------------------------------------------------


def test_volcano_pod_group_is_owned_by_the_spark_driver_and_sums_driver_and_executors() -> None:
    objects = render(
        driver(batchScheduler="volcano", batchSchedulerOptions={"queue": "etl", "priorityClassName": "hi"}), 1
    )
    group = objects.pod_group
    assert group is not None
    assert (group["apiVersion"], group["kind"], group["metadata"]["name"]) == (
        "scheduling.volcano.sh/v1beta1",
        "PodGroup",
        "pi-1-pg",
    )
    [owner] = group["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("SparkDriver", "pi-1", UID, True)
    # driver 1 CPU, 512m + 384m overhead; two executors the same: 3 CPUs, 3 x 896 MiB
    assert group["spec"] == {
        "minMember": 1,
        "minResources": {"cpu": "3", "memory": "2688Mi"},
        "queue": "etl",
        "priorityClassName": "hi",
    }
    driver_requests = objects.pod["spec"]["containers"][-1]["resources"]["requests"]
    assert driver_requests == {"cpu": "1", "memory": "896Mi"}  # what the sum started from


def test_volcano_marks_the_driver_pod_and_the_executor_template() -> None:
    objects = render(driver(batchScheduler="volcano"), 1)
    for pod in (objects.pod, executor_template(objects)):
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "pi-1-pg"
    # Spark's own property too, so that a scheduler name in sparkConf cannot send the executors elsewhere
    assert objects.properties["spark.kubernetes.executor.scheduler.name"] == "volcano"


def test_volcano_resources_option_replaces_the_sum_and_the_queue_is_optional() -> None:
    objects = render(driver(batchScheduler="volcano", batchSchedulerOptions={"resources": {"cpu": "10"}}), 2)
    assert objects.pod_group is not None
    assert objects.pod_group["spec"] == {"minMember": 1, "minResources": {"cpu": "10"}}
    assert objects.pod_group["metadata"]["name"] == "pi-1-pg"  # one group for every incarnation


def test_no_batch_scheduler_no_pod_group_and_no_marks() -> None:
    objects = render(driver(), 1)
    assert objects.pod_group is None and names(driver(), 1).pod_group is None
    assert "schedulerName" not in objects.pod["spec"]
    assert "schedulerName" not in executor_template(objects)["spec"]


# --- scheduler-plugins coscheduling ---------------------------------------------------------------


def test_coscheduling_pod_group_and_label() -> None:
    d = driver(batchScheduler="kube-scheduler", executor={"instances": 3, "coreRequest": "500m", "memory": "1g"})
    objects = render(d, 1)
    group = objects.pod_group
    assert group is not None and group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    # driver 1 CPU 896 MiB + 3 x (500m, 1024 + 384 MiB)
    assert group["spec"] == {"minMember": 1, "minResources": {"cpu": "2500m", "memory": "5120Mi"}}
    assert group["metadata"]["ownerReferences"][0]["controller"] is True
    for pod in (objects.pod, executor_template(objects)):
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "pi-1-pg"
        assert "schedulerName" not in pod["spec"]  # the pods keep their scheduler (it runs the plugin)
    assert names(d, 1).pod_group == "pi-1-pg"


def test_coscheduling_keeps_the_scheduler_name_the_spec_gives() -> None:
    d = driver(batchScheduler="kube-scheduler", driver={"schedulerName": "scheduler-plugins-scheduler"})
    assert render(d, 1).pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"


def test_a_long_driver_name_gives_a_pod_group_name_that_is_a_label_value() -> None:
    d = driver(batchScheduler="kube-scheduler")
    d.metadata["name"] = "a" * 200 + "-1"
    name = render(d, 1).pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
    assert len(name) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)


# --- yunikorn -------------------------------------------------------------------------------------


def test_yunikorn_annotations_parse_as_yunikorn_reads_them() -> None:
    d = driver(
        batchScheduler="yunikorn",
        batchSchedulerOptions={"queue": "root.etl"},
        nodeSelector={"pool": "spark"},
        driver={"cores": 1, "memory": "512m", "labels": {"team": "data"}},
        executor={
            "instances": 4,
            "cores": 2,
            "memory": "2g",
            "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        },
    )
    objects = render(d, 1)
    pod, template = objects.pod, executor_template(objects)
    groups = parse_task_groups(pod["metadata"]["annotations"])
    assert groups["spark-driver"]["minMember"] == 1
    assert groups["spark-driver"]["minResource"] == {"cpu": "1", "memory": "896Mi"}
    assert groups["spark-driver"]["nodeSelector"] == {"pool": "spark"}
    assert groups["spark-driver"]["labels"] == {"team": "data", "queue": "root.etl"}
    assert groups["spark-executor"]["minMember"] == 4
    assert groups["spark-executor"]["minResource"] == {"cpu": "2", "memory": "2432Mi"}
    assert groups["spark-executor"]["tolerations"][0]["key"] == "spot"
    # each pod names a group that the originating pod defines, and only the driver defines them
    assert pod["metadata"]["annotations"]["yunikorn.apache.org/task-group-name"] in groups
    assert template["metadata"]["annotations"]["yunikorn.apache.org/task-group-name"] in groups
    assert "yunikorn.apache.org/task-groups" not in template["metadata"]["annotations"]
    app_id = pod["metadata"]["labels"]["spark-app-selector"]
    for p in (pod, template):
        assert p["spec"]["schedulerName"] == "yunikorn"
        assert p["metadata"]["annotations"]["yunikorn.apache.org/app-id"] == app_id
        assert p["metadata"]["annotations"]["yunikorn.apache.org/queue"] == "root.etl"
        assert p["metadata"]["labels"]["queue"] == "root.etl"
    assert objects.pod_group is None  # YuniKorn reads the pods; nothing else to create


def test_yunikorn_leaves_out_an_executor_group_of_no_member() -> None:
    d = driver(
        batchScheduler="yunikorn",
        dynamicAllocation={"enabled": True, "minExecutors": 0, "initialExecutors": 0, "maxExecutors": 5},
        executor={"instances": 0},
    )
    assert list(parse_task_groups(render(d, 1).pod["metadata"]["annotations"])) == ["spark-driver"]


# --- the arithmetic ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "milli"), [("1", 1000), ("500m", 500), ("1.5", 1500), (".5", 500), ("2", 2000)])
def test_millicores(text: str, milli: int) -> None:
    assert schedulers.millicores(text) == milli
    assert schedulers.millicores(schedulers.cpu_quantity(milli)) == milli


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({}, 2),
        ({"spark.executor.instances": "5"}, 5),
        ({"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.minExecutors": "3"}, 3),
        (
            {
                "spark.dynamicAllocation.enabled": "true",
                "spark.dynamicAllocation.initialExecutors": "4",
                "spark.executor.instances": "1",
            },
            4,
        ),
    ],
)
def test_initial_executors_as_spark_counts_them(conf: dict[str, str], expected: int) -> None:
    assert schedulers.initial_executors(conf) == expected


def test_executor_requests_follow_spark() -> None:
    conf = {"spark.executor.memory": "4g", "spark.executor.pyspark.memory": "1g", "spark.executor.cores": "2"}
    assert schedulers.executor_requests(conf, "python", False) == schedulers.Requests(2000, 4096 + 1638 + 1024)
    assert schedulers.executor_requests({"spark.executor.memoryOverhead": "1g"}, "java", False).memory_mib == 2048


# --- the driver reconcile ---------------------------------------------------------------------------


def body(**spec: Any) -> dict[str, Any]:
    d = driver(**spec)
    manifest = d.to_json()
    manifest["metadata"].update(generation=1, resourceVersion="10")
    manifest["status"] = {}
    return manifest


def test_the_pod_group_is_created_before_the_driver_pod() -> None:
    plan = decide(Observed.of(body(batchScheduler="volcano")), NOW)
    kinds = [a.kind for a in plan.before_status if isinstance(a, Create)]
    assert kinds[0] == "PodGroup" and kinds[-1] == "Pod"


def test_a_pod_group_kind_the_cluster_does_not_serve_fails_the_submission_and_says_what_to_do() -> None:
    key = refusal_key(Create({"kind": "PodGroup", "metadata": {"name": "pi-1-pg"}}))
    refusal = Refusal(404, "NotFound", "the server could not find the requested resource")
    plan = decide(Observed.of(body(batchScheduler="volcano"), refusals={key: refusal}), NOW)
    assert plan.status is not None and plan.status.phase == "SubmissionFailed"
    assert plan.status.lastError is not None
    assert "install that scheduler's CRDs, or remove spec.batchScheduler" in (plan.status.lastError.message or "")
    assert not [a for a in plan.before_status if isinstance(a, Create)]
