"""The renderer: names at any length, memory math, determinism, kubeflow's property mapping."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkop.domain import labels, naming
from sparkop.driver_controller import sparkconf
from sparkop.driver_controller.podbuild import app_name_label
from sparkop.driver_controller.render import (
    CONFIGMAP_DATA_LIMIT,
    InvalidSpec,
    SpecTooLarge,
    config_map_data_size,
    names,
    parse,
    render,
)
from sparkop.driver_controller.sparkconf import driver_memory_mib
from sparkop.driver_controller.summaries import summarize_pod

DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
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


driver_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=253).filter(
    lambda s: s[0].isalnum() and s[-1].isalnum()
)


@settings(max_examples=200, deadline=None)
@given(name=driver_names, incarnation=st.integers(min_value=1, max_value=10_000))
def test_names_are_valid_at_any_length(name: str, incarnation: int) -> None:
    monitoring = {"exposeDriverMetrics": True, "exposeExecutorMetrics": True, "prometheus": {"jmxExporterJar": "/j"}}
    out = render(parse(manifest(name, monitoring=monitoring)), incarnation)
    assert len(out.config_maps) == 3
    for obj in (out.pod, out.service, *out.config_maps):
        if obj is out.pod:  # kubeflow's <name>-driver: a pod name is a DNS-1123 subdomain
            assert len(obj["metadata"]["name"]) <= 253 and DNS_SUBDOMAIN.fullmatch(obj["metadata"]["name"])
        else:
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
@given(name=driver_names, incarnation=st.integers(min_value=1, max_value=100))
def test_render_is_deterministic(name: str, incarnation: int) -> None:
    a = render(parse(manifest(name)), incarnation)
    b = render(parse(manifest(name)), incarnation)
    assert json.dumps([a.pod, a.config_map, a.service, a.executor_template], sort_keys=True) == json.dumps(
        [b.pod, b.config_map, b.service, b.executor_template], sort_keys=True
    )


def test_incarnations_differ_but_for_the_driver_pods_name() -> None:
    one, two = render(parse(manifest()), 1), render(parse(manifest()), 2)
    # kubeflow's naming: one driver pod name for every incarnation (one at a time), the rest per incarnation.
    assert one.pod["metadata"]["name"] == two.pod["metadata"]["name"] == "pi-1-driver"
    assert one.service["metadata"]["name"] != two.service["metadata"]["name"]
    assert one.pod["metadata"]["labels"][labels.INCARNATION] != two.pod["metadata"]["labels"][labels.INCARNATION]
    assert one.properties["spark.app.id"] != two.properties["spark.app.id"]
    assert one.properties["spark.app.id"] == naming.spark_app_id(UID, 1)


@pytest.mark.parametrize(
    ("conf", "kind", "min_overhead_conf", "expected"),
    [
        ({}, "java", False, (1024, 384)),  # 0.1 * 1024 < 384
        ({"spark.driver.memory": "8g"}, "java", False, (8192, 819)),
        ({"spark.driver.memory": "8g"}, "python", False, (8192, 3276)),  # non-JVM: 0.4
        ({"spark.driver.memory": "8g", "spark.kubernetes.memoryOverheadFactor": "0.2"}, "python", False, (8192, 1638)),
        ({"spark.driver.memory": "8g", "spark.driver.memoryOverheadFactor": "0.3"}, "java", False, (8192, 2457)),
        ({"spark.driver.memory": "2g", "spark.driver.memoryOverhead": "100m"}, "java", False, (2048, 100)),
        ({"spark.driver.memory": "1g", "spark.driver.minMemoryOverhead": "500m"}, "java", True, (1024, 500)),
        ({"spark.driver.memory": "1g", "spark.driver.minMemoryOverhead": "500m"}, "java", False, (1024, 384)),
        ({"spark.driver.memory": "1500000k"}, "java", False, (1464, 384)),
    ],
)
def test_memory_math(conf: dict[str, str], kind: str, min_overhead_conf: bool, expected: tuple[int, int]) -> None:
    assert driver_memory_mib(conf, kind, min_overhead_conf) == expected


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


# --- the Spark container of a pod template -------------------------------------------------------

SIDECAR_FIRST = {"spec": {"containers": [{"name": "sidecar", "image": "busybox"}, {"name": "main"}]}}


def test_executor_template_container_name_set_by_the_user_is_honoured() -> None:
    spec = {
        "sparkConf": {"spark.kubernetes.executor.podTemplateContainerName": "main"},
        "executor": {"template": SIDECAR_FIRST, "env": [{"name": "A", "value": "b"}]},
    }
    out = render(parse(manifest(**spec)), 1)
    assert out.properties["spark.kubernetes.executor.podTemplateContainerName"] == "main"
    containers = {c["name"]: c for c in executor_template(out)["spec"]["containers"]}
    assert containers["main"]["env"] == [{"name": "A", "value": "b"}]  # the Spark container, not the sidecar
    assert containers["sidecar"] == {"name": "sidecar", "image": "busybox"}


def test_executor_template_container_name_defaults_to_sparks() -> None:
    out = render(parse(manifest()), 1)
    assert out.properties["spark.kubernetes.executor.podTemplateContainerName"] == "spark-kubernetes-executor"
    assert [c["name"] for c in executor_template(out)["spec"]["containers"]] == ["spark-kubernetes-executor"]


def test_driver_template_container_named_by_the_user_is_the_spark_container() -> None:
    spec = {
        "sparkConf": {"spark.kubernetes.driver.podTemplateContainerName": "main"},
        "driver": {"template": SIDECAR_FIRST},
    }
    out = render(parse(manifest(**spec)), 1)
    sidecar, spark = out.pod["spec"]["containers"]
    assert sidecar == {"name": "sidecar", "image": "busybox"}
    assert spark["name"] == "main" and spark["args"][0] == "driver"
    # Its outcome is read from that container, whatever the order of the kubelet's statuses.
    statuses = [
        {"name": "main", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}},
        {"name": "sidecar", "state": {"running": {}}},
    ]
    summary = summarize_pod({**out.pod, "status": {"phase": "Running", "containerStatuses": statuses}})
    assert summary.terminated is not None and summary.terminated.exit_code == 3


# --- volumes Spark mounts from properties ----------------------------------------------------------

PVC_BY_CONF = {
    f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.data.{key}": value
    for role in ("driver", "executor")
    for key, value in (("mount.path", "/data"), ("options.claimName", "spark-data"), ("mount.readOnly", "true"))
}
PVC_BY_SPEC = {
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "spark-data"}}],
    "driver": {"volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}]},
    "executor": {"volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}]},
}


def pod_volume(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in pod["spec"]["volumes"] if v["name"] == name)


@pytest.mark.parametrize("spec", [{"sparkConf": PVC_BY_CONF}, PVC_BY_SPEC], ids=["sparkConf", "spec.volumes"])
def test_a_read_only_mount_makes_the_claim_read_only(spec: dict[str, Any]) -> None:
    """Spark's MountVolumesFeatureStep: PersistentVolumeClaimVolumeSource(claimName, mount.readOnly)."""
    out = render(parse(manifest(**spec)), 1)
    assert pod_volume(out.pod, "data") == {
        "name": "data", "persistentVolumeClaim": {"claimName": "spark-data", "readOnly": True},
    }  # fmt: skip
    assert mounts(container(out.pod))["/data"] == {"name": "data", "mountPath": "/data", "readOnly": True}
    # Executors get it from the same properties, through Spark's own executor builder.
    prefix = "spark.kubernetes.executor.volumes.persistentVolumeClaim.data."
    executor = {k.removeprefix(prefix): v for k, v in out.properties.items() if k.startswith(prefix)}
    assert executor == {"mount.path": "/data", "options.claimName": "spark-data", "mount.readOnly": "true"}
    assert not any(k.endswith(".options.readOnly") for k in out.properties)  # Spark has no such option


