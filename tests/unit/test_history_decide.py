"""The history controller's decision, pure: a server's Deployment and Service (and Ingress or HTTPRoute)
written only when missing or built from another spec, its state from its pod's readiness, a refused
object, and what its spec means for the apps that log there."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from sparkop.api import history, validate
from sparkop.api.history import HistoryState, SparkHistoryServerStatus
from sparkop.core.plan import Ensure, Refusal, refusal_key
from sparkop.core.specs import lenient
from sparkop.domain import labels
from sparkop.history_controller import build
from sparkop.history_controller.decide import decide
from sparkop.history_controller.events import Reason
from sparkop.history_controller.observed import ChildView, Observed, ServerView

NOW = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
UID = "5e4f0000-0000-4000-8000-000000000047"
SPEC: dict[str, Any] = {
    "image": "apache/spark:4.0.5",
    "logDirectory": {"persistentVolumeClaim": {"claimName": "spark-events", "path": "logs"}},
}


def body(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": labels.API_VERSION,
        "kind": history.KIND,
        "metadata": {"name": "hist", "namespace": "ns", "uid": UID, "generation": 1},
        "spec": copy.deepcopy(spec or SPEC),
        "status": status or {},
    }


def child(manifest: dict[str, Any], ready: int = 0) -> ChildView:
    return ChildView.from_body(
        {
            **manifest,
            "metadata": {**manifest["metadata"], "uid": "u-" + manifest["kind"]},
            "status": {"readyReplicas": ready},
        }
    )


def observed(
    obj: dict[str, Any], children: tuple[ChildView, ...] = (), refusals: dict[str, Refusal] | None = None
) -> Observed:
    status = lenient(SparkHistoryServerStatus, obj.get("status"))
    return Observed(ServerView.from_body(obj), children, status=status, body=obj, refusals=refusals or {})


def made(obj: dict[str, Any]) -> tuple[ChildView, ...]:
    view = ServerView.from_body(obj)
    return tuple(
        child(m, ready=1 if m["kind"] == "Deployment" else 0)
        for m in (build.deployment(view, obj), build.service(view, obj))
    )


def test_a_new_server_gets_its_deployment_and_service_and_is_provisioning() -> None:
    plan = decide(observed(body()), NOW)
    assert [(a.kind, a.name) for a in plan.before_status] == [
        ("Deployment", "hist-history"),
        ("Service", "hist-history"),
    ]
    deployment = plan.before_status[0].manifest  # type: ignore[union-attr]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert history.SERVER_CLASS in container["command"][-1]
    assert "mkdir -p /mnt/spark-history/logs" in container["command"][-1]
    props = next(e["value"] for e in container["env"] if e["name"] == build.PROPERTIES_ENV)
    assert "spark.history.fs.logDirectory=file\\://" not in props  # values are not escaped, keys are
    assert "spark.history.fs.logDirectory=file:///mnt/spark-history/logs\n" in props
    assert pod["volumes"] == [{"name": "spark-history", "persistentVolumeClaim": {"claimName": "spark-events"}}]
    assert pod["securityContext"]["fsGroup"] == build.SPARK_UID
    assert plan.status is not None and plan.status.state is HistoryState.PROVISIONING
    assert plan.status.url == "http://hist-history.ns.svc:18080"
    assert plan.status.eventLogDirectory == "file:///mnt/spark-history/logs"


def test_a_server_at_rest_writes_nothing_and_is_ready_once_its_pod_is() -> None:
    obj = body()
    plan = decide(observed(obj, made(obj)), NOW)
    assert plan.before_status == ()
    assert plan.status is not None and plan.status.state is HistoryState.READY
    assert [e.reason for e in plan.events] == [Reason.SERVER_READY]
    again = decide(observed(body(status=plan.status.to_json()), made(obj)), NOW)
    assert again.before_status == () and again.events == () and again.status == plan.status


def test_a_changed_spec_is_written_again_and_a_route_no_longer_asked_for_is_deleted() -> None:
    obj = body({**SPEC, "httpRoute": {"gateway": {"name": "gw", "namespace": "gateway"}, "hostnames": ["h.example"]}})
    view = ServerView.from_body(obj)
    route = build.http_route(view, obj)
    assert route is not None
    assert route["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw", "namespace": "gateway"}
    ]
    children = (*made(obj), child(route))
    assert decide(observed(obj, children), NOW).before_status == ()
    changed = body({**SPEC, "image": "apache/spark:4.3.0"})
    plan = decide(observed(changed, children), NOW)
    assert [type(a).__name__ + "/" + a.kind for a in plan.before_status] == ["Ensure/Deployment", "Delete/HTTPRoute"]
    assert plan.status is not None and plan.status.url == "http://hist-history.ns.svc:18080"


def test_a_route_with_a_host_and_a_prefix_is_where_the_pages_are() -> None:
    spec = {**SPEC, "httpRoute": {"gateway": {"name": "gw"}, "hostnames": ["spark.example"], "path": "/history/"}}
    obj = body(spec)
    plan = decide(observed(obj), NOW)
    assert plan.status is not None and plan.status.url == "http://spark.example/history"
    route = next(a.manifest for a in plan.before_status if isinstance(a, Ensure) and a.kind == "HTTPRoute")
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/history"}}]
    assert rule["filters"][0]["urlRewrite"]["path"]["replacePrefixMatch"] == "/"
    assert build.properties(ServerView.from_body(obj))["spark.ui.proxyBase"] == "/history"
    assert history.app_url(plan.status.url, "spark-0123") == "http://spark.example/history/history/spark-0123/"


def test_a_refused_object_fails_the_server_with_the_api_servers_reason_once() -> None:
    obj = body({**SPEC, "httpRoute": {"gateway": {"name": "gw"}}})
    route = build.http_route(ServerView.from_body(obj), obj)
    assert route is not None
    refusal = Refusal(404, "NotFound", "the server could not find the requested resource")
    plan = decide(observed(obj, made(obj), {refusal_key(Ensure(route)): refusal}), NOW)
    assert plan.status is not None and plan.status.state is HistoryState.FAILED
    assert plan.status.lastError is not None and "HTTPRoute hist-history" in (plan.status.lastError.message or "")
    assert [e.reason for e in plan.events] == [Reason.OBJECT_REFUSED]
    again = decide(
        observed(
            body(spec=obj["spec"], status=plan.status.to_json()), made(obj), {refusal_key(Ensure(route)): refusal}
        ),
        NOW,
    )
    assert again.events == ()


def test_a_url_log_directory_is_what_the_apps_write_to_and_the_rules_hold_the_spec() -> None:
    spec = {"image": "apache/spark:4.0.5", "logDirectory": {"url": "s3a://bucket/events"}}
    assert history.event_log(spec) == history.EventLog("s3a://bucket/events")
    assert (
        build.deployment(ServerView.from_body(body(spec)), body(spec))["spec"]["template"]["spec"].get("volumes")
        is None
    )
    bad = {
        "apiVersion": labels.API_VERSION,
        "kind": history.KIND,
        "metadata": {"name": "x"},
        "spec": {**spec, "logDirectory": {}, "sparkConf": {history.LOG_DIR_CONF: "/x"}},
    }
    messages = [e.message for e in validate.validate_document(bad)]
    assert any("exactly one of persistentVolumeClaim and url" in m for m in messages), messages
    assert any("set by sparkop" in m for m in messages), messages
