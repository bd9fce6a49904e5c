"""What every pod of a driver-pod incarnation carries (the Spark containers' names, sparkop's labels,
the SparkDriver's ownerReference), and the driver and executor pod *templates*: what Spark cannot
express with properties (kubeflow patches it into the pods with its webhook), which Spark merges into
the pods it builds (:mod:`driver_controller.podbuild`). Pure."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from sparkop.api.models import SparkDriver, SparkPodSpec
from sparkop.core import owners
from sparkop.core.jsontypes import JSON
from sparkop.domain import labels, naming
from sparkop.driver_controller.monitoring import (
    DEFAULT_PROMETHEUS_PORT,
    DEFAULT_PROMETHEUS_PORT_NAME,
    METRICS_CONF_DIR,
    METRICS_VOLUME,
    exposed_roles,
)

DRIVER_CONTAINER: Final = "spark-kubernetes-driver"
EXECUTOR_CONTAINER: Final = "spark-kubernetes-executor"
SPARK_CONF_MAP_DIR: Final = "/etc/spark/conf"  # kubeflow's mount point for spec.sparkConfigMap
SPARK_CONF_MAP_VOLUME: Final = "spark-configmap-volume"


def spark_container_name(spark_conf: Mapping[str, str] | None, role: str) -> str:
    """The Spark container of ``role``'s pod template: ``spark.kubernetes.<role>.podTemplateContainerName``
    when the user sets it, else Spark's default name (Spark takes the first container when none has it)."""
    default = DRIVER_CONTAINER if role == "driver" else EXECUTOR_CONTAINER
    return (spark_conf or {}).get(f"spark.kubernetes.{role}.podTemplateContainerName") or default


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


def kubeflow_pod_labels(driver: SparkDriver) -> dict[str, str]:
    """kubeflow's labels on the driver and executor pods, whatever the app's group: its clients and
    dashboards select by them. The submission id is the SparkDriver's uid: one per run, and the
    ``status.submissionID`` of its app; the app's name where the SparkDriver runs an app, the
    SparkConnect's where it runs a Connect server."""
    meta = driver.metadata
    own = meta.get("labels") or {}
    out = {labels.KUBEFLOW_LAUNCHED: "true", labels.KUBEFLOW_SUBMISSION_ID: str(meta["uid"])}
    if own.get(labels.APP):
        out[labels.KUBEFLOW_APP_NAME] = own[labels.APP]
    if own.get(labels.CONNECT):
        out[labels.KUBEFLOW_CONNECT_NAME] = own[labels.CONNECT]
    return out


def owner_reference(driver: SparkDriver, *, controller: bool) -> JSON:
    meta = driver.metadata
    owner: JSON = {
        "apiVersion": labels.API_VERSION,
        "kind": "SparkDriver",
        "metadata": {"name": meta["name"], "uid": meta["uid"]},
    }
    return owners.owner_reference(owner, controller=controller)


def _spark_container(pod: JSON, name: str) -> JSON:
    """The template's Spark container (named ``name``, else the first), created if missing and
    moved to the front so that Spark's template loader picks it."""
    spec = pod.setdefault("spec", {})
    containers: list[JSON] = spec.setdefault("containers", [])
    for index, existing in enumerate(containers):
        if existing.get("name") == name:
            containers.insert(0, containers.pop(index))
            return existing
    if containers:
        return containers[0]
    created: JSON = {"name": name}
    containers.append(created)
    return created


def _template_pod(template: Mapping[str, Any] | None) -> JSON:
    pod: JSON = {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}}
    if template:
        pod["metadata"] = copy.deepcopy(dict(template.get("metadata") or {}))
        pod["spec"] = copy.deepcopy(dict(template.get("spec") or {}))
    return pod


def _pod_fields(spec: JSON, s: SparkPodSpec) -> None:
    """kubeflow's webhook patches of the pod spec."""
    if s.affinity is not None:
        spec["affinity"] = copy.deepcopy(s.affinity)
    if s.tolerations:
        spec["tolerations"] = [*spec.get("tolerations", []), *copy.deepcopy(s.tolerations)]
    if s.podSecurityContext is not None:
        spec["securityContext"] = copy.deepcopy(s.podSecurityContext)
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


