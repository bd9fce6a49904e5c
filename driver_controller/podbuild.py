"""What Spark's submission client builds from a spark-submit request, in Python.

Spark (3.5 and 4.0) builds the driver pod by loading the driver pod template (or an empty pod),
taking its Spark container out, and folding a fixed list of feature steps over (pod, container,
system properties): ``BasicDriverFeatureStep``, ``DriverKubernetesCredentialsFeatureStep``,
``DriverServiceFeatureStep``, ``MountSecretsFeatureStep``, ``EnvSecretsFeatureStep``,
``MountVolumesFeatureStep``, ``DriverCommandFeatureStep``, ``HadoopConfDriverFeatureStep``,
``KerberosConfDriverFeatureStep``, ``PodTemplateConfigMapStep``, ``LocalDirsFeatureStep``. The
submission client then adds the conf volume and ``SPARK_CONF_DIR``, appends the Spark container
after the template's other containers, and writes every property into the driver ConfigMap.

This module follows the same steps in the same order, so what we create matches what
spark-submit creates (tests/conformance compares the two on a real API server). Where Spark
would use randomness (app id, local dir) we use values fixed by the SparkDriver's uid and
incarnation, so that a retried create renders byte-identical objects.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sparkop.api.spark_lines import Feature
from sparkop.core.jsontypes import JSON
from sparkop.domain import labels, naming
from sparkop.driver_controller import nodeloss, podsecurity, schedulers, sparkconf
from sparkop.driver_controller.submission import IN_CLUSTER_MASTER, Submission

SPARK_CONF_DIR: Final = "/opt/spark/conf"
SPARK_CONF_FILE: Final = "spark.properties"
SPARK_CONF_VOLUME: Final = "spark-conf-volume-driver"
POD_TEMPLATE_VOLUME: Final = "pod-template-volume"
POD_TEMPLATE_MOUNT: Final = "/opt/spark/pod-template"
POD_TEMPLATE_FILE: Final = "pod-spec-template.yml"
POD_TEMPLATE_KEY: Final = "podspec-configmap-key"
HADOOP_CONF_VOLUME: Final = "hadoop-properties"
HADOOP_CONF_DIR: Final = "/opt/hadoop/conf"
CONNECT_PORT_NAME: Final = "spark-connect"
MAX_SERVICE_NAME: Final = 63


@dataclass(frozen=True)
class RenderOptions:
    """Operator-wide choices that spark-submit takes from its environment."""

    # spark-submit puts the submitting OS user into SPARK_USER; the operator has no meaningful one.
    spark_user: str = "spark"
    # spark.master as the driver pod sees it (spark-submit writes the URL it was given).
    master: str = IN_CLUSTER_MASTER
    # --driver-pod-disruption-budget: a driver PodDisruptionBudget for specs that do not say.
    driver_pdb: bool = False
    # --pod-security: a Pod Security Standards profile whose requirements the pods get where the spec
    # is silent (driver_controller.podsecurity); "" for none.
    pod_security: str = ""
    # --node-loss-toleration-seconds: the node-loss taints' tolerationSeconds for specs that do not say.
    node_loss_toleration_seconds: int | None = None
    # --max-executor-failures: a bound on failing executors for specs that do not say (their pods then
    # carry a finalizer until their outcome is counted).
    max_executor_failures: int | None = None


@dataclass
class DriverObjects:
    """Everything one driver-pod incarnation needs, as manifests (no status, no server fields)."""

    pod: JSON
    config_map: JSON
    service: JSON
    executor_template: JSON | None
    properties: dict[str, str]
    metrics_config_map: JSON | None = None
    pod_group: JSON | None = None  # the batch scheduler's PodGroup (one per SparkDriver, see schedulers)
    # What the run asks of its Kueue queue, when the SparkDriver names one (driver_controller.kueue).
    pod_sets: schedulers.PodSetRequests | None = None
    network_policy: JSON | None = None  # the executors' NetworkPolicy (Spark 4.2+)
    pod_disruption_budget: JSON | None = None  # the driver's, one per SparkDriver (sparkop's, kubeflow's field)

    @property
    def config_maps(self) -> list[JSON]:
        """The incarnation's ConfigMaps, all of which the driver pod mounts."""
        return [cm for cm in (self.executor_template, self.config_map, self.metrics_config_map) if cm is not None]


