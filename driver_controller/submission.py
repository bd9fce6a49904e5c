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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sparkop.api import spark_lines
from sparkop.api.models import (
    DynamicAllocation,
    NameKey,
    SecretInfo,
    SparkApplicationType,
    SparkDriver,
    SparkDriverSpec,
    SparkPodSpec,
)
from sparkop.api.rules import NAMED_SCHEDULERS
from sparkop.core.jsontypes import JSON
from sparkop.domain import naming
from sparkop.driver_controller.monitoring import metrics_files, monitoring_conf

# The Spark containers' names are the request's too (what its callers read as submission's).
from sparkop.driver_controller.templates import DRIVER_CONTAINER as DRIVER_CONTAINER
from sparkop.driver_controller.templates import EXECUTOR_CONTAINER as EXECUTOR_CONTAINER
from sparkop.driver_controller.templates import (
    driver_template,
    executor_template,
    kubeflow_pod_labels,
    owner_reference,
    spark_container_name,
    sparkop_labels,
)

ROLES: Final = ("driver", "executor")
# The API server URL a driver pod uses (kubeflow: from KUBERNETES_SERVICE_HOST/PORT of the operator).
IN_CLUSTER_MASTER: Final = "k8s://https://kubernetes.default.svc:443"

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
        "spark.kubernetes.driver.service.deleteOnTermination",
        "spark.kubernetes.executor.podTemplateFile",
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
    release: spark_lines.SparkRelease  # spec.sparkVersion: the line rendered for, and the label's version
    conf: dict[str, str]
    driver_template: JSON  # a Pod: its first container is the Spark container
    executor_template: JSON
    sparkop_labels: dict[str, str]
    owner: JSON  # the SparkDriver, as an ownerReference target
    pod_labels: dict[str, str] = field(default_factory=dict)  # on the driver and executor pods only
    driver_container: str = DRIVER_CONTAINER  # the name of the driver template's Spark container
    submit_time_ms: int | None = None
    # The metrics ConfigMap's files (metrics.properties, prometheus.yaml); empty: no such ConfigMap.
    metrics_files: dict[str, str] = field(default_factory=dict)
    # The SparkDriver it was made from, for what no spark-submit argument carries: batch scheduling.
    source: SparkDriver | None = None

    @property
    def spark_version(self) -> str:
        return self.release.version

    def has(self, feature: spark_lines.Feature) -> bool:
        """Whether the submission client of the app's Spark line does ``feature``."""
        return self.release.has(feature)


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
    else:
        conf[f"{base}.options.claimName"] = source["claimName"]


# The typed per-role fields kubeflow passes as --conf (driverConfOption / executorConfOption).
_ROLE_FIELDS: Final = (
    ("cores", "spark.{role}.cores"),
    ("coreRequest", "spark.kubernetes.{role}.request.cores"),
    ("coreLimit", "spark.kubernetes.{role}.limit.cores"),
    ("memory", "spark.{role}.memory"),
    ("memoryOverhead", "spark.{role}.memoryOverhead"),
    ("serviceAccount", "spark.kubernetes.authenticate.{role}.serviceAccountName"),
    ("javaOptions", "spark.{role}.extraJavaOptions"),
)
# spec.deps -> spark-submit's --jars, --files, --py-files, --packages, ... as properties.
_DEPS: Final = (
    ("jars", "spark.jars"),
    ("files", "spark.files"),
    ("pyFiles", "spark.submit.pyFiles"),
    ("packages", "spark.jars.packages"),
    ("excludePackages", "spark.jars.excludes"),
    ("repositories", "spark.jars.repositories"),
    ("archives", "spark.archives"),
)