def test_a_source_read_only_mark_spark_would_lose_is_mounted_through_the_templates() -> None:
    volumes = [
        {"name": "ro-claim", "persistentVolumeClaim": {"claimName": "c", "readOnly": True}},
        {"name": "ro-share", "nfs": {"server": "nfs.example.com", "path": "/x", "readOnly": True}},
        {"name": "rw-claim", "persistentVolumeClaim": {"claimName": "w"}},
    ]
    role_mounts = [
        {"name": "ro-claim", "mountPath": "/c"},
        {"name": "ro-share", "mountPath": "/x", "readOnly": True},
        {"name": "rw-claim", "mountPath": "/w"},
    ]
    spec = {"volumes": volumes, "driver": {"volumeMounts": role_mounts}, "executor": {"volumeMounts": role_mounts}}
    out = render(parse(manifest(**spec)), 1)
    template = executor_template(out)
    for volume in volumes[:2]:  # as written, in the driver pod and in the executor template
        assert pod_volume(out.pod, volume["name"]) == volume
        assert volume in template["spec"]["volumes"]
        assert not any(f".{volume['name']}." in k for k in out.properties)
    assert pod_volume(out.pod, "rw-claim") == {"name": "rw-claim", "persistentVolumeClaim": {"claimName": "w"}}
    assert out.properties["spark.kubernetes.executor.volumes.persistentVolumeClaim.rw-claim.mount.path"] == "/w"
    assert mounts(container(out.pod))["/c"] == {"name": "ro-claim", "mountPath": "/c"}
    assert mounts(template["spec"]["containers"][0])["/x"] == role_mounts[1]


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