def _container_fields(container: JSON, s: SparkPodSpec) -> None:
    """kubeflow's webhook patches of the Spark container."""
    if s.securityContext is not None:
        container["securityContext"] = copy.deepcopy(s.securityContext)
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


def _add_volume(spec: JSON, volume: JSON) -> None:
    volumes: list[JSON] = spec.setdefault("volumes", [])
    if not any(v.get("name") == volume["name"] for v in volumes):
        volumes.append(volume)


def _add_mount(container: JSON, mount: JSON) -> None:
    container.setdefault("volumeMounts", []).append(mount)


def _mount_config_map(pod: JSON, container: JSON, volume_name: str, config_map: str, path: str) -> None:
    """kubeflow's addConfigMapVolume + addConfigMapVolumeMount (read-only)."""
    _add_volume(pod["spec"], {"name": volume_name, "configMap": {"name": config_map}})
    _add_mount(container, {"name": volume_name, "mountPath": path, "readOnly": True})


def _prune_empty(pod: JSON) -> JSON:
    pod["metadata"] = {k: v for k, v in pod["metadata"].items() if v not in (None, {}, [])}
    return pod


def _role_template(
    driver: SparkDriver, role: str, mounts: list[tuple[JSON, JSON]], metrics_map: str | None
) -> tuple[JSON, JSON]:
    """(pod template, its Spark container) of ``role``: ``spec.<role>.template``, then what kubeflow
    patches into that role's pods with its webhook, the volumes Spark cannot mount from properties,
    spec.sparkConfigMap and the metrics ConfigMap. The direct fields win over the template's."""
    spec = driver.spec
    role_spec = spec.driver if role == "driver" else spec.executor
    pod = _template_pod(role_spec.template)
    container = _spark_container(pod, spark_container_name(spec.sparkConf, role))
    _pod_fields(pod["spec"], role_spec)
    _container_fields(container, role_spec)
    for cm in role_spec.configMaps or ():
        _mount_config_map(pod, container, naming.dns_label(f"{cm.name}-vol"), cm.name, cm.path)
    for volume, mount in mounts:
        _add_volume(pod["spec"], copy.deepcopy(volume))
        _add_mount(container, copy.deepcopy(mount))
    if spec.sparkConfigMap:
        _mount_config_map(pod, container, SPARK_CONF_MAP_VOLUME, spec.sparkConfigMap, SPARK_CONF_MAP_DIR)
    if metrics_map:
        _mount_config_map(pod, container, METRICS_VOLUME, metrics_map, METRICS_CONF_DIR)
    mon = spec.monitoring
    if mon is not None and mon.prometheus is not None and role in exposed_roles(mon):
        port = {
            "name": mon.prometheus.portName or DEFAULT_PROMETHEUS_PORT_NAME,
            "containerPort": mon.prometheus.port or DEFAULT_PROMETHEUS_PORT,
            "protocol": "TCP",
        }
        container["ports"] = [*container.get("ports", []), port]
    return pod, container


def driver_template(driver: SparkDriver, mounts: list[tuple[JSON, JSON]], metrics_map: str | None) -> JSON:
    pod, _ = _role_template(driver, "driver", mounts, metrics_map)
    return _prune_empty(pod)


def executor_template(
    driver: SparkDriver, incarnation: int, mounts: list[tuple[JSON, JSON]], metrics_map: str | None
) -> JSON:
    """The executor pod template: the executor fields Spark cannot express, plus what makes the
    executors ours: sparkop's labels and a non-controller ownerReference to the SparkDriver (the
    driver pod adds its own controller reference; see docs/driver-controller.md)."""
    pod, container = _role_template(driver, "executor", mounts, metrics_map)
    if driver.spec.sparkConfigMap:
        container.setdefault("env", []).append({"name": "SPARK_CONF_DIR", "value": SPARK_CONF_MAP_DIR})
    meta = pod["metadata"]
    meta["labels"] = {
        **(meta.get("labels") or {}),
        **kubeflow_pod_labels(driver),
        **sparkop_labels(driver, incarnation),
    }
    meta["ownerReferences"] = [owner_reference(driver, controller=False)]
    return _prune_empty(pod)
