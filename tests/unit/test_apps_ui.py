"""The Spark UI Service and Ingress: spec.sparkUIOptions (kubeflow v1beta2 fields) and the
--ingress-url-format substitutions, host- and path-based, through the state machine."""

from __future__ import annotations

from typing import Any

import pytest

from sparkop.api.models import DriverPhase, SparkApplicationStatus, SparkDriver
from sparkop.apps_controller import events, ui
from sparkop.apps_controller.builders import build_driver
from sparkop.apps_controller.observed import AppView, UIConfig
from sparkop.domain import labels
from tests.support.simulation import SimCluster
from tests.support.specs import PYTHON_PI_SPEC

SPEC = PYTHON_PI_SPEC
OPTIONS: dict[str, Any] = {
    "servicePort": 80,
    "servicePortName": "http",
    "serviceType": "NodePort",
    "serviceAnnotations": {"cloud.example.com/lb": "internal"},
    "serviceLabels": {"team": "data", labels.APP: "not-ours"},
    "ingressAnnotations": {"kubernetes.io/ingress.class": "nginx"},
    "ingressTLS": [{"hosts": ["pi.ns.example.com"], "secretName": "pi-tls"}],
}


def app(**spec: Any) -> AppView:
    return AppView(namespace="ns", name="pi", uid="uid-1", generation=1, spec={**SPEC, **spec})


def running(url_format: str | None, **spec: Any) -> SimCluster:
    c = SimCluster(spec={**SPEC, **spec}, name="pi", ui=UIConfig(ingress_url_format=url_format))
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    return c


def test_defaults_are_kubeflows() -> None:
    svc = ui.build_service(app(), "spark-1", ui.UIOptions.of(app()))
    assert svc["spec"]["type"] == "ClusterIP"
    port = {"name": "spark-driver-ui-port", "port": 4040, "targetPort": 4040, "protocol": "TCP"}
    assert svc["spec"]["ports"] == [port]
    assert "annotations" not in svc["metadata"]


def test_the_ui_port_follows_spark_ui_port_unless_service_port_is_set() -> None:
    custom = app(sparkConf={"spark.ui.port": "4041"})
    port = ui.build_service(custom, "spark-1", ui.UIOptions.of(custom))["spec"]["ports"][0]
    assert (port["port"], port["targetPort"]) == (4041, 4041)
    both = app(sparkConf={"spark.ui.port": "4041"}, sparkUIOptions={"servicePort": 80})
    port = ui.build_service(both, "spark-1", ui.UIOptions.of(both))["spec"]["ports"][0]
    assert (port["port"], port["targetPort"]) == (80, 4041)


def test_service_options_are_honoured() -> None:
    c = running(None, sparkUIOptions=OPTIONS)
    svc = c.ui_objects[("Service", "pi-ui-svc")]
    assert svc["spec"]["type"] == "NodePort"
    assert svc["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 4040, "protocol": "TCP"}]
    assert svc["metadata"]["annotations"] == {"cloud.example.com/lb": "internal"}
    assert svc["metadata"]["labels"]["team"] == "data"
    assert svc["metadata"]["labels"][labels.APP] == "pi"  # ours win: the label says whose it is
    info = c.status["driverInfo"]
    assert (info["webUIPort"], info["webUIAddress"]) == (80, "pi-ui-svc.ns.svc:80")


def test_host_based_ingress_with_tls_and_annotations() -> None:
    c = running("{{$appName}}.{{$appNamespace}}.example.com", sparkUIOptions=OPTIONS)
    ingress = c.ui_objects[("Ingress", "pi-ui-ingress")]
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "pi.ns.example.com"
    assert rule["http"]["paths"][0] == {
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": "pi-ui-svc", "port": {"number": 80}}},
    }
    assert ingress["spec"]["tls"] == OPTIONS["ingressTLS"]
    assert ingress["metadata"]["annotations"] == {"kubernetes.io/ingress.class": "nginx"}
    assert c.status["driverInfo"]["webUIIngressAddress"] == "https://pi.ns.example.com"  # TLS: https
    assert "spark.ui.proxyBase" not in c.drivers["pi-1"].spec.get("sparkConf", {})
    SparkApplicationStatus.model_validate(c.status)


@pytest.mark.parametrize(
    "url_format",
    ["example.com/{{$appNamespace}}/{{$appName}}", "http://example.com/{{ $appNamespace }}/{{ $appName }}/"],
)
def test_a_url_with_a_path_gives_a_path_based_rule(url_format: str) -> None:
    c = running(url_format)
    ingress = c.ui_objects[("Ingress", "pi-ui-ingress")]
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "example.com"
    path = rule["http"]["paths"][0]
    assert (path["path"], path["pathType"]) == ("/ns/pi(/|$)(.*)", "ImplementationSpecific")
    assert ingress["metadata"]["annotations"] == {ui.REWRITE_TARGET: "/$2"}
    assert c.status["driverInfo"]["webUIIngressAddress"] == "http://example.com/ns/pi"
    # the driver writes its UI links under the path the Ingress strips (kubeflow's configWebUI)
    conf = c.drivers["pi-1"].spec["sparkConf"]
    assert conf["spark.ui.proxyBase"] == "/ns/pi" and conf["spark.ui.proxyRedirectUri"] == "/"


def test_the_apps_own_proxy_settings_and_rewrite_annotation_win() -> None:
    own = app(
        sparkConf={"spark.ui.proxyBase": "/custom"},
        sparkUIOptions={"ingressAnnotations": {ui.REWRITE_TARGET: "/"}},
    )
    config = UIConfig(ingress_url_format="example.com/{{$appName}}")
    driver = build_driver(own, 1, config)
    assert driver["spec"]["sparkConf"] == {"spark.ui.proxyBase": "/custom", "spark.ui.proxyRedirectUri": "/"}
    SparkDriver.model_validate(driver)
    url = ui.ingress_url("example.com/{{$appName}}", own)
    ingress = ui.build_ingress(own, url, ui.UIOptions.of(own))
    assert ingress["metadata"]["annotations"][ui.REWRITE_TARGET] == "/"


def test_a_url_without_a_host_routes_every_host() -> None:
    url = ui.ingress_url("/spark/{{$appNamespace}}/{{$appName}}", app())
    ingress = ui.build_ingress(app(), url, ui.UIOptions.of(app()))
    assert "host" not in ingress["spec"]["rules"][0]
    assert ingress["spec"]["rules"][0]["http"]["paths"][0]["path"] == "/spark/ns/pi(/|$)(.*)"


def test_a_refused_ui_object_is_reported_once_and_the_app_carries_on() -> None:
    c = SimCluster(spec={**SPEC, "sparkUIOptions": {"servicePortName": "Not_A_Name"}}, name="pi")
    c.refuse_ui = True
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    status = c.app_status
    assert c.state == "RUNNING" and not c.ui_objects
    assert status.lastError is not None and status.lastError.reason == events.Reason.UI_REFUSED
    assert status.lastError.message is not None and "Service pi-ui-svc" in status.lastError.message
    assert "webUIServiceName" not in c.status.get("driverInfo", {})
    assert [e.reason for e in c.events].count(events.Reason.UI_REFUSED) == 1
    writes = c.writes
    c.run_until_quiet()
    assert c.writes == writes
    c.set_phase("pi-1", DriverPhase.SUCCEEDED, "Completed")
    c.run_until_quiet()
    assert c.state == "COMPLETED"