# --- monitoring (kubeflow's configPrometheusMonitoring) -------------------------------------------

JAR = "/prometheus/jmx_prometheus_javaagent.jar"


def mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["mountPath"]: m for m in container.get("volumeMounts", [])}


def executor_template(out: Any) -> dict[str, Any]:
    assert out.executor_template is not None
    template: dict[str, Any] = json.loads(out.executor_template["data"]["podspec-configmap-key"])
    return template


def test_prometheus_defaults_like_kubeflow() -> None:
    monitoring = {"exposeDriverMetrics": True, "exposeExecutorMetrics": True, "prometheus": {"jmxExporterJar": JAR}}
    out = render(parse(manifest(monitoring=monitoring, driver={"javaOptions": "-Dx=1"})), 2)
    cm = out.metrics_config_map
    assert cm is not None and cm in out.config_maps
    assert cm["metadata"]["name"] == naming.metrics_configmap_name("pi-1", 2) == "pi-1-2-prom-conf"
    assert cm["metadata"]["labels"] == out.config_map["metadata"]["labels"]  # owned and labelled like the others
    assert cm["metadata"]["ownerReferences"] == out.config_map["metadata"]["ownerReferences"]
    assert cm["immutable"] is True
    assert set(cm["data"]) == {"metrics.properties", "prometheus.yaml"}
    assert "JmxSink" in cm["data"]["metrics.properties"]
    p = out.properties
    agent = f"-javaagent:{JAR}=8090:/etc/metrics/conf/prometheus.yaml"
    assert p["spark.driver.extraJavaOptions"] == f"-Dx=1 {agent}"
    assert p["spark.executor.extraJavaOptions"] == agent
    assert p["spark.metrics.conf"] == "/etc/metrics/conf/metrics.properties"
    assert p["spark.metrics.namespace"] == "ns.pi-1"
    for role in ("driver", "executor"):
        assert p[f"spark.kubernetes.{role}.annotation.prometheus.io/scrape"] == "true"
        assert p[f"spark.kubernetes.{role}.annotation.prometheus.io/port"] == "8090"
        assert p[f"spark.kubernetes.{role}.annotation.prometheus.io/path"] == "/metrics"
    assert out.pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    # Mounted read-only into the driver, and into the executors through their pod template.
    volume = {"name": "metrics-conf-volume", "configMap": {"name": "pi-1-2-prom-conf"}}
    port = {"name": "jmx-exporter", "containerPort": 8090, "protocol": "TCP"}
    assert volume in out.pod["spec"]["volumes"]
    assert mounts(container(out.pod))["/etc/metrics/conf"] == {
        "name": "metrics-conf-volume", "mountPath": "/etc/metrics/conf", "readOnly": True,
    }  # fmt: skip
    assert port in container(out.pod)["ports"]
    template = executor_template(out)
    assert volume in template["spec"]["volumes"]
    assert mounts(template["spec"]["containers"][0])["/etc/metrics/conf"]["name"] == "metrics-conf-volume"
    assert port in template["spec"]["containers"][0]["ports"]


