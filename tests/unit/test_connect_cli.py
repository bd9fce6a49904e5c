"""``sparkop connect NAME`` without --port-forward: what it prints of a SparkConnect, its exit status,
its flags and its help. (The forwarding is tests/unit/test_portforward.py's.)"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from sparkop import cli, connect_cli
from sparkop.core import kube as k8s

READY: dict[str, Any] = {
    "apiVersion": "sparkop.io/v1alpha1",
    "kind": "SparkConnect",
    "metadata": {"name": "analytics", "namespace": "jobs"},
    "spec": {"sparkVersion": "4.0.1", "image": "apache/spark:4.0.1"},
    "status": {
        "state": "Ready",
        "endpoint": "sc://analytics-server.jobs.svc:15002",
        "server": {
            "podName": "analytics-server-2-1-driver",
            "podIp": "10.244.1.7",
            "serviceName": "analytics-server",
            "driver": "analytics-server-2",
            "incarnation": 1,
        },
        "executors": {"pending": 1, "running": 2, "succeeded": 0, "failed": 0, "unknown": 0},
        "restarts": 1,
        "lastError": {"reason": "ServerExited", "message": "server analytics-server-1 exited:\n  exit code 1"},
    },
}


def test_a_ready_server_in_a_few_lines() -> None:
    assert connect_cli.describe(READY) == [
        "SparkConnect jobs/analytics: Ready",
        "  Endpoint: sc://analytics-server.jobs.svc:15002 (in the cluster; from outside: "
        "sparkop connect analytics -n jobs --port-forward)",
        "  Server: pod analytics-server-2-1-driver, IP 10.244.1.7, SparkDriver analytics-server-2, incarnation 1",
        "  Executors: 2 running, 1 pending",
        "  Restarts: 1",
        "  Last error: ServerExited: server analytics-server-1 exited: exit code 1",
    ]
    assert connect_cli.is_ready(READY)


def test_a_new_object_without_status_says_so() -> None:
    fresh = {"metadata": {"name": "analytics", "namespace": "jobs"}, "spec": {}}
    assert connect_cli.describe(fresh) == [
        "SparkConnect jobs/analytics: Unknown (no status yet: has the operator's connect controller seen it?)",
        "  Endpoint: none yet",
        "  Server: none yet",
        "  Executors: 0 running, 0 pending",
        "  Restarts: 0",
    ]
    assert not connect_cli.is_ready(fresh)


def test_a_provisioning_server_shows_what_there_is() -> None:
    provisioning = {
        **READY,
        "status": {
            "state": "Provisioning",
            "endpoint": "sc://analytics-server.jobs.svc:15002",
            "server": {"serviceName": "analytics-server", "driver": "analytics-server-1"},
            "executors": {"failed": 3},
            "lastError": {"reason": "ServerPodPending"},
        },
    }
    lines = connect_cli.describe(provisioning)
    assert lines[0] == "SparkConnect jobs/analytics: Provisioning"
    assert lines[2] == "  Server: pod -, IP -, SparkDriver analytics-server-1, incarnation -"
    assert lines[3] == "  Executors: 0 running, 0 pending, 3 failed"
    assert lines[-1] == "  Last error: ServerPodPending"
    assert not connect_cli.is_ready(provisioning)


def test_the_grpc_port_is_the_spark_confs() -> None:
    assert connect_cli.grpc_port(READY) == 15002
    moved = {**READY, "spec": {"sparkConf": {"spark.connect.grpc.binding.port": "15010"}}}
    assert connect_cli.grpc_port(moved) == 15010


def test_the_forwarding_line() -> None:
    assert connect_cli.forwarding_line("127.0.0.1", 15002, "jobs", "analytics-server-2-1-driver", 15002) == (
        "Forwarding sc://127.0.0.1:15002 -> jobs/analytics-server-2-1-driver:15002 (Ctrl-C to stop)"
    )
    assert connect_cli.local_url("::1", 40001) == "sc://[::1]:40001"


def test_help_shows_examples() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        cli.main(["connect", "--help"])
    assert exited.value.code == 0
    text = out.getvalue()
    assert "Examples:\n  sparkop connect analytics -n spark-jobs\n" in text
    assert "sparkop connect analytics --port-forward" in text
    assert 'SparkSession.builder.remote("sc://127.0.0.1:15002")' in text
    for flag in ("--kubeconfig", "--context", "--namespace", "--port-forward [LOCAL_PORT]", "--address ADDR"):
        assert flag in text, flag


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], {"port_forward": False, "local_port": None, "address": None}),
        (["--port-forward"], {"port_forward": True, "local_port": None, "address": None}),
        (["--port-forward", "-n", "jobs"], {"port_forward": True, "local_port": None, "address": None}),
        (["--port-forward", "0"], {"port_forward": True, "local_port": 0, "address": None}),
        (
            ["--port-forward", "25002", "--address", "0.0.0.0"],
            {"port_forward": True, "local_port": 25002, "address": "0.0.0.0"},
        ),
    ],
)
def test_the_flags_reach_the_command(
    argv: list[str], expected: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, ...]] = []

    def fake_main(target: Any, name: str, **kwargs: Any) -> int:
        calls.append((target, name, kwargs))
        return 0

    monkeypatch.setattr(connect_cli, "main", fake_main)
    assert cli.main(["connect", "analytics", *argv]) == 0
    ((target, name, kwargs),) = calls
    assert name == "analytics" and kwargs == expected
    assert target.namespace == ("jobs" if "-n" in argv else None)


@pytest.mark.parametrize("port", ["x", "-2", "65536"])
def test_a_bad_local_port_is_a_usage_error(port: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exited:
        cli.main(["connect", "analytics", "--port-forward", port])
    assert exited.value.code == 2
    assert "--port-forward" in err.getvalue()


class StubKube:
    namespace = "jobs"

    def __init__(self, found: dict[str, Any] | None) -> None:
        self.found = found

    async def get(self, resource: k8s.Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert resource.kind == "SparkConnect"
        return self.found if self.found and (namespace, name) == ("jobs", "analytics") else None

    async def close(self) -> None:
        pass


def run_command(monkeypatch: pytest.MonkeyPatch, found: dict[str, Any] | None, *argv: str) -> tuple[int, str, str]:
    async def connect(kubeconfig: str | None = None, context: str | None = None) -> StubKube:
        return StubKube(found)

    monkeypatch.setattr(k8s.Kube, "connect", connect)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(["connect", *argv])
    return status, out.getvalue(), err.getvalue()


def test_ready_exits_0_and_anything_else_1(monkeypatch: pytest.MonkeyPatch) -> None:
    status, out, err = run_command(monkeypatch, READY, "analytics")
    assert (status, out, err) == (0, "\n".join(connect_cli.describe(READY)) + "\n", "")
    not_ready = {**READY, "status": {**READY["status"], "state": "NotReady"}}
    status, out, _ = run_command(monkeypatch, not_ready, "analytics")
    assert status == 1 and out.startswith("SparkConnect jobs/analytics: NotReady\n")


def test_no_such_object_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    status, out, err = run_command(monkeypatch, READY, "nope", "-n", "jobs")
    assert (status, out) == (1, "")
    assert err == "sparkop connect: no SparkConnect 'nope' in namespace 'jobs'; kubectl get sparkconnects -n jobs\n"


def test_address_without_port_forward_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    status, out, err = run_command(monkeypatch, READY, "analytics", "--address", "0.0.0.0")
    assert (status, out, err) == (2, "", "sparkop connect: --address is for --port-forward\n")