# --- helpers -----------------------------------------------------------------------------------


def app_name_label(app_name: str) -> str:
    """``KubernetesConf.getAppNameLabel``, trimmed to a valid label value (Spark would let a
    leading or trailing '-' through and have the pod refused)."""
    text = re.sub(r"[^a-z0-9\-]", "-", app_name.strip().lower())
    text = re.sub(r"-+", "-", text)[: naming.DNS_LABEL_MAX]
    return text.strip("-")


def substitute_ids(value: str, app_id: str, exec_id: str = "") -> str:
    """``Utils.substituteAppNExecIds``."""
    return value.replace("{{APP_ID}}", app_id).replace("{{EXECUTOR_ID}}", exec_id)


def local_dir_path(app_id: str) -> str:
    """Spark picks ``/var/data/spark-<random uuid>``; ours is fixed by the app id."""
    return f"/var/data/spark-{uuid.UUID(hex=app_id.removeprefix('spark-')[:32])}"


def select_spark_container(pod: JSON, name: str) -> JSON:
    """``KubernetesUtils.selectSparkContainer``: takes the Spark container (named ``name``, else the
    first) out of the template ``pod``, in place, and returns it."""
    pod.setdefault("metadata", {})
    spec = pod.setdefault("spec", {})
    containers: list[JSON] = spec.get("containers") or []
    named = [c for c in containers if c.get("name") == name]
    if len(named) == 1:
        container = named[0]
        rest = [c for c in containers if c is not container]
    elif containers:
        container, rest = containers[0], containers[1:]
    else:
        container, rest = {}, []
    spec["containers"] = rest
    return container


def _env(container: JSON, name: str, value: str | None = None, value_from: JSON | None = None) -> None:
    entry: JSON = {"name": name}
    if value_from is not None:
        entry["valueFrom"] = value_from
    else:
        entry["value"] = value
    container.setdefault("env", []).append(entry)


def _volume(pod: JSON, volume: JSON) -> None:
    pod["spec"].setdefault("volumes", []).append(volume)


def _mount(container: JSON, mount: JSON) -> None:
    container.setdefault("volumeMounts", []).append(mount)


# --- the feature steps -------------------------------------------------------------------------


