"""The pure parts of ``sparkop list``, ``logs``, ``events``, ``suspend`` and ``resume``: the table,
durations, which SparkDriver and pod ``logs`` reads (from lists of objects shaped as the API server
sends them), which events belong to an app and in what order, and the suspend patch."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from sparkop import cli, daily_cli
from sparkop.core import kube as k8s
from sparkop.daily_cli import Unavailable
from sparkop.domain import labels

NOW = datetime(2025, 1, 2, 12, 0, 0, tzinfo=UTC)
Obj = dict[str, Any]


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def app(name: str = "pi", namespace: str = "jobs", *, created: float = 600, **status: Any) -> Obj:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "creationTimestamp": stamp(created)},
        "spec": {"type": "Scala"},
        "status": status or None,
    }


def driver(name: str, run: int, incarnation: int = 1, phase: str = "Running") -> Obj:
    return {
        "kind": "SparkDriver",
        "metadata": {"name": name, "namespace": "jobs", "labels": {labels.APP: "pi", labels.RUN: str(run)}},
        "status": {"phase": phase, "incarnation": incarnation},
    }


def pod(name: str, role: str, incarnation: int, exec_id: int | None = None, containers: int = 1) -> Obj:
    pod_labels = {labels.SPARK_ROLE: role, labels.INCARNATION: str(incarnation), labels.DRIVER: "pi-2"}
    if exec_id is not None:
        pod_labels[labels.SPARK_EXEC_ID] = str(exec_id)
    names = [f"sidecar-{i}" for i in range(containers - 1)]
    names.append("spark-kubernetes-driver" if role == labels.ROLE_DRIVER else "spark-kubernetes-executor")
    if role == labels.ROLE_EXECUTOR:
        names.reverse()  # Spark's executor container comes first, a template's sidecars after it
    return {
        "metadata": {"name": name, "labels": pod_labels},
        "spec": {"containers": [{"name": n} for n in names]},
    }


# -- durations and the table ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (8 * 3600 + 59 * 60, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (2 * 86400 + 5 * 3600, "2d5h"),
        (8 * 86400 + 5 * 3600, "8d"),
        (2 * 365 * 86400, "2y"),
        (3 * 365 * 86400 + 4 * 86400, "3y4d"),
        (9 * 365 * 86400 + 4 * 86400, "9y"),
    ],
)
def test_durations_read_as_kubectl_prints_its_age_column(seconds: float, shown: str) -> None:
    assert daily_cli.human_duration(seconds) == shown


def test_run_duration_runs_to_now_while_running_and_stops_at_the_finish() -> None:
    running = app(applicationState={"state": "RUNNING"}, lastSubmissionAttemptTime=stamp(300))
    finished = app(
        applicationState={"state": "COMPLETED"}, lastSubmissionAttemptTime=stamp(300), terminationTime=stamp(200)
    )
    # A retry waiting to start still carries the finish of a run before: it is not the end.
    waiting = app(
        applicationState={"state": "PENDING_RERUN"}, lastSubmissionAttemptTime=stamp(300), terminationTime=stamp(200)
    )
    assert daily_cli.run_duration(running, NOW) == "5m"
    assert daily_cli.run_duration(finished, NOW) == "100s"
    assert daily_cli.run_duration(waiting, NOW) == "5m"
    assert daily_cli.run_duration(app(), NOW) == "-"


def test_last_error_is_one_line_cut_to_the_column() -> None:
    failing = app(lastError={"reason": "DriverFailed", "message": "exit code 1:\n  java.lang.Oops\n" + "x" * 100})
    text = daily_cli.last_error(failing)
    assert text.startswith("DriverFailed: exit code 1: java.lang.Oops x")
    assert len(text) == daily_cli.LAST_ERROR_WIDTH and text.endswith("...")
    assert "\n" not in text
    from_state = app(applicationState={"state": "FAILED", "errorMessage": "driver pod lost"})
    assert daily_cli.last_error(from_state) == "driver pod lost"
    assert daily_cli.last_error(app()) == "-"


def test_the_list_table_has_kubectls_columns_aligned_plus_duration_and_last_error() -> None:
    apps = [
        app(
            "zeta",
            applicationState={"state": "RUNNING"},
            executionAttempts=2,
            executors={"running": 3},
            lastSubmissionAttemptTime=stamp(90),
            lastError={"reason": "DriverFailed", "message": "exit code 1"},
        ),
        app("a-new-app", created=30),
    ]
    lines = daily_cli.render_list(apps, NOW, all_namespaces=False).splitlines()
    assert lines[0].split() == ["NAME", "STATE", "ATTEMPTS", "EXECUTORS", "DURATION", "AGE", "LAST", "ERROR"]
    assert lines[1].split() == ["a-new-app", "NEW", "0", "0", "-", "30s", "-"]
    assert lines[2].split() == ["zeta", "RUNNING", "2", "3", "90s", "10m", "DriverFailed:", "exit", "code", "1"]
    # Columns start at the same offset on every line, three spaces after the widest cell.
    for header in ("STATE", "ATTEMPTS", "LAST ERROR"):
        column = lines[0].index(header)
        assert all(line[column - 3 : column] == "   " and line[column] != " " for line in lines)
    assert lines[0].index("STATE") == len("a-new-app") + 3


def test_all_namespaces_adds_the_namespace_column_and_sorts_by_it() -> None:
    apps = [app("b", "ns2"), app("a", "ns2"), app("c", "ns1")]
    lines = daily_cli.render_list(apps, NOW, all_namespaces=True).splitlines()
    assert lines[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert [line.split()[:2] for line in lines[1:]] == [["ns1", "c"], ["ns2", "a"], ["ns2", "b"]]


def test_apps_of_kubeflows_group_are_listed_with_a_group_column() -> None:
    theirs = {**app("pi"), "apiVersion": "sparkoperator.k8s.io/v1beta2", "metadata": {**app("pi")["metadata"]}}
    lines = daily_cli.render_list([app("pi"), theirs], NOW, all_namespaces=False).splitlines()
    assert lines[0].split()[:3] == ["NAME", "GROUP", "STATE"]
    assert [line.split()[:2] for line in lines[1:]] == [["pi", "sparkop.io"], ["pi", "sparkoperator.k8s.io"]]


def test_an_app_is_named_by_its_name_or_group_and_name() -> None:
    apis, name = daily_cli.app_reference("pi")
    assert name == "pi" and [a.group for a in apis] == ["sparkop.io", "sparkoperator.k8s.io"]
    apis, name = daily_cli.app_reference("sparkoperator.k8s.io/pi")
    assert name == "pi" and [a.group for a in apis] == ["sparkoperator.k8s.io"]
    with pytest.raises(Unavailable, match=r"'spark\.apache\.org' is not a group sparkop serves"):
        daily_cli.app_reference("spark.apache.org/pi")


def test_an_apps_sparkdrivers_are_those_it_controls_not_the_other_groups_of_the_same_name() -> None:
    ours, theirs = app("pi"), {**app("pi"), "apiVersion": "sparkoperator.k8s.io/v1beta2"}
    theirs["metadata"] = {**theirs["metadata"], "uid": "uid-kubeflow-pi"}

    def owned(name: str, owner: Obj) -> Obj:
        ref = {"apiVersion": owner["apiVersion"], "kind": "SparkApplication", "name": "pi", "controller": True,
               "uid": owner["metadata"]["uid"]}  # fmt: skip
        body = driver(name, 1)
        body["metadata"]["ownerReferences"] = [ref]
        return body

    drivers = [owned("pi-1", ours), owned("pi-1-kf", theirs)]
    assert [d["metadata"]["name"] for d in daily_cli.own_drivers(ours, drivers)] == ["pi-1"]
    assert [d["metadata"]["name"] for d in daily_cli.own_drivers(theirs, drivers)] == ["pi-1-kf"]


# -- which SparkDriver and pod `logs` reads ----------------------------------------------------


def test_the_current_run_is_status_current_driver_else_the_newest_run() -> None:
    drivers = [driver("pi-1", 1, phase="Failed"), driver("pi-3", 3), driver("pi-2", 2, phase="Failed")]
    assert daily_cli.choose_driver(app(currentDriver="pi-2"), drivers)["metadata"]["name"] == "pi-2"
    assert daily_cli.choose_driver(app(), drivers)["metadata"]["name"] == "pi-3"
    assert daily_cli.choose_driver(app(currentDriver="pi-3"), drivers, run=1)["metadata"]["name"] == "pi-1"


def test_a_missing_run_names_the_app_the_runs_kept_and_where_to_look() -> None:
    with pytest.raises(Unavailable, match=r"'pi' has no run 7 \(runs kept: 1, 3\); sparkop status pi -n jobs"):
        daily_cli.choose_driver(app(), [driver("pi-3", 3), driver("pi-1", 1)], run=7)
    with pytest.raises(Unavailable, match=r"'pi' has no run yet \(state NEW\); sparkop events pi -n jobs"):
        daily_cli.choose_driver(app(), [])


PODS = [
    pod("pi-2-1-driver", labels.ROLE_DRIVER, 1),
    pod("pi-2-1-exec-1", labels.ROLE_EXECUTOR, 1, exec_id=1),
    pod("pi-2-2-driver", labels.ROLE_DRIVER, 2, containers=2),
    pod("pi-2-2-exec-10", labels.ROLE_EXECUTOR, 2, exec_id=10),
    pod("pi-2-2-exec-2", labels.ROLE_EXECUTOR, 2, exec_id=2, containers=2),
]


def test_logs_reads_the_driver_pod_of_the_current_incarnation_by_default() -> None:
    current = driver("pi-2", 2, incarnation=2)
    assert daily_cli.choose_pod(current, PODS)["metadata"]["name"] == "pi-2-2-driver"
    assert daily_cli.choose_pod(current, PODS, incarnation=1)["metadata"]["name"] == "pi-2-1-driver"
    # Before its status names an incarnation, the newest pod is the current one.
    assert daily_cli.choose_pod(driver("pi-2", 2, incarnation=0), PODS)["metadata"]["name"] == "pi-2-2-driver"


def test_an_executor_is_found_by_its_spark_executor_id_in_the_incarnation() -> None:
    current = driver("pi-2", 2, incarnation=2)
    assert daily_cli.choose_pod(current, PODS, executor="10")["metadata"]["name"] == "pi-2-2-exec-10"
    assert daily_cli.choose_pod(current, PODS, executor="1", incarnation=1)["metadata"]["name"] == "pi-2-1-exec-1"
    with pytest.raises(Unavailable, match=r"'pi-2' incarnation 2 has no executor 1 \(executor ids: 2, 10\)"):
        daily_cli.choose_pod(current, PODS, executor="1")


def test_a_missing_pod_says_which_incarnations_have_pods() -> None:
    with pytest.raises(Unavailable, match=r"no driver pod of incarnation 3 \(current: 2; pods kept: 1, 2\)"):
        daily_cli.choose_pod(driver("pi-2", 2, incarnation=2), PODS, incarnation=3)
    with pytest.raises(Unavailable, match=r"'pi-2' has no driver pod yet \(phase Pending\)"):
        daily_cli.choose_pod(driver("pi-2", 2, incarnation=0, phase="Pending"), [])


def test_the_log_is_read_from_the_spark_container() -> None:
    by_name = {p["metadata"]["name"]: p for p in PODS}
    assert daily_cli.log_container(by_name["pi-2-1-driver"]) is None  # one container: the API server's choice
    assert daily_cli.log_container(by_name["pi-2-2-driver"]) == "spark-kubernetes-driver"  # the last one
    assert daily_cli.log_container(by_name["pi-2-2-exec-2"]) == "spark-kubernetes-executor"
    annotated = {**by_name["pi-2-2-driver"]}
    annotated["metadata"] = {**annotated["metadata"], "annotations": {daily_cli.DEFAULT_CONTAINER_ANNOTATION: "x"}}
    assert daily_cli.log_container(annotated) == "x"


# -- events ------------------------------------------------------------------------------------


def event(kind: str, name: str, reason: str, *, seconds_ago: float, uid: str | None = None, **extra: Any) -> Obj:
    return {
        "metadata": {"name": f"{name}.{reason}", "creationTimestamp": stamp(seconds_ago)[:19] + "Z"},
        "involvedObject": {"kind": kind, "name": name, **({"uid": uid} if uid else {})},
        "reason": reason,
        "type": "Normal",
        "message": f"{reason} happened",
        "eventTime": stamp(seconds_ago),
        **extra,
    }


def test_events_are_the_apps_and_its_drivers_in_time_order() -> None:
    the_app = app(created=600, currentDriver="pi-3", attempts=[{"run": 1, "driver": "pi-1"}])
    drivers = [driver("pi-2", 2), driver("pi-3", 3)]
    events = [
        event("SparkDriver", "pi-3", "PodCreated", seconds_ago=10.25),
        event("SparkApplication", "pi", "Submitted", seconds_ago=500, uid="uid-pi"),
        event("SparkDriver", "pi-1", "PodCreated", seconds_ago=400),  # pruned run, remembered in status
        event("SparkDriver", "pi-2", "Failed", seconds_ago=10.5),  # same second as pi-3's, earlier
        event("SparkDriver", "other-1", "PodCreated", seconds_ago=5),  # another app's driver
        event("SparkApplication", "other", "Submitted", seconds_ago=5),
        event("SparkApplication", "pi", "Stale", seconds_ago=5, uid="uid-of-a-deleted-pi"),
        event("SparkApplication", "pi", "BeforeCreation", seconds_ago=700),
    ]
    chosen = daily_cli.app_events(the_app, drivers, events)
    assert [(e["involvedObject"]["name"], e["reason"]) for e in chosen] == [
        ("pi", "Submitted"),
        ("pi-1", "PodCreated"),
        ("pi-2", "Failed"),
        ("pi-3", "PodCreated"),
    ]


def test_a_repeated_event_sorts_by_when_it_was_last_seen_and_shows_its_count() -> None:
    repeated = event(
        "SparkDriver",
        "pi-2",
        "Retrying",
        seconds_ago=300,
        count=4,
        firstTimestamp=stamp(300)[:19] + "Z",
        lastTimestamp=stamp(30)[:19] + "Z",
    )
    once = event("SparkDriver", "pi-2", "PodCreated", seconds_ago=60)
    chosen = daily_cli.app_events(app(), [driver("pi-2", 2)], [repeated, once])
    assert [e["reason"] for e in chosen] == ["PodCreated", "Retrying"]
    lines = daily_cli.render_events(chosen, NOW).splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert lines[1].split() == ["60s", "Normal", "PodCreated", "sparkdriver/pi-2", "PodCreated", "happened"]
    assert lines[2].split()[:5] == ["30s", "(x4", "over", "5m)", "Normal"]


# -- suspend and resume ------------------------------------------------------------------------


def test_suspend_sets_spec_suspend_only_when_it_says_otherwise() -> None:
    running = app(applicationState={"state": "RUNNING"}, currentDriver="pi-1")
    suspended = {**running, "spec": {"suspend": True}}
    assert daily_cli.suspension_patch(running, True) == {"spec": {"suspend": True}}
    assert daily_cli.suspension_patch(running, False) is None
    assert daily_cli.suspension_patch(suspended, True) is None
    assert daily_cli.suspension_patch(suspended, False) == {"spec": {"suspend": False}}
    assert daily_cli.describe_suspension(running, True, changed=True) == (
        "sparkapplication jobs/pi suspended (was RUNNING): its run pi-1 is stopped and no new run starts "
        "until sparkop resume pi -n jobs"
    )
    assert "is not suspended (state RUNNING); nothing to do" in daily_cli.describe_suspension(
        running, False, changed=False
    )


# -- the command line --------------------------------------------------------------------------


def test_the_commands_take_kubectls_connection_flags() -> None:
    parser = cli._parser()
    listing = parser.parse_args(["list", "-A", "--kubeconfig", "k", "--context", "c"])
    assert (listing.all_namespaces, listing.kubeconfig, listing.context, listing.namespace) == (True, "k", "c", None)
    logs = parser.parse_args(["logs", "pi", "-n", "jobs", "-f", "--executor", "3", "--incarnation", "2"])
    assert (logs.app, logs.namespace, logs.follow, logs.executor, logs.incarnation) == ("pi", "jobs", True, "3", 2)
    assert parser.parse_args(["logs", "pi", "--attempt", "4"]).attempt == 4
    for verb in ("events", "suspend", "resume"):
        assert parser.parse_args([verb, "pi", "--namespace", "x"]).namespace == "x"


def test_a_missing_kubeconfig_is_one_line_naming_it() -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = cli.main(["list", "--kubeconfig", "/nonexistent/kubeconfig"])
    assert status == 1
    assert (
        err.getvalue()
        == "sparkop list: kubeconfig /nonexistent/kubeconfig does not exist; pass the file kubectl uses\n"
    )


KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: jobs
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: jobs
  context: {cluster: c, user: u, namespace: jobs}
- name: bare
  context: {cluster: c, user: u}
"""


