"""The run spec as a spark-submit request: what kubeflow's operator would pass to spark-submit.

``submission(driver, incarnation)`` returns a :class:`Submission`: the Spark properties
(``--conf``), main class, primary resource, arguments, proxy user, and the driver and executor
pod *templates* for everything Spark cannot express with properties. kubeflow's operator maps
its spec fields to spark-submit arguments in ``internal/controller/sparkapplication/submission.go``
and patches the rest into the pods with a mutating webhook; we map the same fields to the same
properties and put the rest into pod templates, which Spark merges the way it merges any template
(:mod:`driver_controller.podbuild`). No webhook is needed: we build the driver pod ourselves, and
the executor template is mounted into the driver like spark-submit's own ``pod-template-volume``.

Pure functions of the SparkDriver and its incarnation. No I/O, no clock.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from api.models import NameKey, SecretInfo, SparkApplicationType, SparkDriver, SparkPodSpec
from sparkop import labels, naming

Body = dict[str, Any]

DRIVER_CONTAINER: Final = "spark-kubernetes-driver"
EXECUTOR_CONTAINER: Final = "spark-kubernetes-executor"
# The API server URL a driver pod uses (kubeflow: from KUBERNETES_SERVICE_HOST/PORT of the operator).
IN_CLUSTER_MASTER: Final = "k8s://https://kubernetes.default.svc:443"
SPARK_CONF_MAP_DIR: Final = "/etc/spark/conf"  # kubeflow's mount point for spec.sparkConfigMap

PYTHON_RUNNER: Final = "org.apache.spark.deploy.PythonRunner"
R_RUNNER: Final = "org.apache.spark.deploy.RRunner"
NO_RESOURCE: Final = "spark-internal"

# kubeflow's secret types: an env var pointing at a file in the mounted secret.
_SECRET_ENV: Final = {
    "GCPServiceAccount": ("GOOGLE_APPLICATION_CREDENTIALS", "key.json"),
    "HadoopDelegationToken": ("HADOOP_TOKEN_FILE_LOCATION", "hadoop.token"),
}
# Volume types Spark mounts from properties (spark.kubernetes.<role>.volumes.<type>.<name>.*);
# kubeflow maps exactly these to properties and patches others in with its webhook.
_SPARK_VOLUME_TYPES: Final = {
    "emptyDir": "emptyDir",
    "hostPath": "hostPath",
    "nfs": "nfs",
    "persistentVolumeClaim": "persistentVolumeClaim",
}

# Properties sparkop owns: a value in spec.sparkConf is replaced (see docs/driver-controller.md).
OWNED_PROPERTIES: Final = frozenset(
    {
        "spark.app.id",
        "spark.kubernetes.driver.pod.name",
        "spark.kubernetes.executor.podNamePrefix",
        "spark.kubernetes.namespace",
        "spark.kubernetes.driver.podTemplateFile",
        "spark.kubernetes.driver.podTemplateContainerName",
        "spark.kubernetes.executor.podTemplateFile",
        "spark.kubernetes.executor.podTemplateContainerName",
        "spark.kubernetes.submission.waitAppCompletion",
        "spark.master",
        "spark.submit.deployMode",
    }
)
# Properties Spark refuses from users in cluster mode (it sets them itself).
REJECTED_PROPERTIES: Final = frozenset({"spark.driver.host", "spark.driver.bindAddress"})


class InvalidSpec(ValueError):
    """A spec Spark would refuse (a permanent error: the SparkDriver fails with SubmissionFailed)."""


@dataclass
class Submission:
    """A spark-submit request, in the shape Spark's submission client sees it."""

    name: str  # SparkDriver name
    namespace: str
    uid: str
    incarnation: int
    app_id: str
    app_name: str
    resource_type: str  # "java" | "python" | "r"
    main_class: str
    resource: str
    app_args: list[str]
    proxy_user: str | None
    spark_version: str
    conf: dict[str, str]
    driver_template: Body  # a Pod: its first container is the Spark container
    executor_template: Body
    sparkop_labels: dict[str, str]
    owner: Body  # the SparkDriver, as an ownerReference target
    submit_time_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def major_version(self) -> int:
        head = self.spark_version.split(".", 1)[0]
        return int(head) if head.isdigit() else 3


