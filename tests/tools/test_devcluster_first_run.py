"""The README's first command on a fresh machine: an empty binary cache, a slow first build, and
the traps a newcomer meets before it (no go, an old go, a build already running, no venv module).

No real `go build` runs here: a fake `go` first on PATH takes its time and drops placeholder
binaries. Everything else is the real code: `ensure_built` (lock, temp dir, rename) and
`Cluster.up` spawning real processes; only the components' readiness probes are stubbed,
since the placeholders serve nothing.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from devcluster import procs
from devcluster.build import (
    BuildError,
    bin_dir,
    build_lock,
    ensure_built,
    is_built,
    read_versions,
    required_go_version,
)
from devcluster.cluster import Cluster
from devcluster.testing import install_fake_go, wait_for
from sparkop import demo

REPO = Path(__file__).resolve().parents[2]
# The start-up budget is deliberately smaller than the build: on code that starts the deadline
# before building, `up` times out waiting for etcd, as on the first `make demo` of issue 9.
STARTUP_TIMEOUT_S = 2.0
BUILD_S = STARTUP_TIMEOUT_S + 1.5


def go_version(offset: int = 0) -> str:
    """The go version the build modules need (offset < 0: an older minor release)."""
    need, _ = required_go_version()
    major, minor, *_ = need
    return f"go{major}.{minor + offset}.0"


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("SPARKOP_CACHE", str(cache))
    monkeypatch.setenv("GOTOOLCHAIN", "local")
    return cache


def put_fake_go_on_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version: str, build_seconds: dict[str, float] | None = None
) -> None:
    fake = install_fake_go(tmp_path / "fake-go", build_seconds=build_seconds or {}, version=version)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")


def stub_readiness(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each component is ready at its second probe: starting takes a moment, as for real, so a
    deadline already past when the first process starts fails `up`."""
    probes: Counter[str] = Counter()

    def ready(name: str) -> bool:
        probes[name] += 1
        return probes[name] >= 2

    monkeypatch.setattr(Cluster, "_etcd_ready", lambda self: ready("etcd"))
    monkeypatch.setattr(Cluster, "_apiserver_ready", lambda self: ready("kube-apiserver"))
    monkeypatch.setattr(Cluster, "_readiness_check", lambda self, name: lambda: ready(name))
    monkeypatch.setattr(Cluster, "_nodes_ready", lambda self: ready("nodes"))
    monkeypatch.setattr(Cluster, "_default_service_account_exists", lambda self: ready("default service account"))
    monkeypatch.setattr(Cluster, "_create_nodes", lambda self, count, cpu, memory: [f"n{i}" for i in range(count)])


