"""kubeflow's API group served beside sparkop's (``sparkop run --kubeflow-api``): one model, two groups,
and an app ``pi`` of each in one namespace never taken for the other (keys, filing, SparkDriver names,
owner checks); kubeflow's status fields (submissionID, executorState) and its pod labels."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sparkop.api import crds, validate
from sparkop.api.models import DriverPhase, ExecutorState, SparkDriverStatus
from sparkop.apps_controller.builders import build_driver
from sparkop.apps_controller.decide import decide as decide_app
from sparkop.apps_controller.observed import AppView, DriverView, Observed, OwnedObject, owner_keys
from sparkop.apps_controller.status import read_status
from sparkop.connect_controller.build import build_server
from sparkop.connect_controller.observed import ConnectView
from sparkop.core.plan import Create
from sparkop.domain import kinds, labels, naming
from sparkop.driver_controller.observed import Observed as DriverObserved
from sparkop.driver_controller.observed import Settings
from sparkop.driver_controller.render import parse, render
from sparkop.driver_controller.summaries import summarize_pod
from sparkop.schedule_controller.decide import build_run
from sparkop.schedule_controller.observed import RunView, ScheduledView
from sparkop.schedule_controller.observed import owner_keys as schedule_owner_keys
from tests.support.driver_objects import NOW, decided, driver, executor, objects, running, terminated
from tests.support.specs import PYTHON_PI_SPEC

KUBEFLOW = "sparkoperator.k8s.io/v1beta2"
SPARKOP = "sparkop.io/v1alpha1"


def app_body(api_version: str, uid: str, name: str = "pi") -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "generation": 1},
        "spec": dict(PYTHON_PI_SPEC),
    }


def owned_by(api_version: str, uid: str, kind: str = "SparkDriver", name: str = "pi-1") -> dict[str, Any]:
    ref = {"apiVersion": api_version, "kind": "SparkApplication", "name": "pi", "uid": uid, "controller": True}
    return {
        "apiVersion": "v1" if kind == "Service" else SPARKOP,
        "kind": kind,
        "metadata": {"name": name, "namespace": "ns", "uid": f"{name}-uid", "ownerReferences": [ref]},
        "status": {"phase": "Running"},
    }


# ---------------------------------------------------------------------------------- identity


def test_the_same_app_name_in_both_groups_runs_as_two_sparkdrivers_owned_apart() -> None:
    ours = AppView.from_body(app_body(SPARKOP, "uid-a"))
    theirs = AppView.from_body(app_body(KUBEFLOW, "uid-k"))
    assert (ours.group, theirs.group) == ("sparkop.io", "sparkoperator.k8s.io")
    mine, kf = build_driver(ours, 1), build_driver(theirs, 1)
    assert (mine["metadata"]["name"], kf["metadata"]["name"]) == ("pi-1", "pi-1-kf")
    (ref,) = kf["metadata"]["ownerReferences"]
    assert (ref["apiVersion"], ref["kind"], ref["uid"], ref["controller"]) == (
        KUBEFLOW,
        "SparkApplication",
        "uid-k",
        True,
    )
    # Each apps controller files only its own group's children under (namespace, "pi").
    for body, group in ((mine, "sparkop.io"), (kf, "sparkoperator.k8s.io")):
        other = "sparkoperator.k8s.io" if group == "sparkop.io" else "sparkop.io"
        assert owner_keys(body, group) == [("ns", "pi")]
        assert owner_keys(body, other) == []
        assert DriverView.from_body(body, other).owner_uid == ""
    assert DriverView.from_body(kf, "sparkoperator.k8s.io").owner_uid == "uid-k"


def test_an_apps_pass_never_counts_the_other_groups_sparkdriver_of_the_same_name() -> None:
    theirs = AppView.from_body(app_body(KUBEFLOW, "uid-k"))
    # A SparkDriver of sparkop's app "pi" that somehow reached this app's observation is not its run.
    stranger = DriverView.from_body({**owned_by(SPARKOP, "uid-a"), "metadata": {
        **owned_by(SPARKOP, "uid-a")["metadata"], "labels": {labels.RUN: "1"}}}, "sparkop.io")  # fmt: skip
    observed = Observed(theirs, read_status({}), (stranger,))
    assert observed.owned == ()
    plan = decide_app(observed, NOW)
    (create,) = [a for a in plan.after_status if isinstance(a, Create)]
    assert create.manifest["metadata"]["name"] == "pi-1-kf"


def test_ui_objects_are_filed_by_group() -> None:
    svc = owned_by(KUBEFLOW, "uid-k", kind="Service", name="pi-ui-svc")
    assert owner_keys(svc, "sparkoperator.k8s.io") == [("ns", "pi")] and owner_keys(svc) == []
    assert OwnedObject.from_body(svc, "sparkoperator.k8s.io").owner_uid == "uid-k"
    assert OwnedObject.from_body(svc).owner_uid == ""


@given(
    st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    st.integers(1, 10**6),
    st.integers(1, 10**6),
)
def test_no_sparkdriver_name_of_one_group_is_a_name_of_the_other(a: str, b: str, run: int, other: int) -> None:
    for kf in (naming.driver_name(b, other, labels.KUBEFLOW_GROUP), naming.connect_server_name(b, other, "x.io")):
        assert naming.driver_name(a, run) != kf
        assert naming.connect_server_name(a, run) != kf


def test_a_kubeflow_schedule_starts_kubeflow_apps_and_files_them_by_its_group() -> None:
    body = {
        "apiVersion": KUBEFLOW,
        "kind": "ScheduledSparkApplication",
        "metadata": {"name": "nightly", "namespace": "ns", "uid": "s-uid", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"schedule": "@hourly", "template": dict(PYTHON_PI_SPEC)},
    }
    run = build_run(ScheduledView.from_body(body), body, NOW)
    assert run["apiVersion"] == KUBEFLOW and run["kind"] == "SparkApplication"
    assert run["metadata"]["labels"][labels.KUBEFLOW_SCHEDULED_APP_NAME] == "nightly"
    assert schedule_owner_keys("sparkoperator.k8s.io")(run) == [("ns", "nightly")]
    assert schedule_owner_keys()(run) == []
    assert RunView.from_body(run, "sparkoperator.k8s.io").owner_uid == "s-uid"
    assert RunView.from_body(run).owner_uid == ""


def test_a_kubeflow_sparkconnect_server_is_named_apart() -> None:
    body = {
        "apiVersion": "sparkoperator.k8s.io/v1alpha1",
        "kind": "SparkConnect",
        "metadata": {"name": "sc", "namespace": "ns", "uid": "c-uid"},
        "spec": {"sparkVersion": "4.0.1", "image": "apache/spark:4.0.1", "server": {}, "executor": {}},
    }
    server = build_server(ConnectView.from_body(body), body, run=1)
    assert server["metadata"]["name"] == "sc-server-1-kf"
    (ref,) = server["metadata"]["ownerReferences"]
    assert (ref["apiVersion"], ref["kind"]) == ("sparkoperator.k8s.io/v1alpha1", "SparkConnect")


def without_rules(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: without_rules(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [without_rules(x) for x in node]
    return node


def rules_in(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        own = list(node.get("x-kubernetes-validations", []))
        return own + [r for k, v in node.items() if k != "x-kubernetes-validations" for r in rules_in(v)]
    if isinstance(node, list):
        return [r for x in node for r in rules_in(x)]
    return []


def test_each_group_has_its_own_crds_from_one_model() -> None:
    for kind, version in (("SparkApplication", "v1beta2"), ("ScheduledSparkApplication", "v1beta2"),
                          ("SparkConnect", "v1alpha1")):  # fmt: skip
        theirs, ours = crds.crd(kind, kinds.KUBEFLOW_API), crds.crd(kind)
        assert theirs["spec"]["group"] == "sparkoperator.k8s.io" and theirs["metadata"]["name"].endswith(".k8s.io")
        assert theirs["spec"]["versions"][0]["name"] == version
        assert theirs["spec"]["names"]["shortNames"] == ours["spec"]["names"]["shortNames"]
        # A CRD under k8s.io needs the approval annotation, or the API server refuses it.
        assert "api-approved.kubernetes.io" in theirs["metadata"]["annotations"]
        schema = theirs["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        our_schema = ours["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        # One model: the same schema; only the cross-field rules of each group's own differ.
        assert without_rules(schema["properties"]["spec"]) == without_rules(our_schema["properties"]["spec"])
        for group, crd_schema in (("sparkoperator.k8s.io", schema), ("sparkop.io", our_schema)):
            carried = sorted(r["rule"] for r in rules_in(crd_schema))
            assert carried == sorted(r.cel for r in crds.rules_for(kind, group) for _ in r.paths), (kind, group)
    assert sorted(crds.crds(kinds.KUBEFLOW_API)) == [
        "sparkoperator.k8s.io_scheduledsparkapplications.yaml",
        "sparkoperator.k8s.io_sparkapplications.yaml",
        "sparkoperator.k8s.io_sparkconnects.yaml",
    ]


def test_validate_takes_each_kind_in_its_own_version_only() -> None:
    app = app_body(KUBEFLOW, "u")
    del app["metadata"]["uid"]
    assert validate.validate_document(app) == []
    (error,) = validate.validate_document({**app, "apiVersion": "sparkoperator.k8s.io/v1alpha1"})
    assert error.path == "apiVersion" and "v1beta2" in error.message
    driver_doc = {"apiVersion": KUBEFLOW, "kind": "SparkDriver", "metadata": {"name": "d"}, "spec": {}}
    (error,) = validate.validate_document(driver_doc)
    assert "sparkop's own kind" in error.message


# --------------------------------------------------------------------- pods: kubeflow's labels


def test_driver_and_executor_pods_carry_kubeflows_labels() -> None:
    body = driver()
    body["metadata"]["labels"] = {labels.APP: "pi"}
    out = render(parse(body), 1)
    pod_labels = out.pod["metadata"]["labels"]
    assert pod_labels[labels.KUBEFLOW_APP_NAME] == "pi"
    assert pod_labels[labels.KUBEFLOW_LAUNCHED] == "true"
    assert pod_labels[labels.KUBEFLOW_SUBMISSION_ID] == body["metadata"]["uid"]
    assert out.executor_template is not None
    template = json.loads(out.executor_template["data"]["podspec-configmap-key"])
    for key in (labels.KUBEFLOW_APP_NAME, labels.KUBEFLOW_LAUNCHED, labels.KUBEFLOW_SUBMISSION_ID):
        assert template["metadata"]["labels"][key] == pod_labels[key]
    # Only on the pods: the Service selector and the ConfigMaps stay as Spark makes them.
    assert labels.KUBEFLOW_SUBMISSION_ID not in out.service["metadata"]["labels"]
    assert labels.KUBEFLOW_SUBMISSION_ID not in out.service["spec"]["selector"]
    # A SparkDriver written by hand runs no app: no app-name, the rest as for any run.
    assert labels.KUBEFLOW_APP_NAME not in render(parse(driver()), 1).pod["metadata"]["labels"]


# --------------------------------------------------------------------- status: executorState


def plan_for(body: dict[str, Any], pods: list[dict[str, Any]], **settings: Any) -> SparkDriverStatus:
    pod, cms, svcs = objects()
    del pod
    observed = DriverObserved.of(body, [summarize_pod(p) for p in pods], list(cms), list(svcs), Settings(**settings))
    status = decided(observed, NOW).status
    assert status is not None
    return status


def running_driver(**extra: Any) -> dict[str, Any]:
    return driver({"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-1-driver", "uid": "pod-1"}, **extra})


def test_executor_state_says_each_executor_as_kubeflow_does() -> None:
    pod, _, _ = objects()
    pods = [running(pod), executor(1), executor(2, phase="Pending"), executor(3, phase="Failed")]
    status = plan_for(running_driver(), pods)
    assert status.executorState == {
        "pi-1-exec-1": ExecutorState.RUNNING,
        "pi-1-exec-2": ExecutorState.PENDING,
        "pi-1-exec-3": ExecutorState.FAILED,
    }
    # Executor 1 gone while the driver runs: UNKNOWN; 3 had failed and stays FAILED; 2 runs now.
    later = plan_for(driver(status.to_json()), [running(pod), executor(2)])
    assert later.executorState == {
        "pi-1-exec-1": ExecutorState.UNKNOWN,
        "pi-1-exec-2": ExecutorState.RUNNING,
        "pi-1-exec-3": ExecutorState.FAILED,
    }


def test_executor_state_is_final_when_the_driver_ends() -> None:
    pod, _, _ = objects()
    seen = plan_for(running_driver(), [running(pod), executor(1), executor(2)])
    for code, ended_as in ((0, ExecutorState.COMPLETED), (1, ExecutorState.FAILED)):
        done = plan_for(driver(seen.to_json()), [terminated(pod, code), executor(1)])
        assert done.phase in (DriverPhase.SUCCEEDED, DriverPhase.FAILED)
        # Whatever still runs (executor 1) or went (2) ends as the driver did: the status is frozen now.
        assert done.executorState == {"pi-1-exec-1": ended_as, "pi-1-exec-2": ended_as}


def test_executor_state_is_bounded_by_the_lowest_executor_ids() -> None:
    pod, _, _ = objects()
    pods = [running(pod), *(executor(n) for n in (12, 3, 7, 1))]
    status = plan_for(running_driver(), pods, max_tracked_executors=3)
    assert list(status.executorState or {}) == ["pi-1-exec-1", "pi-1-exec-3"]  # 7 and 12 are above 3
    none = plan_for(running_driver(), pods, max_tracked_executors=0)
    assert none.executorState is None


def test_a_new_incarnation_starts_its_executor_state_afresh() -> None:
    pod, _, _ = objects()
    seen = plan_for(running_driver(), [running(pod), executor(1)])
    assert seen.executorState
    lost = plan_for(driver(seen.to_json()), [executor(1)])  # the driver pod vanished: replaced
    assert lost.incarnation == 2 and lost.executorState is None


# ------------------------------------------------------------------ status: the app mirrors them


def test_the_app_shows_its_runs_submission_id_and_executor_state() -> None:
    app = AppView.from_body(app_body(KUBEFLOW, "uid-k"))
    first = decide_app(Observed(app, read_status({})), NOW).status
    assert first is not None and first.submissionID is None  # the run is planned: no SparkDriver yet
    body = owned_by(KUBEFLOW, "uid-k", name="pi-1-kf")
    body["metadata"]["labels"] = {labels.RUN: "1"}
    body["status"] = {
        "phase": "Running",
        "incarnation": 1,
        "driverPod": {"name": "pi-1-kf-1-driver"},
        "executorState": {"pi-1-kf-1-exec-1": "RUNNING"},
    }
    view = DriverView.from_body(body, "sparkoperator.k8s.io")
    status = decide_app(Observed(app, first, (view,)), NOW).status
    assert status is not None
    assert status.submissionID == "pi-1-kf-uid"
    assert status.executorState == {"pi-1-kf-1-exec-1": ExecutorState.RUNNING}


def test_sparkop_status_shows_the_end_of_a_replaced_driver_pods_log() -> None:
    from sparkop.status_cli import render_status

    app = {**app_body(SPARKOP, "u"), "status": {"applicationState": {"state": "RUNNING"}, "currentDriver": "pi-1"}}
    driver = {
        "metadata": {"name": "pi-1"},
        "status": {
            "phase": "Running",
            "incarnation": 2,
            "driverPod": {"name": "pi-driver"},
            "incarnations": [
                {"incarnation": 1, "outcome": "Lost", "reason": "Deleted", "time": "2026-01-01T12:00:00Z",
                 "logTail": "starting\nstage 3 of 7\n\nPi is roughly 3.14\nshutdown hook called\n"},
            ],
        },
    }  # fmt: skip
    text = render_status(app, [driver], NOW)
    assert "      | stage 3 of 7\n      | Pi is roughly 3.14\n      | shutdown hook called" in text
    assert "starting" not in text  # its last lines only
