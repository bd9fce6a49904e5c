from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Literal

import pytest

from sparkop.core import logs


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _capture(fmt: Literal["text", "json"]) -> tuple[logging.Logger, io.StringIO]:
    logs.configure(fmt)
    stream = io.StringIO()
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    return logging.getLogger("sparkop.test"), stream


def test_json_lines_carry_the_object_and_the_reason() -> None:
    log, stream = _capture("json")
    logs.decision(log, "ns/pi", "create SparkDriver pi-2", "PendingRerun", run=2)
    entry = json.loads(stream.getvalue())
    assert entry["msg"] == "ns/pi: create SparkDriver pi-2"
    assert entry["obj"] == "ns/pi"
    assert entry["reason"] == "PendingRerun"
    assert entry["run"] == 2
    assert entry["level"] == "info"


def test_text_lines_are_one_line_with_key_values() -> None:
    log, stream = _capture("text")
    logs.decision(log, "ns/pi", "delete pod pi-1-1-driver", "StaleIncarnation")
    line = stream.getvalue()
    assert line.count("\n") == 1
    assert "ns/pi: delete pod pi-1-1-driver" in line
    assert "obj=ns/pi reason=StaleIncarnation" in line
