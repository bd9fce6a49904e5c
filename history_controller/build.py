"""What a SparkHistoryServer is made of: pure builders, shared by the decision and the tests.

* a **Deployment** of one pod running Spark's ``HistoryServer`` (``spark-class``, so any Spark image
  works whatever its entrypoint) with ``spark.history.fs.logDirectory`` set from ``logDirectory``; a
  claim is mounted at :data:`api.history.MOUNT_PATH` (the drivers that log there mount it at the same
  path) with ``fsGroup`` 185 (Spark's user) where the template sets none, and a directory inside it is
  created by the server before it starts. Its properties travel in an environment variable and are
  written to a file by the container's shell, so there is no ConfigMap to lose; a changed spec rolls
  the pod (Recreate: two servers never hold one claim);
* a **Service** to its UI port, and optionally an **Ingress** or a Gateway API **HTTPRoute** to the
  Service. Under a path prefix the server writes its links below it (``spark.ui.proxyBase``) and the
  route (a URLRewrite filter) or Ingress (ingress-nginx's rewrite-target) strips it.

Every object carries the hash of the manifest it was built from (``sparkop.io/spec-hash``): a pass
writes one only when it is missing or its hash differs, so an unchanged server costs no write.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shlex
from collections.abc import Mapping
from typing import Final

from sparkop.api import history, routes
from sparkop.core.jsontypes import JSON
from sparkop.core.owners import owner_reference
from sparkop.domain import labels, naming
from sparkop.history_controller.observed import ServerView

COMPONENT: Final = "history-server"
SELECTOR: Final = f"{labels.MANAGED_BY}={labels.MANAGER},{labels.COMPONENT}={COMPONENT}"
CONTAINER: Final = history.CONTAINER
SPARK_UID: Final = 185
PROPERTIES_ENV: Final = "SPARKOP_HISTORY_PROPERTIES"
PROXY_BASE: Final = "spark.ui.proxyBase"
REWRITE_TARGET: Final = "nginx.ingress.kubernetes.io/rewrite-target"
# The JVM and its listing of the log directory take a while on a small node: readiness every 5 s.
READINESS_PROBE: Final = {"periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 3}
STARTUP_PROBE: Final = {"periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 60}
MEMORY_OVERHEAD_MIB: Final = 384


def name(s: ServerView) -> str:
    return naming.history_name(s.name)


def selector(s: ServerView) -> dict[str, str]:
    return {labels.HISTORY_SERVER: naming.label_value(s.name), labels.COMPONENT: COMPONENT}


def _metadata(s: ServerView, body: JSON, extra_labels: Mapping[str, str] | None = None) -> JSON:
    return {
        "name": name(s),
        "namespace": s.namespace,
        "labels": {
            **(extra_labels or {}),
            labels.MANAGED_BY: labels.MANAGER,
            labels.HISTORY_SERVER: naming.label_value(s.name),
            labels.COMPONENT: COMPONENT,
        },
        "ownerReferences": [owner_reference(body)],
    }


def hashed(manifest: JSON) -> JSON:
    """``manifest`` with the hash of its content as an annotation (what a pass compares)."""
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    meta = manifest["metadata"]
    meta["annotations"] = {**(meta.get("annotations") or {}), labels.SPEC_HASH: digest}
    return manifest


def properties(s: ServerView) -> dict[str, str]:
    """The server's Spark properties: the spec's, then sparkop's (log directory, port, proxy base)."""
    spec = s.spec
    out = {str(k): str(v) for k, v in (spec.get("sparkConf") or {}).items()}
    out.update({f"spark.hadoop.{k}": str(v) for k, v in (spec.get("hadoopConf") or {}).items()})
    target = history.event_log(spec)
    if target is not None:
        out[history.LOG_DIR_CONF] = target.directory
    out[history.PORT_CONF] = str(history.ui_port(spec))
    base = history.proxy_base(spec)
    if base:
        out.setdefault(PROXY_BASE, base)
    return dict(sorted(out.items()))


def _properties_text(props: Mapping[str, str]) -> str:
    # Java properties: backslashes, and the separators a key may hold, escaped.
    def escape(text: str, key: bool) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n")
        return text.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ") if key else text

    return "".join(f"{escape(k, True)}={escape(v, False)}\n" for k, v in props.items())


def _command(s: ServerView) -> list[str]:
    claim = (s.spec.get("logDirectory") or {}).get("persistentVolumeClaim") or {}
    path = str(claim.get("path") or "").strip("/")
    steps = ['props="${TMPDIR:-/tmp}/spark-history.properties"', f'printf "%s" "${PROPERTIES_ENV}" > "$props"']
    if claim.get("claimName") and path:
        steps.append(f"mkdir -p {shlex.quote(f'{history.MOUNT_PATH}/{path}')}")
    steps.append(
        f'exec "${{SPARK_HOME:-/opt/spark}}/bin/spark-class" {history.SERVER_CLASS} --properties-file "$props"'
    )
    return ["/bin/sh", "-c", " && ".join(steps)]


