"""The Spark UI of a running app: a Service selecting the current driver pod, and an Ingress when
the operator has an URL format. Pure builders; the state machine decides when they are needed
(``apps_controller.ui_steps``).

``spec.sparkUIOptions`` takes kubeflow v1beta2's fields and meanings: servicePort (default: the UI
port, ``spark.ui.port`` or 4040), servicePortName, serviceType, serviceAnnotations, serviceLabels,
ingressAnnotations, ingressTLS. ``--ingress-url-format`` substitutes ``{{$appName}}`` and
``{{$appNamespace}}``; a format with a path makes a path-based rule the way kubeflow does (a
capture-group path and nginx's rewrite-target, and ``spark.ui.proxyBase`` on the driver).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from sparkop.api import routes
from sparkop.api.models import ApplicationState
from sparkop.apps_controller.observed import APP_KIND, AppView, OwnedObject, UIConfig
from sparkop.core import owners
from sparkop.core.jsontypes import JSON
from sparkop.domain import labels, naming

DEFAULT_UI_PORT: Final = 4040
UI_PORT_NAME: Final = "spark-driver-ui-port"
COMPONENT_UI: Final = "ui"
COMPONENT_DRIVER_INGRESS: Final = "driver-ingress"  # spec.driverIngressOptions' Services and Ingresses
# The Spark UI's and driverIngressOptions' Services and Ingresses, selected on the server by the
# labels put on them here.
UI_SELECTOR: Final = (
    f"{labels.MANAGED_BY}={labels.MANAGER},{labels.COMPONENT} in ({COMPONENT_UI},{COMPONENT_DRIVER_INGRESS})"
)
DRIVER_INGRESS_PORT_NAME: Final = "driver-ing-{port}"
SERVICE_TYPES: Final = ("ClusterIP", "NodePort", "LoadBalancer")
# What kubeflow sets on a path-based Ingress (ingress-nginx; other controllers take their own
# annotation through sparkUIOptions.ingressAnnotations, which wins).
REWRITE_TARGET: Final = "nginx.ingress.kubernetes.io/rewrite-target"
PROXY_BASE: Final = "spark.ui.proxyBase"
PROXY_REDIRECT_URI: Final = "spark.ui.proxyRedirectUri"

# Why a UI object is created or deleted (the decision line's reason).
UI_ENSURED: Final = "SparkUI"
UI_REMOVED: Final = "SparkUIRemoved"
UI_RESTORED: Final = "SparkUIRestored"
DRIVER_INGRESS_ENSURED: Final = "DriverIngress"
# While a run is active its UI is served; in any other state the UI objects go.
ACTIVE_STATES: Final = frozenset({ApplicationState.SUBMITTED, ApplicationState.RUNNING, ApplicationState.UNKNOWN})

_APP_NAME = re.compile(r"{{\s*\$appName\s*}}")
_APP_NAMESPACE = re.compile(r"{{\s*\$appNamespace\s*}}")
_APP_ID = re.compile(r"{{\s*\$appId\s*}}")


def _port(value: Any) -> int | None:
    try:
        port = int(value)
    except (TypeError, ValueError):
        return None
    return port if 1 <= port <= 65535 else None


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


@dataclass(frozen=True, kw_only=True)
class Exposure:
    """How a port of the driver is exposed: kubeflow's serviceType, serviceLabels, serviceAnnotations,
    ingressAnnotations and ingressTLS, the same in spec.sparkUIOptions and each driverIngressOptions."""

    service_type: str = "ClusterIP"
    service_labels: Mapping[str, str] = field(default_factory=dict)
    service_annotations: Mapping[str, str] = field(default_factory=dict)
    ingress_annotations: Mapping[str, str] = field(default_factory=dict)
    ingress_tls: tuple[JSON, ...] = ()

    @staticmethod
    def fields(options: Mapping[str, Any]) -> dict[str, Any]:
        """The exposure fields of ``options`` (kubeflow's names), read leniently."""
        kind, tls = options.get("serviceType"), options.get("ingressTLS")
        return {
            "service_type": kind if kind in SERVICE_TYPES else "ClusterIP",
            "service_labels": _strings(options.get("serviceLabels")),
            "service_annotations": _strings(options.get("serviceAnnotations")),
            "ingress_annotations": _strings(options.get("ingressAnnotations")),
            "ingress_tls": tuple(dict(t) for t in tls if isinstance(t, Mapping)) if isinstance(tls, list) else (),
        }


@dataclass(frozen=True, kw_only=True)
class UIOptions(Exposure):
    """An app's spec.sparkUIOptions, read leniently, with kubeflow's defaults."""

    target_port: int = DEFAULT_UI_PORT  # spark.ui.port: where the driver serves its UI
    service_port: int = DEFAULT_UI_PORT
    port_name: str = UI_PORT_NAME

    @classmethod
    def of(cls, app: AppView) -> UIOptions:
        opts = app.ui_options
        target = _port(app.spark_conf.get("spark.ui.port")) or DEFAULT_UI_PORT
        return cls(
            target_port=target,
            service_port=_port(opts.get("servicePort")) or target,
            port_name=str(opts.get("servicePortName") or UI_PORT_NAME),
            **Exposure.fields(opts),
        )


@dataclass(frozen=True)
class IngressURL:
    host: str  # "" for every host
    path: str  # "" for the host's root, else e.g. "/ns/app" (no trailing slash)
    address: str  # what status.driverInfo.webUIIngressAddress shows

    @property
    def rule_path(self) -> str:
        """kubeflow's path: the prefix plus capture groups that rewrite-target ``/$2`` strips."""
        return f"{self.path}(/|$)(.*)" if self.path else "/"

    @property
    def path_type(self) -> str:
        return "ImplementationSpecific" if self.path else "Prefix"


def owner_reference(app: AppView) -> JSON:
    owner: JSON = {
        "apiVersion": app.api_version,
        "kind": APP_KIND,
        "metadata": {"name": app.name, "uid": app.uid},
    }
    return owners.owner_reference(owner)


def _metadata(
    app: AppView,
    name: str,
    extra_labels: Mapping[str, str],
    annotations: Mapping[str, str],
    component: str = COMPONENT_UI,
) -> JSON:
    meta: JSON = {
        "name": name,
        "namespace": app.namespace,
        "labels": {
            **extra_labels,
            labels.MANAGED_BY: labels.MANAGER,
            labels.APP: naming.label_value(app.name),
            labels.COMPONENT: component,
        },
        "ownerReferences": [owner_reference(app)],
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def own_service_wanted(app: AppView, config: UIConfig) -> bool:
    """Whether the app's Spark UI gets a Service of its own, ``<app>-ui-svc``: only when something is
    to reach the UI through it, an Ingress (``--ingress-url-format``) or anything spec.sparkUIOptions
    asks of it (a NodePort or LoadBalancer, a port, a port name, labels, annotations). Otherwise the
    driver's own Service, which every run has and which serves the UI port (as spark-submit makes it),
    is where the UI is: status.driverInfo names it, and no object is written for the UI at all."""
    return config.service and (bool(config.ingress_url_format) or bool(app.ui_options))


def driver_service_ui(web_ui_address: str | None) -> tuple[str, int] | None:
    """(Service name, port) of a SparkDriver's ``webUIAddress`` (``<service>.<namespace>.svc:<port>``)."""
    if not web_ui_address or ":" not in web_ui_address:
        return None
    host, _, port = web_ui_address.rpartition(":")
    number = _port(port)
    return (host.split(".", 1)[0], number) if number is not None and host else None


def service_address(app: AppView, opts: UIOptions) -> str:
    return f"{naming.ui_service_name(app.name)}.{app.namespace}.svc:{opts.service_port}"


def build_service(app: AppView, spark_application_id: str, opts: UIOptions) -> JSON:
    """Service ``<app>-ui-svc`` → the UI port of the driver pod running ``spark_application_id``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(app, naming.ui_service_name(app.name), opts.service_labels, opts.service_annotations),
        "spec": {
            "type": opts.service_type,
            "selector": {labels.SPARK_APP_SELECTOR: spark_application_id, labels.SPARK_ROLE: labels.ROLE_DRIVER},
            "ports": [
                {
                    "name": opts.port_name,
                    "port": opts.service_port,
                    "targetPort": opts.target_port,
                    "protocol": "TCP",
                }
            ],
        },
    }


def ingress_url(url_format: str, app: AppView, tls: bool = False, app_id: str = "") -> IngressURL:
    """Kubeflow's --ingress-url-format: ``{{$appName}}``, ``{{$appNamespace}}`` and (driverIngressOptions)
    ``{{$appId}}`` are substituted; the result is ``[scheme://]host[/path]``. Without a scheme: http,
    or https when the Ingress has TLS settings."""
    text = _APP_ID.sub(app_id, _APP_NAMESPACE.sub(app.namespace, _APP_NAME.sub(app.name, url_format)))
    if "://" not in text:
        text = f"{'https' if tls else 'http'}://{text}"
    parts = urlsplit(text)
    path = parts.path.rstrip("/")
    return IngressURL(host=parts.hostname or "", path=path, address=f"{parts.scheme}://{parts.netloc}{path}")


def ui_url(app: AppView, config: UIConfig | None) -> IngressURL | None:
    """The app's Spark UI Ingress URL, when the operator makes Ingresses."""
    if config is None or not config.service or not config.ingress_url_format:
        return None
    return ingress_url(config.ingress_url_format, app, tls=bool(UIOptions.of(app).ingress_tls))


def route_url(app: AppView) -> IngressURL | None:
    """Where spec.sparkUIOptions.httpRoute puts the app's Spark UI (None: it asks for no route)."""
    route = app.ui_options.get("httpRoute")
    if not isinstance(route, Mapping):
        return None
    hosts = [h for h in route.get("hostnames") or () if isinstance(h, str)]
    return IngressURL(host=hosts[0] if hosts else "", path=routes.prefix(route), address=routes.url(route) or "")


def build_route(app: AppView, opts: UIOptions) -> JSON | None:
    """HTTPRoute ``<app>-ui-route`` (spec.sparkUIOptions.httpRoute) to the app's UI Service."""
    route = app.ui_options.get("httpRoute")
    if not isinstance(route, Mapping):
        return None
    meta = _metadata(app, naming.ui_route_name(app.name), {}, {})
    return routes.http_route(meta, route, naming.ui_service_name(app.name), opts.service_port)


def driver_conf(url: IngressURL | None) -> dict[str, str]:
    """Spark properties a path-based Ingress needs on the driver (kubeflow's configWebUI): the UI
    writes its links under the path the Ingress strips."""
    if url is None or not url.path:
        return {}
    return {PROXY_BASE: url.path, PROXY_REDIRECT_URI: "/"}


def build_ingress(app: AppView, url: IngressURL, opts: UIOptions, ingress_class_name: str | None = None) -> JSON:
    return _ingress(
        app,
        naming.ui_ingress_name(app.name),
        COMPONENT_UI,
        url,
        naming.ui_service_name(app.name),
        opts.service_port,
        opts.ingress_annotations,
        opts.ingress_tls,
        ingress_class_name,
    )


def _ingress(
    app: AppView,
    name: str,
    component: str,
    url: IngressURL,
    service: str,
    port: int,
    ingress_annotations: Mapping[str, str],
    tls: tuple[JSON, ...],
    ingress_class_name: str | None,
) -> JSON:
    annotations = dict(ingress_annotations)
    if url.path:
        annotations.setdefault(REWRITE_TARGET, "/$2")
    rule: JSON = {
        "http": {
            "paths": [
                {
                    "path": url.rule_path,
                    "pathType": url.path_type,
                    "backend": {"service": {"name": service, "port": {"number": port}}},
                }
            ]
        },
    }
    if url.host:
        rule = {"host": url.host, **rule}
    spec: JSON = {"rules": [rule]}
    if tls:
        spec["tls"] = [dict(t) for t in tls]
    if ingress_class_name:
        spec["ingressClassName"] = ingress_class_name
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": _metadata(app, name, {}, annotations, component),
        "spec": spec,
    }


@dataclass(frozen=True, kw_only=True)
class DriverIngress(Exposure):
    """One entry of an app's spec.driverIngressOptions, read leniently, with kubeflow's defaults."""

    port: int
    url_format: str
    port_name: str

    @classmethod
    def all_of(cls, app: AppView) -> list[DriverIngress]:
        entries = app.spec.get("driverIngressOptions")
        found: list[DriverIngress] = []
        for entry in entries if isinstance(entries, list) else ():
            port = _port(entry.get("servicePort")) if isinstance(entry, Mapping) else None
            if port is None or not entry.get("ingressURLFormat"):
                continue  # the CRD requires both; a hand-stored object without them gets nothing
            found.append(
                cls(
                    port=port,
                    url_format=str(entry["ingressURLFormat"]),
                    port_name=str(entry.get("servicePortName") or DRIVER_INGRESS_PORT_NAME.format(port=port)),
                    **Exposure.fields(entry),
                )
            )
        return found

    def service_name(self, app: AppView) -> str:
        return naming.driver_ingress_service_name(app.name, self.port)

    def ingress_name(self, app: AppView) -> str:
        return naming.driver_ingress_name(app.name, self.port)

    def url(self, app: AppView, spark_application_id: str) -> IngressURL:
        return ingress_url(self.url_format, app, tls=bool(self.ingress_tls), app_id=spark_application_id)


def build_driver_ingress_service(app: AppView, spark_application_id: str, entry: DriverIngress) -> JSON:
    """Service ``<app>-driver-<port>`` → that port of the driver pod running ``spark_application_id``
    (kubeflow's createDriverIngressService: port and targetPort are the servicePort)."""
    meta = _metadata(
        app, entry.service_name(app), entry.service_labels, entry.service_annotations, COMPONENT_DRIVER_INGRESS
    )
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": entry.service_type,
            "selector": {labels.SPARK_APP_SELECTOR: spark_application_id, labels.SPARK_ROLE: labels.ROLE_DRIVER},
            "ports": [{"name": entry.port_name, "port": entry.port, "targetPort": entry.port, "protocol": "TCP"}],
        },
    }