def test_prometheus_custom_port_config_and_one_role() -> None:
    monitoring = {
        "exposeDriverMetrics": False,
        "exposeExecutorMetrics": True,
        "metricsProperties": "*.sink.console.class=org.apache.spark.metrics.sink.ConsoleSink\n",
        "prometheus": {"jmxExporterJar": JAR, "port": 9100, "portName": "metrics", "configuration": "rules: []\n"},
    }
    out = render(parse(manifest(monitoring=monitoring)), 1)
    assert out.metrics_config_map is not None
    assert out.metrics_config_map["data"] == {
        "metrics.properties": "*.sink.console.class=org.apache.spark.metrics.sink.ConsoleSink\n",
        "prometheus.yaml": "rules: []\n",
    }
    p = out.properties
    assert "spark.driver.extraJavaOptions" not in p
    assert p["spark.executor.extraJavaOptions"] == f"-javaagent:{JAR}=9100:/etc/metrics/conf/prometheus.yaml"
    assert "prometheus.io/scrape" not in (out.pod["metadata"].get("annotations") or {})
    assert all(port["name"] != "metrics" for port in container(out.pod)["ports"])
    # spark.metrics.conf names the file for every JVM, so the driver mounts it too.
    assert "/etc/metrics/conf" in mounts(container(out.pod))
    ports = executor_template(out)["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "metrics", "containerPort": 9100, "protocol": "TCP"}]


def test_prometheus_files_in_the_image_need_no_configmap() -> None:
    monitoring = {
        "exposeDriverMetrics": True,
        "exposeExecutorMetrics": False,
        "metricsPropertiesFile": "/opt/spark/conf/metrics.properties",
        "prometheus": {"jmxExporterJar": JAR, "configFile": "/opt/prom/config.yaml"},
    }
    out = render(parse(manifest(monitoring=monitoring)), 1)
    assert out.metrics_config_map is None
    assert len(out.config_maps) == 2
    p = out.properties
    assert p["spark.driver.extraJavaOptions"] == f"-javaagent:{JAR}=8090:/opt/prom/config.yaml"
    assert p["spark.metrics.conf"] == "/opt/spark/conf/metrics.properties"
    assert "/etc/metrics/conf" not in mounts(container(out.pod))
    assert {"name": "jmx-exporter", "containerPort": 8090, "protocol": "TCP"} in container(out.pod)["ports"]


def test_metrics_properties_without_prometheus() -> None:
    text = "*.sink.graphite.class=org.apache.spark.metrics.sink.GraphiteSink\n"
    monitoring = {"exposeDriverMetrics": False, "exposeExecutorMetrics": False, "metricsProperties": text}
    out = render(parse(manifest(monitoring=monitoring)), 1)
    assert out.metrics_config_map is not None
    assert out.metrics_config_map["data"] == {"metrics.properties": text}
    assert out.properties["spark.metrics.conf"] == "/etc/metrics/conf/metrics.properties"
    assert "spark.metrics.namespace" not in out.properties
    assert "spark.driver.extraJavaOptions" not in out.properties
    # Without prometheus, monitoring only names metrics.properties: nothing else changes.
    plain = render(parse(manifest()), 1)
    assert render(parse(manifest(monitoring={"exposeDriverMetrics": True, "exposeExecutorMetrics": True})), 1).pod == (
        plain.pod
    )


def test_default_prometheus_config_reads_sparks_jmx_names() -> None:
    import yaml

    from sparkop.driver_controller.monitoring import DEFAULT_PROMETHEUS_CONFIG

    rules = yaml.safe_load(DEFAULT_PROMETHEUS_CONFIG)["rules"]

    def first(bean: str) -> tuple[str, list[str]] | None:
        for rule in rules:
            match = re.fullmatch(rule["pattern"], bean)
            if match:
                return rule["name"], [match.group(i) for i in range(1, (match.lastindex or 0) + 1)]
        return None

    jvm = "metrics<name=ns.pi.driver.jvm.heap.used, type=gauges><>Value"
    assert first(jvm) == ("spark_driver_$3", ["ns", "pi", "jvm.heap.used"])
    assert first("metrics<type=counters, name=ns.my.app.driver.DAGScheduler.job.allJobs><>Count") == (
        "spark_driver_$3_total", ["ns", "my.app", "DAGScheduler.job.allJobs"],
    )  # fmt: skip
    assert first("metrics<name=ns.pi.3.executor.bytesRead, type=counters><>Count") == (
        "spark_executor_$4_total", ["ns", "pi", "3", "executor.bytesRead"],
    )  # fmt: skip
    assert first("java.lang<type=Memory><HeapMemoryUsage>used") is None


MONITORING = {"exposeDriverMetrics": True, "exposeExecutorMetrics": True, "prometheus": {"jmxExporterJar": JAR}}


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"monitoring": MONITORING},
        {"monitoring": {**MONITORING, "metricsPropertiesFile": "/m", "prometheus": {"jmxExporterJar": JAR,
                                                                                     "configFile": "/c"}}},
        {"sparkConf": {"spark.ui.port": "4141"}},
    ],
)  # fmt: skip
def test_names_agree_with_render(spec: dict[str, Any]) -> None:
    driver = parse(manifest(**spec))
    for incarnation in (1, 7):
        out, expected = render(driver, incarnation), names(driver, incarnation)
        assert expected.pod == out.pod["metadata"]["name"]
        assert expected.service == out.service["metadata"]["name"]
        assert expected.config_maps == {cm["metadata"]["name"] for cm in out.config_maps}
        ui = next(p["port"] for p in out.service["spec"]["ports"] if p["name"] == "spark-ui")
        assert expected.web_ui_address == f"{out.service['metadata']['name']}.ns.svc:{ui}"


