"""What a SparkConnect's servers and Service are made of: pure builders, shared by the decision and
the tests.

A server is a SparkDriver ``<name>-server-<run>`` (``-kf`` after it for kubeflow's group) running
Spark's ``SparkConnectServer`` as a JVM application with no primary resource (spark-submit's ``--class
... spark-internal``), so the driver controller renders its pod as spark-submit would and owns its
executors; a kubeflow SparkConnect's server pod is ``<name>-server``, as kubeflow names it
(:func:`one_server_pod_name`). What makes it a server:

* ``spark.connect.grpc.binding.port`` set (default 15002) and that port declared on the Spark
  container (by Spark itself from 4.1, by the SparkDriver's ``driver.ports`` before), with a TCP
  readiness probe and a startup probe on it (as kubeflow's operator sets, unless the user's template
  sets its own): Ready means the gRPC port accepts connections;
* the driver's headless Service publishing not-ready addresses (Spark 4.3's property, which sparkop
  honours on every line): the executors must reach a server that is not Ready yet;
* the ``sparkop.io/connect`` label on its pods, which the stable Service selects along with the
  SparkDriver's own ``sparkop.io/driver`` label: the Service follows one server at a time;
* as many driver-pod replacements as a long-lived process needs: a lost server pod comes back inside
  its run at the same Service, and a server that ends is the connect controller's to restart.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from sparkop.api import connect, routes, spark_lines
from sparkop.connect_controller.observed import ConnectView
from sparkop.core.jsontypes import JSON
from sparkop.core.owners import owner_reference
from sparkop.domain import labels, naming

DRIVER_KIND: Final = "SparkDriver"
SPARK_DRIVER_CONTAINER: Final = "spark-kubernetes-driver"
SPARK_EXECUTOR_CONTAINER: Final = "spark-kubernetes-executor"
MAX_POD_REPLACEMENTS: Final = 100
H2C: Final = "kubernetes.io/h2c"
PUBLISH_NOT_READY: Final = "spark.kubernetes.driver.service.publishNotReadyAddresses"
# A JVM and its session state take a while to come up on a small node: 5 minutes before the startup
# probe gives up, then readiness every 5 s.
STARTUP_PROBE: Final = {"periodSeconds": 5, "timeoutSeconds": 1, "failureThreshold": 60}
READINESS_PROBE: Final = {"periodSeconds": 5, "timeoutSeconds": 1, "failureThreshold": 3}
# The spec fields a SparkDriver runs as they are.
_RUN_FIELDS: Final = (
    "sparkVersion",
    "image",
    "imagePullPolicy",
    "imagePullSecrets",
    "hadoopConf",
    "sparkConfigMap",
    "hadoopConfigMap",
    "volumes",
    "deps",
    "dynamicAllocation",
    "nodeLossTolerationSeconds",
    "timeouts",
    "executorFailures",
)


def port(c: ConnectView) -> int:
    return connect.port_of(c.spec.get("sparkConf")) or connect.DEFAULT_PORT


def service_name(c: ConnectView) -> str:
    meta = ((c.spec.get("server") or {}).get("service") or {}).get("metadata") or {}
    name = meta.get("name")
    return name if isinstance(name, str) and name else naming.connect_service_name(c.name)


def endpoint(c: ConnectView) -> str:
    return f"sc://{service_name(c)}.{c.namespace}.svc:{port(c)}"


def selector(c: ConnectView, driver: str) -> dict[str, str]:
    """The Service's selector: the driver pod of one server (its SparkDriver's pods, of whatever
    incarnation: one at a time)."""
    return {
        labels.CONNECT: naming.label_value(c.name),
        labels.DRIVER: naming.label_value(driver),
        labels.SPARK_ROLE: labels.ROLE_DRIVER,
    }


def build_service(c: ConnectView, body: JSON, driver: str) -> JSON:
    """The stable Service, selecting ``driver``'s pod: the gRPC port and the Spark UI."""
    user = (c.spec.get("server") or {}).get("service") or {}
    meta = user.get("metadata") or {}
    spec = {k: v for k, v in (user.get("spec") or {}).items() if v is not None}
    grpc = port(c)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(c),
            "namespace": c.namespace,
            "labels": {
                **(meta.get("labels") or {}),
                labels.MANAGED_BY: labels.MANAGER,
                labels.CONNECT: naming.label_value(c.name),
            },
            **({"annotations": dict(meta["annotations"])} if meta.get("annotations") else {}),
            "ownerReferences": [owner_reference(body)],
        },
        "spec": {
            "type": "ClusterIP",
            **spec,
            "selector": selector(c, driver),
            # gRPC in clear text is HTTP/2 without TLS: Kubernetes' own name for that protocol, which the
            # Gateway implementations read to reach a GRPCRoute's backend (Traefik refuses any other).
            "ports": [
                {"name": connect.PORT_NAME, "port": grpc, "targetPort": grpc, "protocol": "TCP", "appProtocol": H2C},
                {"name": "spark-ui", "port": connect.UI_PORT, "targetPort": connect.UI_PORT, "protocol": "TCP"},
            ],
        },
    }


def one_server_pod_name(c: ConnectView) -> bool:
    """Whether every server run's pod has the one name ``<name>-server``: kubeflow's SparkConnects,
    whose clients and users find the server by that pod name. A new run's pod then waits for the
    last one to be gone, so a spec change replaces the server (stop, then start); sparkop's own give
    each run's pod its own name, so the new server rolls in beside the old one (connect_controller.decide)."""
    return c.group != labels.GROUP


