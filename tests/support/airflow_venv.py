"""Apache Airflow's Kubernetes provider in a venv of its own, as its users install it: the pinned
packages of tests/clients/airflow-requirements.txt (145 wheels, 445 MB installed) from PyPI, unchanged.

Cached under ``~/.cache/sparkop/airflow-<key>/``, the key a hash of the requirements and of the
interpreter that makes it, so a new pin or Python makes a new venv and an unchanged one costs nothing.
``make test`` makes it beside the tests (tests/support/background_builds.py; 39 s in a cold CI run,
3.7 minutes on a quiet machine once, 20 under a load of 30), and the tests that use it ask for it
again (waiting for the background builder when it is still at it, a moment once made). A venv is
made under the caches' lock and counts only once its ``.complete`` mark is written: one left
half-made by a killed run is made again.

    .venv/bin/python -m tests.support.airflow_venv     # prints the venv's python
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

from devcluster import background
from devcluster.locks import held
from devcluster.paths import cache_root

REQUIREMENTS = Path(__file__).resolve().parents[1] / "clients" / "airflow-requirements.txt"
TASK_SCRIPT = REQUIREMENTS.parent / "airflow_task.py"
COMPLETE = ".complete"
RESULT_MARK = "AIRFLOW-TASK-RESULT "  # what tests/clients/airflow_task.py prints before its result


def _log(message: str) -> None:
    print(f"[airflow-venv {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def venv_key(requirements: Path = REQUIREMENTS, python: str = sys.executable) -> str:
    """What the venv is made of: the pins, and the interpreter's version (the venv links to it)."""
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True, check=True
    ).stdout
    return hashlib.sha256(requirements.read_bytes() + version.encode()).hexdigest()[:16]


def venv_dir(key: str) -> Path:
    return cache_root() / f"airflow-{key}"


def airflow_venv_dir(requirements: Path = REQUIREMENTS, python: str = sys.executable) -> Path:
    """Where the venv of these pins and this interpreter lives (made or not)."""
    return venv_dir(venv_key(requirements, python))


def ensure_airflow_venv(requirements: Path = REQUIREMENTS, python: str = sys.executable) -> Path:
    """The venv's interpreter, the venv made first when it is not cached yet (or, under `make test`,
    once the background builder has made it: devcluster/background.py)."""
    target = airflow_venv_dir(requirements, python)
    interpreter = target / "bin" / "python"
    if (target / COMPLETE).exists():
        return interpreter
    background.wait_for(str(target), _log)
    if (target / COMPLETE).exists():
        return interpreter
    target.parent.mkdir(parents=True, exist_ok=True)
    with held(target.parent / f"{target.name}.lock", lambda pid: _log(f"waiting for process {pid} making it")):
        if (target / COMPLETE).exists():
            return interpreter
        shutil.rmtree(target, ignore_errors=True)
        _log(f"making {target} from {requirements.name} (first run only, minutes)")
        started = time.monotonic()
        subprocess.run([python, "-m", "venv", str(target)], check=True)
        pip = [str(interpreter), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        # --no-deps: the file is the whole resolved set, so nothing else may come in.
        subprocess.run([*pip, "--no-deps", "-r", str(requirements)], check=True)
        subprocess.run([str(interpreter), "-m", "pip", "check"], check=True)
        (target / COMPLETE).write_text(f"{requirements.read_text()}")
        _log(f"made in {time.monotonic() - started:.0f} s")
    return interpreter


if __name__ == "__main__":
    print(ensure_airflow_venv())