class FeatureSteps:
    """Spark's driver feature steps, one method each, over the pod and its Spark container of one
    request (``build.build`` runs them in Spark's order)."""

    def __init__(self, sub: Submission, options: RenderOptions) -> None:
        self.sub = sub
        self.options = options
        self.conf = self._submit_conf()
        self._sorted_keys = sorted(self.conf)  # for prefixed(); conf is not changed after this
        self.props: dict[str, str] = {}
        self.app_id = sub.app_id
        self.pod_name = sub.conf["spark.kubernetes.driver.pod.name"]
        self.service_name = naming.driver_service_name(sub.name, sub.incarnation)
        self.config_map_name = naming.driver_configmap_name(sub.name, sub.incarnation)
        self.template_map_name = naming.executor_template_configmap_name(sub.name, sub.incarnation)
        self.ports = sparkconf.driver_ports(self.conf)
        self.labels = self._driver_labels()

    def _submit_conf(self) -> dict[str, str]:
        """The properties SparkSubmit itself adds before the Kubernetes client runs."""
        sub = self.sub
        conf = dict(sub.conf)
        conf["spark.master"] = self.options.master
        conf["spark.submit.deployMode"] = "cluster"
        if sub.submit_time_ms is not None:
            conf["spark.app.submitTime"] = str(sub.submit_time_ms)
        if sub.resource_type == "java" and sub.resource != "spark-internal":
            # SparkSubmit adds the primary jar to spark.jars in Kubernetes cluster mode.
            jars = [j for j in conf.get("spark.jars", "").split(",") if j]
            if sub.resource not in jars:
                conf["spark.jars"] = ",".join([*jars, sub.resource])
        elif sub.resource_type == "java":
            # With no primary jar (spark-internal: a class of Spark's own) SparkSubmit still writes it.
            conf.setdefault("spark.jars", "")
        # SparkSubmit always writes spark.submit.pyFiles (empty for JVM apps).
        conf.setdefault("spark.submit.pyFiles", "")
        return conf

    def prefixed(self, prefix: str) -> dict[str, str]:
        """``KubernetesUtils.parsePrefixedKeyValuePairs``, in key order (Spark's is hash order)."""
        keys, n = self._sorted_keys, len(prefix)
        found: dict[str, str] = {}
        for key in itertools.islice(keys, bisect.bisect_left(keys, prefix), None):
            if not key.startswith(prefix):
                break
            if len(key) > n:
                found[key[n:]] = self.conf[key]
        return found

    def _driver_labels(self) -> dict[str, str]:
        """``KubernetesDriverConf.labels``: the pod's labels and the Service's selector."""
        custom = {k: substitute_ids(v, self.app_id) for k, v in self.prefixed("spark.kubernetes.driver.label.").items()}
        preset = {
            labels.SPARK_APP_SELECTOR: self.app_id,
            labels.SPARK_APP_NAME: app_name_label(self.sub.app_name),
            labels.SPARK_ROLE: labels.ROLE_DRIVER,
        }
        version = self.sub.spark_version
        if version:
            preset[labels.SPARK_VERSION] = version
        return {**custom, **preset}

    def basic(self, pod: JSON, container: JSON) -> None:
        """``BasicDriverFeatureStep``: the Spark container, its resources, the pod's metadata and spec."""
        self._basic_container(container)
        self._basic_resources(container)
        self._basic_metadata(pod["metadata"])
        self._basic_spec(pod["spec"])
        default_factor, _ = sparkconf.memory_overhead_factor(self.conf, self.sub.resource_type)
        self.props.update(
            {
                "spark.kubernetes.driver.pod.name": self.pod_name,
                "spark.app.id": self.app_id,
                "spark.kubernetes.submitInDriver": "true",
                "spark.kubernetes.memoryOverheadFactor": sparkconf.java_double(default_factor),
            }
        )

    def _basic_container(self, container: JSON) -> None:
        conf = self.conf
        rpc, block, ui = self.ports
        container.setdefault("name", self.sub.driver_container)
        container["image"] = conf.get("spark.kubernetes.driver.container.image") or conf.get(
            "spark.kubernetes.container.image"
        )
        container["imagePullPolicy"] = conf.get("spark.kubernetes.container.image.pullPolicy", "IfNotPresent")
        container["ports"] = [
            *container.get("ports", []),
            {"name": "driver-rpc-port", "containerPort": rpc, "protocol": "TCP"},
            {"name": "blockmanager", "containerPort": block, "protocol": "TCP"},
            {"name": "spark-ui", "containerPort": ui, "protocol": "TCP"},
        ]
        if self.sub.has(Feature.CONNECT_PORT):
            port = {"name": CONNECT_PORT_NAME, "containerPort": sparkconf.connect_port(conf), "protocol": "TCP"}
            container["ports"].append(port)
        if self.sub.has(Feature.ALLOW_PRIVILEGE_ESCALATION):
            # Set over the template's value, its other fields kept.
            context = container.setdefault("securityContext", {})
            context["allowPrivilegeEscalation"] = self._allow_privilege_escalation()
        proxy_user = self.sub.proxy_user if self.sub.has(Feature.PROXY_USER_IS_SPARK_USER) else None
        _env(container, "SPARK_USER", proxy_user or self.options.spark_user)
        _env(container, "SPARK_APPLICATION_ID", self.app_id)
        for key, value in self.prefixed("spark.kubernetes.driverEnv.").items():
            _env(container, key, value)
        _env(
            container,
            "SPARK_DRIVER_BIND_ADDRESS",
            value_from={"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
        )

    def _allow_privilege_escalation(self) -> bool:
        general = self.conf.get("spark.kubernetes.securityContext.allowPrivilegeEscalation")
        driver = self.conf.get("spark.kubernetes.driver.securityContext.allowPrivilegeEscalation", general)
        return sparkconf.parse_bool(driver)

    def _basic_resources(self, container: JSON) -> None:
        conf = self.conf
        heap, overhead = sparkconf.driver_memory_mib(
            conf, self.sub.resource_type, self.sub.has(Feature.MIN_MEMORY_OVERHEAD)
        )
        memory = f"{heap + overhead}Mi"
        resources = container.setdefault("resources", {})
        requests = resources.setdefault("requests", {})
        limits = resources.setdefault("limits", {})
        requests["cpu"] = conf.get("spark.kubernetes.driver.request.cores") or str(
            int(conf.get("spark.driver.cores", "1"))
        )
        if conf.get("spark.kubernetes.driver.limit.cores"):
            limits["cpu"] = conf["spark.kubernetes.driver.limit.cores"]
        requests["memory"] = memory
        limits["memory"] = memory
        # spark.driver.resource.<name>.amount with a vendor: a limit "<vendor>/<name>".
        custom = self.prefixed("spark.driver.resource.")
        for key, amount in custom.items():
            name, _, field = key.partition(".")
            vendor = custom.get(f"{name}.vendor")
            if field == "amount" and vendor:
                limits[f"{vendor}/{name}"] = amount

    def _basic_metadata(self, meta: JSON) -> None:
        meta["name"] = self.pod_name
        meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        annotations = {
            k: substitute_ids(v, self.app_id) for k, v in self.prefixed("spark.kubernetes.driver.annotation.").items()
        }
        if annotations or meta.get("annotations"):
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}

    def _basic_spec(self, spec: JSON) -> None:
        conf = self.conf
        spec["restartPolicy"] = "Never"
        node_selector = {
            **self.prefixed("spark.kubernetes.node.selector."),
            **self.prefixed("spark.kubernetes.driver.node.selector."),
        }
        if node_selector or spec.get("nodeSelector"):
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **node_selector}
        pull_secrets = [s.strip() for s in conf.get("spark.kubernetes.container.image.pullSecrets", "").split(",")]
        if any(pull_secrets):
            spec["imagePullSecrets"] = [*spec.get("imagePullSecrets", []), *({"name": s} for s in pull_secrets if s)]
        scheduler = conf.get("spark.kubernetes.driver.scheduler.name") or conf.get("spark.kubernetes.scheduler.name")
        if scheduler:
            spec["schedulerName"] = scheduler

    def credentials(self, pod: JSON) -> None:
        account = self.conf.get("spark.kubernetes.authenticate.driver.serviceAccountName")
        spec = pod["spec"]
        if account and not spec.get("serviceAccount"):
            spec["serviceAccount"] = account
            spec["serviceAccountName"] = account

    def service(self) -> JSON:
        rpc, block, ui = self.ports
        self.props.update(
            {
                "spark.driver.host": f"{self.service_name}.{self.sub.namespace}.svc",
                "spark.driver.port": str(rpc),
                "spark.driver.blockManager.port": str(block),
            }
        )
        conf = self.conf
        meta: JSON = {"name": self.service_name, "namespace": self.sub.namespace}
        annotations = self.prefixed("spark.kubernetes.driver.service.annotation.")
        if annotations:
            meta["annotations"] = annotations
        meta["labels"] = {
            labels.SPARK_APP_SELECTOR: self.app_id,
            **self.prefixed("spark.kubernetes.driver.service.label."),
        }
        ports: list[JSON] = [
            {"name": "driver-rpc-port", "port": rpc, "targetPort": rpc},
            {"name": "blockmanager", "port": block, "targetPort": block},
            {"name": "spark-ui", "port": ui, "targetPort": ui},
        ]
        if self.sub.has(Feature.CONNECT_PORT):
            connect = sparkconf.connect_port(conf)
            ports.append({"name": CONNECT_PORT_NAME, "port": connect, "targetPort": connect})
            if self.sub.has(Feature.CONNECT_APP_PROTOCOL):
                ports[-1]["appProtocol"] = "grpc"
        spec: JSON = {"clusterIP": "None"}
        publish = sparkconf.parse_bool(conf.get("spark.kubernetes.driver.service.publishNotReadyAddresses"))
        if self.sub.has(Feature.PUBLISH_NOT_READY_ADDRESSES) or publish:
            # Before 4.3 Spark has no such property, and sparkop honours it all the same: a driver with
            # a readiness probe (a Connect server) must be reachable by its executors before it is Ready.
            spec["publishNotReadyAddresses"] = publish
        spec.update(
            ipFamilyPolicy=conf.get("spark.kubernetes.driver.service.ipFamilyPolicy", "SingleStack"),
            ipFamilies=[f.strip() for f in conf.get("spark.kubernetes.driver.service.ipFamilies", "IPv4").split(",")],
            selector=self.labels,
            ports=ports,
        )
        return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}

    def network_policy(self) -> JSON:
        return network_policy_manifest(self.sub.name, self.sub.namespace, self.sub.incarnation, self.app_id)

    def secrets(self, pod: JSON, container: JSON) -> None:
        for secret, path in self.prefixed("spark.kubernetes.driver.secrets.").items():
            volume_name = naming.dns_label(f"{secret}-volume")
            _volume(pod, {"name": volume_name, "secret": {"secretName": secret}})
            _mount(container, {"name": volume_name, "mountPath": path})

    def env_secrets(self, container: JSON) -> None:
        for env_name, ref in self.prefixed("spark.kubernetes.driver.secretKeyRef.").items():
            secret, _, key = ref.partition(":")
            _env(container, env_name, value_from={"secretKeyRef": {"key": key, "name": secret}})

    def volumes(self, pod: JSON, container: JSON) -> None:
        """``MountVolumesFeatureStep``: spark.kubernetes.driver.volumes.<kind>.<name>.{mount,options}.*"""
        specs: dict[tuple[str, str], dict[str, str]] = {}
        for key, value in self.prefixed("spark.kubernetes.driver.volumes.").items():
            parts = key.split(".", 2)
            if len(parts) == 3:
                specs.setdefault((parts[0], parts[1]), {})[parts[2]] = value
        for (kind, name), opts in sorted(specs.items(), key=lambda item: item[0][1]):
            read_only = sparkconf.parse_bool(opts.get("mount.readOnly"))
            source = self._volume_source(kind, opts, read_only)
            if "mount.path" not in opts or source is None:
                continue
            mount: JSON = {"name": name, "mountPath": opts["mount.path"]}
            if read_only:
                mount["readOnly"] = True
            for field in ("subPath", "subPathExpr"):
                if opts.get(f"mount.{field}"):
                    mount[field] = opts[f"mount.{field}"]
            _volume(pod, {"name": name, kind: source})
            _mount(container, mount)

    def _volume_source(self, kind: str, opts: Mapping[str, str], read_only: bool) -> JSON | None:
        """The volume source of one of the four kinds Spark mounts from properties (None: another kind).

        Spark has no ``options.readOnly``: a claim is read-only exactly when its mount is
        (``mount.readOnly``), and an NFS source never carries the flag (``MountVolumesFeatureStep``)."""
        if kind == "hostPath":
            # Spark 3.5 ignores options.type (always ""); 4.0 passes it through.
            kind_type = opts.get("options.type", "") if self.sub.has(Feature.HOST_PATH_TYPE) else ""
            return {"path": opts.get("options.path", ""), "type": kind_type}
        if kind == "emptyDir":
            return {
                field: opts[f"options.{field}"] for field in ("medium", "sizeLimit") if opts.get(f"options.{field}")
            }
        if kind == "nfs":
            return {"path": opts.get("options.path", ""), "server": opts.get("options.server", "")}
        if kind == "persistentVolumeClaim":
            claim: JSON = {"claimName": opts.get("options.claimName", "")}
            if read_only:
                claim["readOnly"] = True
            return claim
        return None

    def command(self, container: JSON) -> None:
        sub = self.sub
        args = [*container.get("args", []), "driver"]
        if sub.proxy_user:
            args += ["--proxy-user", sub.proxy_user]
        args += ["--properties-file", f"{SPARK_CONF_DIR}/{SPARK_CONF_FILE}", "--class", sub.main_class, sub.resource]
        args += sub.app_args
        container["args"] = args
        if sub.resource_type == "python":
            python = self.conf.get("spark.pyspark.python")
            driver_python = self.conf.get("spark.pyspark.driver.python") or python
            if python:
                _env(container, "PYSPARK_PYTHON", python)
            if driver_python:
                _env(container, "PYSPARK_DRIVER_PYTHON", driver_python)
        self.props["spark.kubernetes.resource.type"] = sub.resource_type

    def hadoop(self, pod: JSON, container: JSON) -> None:
        config_map = self.conf.get("spark.kubernetes.hadoop.configMapName")
        if not config_map:
            return
        _volume(pod, {"name": HADOOP_CONF_VOLUME, "configMap": {"name": config_map}})
        _mount(container, {"name": HADOOP_CONF_VOLUME, "mountPath": HADOOP_CONF_DIR})
        _env(container, "HADOOP_CONF_DIR", HADOOP_CONF_DIR)
        self.props["spark.kubernetes.executor.hadoopConfigMapName"] = config_map

    def pod_template(self, pod: JSON, container: JSON) -> JSON | None:
        template = self.sub.executor_template
        if not template:
            return None
        _volume(
            pod,
            {
                "name": POD_TEMPLATE_VOLUME,
                "configMap": {
                    "name": self.template_map_name,
                    "items": [{"key": POD_TEMPLATE_KEY, "path": POD_TEMPLATE_FILE}],
                },
            },
        )
        _mount(container, {"name": POD_TEMPLATE_VOLUME, "mountPath": POD_TEMPLATE_MOUNT})
        self.props["spark.kubernetes.executor.podTemplateFile"] = f"{POD_TEMPLATE_MOUNT}/{POD_TEMPLATE_FILE}"
        if self.options.pod_security == podsecurity.RESTRICTED:
            podsecurity.fill_restricted(template)
        nodeloss.tolerate(template, node_loss_seconds(self.sub, self.options))
        if failures_bounded(self.sub, self.options):
            # Spark deletes a failed executor pod within a second: it stays until its outcome is counted.
            meta = template.setdefault("metadata", {})
            meta["finalizers"] = [*(meta.get("finalizers") or []), labels.EXECUTOR_OUTCOME_FINALIZER]
        # JSON is YAML: Spark's template loader reads it, and it is fast and canonical.
        return _config_map(
            self.template_map_name,
            self.sub.namespace,
            {POD_TEMPLATE_KEY: json.dumps(template, sort_keys=True, separators=(",", ":"))},
        )

    def metrics_config_map(self) -> JSON | None:
        """kubeflow's Prometheus ConfigMap (sparkop's is per incarnation, like the others); the pod
        templates already mount it."""
        files = self.sub.metrics_files
        if not files:
            return None
        return _config_map(
            naming.metrics_configmap_name(self.sub.name, self.sub.incarnation), self.sub.namespace, files
        )

    def local_dirs(self, pod: JSON, container: JSON) -> None:
        existing = [
            m["mountPath"] for m in container.get("volumeMounts", []) if m["name"].startswith("spark-local-dir-")
        ]
        if existing:
            dirs = existing
        else:
            dirs = self.conf.get("spark.local.dir", local_dir_path(self.app_id)).split(",")
            tmpfs = sparkconf.parse_bool(self.conf.get("spark.kubernetes.local.dirs.tmpfs"))
            for index in range(1, len(dirs) + 1):
                name = f"spark-local-dir-{index}"
                _volume(pod, {"name": name, "emptyDir": {"medium": "Memory"} if tmpfs else {}})
            for index, path in enumerate(dirs, start=1):
                _mount(container, {"name": f"spark-local-dir-{index}", "mountPath": path})
        _env(container, "SPARK_LOCAL_DIRS", ",".join(dirs))

    def client(self, pod: JSON, container: JSON) -> JSON:
        """``Client.run``: conf volume, SPARK_CONF_DIR, the Spark container last, the ConfigMap."""
        properties = {**self.conf, **self.props}
        text = sparkconf.format_properties(
            properties, f"Java properties built from Kubernetes config map with name: {self.config_map_name}"
        )
        _env(container, "SPARK_CONF_DIR", SPARK_CONF_DIR)
        _mount(container, {"name": SPARK_CONF_VOLUME, "mountPath": SPARK_CONF_DIR})
        pod["spec"]["containers"] = [*pod["spec"]["containers"], container]
        _volume(
            pod,
            {
                "name": SPARK_CONF_VOLUME,
                "configMap": {
                    "name": self.config_map_name,
                    "items": [{"key": SPARK_CONF_FILE, "path": SPARK_CONF_FILE, "mode": 420}],
                },
            },
        )
        self.final_properties = properties
        # Client.run adds the namespace as a second key (not mounted: the volume lists items).
        namespace = self.sub.namespace
        return _config_map(
            self.config_map_name, namespace, {SPARK_CONF_FILE: text, "spark.kubernetes.namespace": namespace}
        )


