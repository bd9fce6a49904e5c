"""The builds `make test` runs beside the suite (devcluster/background.py, tests/support/background_builds.py):
the order of the tests that need them, and a test's wait for one, which ends on the build's end (done,
failed, or its builder dead), never on a time. No real `go build` runs: a fake `go` takes its time."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from devcluster import background
from devcluster.build import (
    ensure_schedulers,
    is_built,
    later_steps,
    read_versions,
    required_go_version,
    schedulers,
    set_dir,
)
from devcluster.testing import install_fake_go, wait_for
from tests.support import background_builds
from tests.support.background_builds import last_by_build

REPO = Path(__file__).resolve().parents[2]


def test_tests_needing_no_build_stay_first_and_the_rest_follow_in_build_order() -> None:
    needs = {"a": (), "b": ("traefik",), "c": (), "d": ("volcano", "kueue"), "e": ("volcano",), "f": ("kueue",)}
    order = ("volcano", "kueue", "coscheduling", "traefik")
    # d waits for kueue, built after volcano: after e; f with d, in their first order.
    assert last_by_build(list(needs), needs.__getitem__, order) == ["a", "c", "e", "d", "f", "b"]


def test_a_build_name_the_builder_does_not_know_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"needs_build\('volcanoo'\).*'volcano'"):
        last_by_build(["x"], lambda item: ("volcanoo",), ("volcano", "kueue"))


def test_the_markers_names_are_the_builders_steps_in_its_order() -> None:
    names = background_builds.step_names()
    assert names == ("helm", "volcano", "kueue", "coscheduling", "traefik", "airflow", "kubeflow-operator")
    assert tuple(step.name for step in later_steps()) == names[:-2]
    assert tuple(step.name for step in background_builds.steps()) == names


# How a test module starts what the background builder makes, and the builder's name for it.
STARTS = {
    'gangs.fixtures("volcano"': "volcano",
    'gangs.fixtures("kueue"': "kueue",
    'gangs.fixtures("coscheduling"': "coscheduling",
    'schedulers=("kueue",)': "kueue",
    "start_schedulers((": "",  # the names follow: checked below
    "start_gateway(": "traefik",
    "ensure_airflow_venv(": "airflow",
    "kubeflow_operator.start(": "kubeflow-operator",
}


def test_every_module_that_starts_a_later_build_is_marked_to_run_last() -> None:
    """A test module that starts what the builder makes, yet runs at its place, would wait minutes there."""
    checked = 0
    for module in sorted((REPO / "tests").glob("**/test_*.py")):
        if module.parent.name == "tools":
            continue
        text = module.read_text()
        needed = {name for start, name in STARTS.items() if name and start in text}
        for call in re.findall(r"start_schedulers\(\(([^)]*)\)", text):
            needed |= set(re.findall(r'"([a-z-]+)"', call))
        marked = {
            name for args in re.findall(r"needs_build\(([^)]*)\)", text) for name in re.findall(r'"([a-z-]+)"', args)
        }
        assert needed <= marked, f"{module.relative_to(REPO)}: pytest.mark.needs_build{tuple(sorted(needed - marked))}"
        checked += bool(needed)
    assert checked >= 8  # the modules of the Kueue, Volcano, Coscheduling, Traefik, Airflow and swap tests


def test_without_a_builder_the_wait_returns_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(background.BACKGROUND_ENV, raising=False)
    background.wait_for("anything", pytest.fail)
    monkeypatch.setenv(background.BACKGROUND_ENV, str(tmp_path))  # a builder, whose plan lacks the key
    background.wait_for("anything", pytest.fail)


def builder_env() -> dict[str, str]:
    """This process's environment less the suite's own builder (under `make test`), as a builder has it."""
    return {key: value for key, value in os.environ.items() if key != background.BACKGROUND_ENV}


def start_builder(directory: Path, steps: list[background.Step]) -> threading.Thread:
    builder = threading.Thread(target=background.run_steps, args=(directory, steps, lambda line: None), daemon=True)
    builder.start()
    wait_for(lambda: background.planned(directory), timeout=10, message="the builder's plan")
    return builder


def gated(gate: threading.Event, outcome: Callable[[], None] = lambda: None) -> Callable[[object], None]:
    def run(log: object) -> None:
        gate.wait()
        outcome()

    return run


def waiting_thread(key: str, lines: list[str], errors: list[BaseException]) -> threading.Thread:
    def wait() -> None:
        try:
            background.wait_for(key, lines.append)
        except background.BackgroundBuildError as err:
            errors.append(err)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    return waiter


def test_a_test_waits_until_its_build_is_done_whatever_the_builder_does_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = threading.Event(), threading.Event()
    steps = [background.Step("a", "key-a", "A", gated(first)), background.Step("b", "key-b", "B", gated(second))]
    builder = start_builder(tmp_path, steps)
    monkeypatch.setenv(background.BACKGROUND_ENV, str(tmp_path))
    lines: list[str] = []
    errors: list[BaseException] = []
    waiter = waiting_thread("key-a", lines, errors)
    wait_for(lambda: any("waiting for the background build of A" in line for line in lines), message="its line")
    assert waiter.is_alive()
    first.set()
    waiter.join(timeout=10)
    assert not waiter.is_alive() and not errors, errors
    assert builder.is_alive()  # still at B, which this test did not need
    second.set()
    builder.join(timeout=10)
    background.wait_for("key-b", pytest.fail)  # done: no wait, no line


def test_a_failed_build_is_the_waiting_tests_error_and_the_next_build_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise RuntimeError("go build of volcano failed (exit 1)")

    gate = threading.Event()
    ran: list[str] = []
    steps = [
        background.Step("a", "key-a", "Volcano", gated(gate, broken)),
        background.Step("b", "key-b", "B", lambda log: ran.append("b")),
    ]
    builder = start_builder(tmp_path, steps)
    monkeypatch.setenv(background.BACKGROUND_ENV, str(tmp_path))
    lines: list[str] = []
    errors: list[BaseException] = []
    waiter = waiting_thread("key-a", lines, errors)
    wait_for(lambda: lines, message="the waiting line")
    gate.set()
    waiter.join(timeout=10)
    builder.join(timeout=10)
    (error,) = errors
    assert "the background build of Volcano failed" in str(error) and "go build of volcano failed" in str(error)
    assert ran == ["b"]


def test_a_builder_killed_mid_build_ends_the_wait_with_an_error_saying_so(tmp_path: Path) -> None:
    script = (
        "import sys, threading; from pathlib import Path; from devcluster import background; "
        "background.run_steps(Path(sys.argv[1]), [background.Step('a', 'key-a', 'A', "
        "lambda log: threading.Event().wait())], print)"
    )
    builder = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, env=builder_env())
    try:
        wait_for(lambda: background.planned(tmp_path), timeout=30, message="the builder's plan")
        env = {**os.environ, background.BACKGROUND_ENV: str(tmp_path)}
        wait = "from devcluster import background; background.wait_for('key-a', print)"
        waiter = subprocess.Popen([sys.executable, "-c", wait], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
        builder.kill()
        _, stderr = waiter.communicate(timeout=30)
    finally:
        builder.kill()
        builder.wait()
    assert waiter.returncode != 0
    assert "the background builder ended before it built A (killed?" in stderr, stderr


def volcano_builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, go_script: str | None) -> subprocess.Popen[bytes]:
    """A builder process making Volcano (one of devcluster's later builds) into an empty cache, with a
    fake `go` (3 s, placeholders), or with ``go_script`` as `go`; this process set to wait for it."""
    monkeypatch.setenv("SPARKOP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GOTOOLCHAIN", "local")
    need, _ = required_go_version()
    version = "go" + ".".join(map(str, need))
    fake = install_fake_go(tmp_path / "fake-go", build_seconds={"volcano": 3.0}, version=version)
    if go_script is not None:
        (fake / "go").write_text(go_script.format(python=sys.executable, version=version))
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    directory = tmp_path / "background"
    script = (
        "import sys; from pathlib import Path; from devcluster import background, build; "
        "steps = [step for step in build.later_steps() if step.name == 'volcano']; "
        "sys.exit(background.run_steps(Path(sys.argv[1]), steps, print))"
    )
    builder = subprocess.Popen([sys.executable, "-c", script, str(directory)], cwd=REPO, env=builder_env())
    wait_for(lambda: background.planned(directory) or builder.poll() is not None, timeout=30, message="its plan")
    monkeypatch.setenv(background.BACKGROUND_ENV, str(directory))
    return builder


def test_a_cluster_needing_volcano_waits_for_the_builders_volcano_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ensure_set_built under a builder process making Volcano."""
    builder = volcano_builder(tmp_path, monkeypatch, None)
    try:
        lines: list[str] = []
        built = ensure_schedulers(lines.append)
        assert builder.wait(timeout=30) == 0
    finally:
        builder.kill()
        builder.wait()
    assert built == set_dir(schedulers(read_versions())) and is_built(built, schedulers(read_versions()).binaries)
    assert any("waiting for the background build of the batch schedulers (volcano-v" in line for line in lines), lines
    assert not any("go build" in line for line in lines), lines  # this process built nothing


# A `go` whose builds fail after a second, as a compile error does.
FAILING_GO = """#!{python}
import sys, time
if sys.argv[1:2] == ["env"]:
    print("{version}"); print("local"); sys.exit(0)
time.sleep(1)
sys.exit("vc-scheduler.go:12: undefined: volcanoThing")
"""


def test_a_failed_background_volcano_is_the_clusters_error_with_the_compilers_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = volcano_builder(tmp_path, monkeypatch, FAILING_GO)
    try:
        with pytest.raises(background.BackgroundBuildError) as raised:
            ensure_schedulers(lambda line: None)
        assert builder.wait(timeout=30) == 1
    finally:
        builder.kill()
        builder.wait()
    message = str(raised.value)
    assert "the background build of the batch schedulers (volcano-v" in message and "failed" in message, message
    assert "go build of volcano failed" in message and "undefined: volcanoThing" in message, message