def sparkop_labels(driver: SparkDriver, incarnation: int) -> dict[str, str]:
    """The labels of docs/design.md carried by everything a SparkDriver owns."""
    meta = driver.metadata
    result = {
        labels.MANAGED_BY: labels.MANAGER,
        labels.DRIVER: naming.label_value(meta["name"]),
        labels.INCARNATION: str(incarnation),
    }
    app = (meta.get("labels") or {}).get(labels.APP)
    if app:
        result[labels.APP] = app
    return result


def owner_reference(driver: SparkDriver, *, controller: bool) -> Body:
    meta = driver.metadata
    return {
        "apiVersion": labels.API_VERSION,
        "kind": "SparkDriver",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def _resource_type(kind: SparkApplicationType) -> str:
    if kind is SparkApplicationType.PYTHON:
        return "python"
    if kind is SparkApplicationType.R:
        return "r"
    return "java"


def _put_prefixed(conf: dict[str, str], prefix: str, values: Mapping[str, str] | None) -> None:
    for key, value in (values or {}).items():
        conf[f"{prefix}{key}"] = value


def _secrets(conf: dict[str, str], role: str, secrets: Iterable[SecretInfo] | None, env_prefix: str) -> None:
    for secret in secrets or ():
        conf[f"spark.kubernetes.{role}.secrets.{secret.name}"] = secret.path
        env = _SECRET_ENV.get(secret.secretType)
        if env:
            conf[f"{env_prefix}{env[0]}"] = f"{secret.path.rstrip('/')}/{env[1]}"


def _secret_key_refs(conf: dict[str, str], role: str, refs: Mapping[str, NameKey] | None) -> None:
    for env_name, ref in (refs or {}).items():
        conf[f"spark.kubernetes.{role}.secretKeyRef.{env_name}"] = f"{ref.name}:{ref.key}"


def _volume_type(volume: Mapping[str, Any]) -> str | None:
    for key in _SPARK_VOLUME_TYPES:
        if volume.get(key) is not None:
            return key
    return None


def _volume_properties(conf: dict[str, str], role: str, volume: Mapping[str, Any], mount: Mapping[str, Any]) -> None:
    kind = _volume_type(volume)
    assert kind is not None
    name = volume["name"]
    base = f"spark.kubernetes.{role}.volumes.{kind}.{name}"
    conf[f"{base}.mount.path"] = mount["mountPath"]
    if mount.get("subPath"):
        conf[f"{base}.mount.subPath"] = mount["subPath"]
    if mount.get("readOnly"):
        conf[f"{base}.mount.readOnly"] = "true"
    source = volume[kind] or {}
    if kind == "emptyDir":
        if source.get("medium"):
            conf[f"{base}.options.medium"] = source["medium"]
        if source.get("sizeLimit") is not None:
            conf[f"{base}.options.sizeLimit"] = str(source["sizeLimit"])
    elif kind == "hostPath":
        conf[f"{base}.options.path"] = source["path"]
        if source.get("type"):
            conf[f"{base}.options.type"] = source["type"]
    elif kind == "nfs":
        conf[f"{base}.options.path"] = source["path"]
        conf[f"{base}.options.server"] = source["server"]
        if source.get("readOnly"):
            conf[f"{base}.options.readOnly"] = "true"
    else:
        conf[f"{base}.options.claimName"] = source["claimName"]
        if source.get("readOnly"):
            conf[f"{base}.options.readOnly"] = "true"


def _role_conf(conf: dict[str, str], role: str, pod: SparkPodSpec, image: str | None) -> None:
    """The typed per-role fields kubeflow passes as --conf (driverConfOption / executorConfOption)."""
    short = "driver" if role == "driver" else "executor"
    if pod.image or image:
        conf[f"spark.kubernetes.{role}.container.image"] = pod.image or image or ""
    if pod.cores is not None:
        conf[f"spark.{short}.cores"] = str(pod.cores)
    if pod.coreRequest is not None:
        conf[f"spark.kubernetes.{role}.request.cores"] = pod.coreRequest
    if pod.coreLimit is not None:
        conf[f"spark.kubernetes.{role}.limit.cores"] = pod.coreLimit
    if pod.memory is not None:
        conf[f"spark.{short}.memory"] = pod.memory
    if pod.memoryOverhead is not None:
        conf[f"spark.{short}.memoryOverhead"] = pod.memoryOverhead
    if pod.serviceAccount is not None:
        conf[f"spark.kubernetes.authenticate.{role}.serviceAccountName"] = pod.serviceAccount
    if pod.javaOptions is not None:
        conf[f"spark.{short}.extraJavaOptions"] = pod.javaOptions
    _put_prefixed(conf, f"spark.kubernetes.{role}.label.", pod.labels)
    _put_prefixed(conf, f"spark.kubernetes.{role}.annotation.", pod.annotations)
    _secret_key_refs(conf, role, pod.envSecretKeyRefs)
    if pod.nodeSelector:
        _put_prefixed(conf, f"spark.kubernetes.{role}.node.selector.", pod.nodeSelector)


def _spark_conf(driver: SparkDriver, incarnation: int) -> tuple[dict[str, str], list[tuple[Body, Body]]]:
    """All Spark properties of the submission (spec.sparkConf, then the typed fields over it, in
    kubeflow's order), and the driver (volume, mount) pairs Spark cannot mount from properties."""
    spec = driver.spec
    meta = driver.metadata
    name = meta["name"]
    conf: dict[str, str] = {}
    # spec.sparkConf first: kubeflow's typed fields come later on the command line and win.
    for key, value in (spec.sparkConf or {}).items():
        if key in REJECTED_PROPERTIES:
            raise InvalidSpec(f"sparkConf {key} is set by Spark itself in cluster mode and cannot be given")
        if key not in OWNED_PROPERTIES:
            conf[key] = value
    deps = spec.deps
    if deps is not None:
        for attr, key in (
            ("jars", "spark.jars"),
            ("files", "spark.files"),
            ("pyFiles", "spark.submit.pyFiles"),
            ("packages", "spark.jars.packages"),
            ("excludePackages", "spark.jars.excludes"),
            ("repositories", "spark.jars.repositories"),
            ("archives", "spark.archives"),
        ):
            values = getattr(deps, attr)
            if values:
                conf[key] = ",".join(values)
    conf["spark.kubernetes.namespace"] = meta["namespace"]
    if spec.image:
        conf["spark.kubernetes.container.image"] = spec.image
    if spec.imagePullPolicy:
        conf["spark.kubernetes.container.image.pullPolicy"] = spec.imagePullPolicy
    if spec.imagePullSecrets:
        conf["spark.kubernetes.container.image.pullSecrets"] = ",".join(spec.imagePullSecrets)
    if spec.pythonVersion:
        conf["spark.kubernetes.pyspark.pythonVersion"] = spec.pythonVersion
    if spec.memoryOverheadFactor:
        conf["spark.kubernetes.memoryOverheadFactor"] = spec.memoryOverheadFactor
    _put_prefixed(conf, "spark.hadoop.", spec.hadoopConf)
    if spec.hadoopConfigMap:
        conf["spark.kubernetes.hadoop.configMapName"] = spec.hadoopConfigMap
    # Driver.
    _role_conf(conf, "driver", spec.driver, spec.image)
    if spec.driver.kubernetesMaster:
        conf["spark.kubernetes.driver.master"] = spec.driver.kubernetesMaster
    _put_prefixed(conf, "spark.kubernetes.driver.service.label.", spec.driver.serviceLabels)
    _put_prefixed(conf, "spark.kubernetes.driver.service.annotation.", spec.driver.serviceAnnotations)
    _put_prefixed(conf, "spark.kubernetes.driverEnv.", spec.driver.envVars)
    _secrets(conf, "driver", spec.driver.secrets, "spark.kubernetes.driverEnv.")
    # Executors.
    _role_conf(conf, "executor", spec.executor, spec.image)
    if spec.executor.instances is not None:
        conf["spark.executor.instances"] = str(spec.executor.instances)
    if spec.executor.deleteOnTermination is not None:
        conf["spark.kubernetes.executor.deleteOnTermination"] = str(spec.executor.deleteOnTermination).lower()
    _put_prefixed(conf, "spark.executorEnv.", spec.executor.envVars)
    _secrets(conf, "executor", spec.executor.secrets, "spark.executorEnv.")
    # Volumes Spark can mount from properties (kubeflow's driverVolumeMountsOption).
    volumes = {v["name"]: v for v in spec.volumes or ()}
    template_mounts: list[tuple[Body, Body]] = []
    for role, pod in (("driver", spec.driver), ("executor", spec.executor)):
        for mount in pod.volumeMounts or ():
            volume = volumes.get(mount.get("name", ""))
            if volume is None:
                raise InvalidSpec(f"{role}.volumeMounts: volume {mount.get('name')!r} is not in spec.volumes")
            if _volume_type(volume) is not None and not mount.get("subPathExpr") and not mount.get("mountPropagation"):
                _volume_properties(conf, role, volume, mount)
            elif role == "driver":
                template_mounts.append((volume, mount))
    # spec.nodeSelector (deprecated, both roles) -> spark.kubernetes.node.selector.*
    _put_prefixed(conf, "spark.kubernetes.node.selector.", spec.nodeSelector)
    dyn = spec.dynamicAllocation
    if dyn is not None and dyn.enabled:
        conf["spark.dynamicAllocation.enabled"] = "true"
        if dyn.initialExecutors is not None:
            conf["spark.dynamicAllocation.initialExecutors"] = str(dyn.initialExecutors)
        if dyn.minExecutors is not None:
            conf["spark.dynamicAllocation.minExecutors"] = str(dyn.minExecutors)
        if dyn.maxExecutors is not None:
            conf["spark.dynamicAllocation.maxExecutors"] = str(dyn.maxExecutors)
        conf["spark.dynamicAllocation.shuffleTracking.enabled"] = conf.get(
            "spark.dynamicAllocation.shuffleTracking.enabled", "true"
        )
        if dyn.shuffleTrackingTimeout is not None:
            conf["spark.dynamicAllocation.shuffleTracking.timeout"] = str(dyn.shuffleTrackingTimeout)
    _monitoring(conf, driver)
    # What sparkop owns: deterministic names per incarnation.
    conf["spark.kubernetes.driver.pod.name"] = naming.driver_pod_name(name, incarnation)
    conf["spark.kubernetes.executor.podNamePrefix"] = naming.pod_prefix(name, incarnation)
    conf["spark.kubernetes.executor.podTemplateContainerName"] = EXECUTOR_CONTAINER
    return conf, template_mounts


def _monitoring(conf: dict[str, str], driver: SparkDriver) -> None:
    mon = driver.spec.monitoring
    if mon is None or mon.prometheus is None:
        return
    prom = mon.prometheus
    port = prom.port or 8090
    config = prom.configFile or "/etc/metrics/conf/prometheus.yaml"
    agent = f"-javaagent:{prom.jmxExporterJar}={port}:{config}"
    for on, key in (
        (mon.exposeDriverMetrics, "spark.driver.extraJavaOptions"),
        (mon.exposeExecutorMetrics, "spark.executor.extraJavaOptions"),
    ):
        if on:
            conf[key] = f"{conf[key]} {agent}" if conf.get(key) else agent
    if mon.metricsPropertiesFile:
        conf["spark.metrics.conf"] = mon.metricsPropertiesFile


# --- templates: what properties cannot express ---------------------------------------------------


def _spark_container(pod: Body, name: str) -> Body:
    """The template's Spark container (named ``name``, else the first), created if missing and
    moved to the front so that Spark's template loader picks it."""
    spec = pod.setdefault("spec", {})
    containers: list[Body] = spec.setdefault("containers", [])
    for index, existing in enumerate(containers):
        if existing.get("name") == name:
            containers.insert(0, containers.pop(index))
            return existing
    if containers:
        return containers[0]
    created: Body = {"name": name}
    containers.append(created)
    return created


def _template_pod(template: Mapping[str, Any] | None) -> Body:
    pod: Body = {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}}
    if template:
        pod["metadata"] = copy.deepcopy(dict(template.get("metadata") or {}))
        pod["spec"] = copy.deepcopy(dict(template.get("spec") or {}))
    return pod