def build_driver_ingress(
    app: AppView, spark_application_id: str, entry: DriverIngress, ingress_class_name: str | None = None
) -> JSON:
    """Ingress ``<app>-ing-<port>`` → the entry's Service (kubeflow's createDriverIngress)."""
    return _ingress(
        app,
        entry.ingress_name(app),
        COMPONENT_DRIVER_INGRESS,
        entry.url(app, spark_application_id),
        entry.service_name(app),
        entry.port,
        entry.ingress_annotations,
        entry.ingress_tls,
        ingress_class_name,
    )


def restore_patch(current: OwnedObject, wanted: JSON) -> JSON | None:
    """The merge patch that puts back what sparkop sets on a UI object (``wanted``, a builder's
    manifest), or None when ``current`` already has it. Only the fields sparkop sets are compared,
    and as a subset: what the API server defaults (clusterIP, sessionAffinity, ipFamilies, a
    port's nodePort, ...) or others add (labels, annotations) is left alone. A Service's selector
    is sparkop's whole: a key added to it would select no driver, so it is removed."""
    meta = wanted["metadata"]
    want_labels = dict(meta.get("labels") or {})
    want_annotations = dict(meta.get("annotations") or {})
    want_spec: JSON = dict(wanted.get("spec") or {})
    selector = want_spec.get("selector")
    selector_edited = isinstance(selector, Mapping) and dict(current.spec.get("selector") or {}) != selector
    if (
        _covers(current.labels, want_labels)
        and _covers(current.annotations, want_annotations)
        and _covers(current.spec, want_spec)
        and not selector_edited
    ):
        return None
    if isinstance(selector, Mapping):
        added = {k: None for k in current.spec.get("selector") or {} if k not in selector}
        want_spec["selector"] = {**added, **selector}
    patch_meta: JSON = {"labels": want_labels}
    if want_annotations:
        patch_meta["annotations"] = want_annotations
    return {"metadata": patch_meta, "spec": want_spec}


def _covers(have: Any, want: Any) -> bool:
    """Whether ``have`` holds everything of ``want``: a mapping's keys (others may be there), a
    list item by item (the same length), anything else equal."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(_covers(have.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(map(_covers, have, want))
    return bool(have == want)