@pytest.mark.parametrize(("context", "namespace"), [(None, "jobs"), ("jobs", "jobs"), ("bare", "default")])
def test_the_default_namespace_is_the_contexts_as_in_kubectl(
    tmp_path: Path, context: str | None, namespace: str
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)

    async def connected_namespace() -> str:
        kube = await k8s.Kube.connect(str(path), context)
        await kube.close()
        return kube.namespace

    assert asyncio.run(connected_namespace()) == namespace


# -- kubectl's habits: list -o/-l/-w, logs --tail/--since/--timestamps, status -n ----------------------


def test_list_takes_kubectls_output_selector_and_watch_flags() -> None:
    parser = cli._parser()
    listing = parser.parse_args(["list", "-o", "json", "-l", "team=a,tier!=b", "-w"])
    assert (listing.output, listing.selector, listing.watch) == ("json", "team=a,tier!=b", True)
    assert parser.parse_args(["list", "--output=wide", "--selector", "x"]).output == "wide"
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        parser.parse_args(["list", "-o", "jsonpath"])


def test_list_json_and_yaml_are_a_v1_list_of_the_objects_as_served() -> None:
    apps = [app("pi", applicationState={"state": "RUNNING"}), app("etl", namespace="other")]
    listed = json.loads(daily_cli.render_objects(apps, "json"))
    assert listed == {"apiVersion": "v1", "items": apps, "kind": "List", "metadata": {"resourceVersion": ""}}
    assert yaml.safe_load(daily_cli.render_objects(apps, "yaml")) == listed
    assert json.loads(daily_cli.render_objects([], "json"))["items"] == []