def _role_conf(conf: dict[str, str], role: str, pod: SparkPodSpec, image: str | None) -> None:
    if pod.image or image:
        conf[f"spark.kubernetes.{role}.container.image"] = pod.image or image or ""
    for attr, key in _ROLE_FIELDS:
        value = getattr(pod, attr)
        if value is not None:
            conf[key.format(role=role)] = str(value)
    _put_prefixed(conf, f"spark.kubernetes.{role}.label.", pod.labels)
    _put_prefixed(conf, f"spark.kubernetes.{role}.annotation.", pod.annotations)
    _secret_key_refs(conf, role, pod.envSecretKeyRefs)
    _put_prefixed(conf, f"spark.kubernetes.{role}.node.selector.", pod.nodeSelector)


def _user_conf(spark_conf: Mapping[str, str] | None) -> dict[str, str]:
    """spec.sparkConf, which comes first: kubeflow's typed fields come later on the command line and win."""
    conf: dict[str, str] = {}
    for key, value in (spark_conf or {}).items():
        if key in REJECTED_PROPERTIES:
            raise InvalidSpec(f"sparkConf {key} is set by Spark itself in cluster mode and cannot be given")
        if key not in OWNED_PROPERTIES:
            conf[key] = value
    return conf


def _common_conf(
    conf: dict[str, str], spec: SparkDriverSpec, namespace: str, release: spark_lines.SparkRelease
) -> None:
    for attr, key in _DEPS:
        values = getattr(spec.deps, attr) if spec.deps is not None else None
        if values:
            conf[key] = ",".join(values)
    conf["spark.kubernetes.namespace"] = namespace
    if spec.image:
        conf["spark.kubernetes.container.image"] = spec.image
    if spec.imagePullPolicy:
        conf["spark.kubernetes.container.image.pullPolicy"] = spec.imagePullPolicy
    if spec.imagePullSecrets:
        conf["spark.kubernetes.container.image.pullSecrets"] = ",".join(spec.imagePullSecrets)
    if spec.pythonVersion and release.has(spark_lines.Feature.PYSPARK_PYTHON_VERSION):
        conf["spark.kubernetes.pyspark.pythonVersion"] = spec.pythonVersion
    if spec.memoryOverheadFactor:
        conf["spark.kubernetes.memoryOverheadFactor"] = spec.memoryOverheadFactor
    _put_prefixed(conf, "spark.hadoop.", spec.hadoopConf)
    if spec.hadoopConfigMap:
        conf["spark.kubernetes.hadoop.configMapName"] = spec.hadoopConfigMap


def _driver_conf(conf: dict[str, str], spec: SparkDriverSpec) -> None:
    driver = spec.driver
    _role_conf(conf, "driver", driver, spec.image)
    if driver.kubernetesMaster:
        conf["spark.kubernetes.driver.master"] = driver.kubernetesMaster
    _put_prefixed(conf, "spark.kubernetes.driver.service.label.", driver.serviceLabels)
    _put_prefixed(conf, "spark.kubernetes.driver.service.annotation.", driver.serviceAnnotations)
    _put_prefixed(conf, "spark.kubernetes.driverEnv.", driver.envVars)
    _secrets(conf, "driver", driver.secrets, "spark.kubernetes.driverEnv.")


def _executor_conf(conf: dict[str, str], spec: SparkDriverSpec) -> None:
    executor = spec.executor
    _role_conf(conf, "executor", executor, spec.image)
    if executor.instances is not None:
        conf["spark.executor.instances"] = str(executor.instances)
    if executor.deleteOnTermination is not None:
        conf["spark.kubernetes.executor.deleteOnTermination"] = str(executor.deleteOnTermination).lower()
    _put_prefixed(conf, "spark.executorEnv.", executor.envVars)
    _secrets(conf, "executor", executor.secrets, "spark.executorEnv.")


