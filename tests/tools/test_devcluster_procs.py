from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devcluster import procs
from devcluster.cluster import Cluster, ClusterError, ClusterState, ProcessRecord
from devcluster.testing import wait_for

SLEEP = shutil.which("sleep") or "/bin/sleep"


def test_stop_all_terminates_our_process(tmp_path: Path) -> None:
    pid = procs.spawn([SLEEP, "60"], tmp_path / "sleep.log")
    # Popen returns as the child's exec begins; its new command line shows a moment later (on a
    # loaded machine, after this line had read an empty one).
    wait_for(lambda: procs.runs_executable(pid, SLEEP), timeout=10, message="sleep's command line")
    assert procs.is_alive(pid)
    procs.stop_all([(pid, SLEEP)], grace=2.0)
    assert not procs.is_alive(pid)


def test_stop_all_leaves_a_reused_pid_alone(tmp_path: Path) -> None:
    pid = procs.spawn([SLEEP, "60"], tmp_path / "sleep.log")
    try:
        procs.stop_all([(pid, "/some/other/binary")], grace=0.1)
        assert procs.is_alive(pid)
    finally:
        procs.stop_all([(pid, SLEEP)], grace=0.1)


def test_die_with_parent(tmp_path: Path) -> None:
    """A process spawned with die_with_parent goes away when its spawner is SIGKILLed."""
    pid_file = tmp_path / "pid"
    script = (
        "import sys, time; from pathlib import Path; from devcluster import procs;"
        f"pid = procs.spawn([{SLEEP!r}, '60'], Path({str(tmp_path / 'log')!r}), die_with_parent=True);"
        f"Path({str(pid_file)!r}).write_text(str(pid)); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert procs.is_alive(child)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 5
    while procs.is_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procs.is_alive(child)


def test_state_round_trip(tmp_path: Path) -> None:
    state = ClusterState(
        name="n",
        directory=str(tmp_path),
        bin_dir="/bin",
        kubeconfig=str(tmp_path / "kubeconfig"),
        server="https://127.0.0.1:1",
        ports={"apiserver": 1},
        nodes=["kwok-node-0"],
        processes={"etcd": ProcessRecord(pid=1, argv=["/bin/etcd", "--x"], log="/l")},
    )
    state.save()
    assert ClusterState.load(tmp_path) == state


def saved_state(tmp_path: Path) -> ClusterState:
    """The state file of a cluster named c that runs nothing yet."""
    directory = tmp_path / "c"
    directory.mkdir()
    state = ClusterState(
        name="c", directory=str(directory), bin_dir="/bin", kubeconfig=str(directory / "kubeconfig"),
        server="https://127.0.0.1:1", ports={"apiserver": 1},
    )  # fmt: skip
    state.save()
    return state


def test_a_client_started_on_a_cluster_is_stopped_by_its_down(tmp_path: Path) -> None:
    """What `sparkop demo --keep` leaves running (its operator) goes with `devcluster down`: recorded in
    the cluster's state as it starts, stopped by pid, before the cluster's own processes."""
    state = saved_state(tmp_path)
    directory = Path(state.directory)
    pid = Cluster(state).start_client("operator", [SLEEP, "60"])
    wait_for(lambda: procs.runs_executable(pid, SLEEP), timeout=10, message="sleep's command line")
    # Another process (`python -m devcluster down`) knows it from the state file alone.
    loaded = Cluster(ClusterState.load(directory))
    assert loaded.state.clients == ["operator"] and loaded.state.processes["operator"].pid == pid
    assert (directory / "operator.log").exists()
    with pytest.raises(ClusterError, match="already runs"):
        loaded.start_client("operator", [SLEEP, "60"])
    loaded.down()
    assert not procs.is_alive(pid) and not directory.exists()


def test_what_a_process_gets_on_top_of_its_environment_it_gets_again_when_started_anew(tmp_path: Path) -> None:
    """A restart (Cluster.restart) starts a process from its record: the API server's GOMEMLIMIT of a
    scale run (components.ScaleSettings) is recorded with it, so a restarted API server keeps it."""
    state = saved_state(tmp_path)
    directory = Path(state.directory)
    seen = tmp_path / "seen"
    argv = ["/bin/sh", "-c", f'echo "$GOMEMLIMIT" >> {seen}; {SLEEP} 60']
    cluster = Cluster(state)
    cluster._spawn("server", argv, extra_env={"GOMEMLIMIT": "8GiB"})
    record = ClusterState.load(directory).processes["server"]
    assert record.env == {"GOMEMLIMIT": "8GiB"}
    wait_for(lambda: seen.exists() and len(seen.read_text().split()) == 1, timeout=10, message="the first start")
    procs.stop_all([(record.pid, record.executable)])
    assert not procs.is_alive(record.pid)
    cluster._respawn("server", cluster.state.processes.pop("server"))
    wait_for(lambda: len(seen.read_text().split()) == 2, timeout=10, message="the second start")
    assert seen.read_text().split() == ["8GiB", "8GiB"]
    cluster.down()
