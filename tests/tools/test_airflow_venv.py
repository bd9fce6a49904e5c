"""The Airflow venv's cache key (tests/support/airflow_venv.py): the pins and the interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support import airflow_venv


def test_the_key_follows_the_pins(tmp_path: Path) -> None:
    pins = tmp_path / "requirements.txt"
    pins.write_text("apache-airflow==3.3.2\n")
    first = airflow_venv.venv_key(pins, sys.executable)
    assert first == airflow_venv.venv_key(pins, sys.executable)
    pins.write_text("apache-airflow==3.3.3\n")
    assert airflow_venv.venv_key(pins, sys.executable) != first


def test_the_pins_are_exact_and_hold_the_provider_with_its_airflow() -> None:
    lines = [line for line in airflow_venv.REQUIREMENTS.read_text().splitlines() if not line.startswith("#")]
    pins = dict(line.split("==") for line in lines)
    assert len(pins) == len(lines), "every requirement is pinned with =="
    assert {"apache-airflow", "apache-airflow-providers-cncf-kubernetes", "apache-airflow-task-sdk"} <= set(pins)
    assert airflow_venv.TASK_SCRIPT.is_file()