def test_list_name_is_kind_dot_group_slash_name_as_kubectl_prints_it() -> None:
    apps = [app("pi"), app("etl")]
    assert daily_cli.render_objects(apps, "name") == ("sparkapplication.sparkop.io/pi\nsparkapplication.sparkop.io/etl")
    assert daily_cli.render_object(app("pi"), "name") == "sparkapplication.sparkop.io/pi"


def test_list_wide_adds_the_spark_version_driver_pod_and_app_id_before_the_last_error() -> None:
    running = app(
        "pi",
        applicationState={"state": "RUNNING"},
        driverInfo={"podName": "pi-1-1-driver"},
        sparkApplicationId="spark-abc",
    )
    running["spec"]["sparkVersion"] = "3.5.9"
    lines = daily_cli.render_list([running], NOW, all_namespaces=True, wide=True).splitlines()
    assert lines[0].split() == [
        "NAMESPACE", "NAME", "STATE", "ATTEMPTS", "EXECUTORS", "DURATION", "AGE",
        "SPARK", "DRIVER", "POD", "SPARK", "APP", "ID", "LAST", "ERROR",
    ]  # fmt: skip
    assert lines[1].split()[7:] == ["3.5.9", "pi-1-1-driver", "spark-abc", "-"]


def test_logs_take_kubectls_tail_since_and_timestamps() -> None:
    parser = cli._parser()
    read = parser.parse_args(["logs", "pi", "--tail", "20", "--since", "1h30m", "--timestamps"])
    assert (read.tail, read.since, read.timestamps) == (20, 5400, True)
    default = parser.parse_args(["logs", "pi"])
    assert (default.tail, default.since, default.timestamps) == (-1, None, False)
    assert parser.parse_args(["logs", "pi", "--since", "90s"]).since == 90
    assert parser.parse_args(["logs", "pi", "--since", "0.5s"]).since == 1
    for wrong, why in (("5", "write e.g. 30s, 5m or 1h30m"), ("1d", "write e.g."), ("0s", "must be positive")):
        err = io.StringIO()
        with pytest.raises(SystemExit), contextlib.redirect_stderr(err):
            parser.parse_args(["logs", "pi", "--since", wrong])
        assert "--since" in err.getvalue() and why in err.getvalue(), err.getvalue()


def test_status_and_render_take_n_and_status_the_connection_flags() -> None:
    parser = cli._parser()
    status = parser.parse_args(["status", "pi", "-n", "jobs", "--context", "c", "--kubeconfig", "k"])
    assert (status.name, status.namespace, status.context, status.kubeconfig) == ("pi", "jobs", "c", "k")
    assert parser.parse_args(["status", "pi"]).namespace is None  # the context's, as kubectl
    assert parser.parse_args(["render", "f.yaml", "-n", "jobs"]).namespace == "jobs"
