"""Small valid specs shared by unit tests."""

from __future__ import annotations

from typing import Any

PYTHON_PI_SPEC: dict[str, Any] = {
    "type": "Python",
    "image": "spark:3.5.3",
    "sparkVersion": "3.5.3",
    "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
    "driver": {"cores": 1, "memory": "512m"},
    "executor": {"instances": 1},
}
