"""The renderer: names at any length, memory math, determinism, kubeflow's property mapping."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driver_controller import sparkconf
from driver_controller.podbuild import app_name_label, driver_memory_mib
from driver_controller.render import InvalidSpec, parse, render
from sparkop import labels, naming

DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
UID = "0b4c3d9e-0000-4000-8000-000000000001"


def manifest(name: str = "pi-1", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": "Scala",
        "sparkVersion": "3.5.7",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
    }
    base.update(spec)
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {"name": name, "namespace": "ns", "uid": UID, "labels": {labels.APP: "pi"}},
        "spec": base,
    }


def container(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "spark-kubernetes-driver")


def env(pod: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(pod)["env"]}


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=253).filter(
    lambda s: s[0].isalnum() and s[-1].isalnum()
)


@settings(max_examples=200, deadline=None)
@given(name=names, incarnation=st.integers(min_value=1, max_value=10_000))
def test_names_are_valid_at_any_length(name: str, incarnation: int) -> None:
    out = render(parse(manifest(name)), incarnation)
    assert out.executor_template is not None
    for obj in (out.pod, out.service, out.config_map, out.executor_template):
        assert len(obj["metadata"]["name"]) <= 63
        assert DNS_LABEL.match(obj["metadata"]["name"]), obj["metadata"]["name"]
        for value in obj["metadata"]["labels"].values():
            assert LABEL_VALUE.match(value) and len(value) <= 63
    prefix = out.properties["spark.kubernetes.executor.podNamePrefix"]
    assert len(prefix) <= naming.POD_PREFIX_MAX and DNS_LABEL.match(prefix)
    assert out.pod["metadata"]["labels"][labels.INCARNATION] == str(incarnation)
    for label_value in out.pod["metadata"]["labels"].values():
        assert LABEL_VALUE.match(label_value)


@settings(max_examples=50, deadline=None)
@given(name=names, incarnation=st.integers(min_value=1, max_value=100))
def test_render_is_deterministic(name: str, incarnation: int) -> None:
    a = render(parse(manifest(name)), incarnation)
    b = render(parse(manifest(name)), incarnation)
    assert json.dumps([a.pod, a.config_map, a.service, a.executor_template], sort_keys=True) == json.dumps(
        [b.pod, b.config_map, b.service, b.executor_template], sort_keys=True
    )


def test_incarnations_differ() -> None:
    one, two = render(parse(manifest()), 1), render(parse(manifest()), 2)
    assert one.pod["metadata"]["name"] != two.pod["metadata"]["name"]
    assert one.properties["spark.app.id"] != two.properties["spark.app.id"]
    assert one.properties["spark.app.id"] == naming.spark_app_id(UID, 1)


@pytest.mark.parametrize(
    ("conf", "kind", "version", "expected"),
    [
        ({}, "java", 3, (1024, 384)),  # 0.1 * 1024 < 384
        ({"spark.driver.memory": "8g"}, "java", 3, (8192, 819)),
        ({"spark.driver.memory": "8g"}, "python", 3, (8192, 3276)),  # non-JVM: 0.4
        ({"spark.driver.memory": "8g", "spark.kubernetes.memoryOverheadFactor": "0.2"}, "python", 3, (8192, 1638)),
        ({"spark.driver.memory": "8g", "spark.driver.memoryOverheadFactor": "0.3"}, "java", 3, (8192, 2457)),
        ({"spark.driver.memory": "2g", "spark.driver.memoryOverhead": "100m"}, "java", 3, (2048, 100)),
        ({"spark.driver.memory": "1g", "spark.driver.minMemoryOverhead": "500m"}, "java", 4, (1024, 500)),
        ({"spark.driver.memory": "1g", "spark.driver.minMemoryOverhead": "500m"}, "java", 3, (1024, 384)),
        ({"spark.driver.memory": "1500000k"}, "java", 3, (1464, 384)),
    ],
)
def test_memory_math(conf: dict[str, str], kind: str, version: int, expected: tuple[int, int]) -> None:
    assert driver_memory_mib(conf, kind, version) == expected


def test_pod_memory_and_cpu() -> None:
    out = render(parse(manifest(driver={"cores": 2, "coreLimit": "3", "memory": "2g", "memoryOverhead": "512m"})), 1)
    resources = container(out.pod)["resources"]
    assert resources == {
        "requests": {"cpu": "2", "memory": "2560Mi"},
        "limits": {"cpu": "3", "memory": "2560Mi"},
    }


def test_python_app() -> None:
    spec = {"type": "Python", "mainApplicationFile": "local:///app/main.py", "mainClass": None, "arguments": ["x"]}
    spec["sparkConf"] = {"spark.pyspark.python": "python3"}
    out = render(parse(manifest(**spec)), 1)
    args = container(out.pod)["args"]
    assert args == [
        "driver", "--properties-file", "/opt/spark/conf/spark.properties",
        "--class", "org.apache.spark.deploy.PythonRunner", "local:///app/main.py", "x",
    ]  # fmt: skip
    assert env(out.pod)["PYSPARK_PYTHON"] == "python3" and env(out.pod)["PYSPARK_DRIVER_PYTHON"] == "python3"
    assert out.properties["spark.kubernetes.resource.type"] == "python"
    assert out.properties["spark.kubernetes.memoryOverheadFactor"] == "0.4"
    assert container(out.pod)["resources"]["requests"]["memory"] == "1433Mi"  # 1024 + 0.4 * 1024


def test_client_properties() -> None:
    out = render(parse(manifest(proxyUser="alice")), 3)
    props = out.properties
    svc = out.service["metadata"]["name"]
    assert props["spark.driver.host"] == f"{svc}.ns.svc"
    assert props["spark.kubernetes.driver.pod.name"] == out.pod["metadata"]["name"]
    assert props["spark.kubernetes.submitInDriver"] == "true"
    assert props["spark.kubernetes.executor.podNamePrefix"] == naming.pod_prefix("pi-1", 3)
    assert props["spark.kubernetes.executor.podTemplateFile"] == "/opt/spark/pod-template/pod-spec-template.yml"
    assert container(out.pod)["args"][:3] == ["driver", "--proxy-user", "alice"]
    parsed = sparkconf.parse_properties(out.config_map["data"]["spark.properties"])
    assert parsed == props
    assert out.config_map["immutable"] is True


def test_ownership_and_labels() -> None:
    out = render(parse(manifest()), 1)
    assert out.executor_template is not None
    for obj in (out.pod, out.config_map, out.service, out.executor_template):
        meta = obj["metadata"]
        assert meta["labels"][labels.DRIVER] == "pi-1"
        assert meta["labels"][labels.APP] == "pi"
        assert meta["labels"][labels.MANAGED_BY] == labels.MANAGER
        (ref,) = meta["ownerReferences"]
        assert ref["kind"] == "SparkDriver" and ref["uid"] == UID and ref["controller"] is True
    assert out.pod["metadata"]["finalizers"] == [labels.DRIVER_OUTCOME_FINALIZER]
    template = json.loads(out.executor_template["data"]["podspec-configmap-key"])
    (ref,) = template["metadata"]["ownerReferences"]
    assert ref["controller"] is False and ref["uid"] == UID
    assert template["metadata"]["labels"][labels.INCARNATION] == "1"


def test_kubeflow_mapping() -> None:
    spec = {
        "deps": {"jars": ["a.jar"], "packages": ["g:a:1"], "pyFiles": ["x.zip"]},
        "dynamicAllocation": {"enabled": True, "minExecutors": 1, "maxExecutors": 5},
        "hadoopConf": {"fs.x": "y"},
        "driver": {
            "labels": {"l": "v"},
            "annotations": {"a": "{{APP_ID}}"},
            "envVars": {"E": "1"},
            "secrets": [{"name": "s", "path": "/s", "secretType": "GCPServiceAccount"}],
            "serviceAccount": "spark",
            "javaOptions": "-Dx=1",
        },
        "executor": {"instances": 4, "envVars": {"X": "2"}, "coreRequest": "500m", "deleteOnTermination": False},
    }
    out = render(parse(manifest(**spec)), 1)
    p = out.properties
    assert p["spark.jars"] == "a.jar,local:///opt/spark/examples/jars/spark-examples.jar"
    assert p["spark.jars.packages"] == "g:a:1"
    assert p["spark.submit.pyFiles"] == "x.zip"
    assert p["spark.dynamicAllocation.enabled"] == "true"
    assert p["spark.dynamicAllocation.shuffleTracking.enabled"] == "true"
    assert p["spark.dynamicAllocation.maxExecutors"] == "5"
    assert p["spark.hadoop.fs.x"] == "y"
    assert p["spark.executor.instances"] == "4"
    assert p["spark.executorEnv.X"] == "2"
    assert p["spark.kubernetes.executor.request.cores"] == "500m"
    assert p["spark.kubernetes.executor.deleteOnTermination"] == "false"
    assert p["spark.driver.extraJavaOptions"] == "-Dx=1"
    assert out.pod["metadata"]["labels"]["l"] == "v"
    assert out.pod["metadata"]["annotations"]["a"] == p["spark.app.id"]
    assert env(out.pod)["E"] == "1"
    assert env(out.pod)["GOOGLE_APPLICATION_CREDENTIALS"] == "/s/key.json"
    assert out.pod["spec"]["serviceAccountName"] == "spark"
    assert {"name": "s-volume", "secret": {"secretName": "s"}} in out.pod["spec"]["volumes"]


def test_pod_customisation_goes_into_the_pod_and_the_executor_template() -> None:
    toleration = {"key": "k", "operator": "Exists"}
    spec = {
        "driver": {"tolerations": [toleration], "sidecars": [{"name": "side", "image": "busybox"}]},
        "executor": {"tolerations": [toleration], "env": [{"name": "A", "value": "b"}]},
    }
    out = render(parse(manifest(**spec)), 1)
    assert out.pod["spec"]["tolerations"] == [toleration]
    # Spark appends its container after the template's others.
    assert [c["name"] for c in out.pod["spec"]["containers"]] == ["side", "spark-kubernetes-driver"]
    assert out.executor_template is not None
    template = json.loads(out.executor_template["data"]["podspec-configmap-key"])
    assert template["spec"]["tolerations"] == [toleration]
    assert template["spec"]["containers"][0]["env"] == [{"name": "A", "value": "b"}]


@pytest.mark.parametrize(
    "spec",
    [
        {"mainClass": None},
        {"sparkConf": {"spark.driver.host": "x"}},
        {"type": "Python", "mainApplicationFile": None},
        {"image": None},
    ],
)
def test_invalid_specs(spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidSpec):
        render(parse(manifest(**spec)), 1)


@pytest.mark.parametrize(
    ("name", "label"),
    [("Spark Pi", "spark-pi"), ("__x__", "x"), ("a" * 100, "a" * 63), ("-", "")],
)
def test_app_name_label(name: str, label: str) -> None:
    assert app_name_label(name) == label


@given(st.dictionaries(st.text(min_size=1, max_size=20), st.text(max_size=40), max_size=10))
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert sparkconf.parse_properties(sparkconf.format_properties(props, "header")) == props


@pytest.mark.parametrize(
    ("text", "mib"), [("512m", 512), ("1g", 1024), ("1024", 1024), ("2GB", 2048), ("1500000k", 1464), ("1t", 1048576)]
)
def test_byte_strings(text: str, mib: int) -> None:
    assert sparkconf.byte_string_as_mib(text) == mib
