"""`make test`'s runner: the whole suite as two pytest processes side by side, the tests that need
real nodes (marked `realnode`, tests/conftest.py) in one and every other test in the other. The
machine holds one cluster with real nodes at a time, so those run one after another; the rest (unit
tests, the control-plane integration tests on their own clusters, the spark-submit conformance)
runs beside them, and the suite takes about as long as its real-node part.

Each process writes its output to a file, shown whole when both have ended (the real-node part last,
the other's summary right above it), so the two never interleave. The exit status is the first
failing part's; a part that selected no test (pytest's 5, e.g. under `-k`) is no failure when the
other ran some. `python tests/run_suite.py --serial ARGS` (or an `-m` of the caller's) runs one
pytest process, as before.

Beside the tests, at the lowest CPU priority, runs the background builder (tests/support/
background_builds.py: helm, Volcano, Kueue, scheduler-plugins, Traefik, Airflow's venv; a moment
when they are cached), which `make test` leaves out of its `prepare` so that the suite starts minutes
sooner on a cold machine. The tests that need one of them (but the chart tests, for helm, built first)
run last in their part, and wait for it where they would build it (devcluster/background.py), its
failure being their error. Its log is shown before the parts' output; it is stopped when the tests
end before it (a partial run that needed none of it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from devcluster import background

PARTS = (("everything else", "not realnode"), ("real nodes", "realnode"))
NO_TESTS_COLLECTED = 5
# Each part's summary lists its slowest tests: what a run that nears CI's budget should look at first.
SLOWEST = "--durations=25"
PYTEST = [sys.executable, "-m", "pytest"]
# The lowest priority: a test running meanwhile keeps its CPU, the builder has what the suite leaves idle.
BACKGROUND_NICE = 19


def main(argv: list[str]) -> int:
    # SIGTERM ends the runner by an exception, so that its `finally` stops both parts and the builder.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sparkop-suite-") as tmp:
        directory = Path(tmp) / "background"
        builder = start_builder(directory)
        try:
            if "--serial" in argv or any(arg.startswith("-m") for arg in argv):
                return subprocess.call([*PYTEST, *(arg for arg in argv if arg != "--serial")])
            logs = {name: Path(tmp) / f"{index}.log" for index, (name, _) in enumerate(PARTS)}
            codes = run_parts(argv, logs)
        finally:
            stop_builder(builder, directory)
        # The parts' output last: CI keeps the end of it.
        for name, _ in PARTS:
            print(f"\n{'=' * 30} {name}: exit {codes[name]} {'=' * 30}", flush=True)
            sys.stdout.buffer.write(logs[name].read_bytes())
            sys.stdout.flush()
    print(f"\nthe suite took {time.monotonic() - started:.0f} s; exit codes: {codes}", flush=True)
    failed = [code for code in codes.values() if code not in (0, NO_TESTS_COLLECTED)]
    if failed:
        return failed[0]
    return NO_TESTS_COLLECTED if all(code == NO_TESTS_COLLECTED for code in codes.values()) else 0


def run_parts(argv: list[str], logs: dict[str, Path]) -> dict[str, int]:
    runs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, selection in PARTS:
            with logs[name].open("wb") as out:
                command = [*PYTEST, "-m", selection, SLOWEST, *argv]
                runs[name] = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        print(f"running the suite in two parts side by side: {', '.join(runs)} (output when both end)", flush=True)
        return {name: run.wait() for name, run in runs.items()}
    finally:
        # Interrupted (Ctrl-C, CI's timeout): neither part outlives the runner.
        for run in runs.values():
            if run.poll() is None:
                run.terminate()
                run.wait()


def start_builder(directory: Path) -> subprocess.Popen[bytes] | None:
    """The background builder, once its plan is written (so a test that needs one of its builds
    finds it planned); None when another builder (an outer run's) already serves these tests."""
    if background.BACKGROUND_ENV in os.environ:
        return None
    directory.mkdir()
    command = ["nice", "-n", str(BACKGROUND_NICE), sys.executable, "-m", "tests.support.background_builds"]
    with (directory / background.LOG_FILE).open("wb") as out:
        builder = subprocess.Popen(
            [*command, str(directory)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopping it stops its `go build` too
        )
    while not background.planned(directory) and builder.poll() is None:
        time.sleep(0.05)
    steps = background.planned(directory)
    if steps:
        os.environ[background.BACKGROUND_ENV] = str(directory)  # the pytest processes inherit it
        print(f"building beside the suite (nice {BACKGROUND_NICE}): {', '.join(steps.values())}", flush=True)
    else:
        print("the background builder did not start: the tests build what they need themselves", flush=True)
    return builder


def stop_builder(builder: subprocess.Popen[bytes] | None, directory: Path) -> None:
    """Stop the builder if the tests ended first, and show what it did (its progress lines left out)."""
    if builder is None:
        return
    if builder.poll() is None:
        os.killpg(builder.pid, signal.SIGTERM)
        builder.wait()
        status = "stopped: the tests ended first"
    else:
        status = f"exit {builder.returncode}"
    print(f"\n{'=' * 30} background builds: {status} {'=' * 30}", flush=True)
    lines = (directory / background.LOG_FILE).read_text(errors="replace").splitlines()
    print("\n".join(line for line in lines if "still building" not in line), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