def _memory_mib(text: str) -> int:
    """Spark's memory syntax (an integer with k, m, g, t; no unit: MiB) in MiB."""
    digits = "".join(ch for ch in text if ch.isdigit()) or "1024"
    unit = text[len(digits) :].lower().rstrip("b") or "m"
    factor = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}.get(unit, 1)
    return max(1, int(int(digits) * factor))


def _memory_request(heap: str) -> str:
    return f"{_memory_mib(heap) + MEMORY_OVERHEAD_MIB}Mi"


def deployment(s: ServerView, body: JSON) -> JSON:
    spec = s.spec
    template: JSON = copy.deepcopy(spec.get("template") or {})
    pod_meta: JSON = template.get("metadata") or {}
    pod: JSON = template.get("spec") or {}
    containers: list[JSON] = list(pod.get("containers") or [])
    index = next((i for i, c in enumerate(containers) if c.get("name") == CONTAINER), 0 if containers else None)
    container: JSON = dict(containers[index]) if index is not None else {}
    memory = str(spec.get("memory") or history.DEFAULT_MEMORY)
    port = history.ui_port(spec)
    container.update(
        {
            "name": CONTAINER,
            "image": spec["image"],
            "command": _command(s),
            "ports": [{"name": history.PORT_NAME, "containerPort": port, "protocol": "TCP"}],
            "env": [
                *(spec.get("env") or []),
                {"name": "SPARK_DAEMON_MEMORY", "value": memory},
                {"name": "SPARK_NO_DAEMONIZE", "value": "true"},
                {"name": PROPERTIES_ENV, "value": _properties_text(properties(s))},
            ],
            "resources": {"requests": {"memory": _memory_request(memory), **(spec.get("resources") or {})}},
        }
    )
    if spec.get("envFrom"):
        container["envFrom"] = list(spec["envFrom"])
    if spec.get("imagePullPolicy"):
        container["imagePullPolicy"] = spec["imagePullPolicy"]
    probe = {"httpGet": {"path": "/api/v1/version", "port": history.PORT_NAME}}
    container.setdefault("readinessProbe", {**probe, **READINESS_PROBE})
    container.setdefault("startupProbe", {**probe, **STARTUP_PROBE})
    volumes: list[JSON] = list(pod.get("volumes") or [])
    target = history.event_log(spec)
    if target is not None and target.claim is not None:
        volumes.append({"name": history.VOLUME_NAME, "persistentVolumeClaim": {"claimName": target.claim}})
        mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != history.VOLUME_NAME]
        container["volumeMounts"] = [*mounts, {"name": history.VOLUME_NAME, "mountPath": history.MOUNT_PATH}]
        security = dict(pod.get("securityContext") or {})
        if "fsGroup" not in security:
            security.update({"fsGroup": SPARK_UID, "fsGroupChangePolicy": "OnRootMismatch"})
        pod["securityContext"] = security
    if index is None:
        containers = [container]
    else:
        containers[index] = container
    pod.update({"containers": containers, "volumes": volumes} if volumes else {"containers": containers})
    if spec.get("imagePullSecrets"):
        pod["imagePullSecrets"] = [{"name": n} for n in spec["imagePullSecrets"]]
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **selector(s), labels.MANAGED_BY: labels.MANAGER}
    return hashed(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _metadata(s, body),
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": selector(s)},
                "template": {"metadata": pod_meta, "spec": pod},
            },
        }
    )


def service(s: ServerView, body: JSON) -> JSON:
    options = s.spec.get("service") or {}
    meta = _metadata(s, body, options.get("labels"))
    if options.get("annotations"):
        meta["annotations"] = dict(options["annotations"])
    return hashed(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {
                "type": options.get("type") or "ClusterIP",
                "selector": selector(s),
                "ports": [
                    {
                        "name": history.PORT_NAME,
                        "port": history.service_port(s.spec),
                        "targetPort": history.PORT_NAME,
                        "protocol": "TCP",
                    }
                ],
            },
        }
    )


def ingress(s: ServerView, body: JSON) -> JSON | None:
    options = s.spec.get("ingress")
    if not isinstance(options, Mapping):
        return None
    meta = _metadata(s, body)
    annotations = dict(options.get("annotations") or {})
    base = history.proxy_base(s.spec)
    if base:
        annotations.setdefault(REWRITE_TARGET, "/$2")
    if annotations:
        meta["annotations"] = annotations
    path = {
        "path": f"{base}(/|$)(.*)" if base else "/",
        "pathType": "ImplementationSpecific" if base else "Prefix",
        "backend": {"service": {"name": name(s), "port": {"number": history.service_port(s.spec)}}},
    }
    rule: JSON = {"http": {"paths": [path]}}
    if options.get("host"):
        rule = {"host": options["host"], **rule}
    spec: JSON = {"rules": [rule]}
    if options.get("ingressClassName"):
        spec["ingressClassName"] = options["ingressClassName"]
    if options.get("tls"):
        spec["tls"] = list(options["tls"])
    return hashed({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec})


def http_route(s: ServerView, body: JSON) -> JSON | None:
    route = s.spec.get("httpRoute")
    if not isinstance(route, Mapping):
        return None
    return hashed(routes.http_route(_metadata(s, body), route, name(s), history.service_port(s.spec)))