def _apply_pod_fields(pod: Body, role_spec: SparkPodSpec, container_name: str, spec_volumes: list[Body]) -> Body:
    """kubeflow's webhook patches, applied to a template instead of to the created pod: the direct
    fields win over the same fields of ``role_spec.template``."""
    s = role_spec
    spec = pod["spec"]
    container = _spark_container(pod, container_name)
    if s.affinity is not None:
        spec["affinity"] = copy.deepcopy(s.affinity)
    if s.tolerations:
        spec["tolerations"] = [*spec.get("tolerations", []), *copy.deepcopy(s.tolerations)]
    if s.podSecurityContext is not None:
        spec["securityContext"] = copy.deepcopy(s.podSecurityContext)
    if s.securityContext is not None:
        container["securityContext"] = copy.deepcopy(s.securityContext)
    if s.schedulerName:
        spec["schedulerName"] = s.schedulerName
    if s.sidecars:
        spec["containers"] = [*spec["containers"], *copy.deepcopy(s.sidecars)]
    if s.initContainers:
        spec["initContainers"] = [*spec.get("initContainers", []), *copy.deepcopy(s.initContainers)]
    if s.hostNetwork is not None:
        spec["hostNetwork"] = s.hostNetwork
    if s.dnsConfig is not None:
        spec["dnsConfig"] = copy.deepcopy(s.dnsConfig)
    if s.terminationGracePeriodSeconds is not None:
        spec["terminationGracePeriodSeconds"] = s.terminationGracePeriodSeconds
    if s.hostAliases:
        spec["hostAliases"] = [*spec.get("hostAliases", []), *copy.deepcopy(s.hostAliases)]
    if s.shareProcessNamespace is not None:
        spec["shareProcessNamespace"] = s.shareProcessNamespace
    if s.runtimeClassName:
        spec["runtimeClassName"] = s.runtimeClassName
    if s.priorityClassName:
        spec["priorityClassName"] = s.priorityClassName
    if s.lifecycle is not None:
        container["lifecycle"] = copy.deepcopy(s.lifecycle)
    if s.env:
        container["env"] = [*container.get("env", []), *copy.deepcopy(s.env)]
    if s.envFrom:
        container["envFrom"] = [*container.get("envFrom", []), *copy.deepcopy(s.envFrom)]
    if s.ports:
        container["ports"] = [
            *container.get("ports", []),
            *({"name": p.name, "containerPort": p.containerPort, "protocol": p.protocol} for p in s.ports),
        ]
    if s.gpu is not None and s.gpu.quantity > 0:
        limits = container.setdefault("resources", {}).setdefault("limits", {})
        limits[s.gpu.name] = str(s.gpu.quantity)
    for cm in s.configMaps or ():
        volume_name = naming.dns_label(f"{cm.name}-vol")
        _add_volume(spec, {"name": volume_name, "configMap": {"name": cm.name}})
        _add_mount(container, {"name": volume_name, "mountPath": cm.path})
    for volume in spec_volumes:
        _add_volume(spec, copy.deepcopy(volume))
    return container