def _privilege_escalation_conf(conf: dict[str, str], spec: SparkDriverSpec) -> None:
    """Spark 4.3 sets each role's allowPrivilegeEscalation over the pod template's, from its properties
    (false by default). A value the spec's securityContext gives explicitly is the user's wish: it
    becomes the role's property, unless sparkConf names that role's or the general one itself, so that
    real Spark building the executors keeps it too."""
    general = "spark.kubernetes.securityContext.allowPrivilegeEscalation"
    for role, pod in (("driver", spec.driver), ("executor", spec.executor)):
        wanted = (pod.securityContext or {}).get("allowPrivilegeEscalation")
        key = f"spark.kubernetes.{role}.securityContext.allowPrivilegeEscalation"
        if isinstance(wanted, bool) and key not in conf and general not in conf:
            conf[key] = str(wanted).lower()


def _by_properties(volume: Mapping[str, Any], mount: Mapping[str, Any]) -> bool:
    """Whether Spark can mount ``volume`` at ``mount`` from properties; other volumes go into the pod templates.

    Spark has no property for a source's ``readOnly``: it makes a claim read-only exactly when the
    mount is (``mount.readOnly``) and never marks an NFS source. A source marked read-only where
    that rule would lose the mark is therefore mounted through the template, as written."""
    kind = _volume_type(volume)
    if kind is None or mount.get("subPathExpr") or mount.get("mountPropagation"):
        return False
    source_read_only = bool((volume[kind] or {}).get("readOnly"))
    return not source_read_only or (kind == "persistentVolumeClaim" and bool(mount.get("readOnly")))


def _volume_conf(conf: dict[str, str], spec: SparkDriverSpec) -> dict[str, list[tuple[JSON, JSON]]]:
    """Volumes Spark can mount from properties (kubeflow's driverVolumeMountsOption); the others, per
    role, as (volume, mount) pairs for the pod templates."""
    volumes = {v["name"]: v for v in spec.volumes or ()}
    template_mounts: dict[str, list[tuple[JSON, JSON]]] = {"driver": [], "executor": []}
    for role, pod in (("driver", spec.driver), ("executor", spec.executor)):
        for mount in pod.volumeMounts or ():
            volume = volumes.get(mount.get("name", ""))
            if volume is None:
                raise InvalidSpec(f"{role}.volumeMounts: volume {mount.get('name')!r} is not in spec.volumes")
            if _by_properties(volume, mount):
                _volume_properties(conf, role, volume, mount)
            else:
                template_mounts[role].append((volume, mount))
    return template_mounts


def _dynamic_allocation_conf(conf: dict[str, str], dyn: DynamicAllocation | None) -> None:
    if dyn is None or not dyn.enabled:
        return
    conf["spark.dynamicAllocation.enabled"] = "true"
    for attr in ("initialExecutors", "minExecutors", "maxExecutors"):
        value = getattr(dyn, attr)
        if value is not None:
            conf[f"spark.dynamicAllocation.{attr}"] = str(value)
    # Kubernetes has no external shuffle service: shuffle tracking is what makes it work (kubeflow's default).
    conf.setdefault("spark.dynamicAllocation.shuffleTracking.enabled", "true")
    if dyn.shuffleTrackingTimeout is not None:
        conf["spark.dynamicAllocation.shuffleTracking.timeout"] = str(dyn.shuffleTrackingTimeout)


