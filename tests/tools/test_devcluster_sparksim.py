from __future__ import annotations

from typing import Any

import pytest

from devcluster.sparksim import (
    ConfigMapFile,
    app_name_label,
    build_executor_pod,
    configmap_file,
    driver_container,
    driver_exited,
    executor_count,
    executor_delay,
    executor_memory_mib,
    executor_name_prefix,
    main,
    parse_size_mib,
)
from sparkop.driver_controller.render import parse, render


def driver(**overrides: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {
            "name": "pi-driver",
            "namespace": "ns",
            "uid": "uid-driver",
            "labels": {"spark-app-selector": "spark-abc", "spark-role": "driver"},
            "annotations": {"sim.sparkop.io/exec-outcome": "Failed", "other": "x"},
        },
        "spec": {
            "containers": [
                {
                    "name": "spark-kubernetes-driver",
                    "image": "spark:driver",
                    "volumeMounts": [
                        {"name": "spark-conf-volume-driver", "mountPath": "/opt/spark/conf"},
                        {"name": "pod-template-volume", "mountPath": "/opt/spark/pod-template/"},
                    ],
                }
            ],
            "volumes": [
                {"name": "spark-conf-volume-driver", "configMap": {"name": "pi-conf"}},
                {
                    "name": "pod-template-volume",
                    "configMap": {"name": "pi-tmpl", "items": [{"key": "tmpl-key", "path": "executor.yaml"}]},
                },
            ],
        },
    }
    pod["metadata"].update(overrides)
    return pod


def test_configmap_file_by_mount_dir_and_items() -> None:
    pod = driver()
    assert configmap_file(pod, "/opt/spark/conf/spark.properties") == ConfigMapFile("pi-conf", "spark.properties")
    assert configmap_file(pod, "/opt/spark/pod-template/executor.yaml") == ConfigMapFile("pi-tmpl", "tmpl-key")
    assert configmap_file(pod, "/opt/spark/pod-template/other.yaml") is None
    assert configmap_file(pod, "/elsewhere/x") is None


def test_executor_count_precedence() -> None:
    pod = driver()
    assert executor_count({"spark.executor.instances": "5"}, pod) == 5
    assert executor_count({}, pod) == 2
    pod["metadata"]["annotations"]["sim.sparkop.io/executors"] = "1"
    assert executor_count({}, pod) == 1
    assert executor_count({"spark.executor.instances": "0"}, pod) == 0


def test_executor_delay_by_annotation_else_the_default() -> None:
    """A driver asks for its executors a moment after it runs: the simulator's --executor-delay, or the
    driver pod's own sim.sparkop.io/executor-delay-seconds (0: at once, as a driver that had them ready)."""
    pod = driver()
    assert executor_delay(pod, 3.0) == 3.0
    pod["metadata"]["annotations"]["sim.sparkop.io/executor-delay-seconds"] = "0.5"
    assert executor_delay(pod, 3.0) == 0.5
    pod["metadata"]["annotations"]["sim.sparkop.io/executor-delay-seconds"] = "0"
    assert executor_delay(pod, 3.0) == 0.0
    pod["metadata"]["annotations"]["sim.sparkop.io/executor-delay-seconds"] = "soon"
    assert executor_delay(pod, 3.0) == 3.0  # not a number: the default (and a warning in its log)


def test_a_negative_executor_delay_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--kubeconfig", "k", "--executor-delay", "-1"])
    assert "--executor-delay" in capsys.readouterr().err


def test_name_prefix() -> None:
    assert executor_name_prefix({}, driver()) == "pi"
    assert executor_name_prefix({}, driver(name="no-suffix")) == "no-suffix"
    assert executor_name_prefix({"spark.kubernetes.executor.podNamePrefix": "custom"}, driver()) == "custom"


@pytest.mark.parametrize(("value", "mib"), [("1g", 1024), ("512m", 512), ("2048", 2048), ("1024k", 1), ("2gb", 2048)])
def test_parse_size(value: str, mib: int) -> None:
    assert parse_size_mib(value) == mib


def test_memory_overhead() -> None:
    assert executor_memory_mib({}) == 1024 + 384
    assert executor_memory_mib({"spark.executor.memory": "10g"}) == 10240 + 1024
    assert executor_memory_mib({"spark.executor.memory": "1g", "spark.executor.memoryOverhead": "100m"}) == 1124


def test_app_name_label() -> None:
    assert app_name_label("My Spark_App!") == "my-spark-app"