def build_server(c: ConnectView, body: JSON, run: int) -> JSON:
    """SparkDriver ``<name>-server-<run>``, controller-owned by the SparkConnect ``body``."""
    spec = c.spec
    conf = dict(spec.get("sparkConf") or {})
    conf.setdefault(connect.PORT_CONF, str(port(c)))
    # The executors reach the driver through its headless Service, whose DNS name lists only Ready pods
    # by default: a server is Ready once its gRPC port listens, after its SparkContext waited for
    # executors (spark.scheduler.minRegisteredResourcesRatio), which could never resolve it.
    conf.setdefault(PUBLISH_NOT_READY, "true")
    driver = _role(spec, "server", SPARK_DRIVER_CONTAINER)
    driver.pop("service", None)
    driver["labels"] = {**(driver.get("labels") or {}), labels.CONNECT: naming.label_value(c.name)}
    if one_server_pod_name(c):
        driver["podName"] = naming.connect_server_pod_name(c.name)
    grpc = port(c)
    ports = list(driver.get("ports") or ())
    if not _declares_connect_port(spec.get("sparkVersion")) and not any(p.get("containerPort") == grpc for p in ports):
        ports.append({"name": connect.PORT_NAME, "protocol": "TCP", "containerPort": grpc})
    if ports:
        driver["ports"] = ports
    driver["template"] = _with_probes(driver.get("template"), grpc)
    executor = _role(spec, "executor", SPARK_EXECUTOR_CONTAINER)
    run_spec: JSON = {
        **{k: copy.deepcopy(spec[k]) for k in _RUN_FIELDS if spec.get(k) is not None},
        "type": "Scala",
        "mainClass": connect.SERVER_CLASS,
        "sparkConf": conf,
        "driver": driver,
        "executor": executor,
        "appName": c.name,
        "attempt": run,
        "maxDriverPodReplacements": MAX_POD_REPLACEMENTS,
        # A server never ends by itself: the operator's run deadline is none of its business. Its start
        # is bounded by spec.timeouts (driverReadySeconds: its gRPC port answering).
        "activeDeadlineSeconds": 0,
    }
    return {
        "apiVersion": labels.API_VERSION,
        "kind": DRIVER_KIND,
        "metadata": {
            "name": naming.connect_server_name(c.name, run, c.group),
            "namespace": c.namespace,
            "labels": {
                labels.MANAGED_BY: labels.MANAGER,
                labels.CONNECT: naming.label_value(c.name),
                labels.RUN: str(run),
            },
            "annotations": {labels.SPEC_HASH: c.spec_hash},
            "ownerReferences": [owner_reference(body)],
        },
        "spec": run_spec,
    }


def _declares_connect_port(version: Any) -> bool:
    """Whether spark-submit of the spec's line declares the Connect port on the driver itself (4.1+)."""
    try:
        return spark_lines.release(version if isinstance(version, str) else None).has(spark_lines.Feature.CONNECT_PORT)
    except ValueError:
        return False


def _role(spec: Mapping[str, Any], role: str, container_name: str) -> JSON:
    """A role's pod spec with its image made explicit (spec.image, else its own, else its template's
    Spark container's) and the container-only securityContext fields kubeflow's sample writes at pod
    level moved onto the Spark container."""
    out: JSON = copy.deepcopy(dict(spec.get(role) or {}))
    template = out.get("template")
    if isinstance(template, dict):
        out["template"] = _container_security_moved(template, container_name)
    if not spec.get("image") and not out.get("image"):
        image = _template_image(out.get("template"), container_name)
        if image:
            out["image"] = image
    return out


def _spark_container(template: Any, name: str) -> JSON | None:
    containers = ((template or {}).get("spec") or {}).get("containers") or []
    containers = [c for c in containers if isinstance(c, dict)]
    return next((c for c in containers if c.get("name") == name), containers[0] if containers else None)


def _template_image(template: Any, name: str) -> str | None:
    container = _spark_container(template, name)
    image = (container or {}).get("image")
    return image if isinstance(image, str) and image else None


def _container_security_moved(template: JSON, name: str) -> JSON:
    pod_spec = template.get("spec") or {}
    pod_security = pod_spec.get("securityContext") or {}
    moved = {k: pod_security.pop(k) for k in connect.CONTAINER_SECURITY_AT_POD_LEVEL if k in pod_security}
    if not moved:
        return template
    if not pod_security:
        pod_spec.pop("securityContext", None)
    container = _spark_container(template, name)
    if container is None:
        container = {"name": name}
        pod_spec.setdefault("containers", []).append(container)
    security = container.setdefault("securityContext", {})
    for key, value in moved.items():
        security.setdefault(key, value)
    return template


def _with_probes(template: Any, grpc: int) -> JSON:
    """The server's pod template with the startup and readiness probes on the gRPC port, unless the
    Spark container has its own."""
    out: JSON = copy.deepcopy(template) if isinstance(template, dict) else {}
    container = _spark_container(out, SPARK_DRIVER_CONTAINER)
    if container is None:
        container = {"name": SPARK_DRIVER_CONTAINER}
        out.setdefault("spec", {}).setdefault("containers", []).append(container)
    probe = {"tcpSocket": {"port": grpc}}
    container.setdefault("startupProbe", {**probe, **STARTUP_PROBE})
    container.setdefault("readinessProbe", {**probe, **READINESS_PROBE})
    return out


def build_route(c: ConnectView, body: JSON) -> JSON | None:
    """GRPCRoute ``<name>-server-route`` (spec.grpcRoute) to the stable Service's gRPC port."""
    route = c.spec.get("grpcRoute")
    if not isinstance(route, Mapping):
        return None
    meta = {
        "name": naming.connect_route_name(c.name),
        "namespace": c.namespace,
        "labels": {labels.MANAGED_BY: labels.MANAGER, labels.CONNECT: naming.label_value(c.name)},
        "ownerReferences": [owner_reference(body)],
    }
    return routes.grpc_route(meta, route, service_name(c), port(c))
