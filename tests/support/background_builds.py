"""The builds `make test` runs beside the suite (devcluster/background.py): devcluster's later builds
(helm, Volcano, Kueue, scheduler-plugins, Traefik: devcluster.build.LATER_BUILDS), Airflow's venv
and kubeflow's spark-operator (the live swap's), helm first (the chart tests, mid-suite, use it), the
rest in the order the suite's last tests use them. tests/run_suite.py starts it at a low priority; the tests
that need one are marked ``needs_build(<name>)`` and run last in their part (tests/conftest.py), and
wait for it where they would otherwise build it.

    .venv/bin/python -m tests.support.background_builds DIR    # what tests/run_suite.py runs
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from devcluster import background
from devcluster.build import later_steps
from tests.support.airflow_venv import airflow_venv_dir, ensure_airflow_venv

AIRFLOW = "airflow"
KUBEFLOW_OPERATOR = "kubeflow-operator"
T = TypeVar("T")


def steps() -> list[background.Step]:
    # Imported here, not at the top: it loads bench/peer.py, which only the builder needs, while every
    # pytest process imports this module for step_names() (tests/conftest.py).
    from tests.support import kubeflow_operator

    airflow = background.Step(AIRFLOW, str(airflow_venv_dir()), "Airflow's venv", lambda log: ensure_airflow_venv())
    kubeflow = background.Step(
        KUBEFLOW_OPERATOR,
        str(kubeflow_operator.binary_dir()),
        "kubeflow's spark-operator",
        lambda log: kubeflow_operator.ensure_binary(),
    )
    return [*later_steps(), airflow, kubeflow]


def step_names() -> tuple[str, ...]:
    """The names a ``needs_build`` marker may give, in the order they are built."""
    return (*(step.name for step in later_steps()), AIRFLOW, KUBEFLOW_OPERATOR)


def last_by_build(items: Sequence[T], needs: Callable[[T], tuple[str, ...]], order: Sequence[str]) -> list[T]:
    """``items`` that need no background build first, as they were; then those that do, by the
    position in ``order`` of the last build each needs (the one it would wait for longest), each group
    as it was (a stable sort: a module's tests stay together). A name not in ``order`` is a ValueError
    naming the known ones."""

    def rank(item: T) -> int:
        names = needs(item)
        unknown = [name for name in names if name not in order]
        if unknown:
            raise ValueError(f"needs_build({', '.join(map(repr, unknown))}): not a background build; one of {order}")
        return 1 + max((order.index(name) for name in names), default=-1)

    return sorted(items, key=rank)


def _log(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)


def main(argv: list[str]) -> int:
    (directory,) = argv
    os.environ.pop(background.BACKGROUND_ENV, None)  # an outer builder's: this one's steps wait for nobody
    failed = background.run_steps(Path(directory), steps(), _log)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