def _add_volume(spec: Body, volume: Body) -> None:
    volumes: list[Body] = spec.setdefault("volumes", [])
    if not any(v.get("name") == volume["name"] for v in volumes):
        volumes.append(volume)


def _add_mount(container: Body, mount: Body) -> None:
    container.setdefault("volumeMounts", []).append(mount)


def _prune_empty(pod: Body) -> Body:
    pod["metadata"] = {k: v for k, v in pod["metadata"].items() if v not in (None, {}, [])}
    return pod


def _driver_template(driver: SparkDriver, template_mounts: list[tuple[Body, Body]]) -> Body:
    spec = driver.spec
    pod = _template_pod(spec.driver.template)
    volumes = [v for v, _ in template_mounts]
    container = _apply_pod_fields(pod, spec.driver, DRIVER_CONTAINER, volumes)
    for _, mount in template_mounts:
        _add_mount(container, copy.deepcopy(mount))
    if spec.sparkConfigMap:
        _add_volume(pod["spec"], {"name": "spark-configmap-volume", "configMap": {"name": spec.sparkConfigMap}})
        _add_mount(container, {"name": "spark-configmap-volume", "mountPath": SPARK_CONF_MAP_DIR})
    return _prune_empty(pod)


def _executor_template(driver: SparkDriver, incarnation: int) -> Body:
    """The executor pod template: the executor fields Spark cannot express, plus what makes the
    executors ours: sparkop's labels and a non-controller ownerReference to the SparkDriver (the
    driver pod adds its own controller reference; see docs/driver-controller.md)."""
    spec = driver.spec
    pod = _template_pod(spec.executor.template)
    volumes = {v["name"]: v for v in spec.volumes or ()}
    extra: list[Body] = []
    mounts: list[Body] = []
    for mount in spec.executor.volumeMounts or ():
        volume = volumes[mount["name"]]
        if _volume_type(volume) is None or mount.get("subPathExpr") or mount.get("mountPropagation"):
            extra.append(volume)
            mounts.append(mount)
    container = _apply_pod_fields(pod, spec.executor, EXECUTOR_CONTAINER, extra)
    for mount in mounts:
        _add_mount(container, copy.deepcopy(mount))
    if spec.sparkConfigMap:
        _add_volume(pod["spec"], {"name": "spark-configmap-volume", "configMap": {"name": spec.sparkConfigMap}})
        _add_mount(container, {"name": "spark-configmap-volume", "mountPath": SPARK_CONF_MAP_DIR})
        container.setdefault("env", []).append({"name": "SPARK_CONF_DIR", "value": SPARK_CONF_MAP_DIR})
    meta = pod["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), **sparkop_labels(driver, incarnation)}
    meta["ownerReferences"] = [owner_reference(driver, controller=False)]
    return _prune_empty(pod)


def _submit_time_ms(driver: SparkDriver) -> int | None:
    created = driver.metadata.get("creationTimestamp")
    if not created:
        return None
    from datetime import datetime

    text = str(created).replace("Z", "+00:00")
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def submission(driver: SparkDriver, incarnation: int) -> Submission:
    """The spark-submit request equivalent to ``driver``'s spec for driver-pod ``incarnation``."""
    spec = driver.spec
    meta = driver.metadata
    if incarnation < 1:
        raise ValueError("incarnations are numbered from 1")
    resource_type = _resource_type(spec.type)
    if resource_type == "python":
        main_class = PYTHON_RUNNER
    elif resource_type == "r":
        main_class = R_RUNNER
    else:
        if not spec.mainClass:
            raise InvalidSpec("mainClass is required for Java and Scala applications")
        main_class = spec.mainClass
    resource = spec.mainApplicationFile or ""
    if not resource:
        if resource_type != "java":
            raise InvalidSpec("mainApplicationFile is required for Python and R applications")
        resource = NO_RESOURCE
    if not (spec.image or (spec.driver.image and spec.executor.image)):
        raise InvalidSpec("spec.image (or both driver.image and executor.image) is required")
    conf, template_mounts = _spark_conf(driver, incarnation)
    app_name = spec.appName or meta["name"]
    conf["spark.app.name"] = app_name
    return Submission(
        name=meta["name"],
        namespace=meta["namespace"],
        uid=meta["uid"],
        incarnation=incarnation,
        app_id=naming.spark_app_id(meta["uid"], incarnation),
        app_name=app_name,
        resource_type=resource_type,
        main_class=main_class,
        resource=resource,
        app_args=list(spec.arguments or ()),
        proxy_user=spec.proxyUser or None,
        spark_version=spec.sparkVersion or "3.5.0",
        conf=conf,
        driver_template=_driver_template(driver, template_mounts),
        executor_template=_executor_template(driver, incarnation),
        sparkop_labels=sparkop_labels(driver, incarnation),
        owner=owner_reference(driver, controller=True),
        submit_time_ms=_submit_time_ms(driver),
    )
