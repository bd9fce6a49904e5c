"""The connect controller's decision, pure: the first server and its Service, readiness, exits and
their backoff, the bounded restarts, rolls on a spec change, suspend, deletions, and the kubeflow
sample's server as the driver controller renders it."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from sparkop.api import connect, validate
from sparkop.api.connect import ConnectState, ServerOutcome, SparkConnectStatus
from sparkop.api.models import DriverPhase
from sparkop.connect_controller import build
from sparkop.connect_controller.decide import (
    CONDITION_READY,
    STABLE_SECONDS,
    backoff,
    decide,
)
from sparkop.connect_controller.events import Reason
from sparkop.connect_controller.observed import ConnectView, Observed, ServerView, ServiceView, spec_hash
from sparkop.core.plan import Create, Delete, Ensure, Plan, Refusal, refusal_key
from sparkop.core.specs import lenient
from sparkop.domain import labels, naming
from sparkop.driver_controller.render import parse, render

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
UID = "c0ffee00-0000-4000-8000-000000000001"
SPEC: dict[str, Any] = {
    "sparkVersion": "4.0.5",
    "image": "sparkop/spark:4.0.5",
    "server": {"cores": 1, "memory": "1g"},
    "executor": {"instances": 2, "cores": 1, "memory": "512m"},
}
KUBEFLOW_SAMPLE = Path(__file__).resolve().parent.parent / "support" / "kubeflow_spark_connect.yaml"


def body(spec: dict[str, Any] | None = None, generation: int = 1, status: dict[str, Any] | None = None) -> dict:
    return {
        "apiVersion": labels.API_VERSION,
        "kind": "SparkConnect",
        "metadata": {"name": "sc", "namespace": "ns", "uid": UID, "generation": generation},
        "spec": copy.deepcopy(spec or SPEC),
        "status": status or {},
    }


def server(
    run: int,
    *,
    spec: dict[str, Any] | None = None,
    phase: DriverPhase | None = DriverPhase.RUNNING,
    ready: bool = False,
    **fields: Any,
) -> ServerView:
    return ServerView(
        name=naming.connect_server_name("sc", run),
        uid=f"uid-{run}",
        run=run,
        owner_uid=UID,
        spec_hash=spec_hash(spec or SPEC),
        created=NOW,
        phase=phase,
        pod_name=f"sc-server-{run}-1-driver",
        pod_ip="10.1.0.7",
        ready=ready,
        incarnation=1,
        **fields,
    )


def service(run: int) -> ServiceView:
    return ServiceView(
        name="sc-server",
        uid="svc",
        owner_uid=UID,
        selector={labels.DRIVER: naming.connect_server_name("sc", run)},
    )


def observed(
    status: SparkConnectStatus | None = None,
    servers: tuple[ServerView, ...] = (),
    services: tuple[ServiceView, ...] = (),
    spec: dict[str, Any] | None = None,
    generation: int = 1,
    refusals: dict[str, Refusal] | None = None,
) -> Observed:
    b = body(spec, generation)
    return Observed(
        ConnectView.from_body(b),
        servers,
        services,
        status=status or SparkConnectStatus(),
        body=b,
        refusals=refusals or {},
    )


def written(plan: Plan[SparkConnectStatus]) -> SparkConnectStatus:
    assert plan.status is not None
    return lenient(SparkConnectStatus, plan.status.to_json())  # what the next pass reads back


def creates(plan: Plan[SparkConnectStatus]) -> list[dict[str, Any]]:
    return [a.manifest for a in plan.actions if isinstance(a, Create)]


def service_selector(plan: Plan[SparkConnectStatus]) -> str:
    (ensure,) = [a for a in plan.before_status if isinstance(a, Ensure)]
    return str(ensure.manifest["spec"]["selector"][labels.DRIVER])


def test_a_new_sparkconnect_gets_its_service_then_its_first_server_after_the_status_write() -> None:
    plan = decide(observed(), NOW)
    status = written(plan)
    assert status.state is ConnectState.PROVISIONING and status.lastRun == 1
    assert status.endpoint == "sc://sc-server.ns.svc:15002"
    assert [r.outcome for r in status.runs or ()] == [ServerOutcome.RUNNING]
    assert [m["metadata"]["name"] for m in creates(plan)] == ["sc-server-1"]
    assert all(isinstance(a, Create) for a in plan.after_status), "the create follows the write that records it"
    assert service_selector(plan) == "sc-server-1"
    assert [e.reason for e in plan.events] == [Reason.SERVER_STARTED]


def test_a_recorded_server_not_seen_yet_is_created_again_never_a_second_run() -> None:
    first = written(decide(observed(), NOW))
    plan = decide(observed(first), NOW + timedelta(seconds=1))
    assert [m["metadata"]["name"] for m in creates(plan)] == ["sc-server-1"]
    assert written(plan).lastRun == 1


def test_ready_comes_from_the_server_pod_probe() -> None:
    status = written(decide(observed(), NOW))
    status = written(decide(observed(status, (server(1),)), NOW))
    assert status.state is ConnectState.PROVISIONING
    plan = decide(observed(status, (server(1, ready=True),), (service(1),)), NOW + timedelta(seconds=5))
    status = written(plan)
    assert status.state is ConnectState.READY
    assert status.server is not None and status.server.podName == "sc-server-1-1-driver"
    assert status.server.podIp == "10.1.0.7" and status.server.driver == "sc-server-1"
    ready = next(c for c in status.conditions or () if c.type == CONDITION_READY)
    assert ready.status == "True"
    assert Reason.SERVER_READY in [e.reason for e in plan.events]
    assert (status.runs or [])[0].readyTime == NOW + timedelta(seconds=5)
    assert decide(observed(status, (server(1, ready=True),), (service(1),)), NOW + timedelta(seconds=9)).events == ()


def test_a_server_that_exits_is_a_failure_restarted_after_a_doubling_backoff() -> None:
    status = written(decide(observed(), NOW))
    status = written(decide(observed(status, (server(1, ready=True),), (service(1),)), NOW))
    ended = server(1, phase=DriverPhase.FAILED, exit_code=1, message="OOM")
    plan = decide(observed(status, (ended,), (service(1),)), NOW + timedelta(minutes=5))
    status = written(plan)
    assert status.restarts == 1 and status.failuresInARow == 1
    assert (status.runs or [])[0].outcome is ServerOutcome.EXITED
    assert Reason.SERVER_EXITED in [e.reason for e in plan.events]
    assert [a.name for a in plan.after_status if isinstance(a, Delete)] == ["sc-server-1"]
    assert creates(plan) == [] and plan.requeue_after == backoff(connect.DEFAULT_RETRY_INTERVAL, 1)
    assert status.state is ConnectState.NOT_READY
    later = NOW + timedelta(minutes=5, seconds=connect.DEFAULT_RETRY_INTERVAL)
    plan = decide(observed(status, (), (service(1),)), later)
    assert [m["metadata"]["name"] for m in creates(plan)] == ["sc-server-2"]
    assert backoff(10, 1) == 10 and backoff(10, 3) == 40 and backoff(10, 10) == connect.MAX_RETRY_INTERVAL


def test_a_server_that_served_ten_minutes_starts_the_count_of_failures_afresh() -> None:
    status = written(decide(observed(), NOW))
    status.failuresInARow = 4
    status = written(decide(observed(status, (server(1, ready=True),), (service(1),)), NOW))
    ended = server(1, phase=DriverPhase.FAILED, exit_code=1)
    soon = written(decide(observed(status, (ended,), (service(1),)), NOW + timedelta(seconds=STABLE_SECONDS - 1)))
    assert soon.failuresInARow == 5
    late = written(decide(observed(status, (ended,), (service(1),)), NOW + timedelta(seconds=STABLE_SECONDS)))
    assert late.failuresInARow == 1 and late.restarts == 1


def test_failures_in_a_row_beyond_the_policy_fail_it_and_it_stays_frozen_until_the_spec_changes() -> None:
    spec = {**SPEC, "restartPolicy": {"onFailureRetries": 1, "onFailureRetryInterval": 1}}
    t = NOW
    status = written(decide(observed(spec=spec), t))
    ended = server(1, spec=spec, phase=DriverPhase.FAILED, exit_code=1)
    status = written(decide(observed(status, (ended,), spec=spec), t))
    assert status.state is not ConnectState.FAILED and status.failuresInARow == 1
    t += timedelta(seconds=5)
    status = written(decide(observed(status, (), spec=spec), t))
    assert status.lastRun == 2
    ended = server(2, spec=spec, phase=DriverPhase.FAILED, exit_code=1)
    plan = decide(observed(status, (ended,), spec=spec), t)
    status = written(plan)
    assert status.state is ConnectState.FAILED and status.lastError is not None
    assert status.lastError.reason == "RetriesExhausted" and creates(plan) == []
    assert decide(observed(status, (), spec=spec), t + timedelta(hours=1)) == Plan()
    changed = {**spec, "image": "sparkop/spark:4.0.6"}
    plan = decide(observed(status, (), spec=changed, generation=2), t + timedelta(hours=1))
    assert written(plan).state is ConnectState.PROVISIONING and len(creates(plan)) == 1


def test_a_spec_change_rolls_the_server_the_old_one_serving_until_the_new_one_is_ready() -> None:
    status = written(decide(observed(), NOW))
    old = server(1, ready=True)
    status = written(decide(observed(status, (old,), (service(1),)), NOW))
    changed = {**SPEC, "sparkConf": {"spark.sql.shuffle.partitions": "8"}}
    plan = decide(observed(status, (old,), (service(1),), spec=changed, generation=2), NOW)
    status = written(plan)
    assert [m["metadata"]["name"] for m in creates(plan)] == ["sc-server-2"]
    assert service_selector(plan) == "sc-server-1" and status.state is ConnectState.READY
    new = server(2, spec=changed)
    plan = decide(observed(status, (old, new), (service(1),), spec=changed, generation=2), NOW)
    assert service_selector(plan) == "sc-server-1" and not plan.deletes
    new = server(2, spec=changed, ready=True)
    plan = decide(observed(written(plan), (old, new), (service(1),), spec=changed, generation=2), NOW)
    assert service_selector(plan) == "sc-server-2"
    assert [d.name for d in plan.deletes] == ["sc-server-1"]
    assert Reason.SERVICE_SWITCHED in [e.reason for e in plan.events]
    outcomes = {r.run: r.outcome for r in written(plan).runs or ()}
    assert outcomes == {1: ServerOutcome.REPLACED, 2: ServerOutcome.RUNNING}
    assert written(plan).restarts == 0


def test_suspend_stops_the_server_and_resume_starts_the_next() -> None:
    status = written(decide(observed(), NOW))
    status = written(decide(observed(status, (server(1, ready=True),), (service(1),)), NOW))
    suspended = {**SPEC, "suspend": True}
    plan = decide(observed(status, (server(1, ready=True),), (service(1),), spec=suspended, generation=2), NOW)
    status = written(plan)
    assert status.state is ConnectState.SUSPENDED and [d.name for d in plan.deletes] == ["sc-server-1"]
    plan = decide(observed(status, (), (service(1),), generation=3), NOW)
    assert [m["metadata"]["name"] for m in creates(plan)] == ["sc-server-2"]
    assert written(plan).restarts == 0


def test_a_server_deleted_by_someone_else_is_replaced_at_once() -> None:
    status = written(decide(observed(), NOW))
    status = written(decide(observed(status, (server(1, ready=True),), (service(1),)), NOW))
    plan = decide(observed(status, (), (service(1),)), NOW + timedelta(seconds=1))
    status = written(plan)
    assert (status.runs or [])[0].outcome is ServerOutcome.DELETED
    assert status.restarts == 1 and status.failuresInARow == 0
    assert [m["metadata"]["name"] for m in creates(plan)] == ["sc-server-2"]


def test_a_refused_server_fails_at_once_with_the_api_servers_reason() -> None:
    first = build.build_server(ConnectView.from_body(body()), body(), 1)
    refusal = Refusal(403, "Forbidden", 'exceeded quota: "compute"')
    plan = decide(observed(refusals={refusal_key(Create(first)): refusal}), NOW)
    status = written(plan)
    assert status.state is ConnectState.FAILED and creates(plan) == []
    assert status.lastError is not None and "exceeded quota" in (status.lastError.message or "")


def test_kubeflows_sample_is_valid_and_its_server_renders_as_a_connect_server() -> None:
    sample = yaml.safe_load(KUBEFLOW_SAMPLE.read_text())
    sample["apiVersion"] = labels.API_VERSION
    assert validate.validate_documents([sample]) == []
    assert len(validate.document_warnings(sample)) == 2  # the pod-level container fields, said
    sample["metadata"].update(uid=UID, generation=1)
    manifest = build.build_server(ConnectView.from_body(sample), sample, 1)
    assert validate.validate_documents([manifest]) == []
    manifest["metadata"]["uid"] = "d0000000-0000-4000-8000-000000000001"
    manifest["metadata"]["creationTimestamp"] = "2026-12-02T08:00:00Z"
    objects = render(parse(manifest), 1)
    pod = objects.pod
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "spark-kubernetes-driver"]
    assert container["image"] == "docker.io/apache/spark:4.0.4"
    assert container["readinessProbe"]["tcpSocket"]["port"] == connect.DEFAULT_PORT
    assert {"name": connect.PORT_NAME, "containerPort": 15002, "protocol": "TCP"} in container["ports"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert "capabilities" not in pod["spec"].get("securityContext", {})
    assert pod["metadata"]["labels"][labels.CONNECT] == "spark-connect"
    assert container["args"][-3:] == ["--class", connect.SERVER_CLASS, "spark-internal"]
    properties = objects.config_map["data"]["spark.properties"]
    assert "spark.connect.grpc.binding.port=15002" in properties
    # Its executors resolve the driver through the headless Service before the server is Ready.
    assert objects.service["spec"]["publishNotReadyAddresses"] is True


def test_every_line_renders_one_connect_port_on_the_server_pod() -> None:
    for version in ("4.0.5", "4.1.4", "4.2.1", "4.3.0"):
        spec = {**SPEC, "sparkVersion": version}
        manifest = build.build_server(ConnectView.from_body(body(spec)), body(spec), 1)
        manifest["metadata"]["uid"] = "d0000000-0000-4000-8000-000000000002"
        pod = render(parse(manifest), 1).pod
        (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "spark-kubernetes-driver"]
        names = [p["name"] for p in container["ports"]]
        assert names.count(connect.PORT_NAME) == 1 and len(names) == len(set(names)), (version, names)


def test_a_server_pod_the_api_server_refuses_fails_the_sparkconnect_at_once() -> None:
    status = written(decide(observed(), NOW))
    refused_pod = server(1, phase=DriverPhase.SUBMISSION_FAILED, message='Pod "sc-server-1-1-driver" is invalid')
    plan = decide(observed(status, (refused_pod,), (service(1),)), NOW)
    status = written(plan)
    assert status.state is ConnectState.FAILED and creates(plan) == []
    assert status.lastError is not None and status.lastError.reason == "SubmissionFailed"
    assert "is invalid" in (status.lastError.message or "") and status.restarts == 0
    assert decide(observed(status, (), (service(1),)), NOW + timedelta(minutes=1)) == Plan()


def test_the_node_loss_toleration_reaches_the_server_pod_and_its_executors() -> None:
    spec = {**SPEC, "nodeLossTolerationSeconds": 25}
    manifest = build.build_server(ConnectView.from_body(body(spec)), body(spec), 1)
    assert manifest["spec"]["nodeLossTolerationSeconds"] == 25
    manifest["metadata"]["uid"] = "d0000000-0000-4000-8000-000000000002"
    objects = render(parse(manifest), 1)
    seconds = {t["key"]: t["tolerationSeconds"] for t in objects.pod["spec"]["tolerations"]}
    assert seconds == {"node.kubernetes.io/unreachable": 25, "node.kubernetes.io/not-ready": 25}


def test_a_grpc_route_to_the_stable_service_follows_the_spec() -> None:
    route = {"gateway": {"name": "gw", "namespace": "gateway", "sectionName": "http"}}
    plan = decide(observed(spec={**SPEC, "grpcRoute": route}), NOW)
    (made,) = [a.manifest for a in plan.before_status if isinstance(a, Ensure) and a.kind == "GRPCRoute"]
    assert made["metadata"]["name"] == "sc-server-route"
    assert made["spec"]["parentRefs"][0] == {
        **route["gateway"],
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
    }
    (rule,) = made["spec"]["rules"]
    assert rule["backendRefs"][0] == {"group": "", "kind": "Service", "name": "sc-server", "port": 15002, "weight": 1}
    service = next(a.manifest for a in plan.before_status if isinstance(a, Ensure) and a.kind == "Service")
    assert service["spec"]["ports"][0]["appProtocol"] == "kubernetes.io/h2c"  # what a Gateway reads as gRPC in clear
    existing = ServiceView(
        name="sc-server-route",
        uid="r-uid",
        owner_uid=UID,
        selector={},
        kind="GRPCRoute",
        api_version="gateway.networking.k8s.io/v1",
    )
    gone = decide(observed(services=(existing,)), NOW)
    assert [(a.kind, a.name) for a in gone.before_status if isinstance(a, Delete)] == [("GRPCRoute", "sc-server-route")]
    assert connect.SparkConnectSpec.model_validate({**SPEC, "grpcRoute": route}).grpcRoute is not None


KUBEFLOW_CONNECT_API = f"{labels.KUBEFLOW_GROUP}/v1alpha1"


def kubeflow_observed(
    status: SparkConnectStatus | None = None,
    servers: tuple[ServerView, ...] = (),
    services: tuple[ServiceView, ...] = (),
    spec: dict[str, Any] | None = None,
    generation: int = 1,
) -> Observed:
    b = body(spec, generation) | {"apiVersion": KUBEFLOW_CONNECT_API}
    return Observed(ConnectView.from_body(b), servers, services, status=status or SparkConnectStatus(), body=b)


def kubeflow_server(run: int, *, spec: dict[str, Any] | None = None, ready: bool = False) -> ServerView:
    return replace(
        server(run, spec=spec, ready=ready),
        name=naming.connect_server_name("sc", run, labels.KUBEFLOW_GROUP),
        pod_name="sc-server",
    )


def test_a_kubeflow_sparkconnects_server_pod_is_named_as_kubeflow_names_it_with_kubeflows_labels() -> None:
    sample = yaml.safe_load(KUBEFLOW_SAMPLE.read_text())
    sample["metadata"].update(uid=UID, generation=1)
    manifest = build.build_server(ConnectView.from_body(sample), sample, 1)
    assert manifest["metadata"]["name"] == "spark-connect-server-1-kf"
    assert manifest["spec"]["driver"]["podName"] == "spark-connect-server"
    manifest["metadata"]["uid"] = "d0000000-0000-4000-8000-000000000003"
    manifest["metadata"]["creationTimestamp"] = "2026-12-02T08:00:00Z"
    objects = render(parse(manifest), 1)
    assert objects.pod["metadata"]["name"] == "spark-connect-server"
    kubeflows = {labels.KUBEFLOW_LAUNCHED: "true", labels.KUBEFLOW_CONNECT_NAME: "spark-connect"}
    assert kubeflows.items() <= objects.pod["metadata"]["labels"].items()
    # kubeflow selects a SparkConnect's executors by these and spark-role=executor (which Spark sets).
    assert objects.executor_template is not None
    (executor_pod,) = [yaml.safe_load(text) for text in objects.executor_template["data"].values()]
    assert kubeflows.items() <= executor_pod["metadata"]["labels"].items()


def test_sparkops_own_server_pods_keep_a_name_per_run() -> None:
    manifest = build.build_server(ConnectView.from_body(body()), body(), 3)
    assert "podName" not in manifest["spec"]["driver"]


def test_a_kubeflow_sparkconnects_spec_change_stops_the_old_server_as_the_new_one_starts() -> None:
    """Both servers' pods would be sc-server: the new one can only follow the old one, never roll in beside it."""
    status = written(decide(kubeflow_observed(), NOW))
    assert status.runs is not None and status.runs[0].driver == "sc-server-1-kf"
    old = kubeflow_server(1, ready=True)
    kubeflow_service = replace(service(1), selector={labels.DRIVER: old.name})
    status = written(decide(kubeflow_observed(status, (old,), (kubeflow_service,)), NOW))
    changed = {**SPEC, "sparkConf": {"spark.sql.shuffle.partitions": "8"}}
    plan = decide(kubeflow_observed(status, (old,), (kubeflow_service,), spec=changed, generation=2), NOW)
    assert [m["metadata"]["name"] for m in creates(plan)] == ["sc-server-2-kf"]
    assert [d.name for d in plan.deletes] == ["sc-server-1-kf"]
    assert service_selector(plan) == "sc-server-2-kf"
    outcomes = {r.run: r.outcome for r in written(plan).runs or ()}
    assert outcomes == {1: ServerOutcome.REPLACED, 2: ServerOutcome.RUNNING}
    assert written(plan).restarts == 0