def _config_map(name: str, namespace: str, data: dict[str, str]) -> JSON:
    """An immutable ConfigMap: its content is fixed by the SparkDriver and incarnation, so a retried
    create meets an identical object."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "immutable": True,
        "data": data,
    }


def network_policy_manifest(driver: str, namespace: str, incarnation: int, app_id: str) -> JSON:
    """``NetworkPolicyFeatureStep``: the app's executors admit ingress only from pods of the same app
    (its driver and its other executors)."""
    app = {labels.SPARK_APP_SELECTOR: app_id}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": naming.network_policy_name(driver, incarnation), "namespace": namespace, "labels": app},
        "spec": {
            "podSelector": {"matchLabels": {labels.SPARK_ROLE: labels.ROLE_EXECUTOR, **app}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": dict(app)}}]}],
        },
    }


def own(obj: JSON, namespace: str, sparkop_labels: Mapping[str, str], owner: JSON) -> None:
    """Make ``obj`` one of the incarnation's objects: sparkop's labels, the SparkDriver as its controller."""
    meta = obj["metadata"]
    meta["namespace"] = namespace
    meta["labels"] = {**(meta.get("labels") or {}), **sparkop_labels}
    meta["ownerReferences"] = [dict(owner)]


def failures_bounded(sub: Submission, options: RenderOptions) -> bool:
    """Whether the run bounds its failing executors (spec.executorFailures, else the operator's default)."""
    asked = sub.source.spec.executorFailures if sub.source is not None else None
    return asked is not None or bool(options.max_executor_failures)


def node_loss_seconds(sub: Submission, options: RenderOptions) -> int | None:
    asked = sub.source.spec.nodeLossTolerationSeconds if sub.source is not None else None
    return asked if asked is not None else options.node_loss_toleration_seconds
