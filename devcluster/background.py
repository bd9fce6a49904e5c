"""Builds that run beside the tests, and the tests' wait for them.

`make test` builds first only what the first tests need (`prepare --stage first`), and runs the rest
(Volcano, Kueue, scheduler-plugins, Traefik, Airflow's venv, kubeflow's operator) in a background
process beside the suite (tests/run_suite.py starts it), so that the suite's idle CPU does the builds a
few tests need. A test that needs one waits for it as a condition, never on time:

* The builder (`run_steps`) takes an exclusive lock on each step's lock file before anything else,
  writes its plan (the steps' keys) and then runs the steps in order, each ended by a result file
  (`.done`, or `.failed` with the error) and the release of that step's lock.
* A consumer (`wait_for`, called where the thing is built on demand: `ensure_set_built`,
  `ensure_airflow_venv`) whose key is in the plan takes a shared lock on the step's lock file: it
  is granted once the step has ended, or the builder has died (the kernel drops a dead process's
  locks). Then the result file says which: done, the consumer goes on; failed, it raises the
  builder's error, which becomes the test's; neither, the builder died before the step, which is
  said as such. No polling, no timeout of its own.

`$SPARKOP_BACKGROUND_BUILDS` names the builder's directory for the processes that may wait (the
pytest processes of run_suite.py). Without it, or for a key not in the plan, `wait_for` returns at
once and the caller builds on demand as before. A key is whatever names the thing uniquely, here
the cache directory it ends up in, so a test building into a cache of its own never waits.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
import traceback
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO

BACKGROUND_ENV = "SPARKOP_BACKGROUND_BUILDS"
PLAN_FILE = "plan.json"
LOG_FILE = "builder.log"

Log = Callable[[str], None]


class BackgroundBuildError(RuntimeError):
    """A step of the background builder failed, or the builder died before it: the waiting test's error."""


@dataclass(frozen=True)
class Step:
    """One background build: ``name`` is the tests' name for it (their ``needs_build`` marker), ``key``
    names what it makes (its cache directory), ``what`` says it to people, ``run`` makes it (a no-op
    when it is cached)."""

    name: str
    key: str
    what: str
    run: Callable[[Log], object]


def step_id(key: str) -> str:
    """The file-name stem of a step's lock and result files."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _files(directory: Path, key: str) -> tuple[Path, Path, Path]:
    stem = directory / step_id(key)
    return stem.with_suffix(".lock"), stem.with_suffix(".done"), stem.with_suffix(".failed")


def run_steps(directory: Path, steps: Sequence[Step], log: Log) -> int:
    """The builder: run ``steps`` in order, reporting each in ``directory``; the number that failed.
    A failed step does not stop the next: the tests that need only the others still run. Its process
    must not have ``$SPARKOP_BACKGROUND_BUILDS`` set (a step would wait for itself)."""
    directory.mkdir(parents=True, exist_ok=True)
    failed = 0
    with ExitStack() as stack:
        locks: dict[str, IO[str]] = {}
        for step in steps:
            lock_path, _, _ = _files(directory, step.key)
            handle = stack.enter_context(lock_path.open("a+"))
            fcntl.flock(handle, fcntl.LOCK_EX)
            locks[step.key] = handle
        plan = {"pid": os.getpid(), "steps": {step.key: step.what for step in steps}}
        tmp = directory / f"{PLAN_FILE}.tmp"
        tmp.write_text(json.dumps(plan, indent=1))
        tmp.rename(directory / PLAN_FILE)  # whole or absent: readers never see half a plan
        for step in steps:
            _, done, failed_file = _files(directory, step.key)
            started = time.monotonic()
            log(f"[background] {step.what}: started")
            try:
                step.run(log)
            except Exception as err:  # any failure is the waiting test's to report
                failed += 1
                failed_file.write_text(f"{err}\n\n{traceback.format_exc()}")
                log(f"[background] {step.what}: FAILED after {time.monotonic() - started:.0f} s: {err}")
            else:
                done.write_text(f"{time.monotonic() - started:.0f} s\n")
                log(f"[background] {step.what}: done in {time.monotonic() - started:.0f} s")
            fcntl.flock(locks[step.key], fcntl.LOCK_UN)
    return failed


def planned(directory: Path) -> dict[str, str]:
    """The builder's plan (key -> what), or {} before it is written."""
    try:
        steps: dict[str, str] = json.loads((directory / PLAN_FILE).read_text())["steps"]
    except FileNotFoundError:
        return {}
    return steps


def background_dir() -> Path | None:
    value = os.environ.get(BACKGROUND_ENV)
    return Path(value) if value else None


def wait_for(key: str, log: Log) -> None:
    """Return once the background builder has made ``key`` (at once when no builder plans it); raise
    BackgroundBuildError when its step failed or the builder died before finishing it."""
    directory = background_dir()
    if directory is None:
        return
    what = planned(directory).get(key)
    if what is None:
        return
    lock_path, done, failed = _files(directory, key)
    builder_log = directory / LOG_FILE
    with lock_path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"[background] waiting for the background build of {what} (its log: {builder_log})")
            started = time.monotonic()
            fcntl.flock(handle, fcntl.LOCK_SH)
            log(f"[background] {what}: waited {time.monotonic() - started:.0f} s")
        fcntl.flock(handle, fcntl.LOCK_UN)
    if done.exists():
        return
    if failed.exists():
        raise BackgroundBuildError(f"the background build of {what} failed (log {builder_log}): {failed.read_text()}")
    raise BackgroundBuildError(f"the background builder ended before it built {what} (killed? its log: {builder_log})")