# --- the API server's 1 MiB limit on a ConfigMap's data -------------------------------------------------


def test_a_configmap_over_the_api_servers_limit_is_a_spec_error() -> None:
    """issue 9 item 9: 20 sparkConf values of 60 KB pass validation, and the API server refuses the ConfigMap."""
    big = {f"spark.example.value{n}": "v" * 60_000 for n in range(20)}
    with pytest.raises(SpecTooLarge) as raised:
        render(parse(manifest(sparkConf=big)), 1)
    message = str(raised.value)
    assert message.startswith("spec.sparkConf / spec.hadoopConf: too large, ConfigMap pi-1-1-conf-map would hold ")
    assert raised.value.size > CONFIGMAP_DATA_LIMIT and f"{raised.value.size:,} bytes" in message
    assert "spark.example.value0 (60,000 bytes)" in message and "\n" not in message
    assert isinstance(raised.value, InvalidSpec)  # a spec error like the others
    # The same through spec.hadoopConf, and through the executor template.
    with pytest.raises(SpecTooLarge, match=r"^spec\.sparkConf / spec\.hadoopConf: "):
        render(parse(manifest(hadoopConf={f"fs.k{n}": "v" * 60_000 for n in range(20)})), 1)
    huge_env = {"executor": {"env": [{"name": "BIG", "value": "v" * CONFIGMAP_DATA_LIMIT}]}}
    with pytest.raises(
        SpecTooLarge, match=r"^spec\.executor \(its pod template\): too large, ConfigMap pi-1-1-podspec"
    ):
        render(parse(manifest(**huge_env)), 1)


def test_a_configmap_just_under_the_limit_renders() -> None:
    out = render(parse(manifest(sparkConf={f"spark.example.value{n}": "v" * 64_000 for n in range(16)})), 1)
    assert CONFIGMAP_DATA_LIMIT - 50_000 < config_map_data_size(out.config_map) <= CONFIGMAP_DATA_LIMIT


# --- what real Spark showed ------------------------------------------------------------------------


def test_the_driver_never_deletes_the_service_the_controller_owns() -> None:
    # Real Spark 3.5/4.0 delete their driver Service at stop by default; the controller saw it
    # missing while the driver pod still ran and created it again.
    asked = manifest(sparkConf={"spark.kubernetes.driver.service.deleteOnTermination": "true"})
    props = render(parse(asked), 1).properties
    assert props["spark.kubernetes.driver.service.deleteOnTermination"] == "false"


def test_a_failed_driver_reports_the_end_of_its_log() -> None:
    # Spark writes no /dev/termination-log: without this a failure says only "exit code 1".
    out = render(parse(manifest()), 1)
    assert container(out.pod)["terminationMessagePolicy"] == "FallbackToLogsOnError"
    chosen = {"spec": {"containers": [{"name": "spark-kubernetes-driver", "terminationMessagePolicy": "File"}]}}
    kept = render(parse(manifest(driver={"template": chosen})), 1)
    assert container(kept.pod)["terminationMessagePolicy"] == "File"