def test_executor_without_template() -> None:
    props = {"spark.app.name": "Pi", "spark.kubernetes.container.image": "spark:3.5", "spark.executor.cores": "2"}
    pod = build_executor_pod(driver(), props, 3)
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == "pi-exec-3"
    assert meta["namespace"] == "ns"
    assert meta["labels"] == {
        "spark-app-selector": "spark-abc",
        "spark-app-name": "pi",
        "spark-role": "executor",
        "spark-exec-id": "3",
        "spark-exec-resourceprofile-id": "0",
    }
    assert meta["annotations"] == {"sim.sparkop.io/outcome": "Failed"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "pi-driver",
            "uid": "uid-driver",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    (container,) = spec["containers"]
    assert container["name"] == "spark-kubernetes-executor"
    assert container["image"] == "spark:3.5"
    assert container["args"] == ["executor"]
    assert container["resources"]["requests"] == {"memory": "1408Mi", "cpu": "2"}
    assert spec["restartPolicy"] == "Never"


def test_executor_image_fallbacks() -> None:
    assert build_executor_pod(driver(), {}, 1)["spec"]["containers"][0]["image"] == "spark:driver"
    props = {"spark.kubernetes.container.image": "a", "spark.kubernetes.executor.container.image": "b"}
    assert build_executor_pod(driver(), props, 1)["spec"]["containers"][0]["image"] == "b"


def test_template_merge_like_spark() -> None:
    foreign_owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": "uid-keeper"}
    template = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "ignored",
            "labels": {"team": "data", "spark-role": "overridden"},
            "annotations": {"note": "kept"},
            "ownerReferences": [foreign_owner],
        },
        "spec": {
            "restartPolicy": "Always",
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "containers": [
                {"name": "sidecar", "image": "busybox"},
                {"name": "main", "image": "tmpl", "env": [{"name": "FROM_TEMPLATE", "value": "1"}]},
            ],
        },
    }
    props = {"spark.kubernetes.executor.podTemplateContainerName": "main"}
    pod = build_executor_pod(driver(), props, 1, template)
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == "pi-exec-1"
    assert meta["labels"]["team"] == "data" and meta["labels"]["spark-role"] == "executor"
    assert meta["annotations"]["note"] == "kept"
    assert meta["ownerReferences"][0] == foreign_owner  # Spark appends its own reference
    assert meta["ownerReferences"][1]["uid"] == "uid-driver"
    assert spec["restartPolicy"] == "Never"
    assert spec["tolerations"] == template["spec"]["tolerations"]
    assert spec["nodeSelector"] == {"disk": "ssd"}
    main, sidecar = spec["containers"]
    assert main["name"] == "main" and main["image"] == "spark:driver" and main["args"] == ["executor"]
    assert main["env"][0] == {"name": "FROM_TEMPLATE", "value": "1"}
    assert sidecar == {"name": "sidecar", "image": "busybox"}
    assert template["metadata"]["name"] == "ignored"  # the template itself is not mutated


def test_template_first_container_by_default() -> None:
    template = {"spec": {"containers": [{"name": "first"}, {"name": "second"}]}}
    pod = build_executor_pod(driver(), {}, 1, template)
    assert [c["name"] for c in pod["spec"]["containers"]] == ["first", "second"]
    assert pod["spec"]["containers"][0]["args"] == ["executor"]


def sparkdriver(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {"name": "pi-1", "namespace": "ns", "uid": "0b4c3d9e-0000-4000-8000-000000000001"},
        "spec": {
            "type": "Scala",
            "sparkVersion": "3.5.7",
            "image": "apache/spark:3.5.7",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            **spec,
        },
    }


@pytest.mark.parametrize("sidecar", ["sidecar", "spark-kubernetes-driver"])
def test_driver_container_is_the_spark_container_sparkop_renders(sidecar: str) -> None:
    """spark.kubernetes.driver.podTemplateContainerName names the Spark container of a driver template whose
    first container is a sidecar (even one called spark-kubernetes-driver): the simulator takes the container
    Spark (and sparkop's renderer) made the Spark container, the pod's last, not the sidecar."""
    template = {"spec": {"containers": [{"name": sidecar, "image": "busybox"}, {"name": "main"}]}}
    body = sparkdriver(
        sparkConf={"spark.kubernetes.driver.podTemplateContainerName": "main"}, driver={"template": template}
    )
    pod = render(parse(body), 1).pod
    pod["metadata"]["uid"] = "uid-driver"  # as the API server returns it
    assert [c["name"] for c in pod["spec"]["containers"]] == [sidecar, "main"]
    spark = driver_container(pod)
    assert spark["name"] == "main" and spark["image"] == "apache/spark:3.5.7" and spark["args"][0] == "driver"
    # Without an executor image property, executors take the driver's Spark image, never the sidecar's.
    assert build_executor_pod(pod, {}, 1)["spec"]["containers"][0]["image"] == "apache/spark:3.5.7"


def test_a_driver_whose_container_ended_has_exited_while_its_pod_still_runs() -> None:
    # The real kubelet: the container is terminated, the pod's phase stays Running for a moment.
    pod = driver()
    pod["status"] = {"phase": "Running", "containerStatuses": [{"name": "spark-kubernetes-driver", "state": {}}]}
    assert not driver_exited(pod)
    pod["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    assert not driver_exited(pod)
    pod["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 0}}
    assert driver_exited(pod)
    # A sidecar that ended says nothing about the driver's JVM.
    pod["spec"]["containers"].insert(0, {"name": "sidecar", "image": "busybox"})
    pod["status"]["containerStatuses"] = [
        {"name": "sidecar", "state": {"terminated": {"exitCode": 0}}},
        {"name": "spark-kubernetes-driver", "state": {"running": {}}},
    ]
    assert not driver_exited(pod)
