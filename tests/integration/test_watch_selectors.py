"""From the API server's side (its audit log): sparkop lists and watches only what it owns.

Pods, ConfigMaps, Services and Ingresses are most of a busy cluster's objects; sparkop must ask
the server to filter them (a label selector on every list and watch), never decode them all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from devcluster.testing import ClusterHandle, wait_for
from sparkop.core.kube import USER_AGENT
from tests.support.operator import OperatorProcess
from tests.support.specs import PYTHON_PI_SPEC

pytestmark = pytest.mark.cluster

BULK_KINDS = {"pods", "configmaps", "services", "ingresses", "networkpolicies"}


def _sparkop_requests(audit_log: Path, namespace: str) -> list[dict[str, Any]]:
    found = []
    for line in audit_log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        ref = entry.get("objectRef") or {}
        if entry.get("userAgent", "").startswith(USER_AGENT) and ref.get("namespace") == namespace:
            found.append(entry)
    return found


def test_every_list_and_watch_of_pods_configmaps_services_ingresses_and_networkpolicies_carries_a_label_selector(
    crds: ClusterHandle, namespace: str, operator: OperatorProcess
) -> None:
    if crds.cluster is None:
        pytest.skip("an external cluster's audit log is not readable here")
    audit_log = crds.cluster.audit_log
    crds.apply(
        {
            "apiVersion": "sparkop.io/v1alpha1",
            "kind": "SparkApplication",
            "metadata": {"name": "audited", "namespace": namespace},
            "spec": PYTHON_PI_SPEC,
        }
    )
    wait_for(
        lambda: crds.kubectl("get", "pods", "-n", namespace, "-o", "name").stdout.strip() != "",
        timeout=60,
        message="the operator created the driver pod (its watches are running)",
    )

    def watched() -> set[str]:
        return {e["objectRef"]["resource"] for e in _sparkop_requests(audit_log, namespace) if e.get("verb") == "watch"}

    wait_for(lambda: watched() >= BULK_KINDS, timeout=60, message=f"sparkop watching {sorted(BULK_KINDS)}")
    # The audit log also records sparkop's writes (creates, patches): only reads fetch in bulk.
    requests = [
        e
        for e in _sparkop_requests(audit_log, namespace)
        if e["objectRef"]["resource"] in BULK_KINDS and e.get("verb") in ("list", "watch")
    ]
    # Each kind's current state is fetched in bulk once: streamed over a watch (sendInitialEvents),
    # or by a LIST where the server cannot stream it.
    listings = {
        e["objectRef"]["resource"]
        for e in requests
        if e["verb"] == "list" or "sendInitialEvents=true" in e["requestURI"]
    }
    assert listings == BULK_KINDS, requests
    for entry in requests:
        query = parse_qs(urlsplit(entry["requestURI"]).query)
        assert query.get("labelSelector"), f"{entry['verb']} without a label selector: {entry['requestURI']}"