def test_up_from_an_empty_cache_starts_its_deadline_after_a_slow_build(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_fake_go_on_path(monkeypatch, tmp_path, go_version(), {"kubernetes": BUILD_S})
    stub_readiness(monkeypatch)
    lines: list[str] = []
    started = time.monotonic()

    cluster = Cluster.up(
        "first-run", nodes=1, simulator=False, die_with_parent=True, timeout=STARTUP_TIMEOUT_S, log=lines.append
    )
    try:
        took = time.monotonic() - started
        assert took > STARTUP_TIMEOUT_S, "the build must outlast the start-up budget, or this proves nothing"
        assert cluster.bin_dir == bin_dir() and cluster.bin_dir.is_relative_to(empty_cache)
        assert is_built(cluster.bin_dir)
        assert set(cluster.state.processes) == {
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        }
        for record in cluster.state.processes.values():
            assert Path(record.executable).parent == cluster.bin_dir
            assert procs.is_alive(record.pid)
        log = "\n".join(lines)
        assert log.index("[build] all binaries ready") < log.index("[up] etcd ready"), log
        assert "[build] kubernetes: go build kube-apiserver" in log and "(first run only; ~" in log, log
        kubernetes = read_versions()["KUBERNETES_VERSION"]
        assert f"building the control plane (Kubernetes {kubernetes}) from source" in log, log
    finally:
        cluster.down()
    assert not any(procs.is_alive(r.pid) for r in cluster.state.processes.values())


def test_a_build_waiting_for_another_build_says_so_and_then_uses_it(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_fake_go_on_path(monkeypatch, tmp_path, go_version())
    lock_path = build_lock(bin_dir())
    lock_path.parent.mkdir(parents=True)
    lines: list[str] = []
    built: list[Path] = []
    with lock_path.open("a+") as other_build:
        fcntl.flock(other_build, fcntl.LOCK_EX)
        other_build.write("4242\n")
        other_build.flush()
        waiter = threading.Thread(target=lambda: built.append(ensure_built(lines.append)), daemon=True)
        try:
            waiter.start()
            wait_for(lambda: any("pid 4242" in line for line in lines), timeout=20, message="the waiting message")
            assert waiter.is_alive() and not built
        finally:
            fcntl.flock(other_build, fcntl.LOCK_UN)
    waiter.join(timeout=60)
    (message,) = (line for line in lines if "pid 4242" in line)
    assert "another process (pid 4242) is building the control plane (Kubernetes v" in message
    assert "; waiting for it" in message
    assert built and is_built(built[0])


def test_no_go_on_path_is_one_clear_error_before_any_build(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BuildError) as raised:
        ensure_built(lambda line: None)
    need, _ = required_go_version()
    assert str(raised.value) == (
        "`go` is not on PATH: the control plane is built from source once, which needs "
        f"Go {'.'.join(map(str, need))} or newer (https://go.dev/dl/)"
    )


def test_a_go_older_than_the_modules_need_is_refused_before_building(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = go_version(offset=-1)
    put_fake_go_on_path(monkeypatch, tmp_path, old)
    lines: list[str] = []
    with pytest.raises(BuildError) as raised:
        ensure_built(lines.append)
    message = str(raised.value)
    assert f"is {old}, older than the go" in message and "go.mod needs" in message, message
    assert "GOTOOLCHAIN=local forbids fetching a newer one" in message and "https://go.dev/dl/" in message, message
    assert not any("go build" in line for line in lines), lines
    assert not is_built(bin_dir())


def test_a_go_older_than_the_modules_need_may_fetch_the_toolchain_itself(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_fake_go_on_path(monkeypatch, tmp_path, go_version(offset=-1))
    monkeypatch.setenv("GOTOOLCHAIN", "auto")
    lines: list[str] = []
    assert is_built(ensure_built(lines.append))
    assert any("go fetches toolchain" in line and "GOTOOLCHAIN=auto" in line for line in lines), lines


def test_demo_without_go_ends_in_one_error_line_not_a_traceback(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert demo.main(name="first-run-demo", keep=False) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: `go` is not on PATH: the control plane is built from source once"), err
    assert "Traceback" not in err and err.count("\n") == 1, err


# -- the Makefile, as `make demo` meets a fresh machine -----------------------------------------

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def make_demo(workdir: Path, python: Path) -> subprocess.CompletedProcess[str]:
    shutil.copy(REPO / "Makefile", workdir / "Makefile")
    (workdir / "pyproject.toml").write_text("")
    (workdir / "tests").mkdir(exist_ok=True)
    (workdir / "tests" / "constraints.txt").write_text("")
    return subprocess.run(
        ["make", "demo", f"PYTHON={python}"], cwd=workdir, capture_output=True, text=True, timeout=60, check=False
    )


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)
    return path


@needs_make
def test_make_demo_with_a_too_old_python_says_which_and_how(tmp_path: Path) -> None:
    python = script(
        tmp_path / "python3",
        'if [ "$1" = "--version" ]; then echo "Python 3.10.12"; exit 0; fi\nexit 1',
    )
    result = make_demo(tmp_path, python)
    assert result.returncode != 0
    assert result.stderr.splitlines()[0] == (
        f"error: sparkop needs Python 3.11+, and '{python}' is Python 3.10.12; "
        "install one, or name it: make demo PYTHON=python3.12"
    ), result.stderr
    assert not (tmp_path / ".venv").exists()


@needs_make
def test_make_demo_without_the_venv_module_says_which_package_and_leaves_no_broken_venv(tmp_path: Path) -> None:
    # Debian's python3 without python3-venv: `-m venv` fails half-way, leaving a .venv without
    # pip; a later run must not take that for a working venv.
    python = script(
        tmp_path / "python3",
        'if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then\n'
        '  mkdir -p "$3/bin" && printf "#!/bin/bash\\nexit 1\\n" > "$3/bin/python" && chmod +x "$3/bin/python"\n'
        '  echo "The virtual environment was not successfully created because ensurepip is not available." >&2\n'
        "  exit 1\n"
        "fi\n"
        f'exec {sys.executable} "$@"',
    )
    for _ in range(2):  # the second run meets what the first left behind
        result = make_demo(tmp_path, python)
        assert result.returncode != 0
        assert (
            f"error: '{python} -m venv' failed; on Debian/Ubuntu install the venv module: "
            "sudo apt-get install python3-venv (or python3.X-venv for your version)"
        ) in result.stderr, result.stderr
        assert not (tmp_path / ".venv").exists()