def _spark_conf(
    driver: SparkDriver, incarnation: int, release: spark_lines.SparkRelease
) -> tuple[dict[str, str], dict[str, list[tuple[JSON, JSON]]]]:
    """All Spark properties of the submission, in kubeflow's order (a later step wins), and per role
    the (volume, mount) pairs Spark cannot mount from properties."""
    spec = driver.spec
    name = driver.metadata["name"]
    conf = _user_conf(spec.sparkConf)
    _common_conf(conf, spec, driver.metadata["namespace"], release)
    _driver_conf(conf, spec)
    _executor_conf(conf, spec)
    if release.has(spark_lines.Feature.ALLOW_PRIVILEGE_ESCALATION):
        _privilege_escalation_conf(conf, spec)
    template_mounts = _volume_conf(conf, spec)
    # spec.nodeSelector (deprecated, both roles) -> spark.kubernetes.node.selector.*
    _put_prefixed(conf, "spark.kubernetes.node.selector.", spec.nodeSelector)
    _dynamic_allocation_conf(conf, spec.dynamicAllocation)
    monitoring_conf(conf, driver)
    # What sparkop owns: deterministic names (the driver pod's the same for every incarnation, the
    # executors' and the other objects' per incarnation).
    conf["spark.kubernetes.driver.pod.name"] = naming.driver_pod_name(name, spec.driver.podName)
    conf["spark.kubernetes.executor.podNamePrefix"] = naming.pod_prefix(name, incarnation)
    # The driver Service is the SparkDriver's, removed with its incarnation. A driver that deletes
    # it at stop (Spark's default) races the controller, which sees it missing while the driver
    # pod still runs and creates it again (seen with real Spark 3.5 and 4.0).
    conf["spark.kubernetes.driver.service.deleteOnTermination"] = "false"
    # A batch scheduler that schedules the pods itself names them (kubeflow's webhook sets the pods'
    # schedulerName); as properties, so that no scheduler name in sparkConf takes them elsewhere.
    if spec.batchScheduler in NAMED_SCHEDULERS:
        for key in ("spark.kubernetes.scheduler.name", *(f"spark.kubernetes.{r}.scheduler.name" for r in ROLES)):
            conf[key] = spec.batchScheduler
    # The user's name, or Spark's default: the executor template's Spark container is found by it.
    conf["spark.kubernetes.executor.podTemplateContainerName"] = spark_container_name(spec.sparkConf, "executor")
    return conf, template_mounts


def _submit_time_ms(driver: SparkDriver) -> int | None:
    created = driver.metadata.get("creationTimestamp")
    if not created:
        return None
    from datetime import datetime

    text = str(created).replace("Z", "+00:00")
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def _main(spec: SparkDriverSpec) -> tuple[str, str, str]:
    """(resource type, main class, primary resource) as SparkSubmit derives them."""
    resource_type = _resource_type(spec.type)
    if resource_type == "python":
        main_class = PYTHON_RUNNER
    elif resource_type == "r":
        main_class = R_RUNNER
    elif spec.mainClass:
        main_class = spec.mainClass
    else:
        raise InvalidSpec("mainClass is required for Java and Scala applications")
    resource = spec.mainApplicationFile or ""
    if not resource:
        if resource_type != "java":
            raise InvalidSpec("mainApplicationFile is required for Python and R applications")
        resource = NO_RESOURCE
    return resource_type, main_class, resource


def submission(driver: SparkDriver, incarnation: int) -> Submission:
    """The spark-submit request equivalent to ``driver``'s spec for driver-pod ``incarnation``."""
    spec = driver.spec
    meta = driver.metadata
    if incarnation < 1:
        raise ValueError("incarnations are numbered from 1")
    resource_type, main_class, resource = _main(spec)
    if not (spec.image or (spec.driver.image and spec.executor.image)):
        raise InvalidSpec("spec.image (or both driver.image and executor.image) is required")
    try:
        release = spark_lines.release(spec.sparkVersion)
    except ValueError as exc:
        raise InvalidSpec(str(exc)) from None
    conf, template_mounts = _spark_conf(driver, incarnation, release)
    app_name = spec.appName or meta["name"]
    conf["spark.app.name"] = app_name
    files = metrics_files(spec.monitoring)
    metrics_map = naming.metrics_configmap_name(meta["name"], incarnation) if files else None
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
        release=release,
        conf=conf,
        driver_template=driver_template(driver, template_mounts["driver"], metrics_map),
        executor_template=executor_template(driver, incarnation, template_mounts["executor"], metrics_map),
        sparkop_labels=sparkop_labels(driver, incarnation),
        owner=owner_reference(driver, controller=True),
        pod_labels=kubeflow_pod_labels(driver),
        driver_container=spark_container_name(spec.sparkConf, "driver"),
        submit_time_ms=_submit_time_ms(driver),
        metrics_files=files,
        source=driver,
    )
