"""The driver controller's caches keep only what its passes read: the summaries of a trimmed pod,
ConfigMap or Service, and the SparkDriver keys each is filed under, are those of the whole object."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sparkop.driver_controller.observed import controller_key, owner_key
from sparkop.driver_controller.summaries import summarize_object, summarize_pod, trim_owned, trim_pod
from sparkop.render_cli import render_document

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml"))


def rendered() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for path in EXAMPLES:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in ("SparkApplication", "SparkDriver"):
                objects += render_document(doc)
    return objects


def with_life(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as the API server holds it once it ran and ended, being deleted."""
    pod = copy.deepcopy(pod)
    pod["metadata"] |= {
        "uid": "p1",
        "resourceVersion": "42",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "deletionTimestamp": "2026-01-01T00:05:00Z",
        "deletionGracePeriodSeconds": 30,
        "finalizers": ["sparkop.io/driver-outcome"],
        "managedFields": [{"manager": "sparkop"}],
    }
    pod["spec"]["nodeName"] = "node-1"
    name = pod["spec"]["containers"][-1]["name"]
    pod["status"] = {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "low memory",
        "podIP": "10.0.0.7",
        "startTime": "2026-01-01T00:00:01Z",
        "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}],
        "containerStatuses": [
            {"name": name, "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}},
        ],
    }
    return pod


@pytest.mark.parametrize("kind", ["Pod", "ConfigMap", "Service"])
def test_a_trimmed_object_summarizes_as_the_whole_one(kind: str) -> None:
    objects = [o for o in rendered() if o["kind"] == kind]
    assert objects, f"no {kind} rendered from examples/"
    for obj in objects:
        if kind == "Pod":
            whole = with_life(obj)
            trimmed = trim_pod(copy.deepcopy(whole))
            assert summarize_pod(trimmed) == summarize_pod(whole)
            assert owner_key(trimmed) == owner_key(whole) != []
            assert len(str(trimmed)) < len(str(whole))
        else:
            trimmed = trim_owned(copy.deepcopy(obj))
            assert summarize_object(trimmed) == summarize_object(obj)
            assert controller_key(trimmed) == controller_key(obj) != []
    if kind == "ConfigMap":  # the Spark properties are gone from the cache
        assert all("data" not in trim_owned(o) for o in objects)
