"""The Spark UI of a running app: a Service selecting the current driver pod, and an Ingress when
the operator has an URL format. Pure builders; the state machine decides when they are needed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from apps_controller.model import JSON, AppView
from sparkop import labels, naming

UI_PORT: Final = 4040
UI_PORT_NAME: Final = "spark-driver-ui-port"
COMPONENT_UI: Final = "ui"


@dataclass(frozen=True)
class IngressURL:
    host: str
    path: str
    address: str  # what status.driverInfo.webUIIngressAddress shows


def owner_reference(app: AppView) -> JSON:
    return {
        "apiVersion": labels.API_VERSION,
        "kind": "SparkApplication",
        "name": app.name,
        "uid": app.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(app: AppView, name: str) -> JSON:
    return {
        "name": name,
        "namespace": app.namespace,
        "labels": {
            labels.MANAGED_BY: labels.MANAGER,
            labels.APP: naming.label_value(app.name),
            labels.COMPONENT: COMPONENT_UI,
        },
        "ownerReferences": [owner_reference(app)],
    }


def service_address(app: AppView) -> str:
    return f"{naming.ui_service_name(app.name)}.{app.namespace}.svc:{UI_PORT}"


def build_service(app: AppView, spark_application_id: str) -> JSON:
    """ClusterIP Service ``<app>-ui-svc`` → port 4040 of the driver pod running ``spark_application_id``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(app, naming.ui_service_name(app.name)),
        "spec": {
            "type": "ClusterIP",
            "selector": {labels.SPARK_APP_SELECTOR: spark_application_id, labels.SPARK_ROLE: labels.ROLE_DRIVER},
            "ports": [{"name": UI_PORT_NAME, "port": UI_PORT, "targetPort": UI_PORT, "protocol": "TCP"}],
        },
    }


def ingress_url(url_format: str, app: AppView) -> IngressURL:
    """Kubeflow's --ingress-url-format: ``{{$appName}}`` and ``{{$appNamespace}}`` are substituted;
    the result is ``host[/path]``, with or without a scheme."""
    text = url_format.replace("{{$appName}}", app.name).replace("{{$appNamespace}}", app.namespace)
    parts = urlsplit(text if "://" in text else f"http://{text}")
    path = parts.path.rstrip("/") or "/"
    return IngressURL(host=parts.hostname or "", path=path, address=f"{parts.scheme}://{parts.netloc}{parts.path}")


def build_ingress(app: AppView, url: IngressURL, ingress_class_name: str | None = None) -> JSON:
    spec: JSON = {
        "rules": [
            {
                "host": url.host,
                "http": {
                    "paths": [
                        {
                            "path": url.path,
                            "pathType": "Prefix",
                            "backend": {
                                "service": {
                                    "name": naming.ui_service_name(app.name),
                                    "port": {"number": UI_PORT},
                                }
                            },
                        }
                    ]
                },
            }
        ]
    }
    if ingress_class_name:
        spec["ingressClassName"] = ingress_class_name
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": _metadata(app, naming.ui_ingress_name(app.name)),
        "spec": spec,
    }
