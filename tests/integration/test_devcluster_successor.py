"""kwok plays the kubelet, whose last act on a terminating pod is a grace-0 delete of that pod: the real
kubelet sends it with a uid precondition, so a pod created under the same name a moment later (a
replacement driver pod, a SparkDriver deleted and applied again) is never taken with it.

The driver controller reacts to the old pod's removal within milliseconds, so the devcluster must be
as careful, or a fresh driver pod is deleted at birth and reported lost (a spurious incarnation)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.testing import ClusterHandle

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
CYCLES = 20
WATCH_SECONDS = 0.5


def bound_pod(namespace: str, name: str, node: str) -> Obj:
    """Bound to a kwok node from the start, so that its deletion is graceful and left to the "kubelet"."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
    }


async def _successor_fate(core: client.CoreV1Api, namespace: str, name: str, node: str) -> str | None:
    """Delete a pod, create its successor the moment the name is free, and watch the successor: None
    if it is left alone, else what happened to it."""
    old = await core.create_namespaced_pod(namespace, cast(Any, bound_pod(namespace, name, node)))
    # Deleted while it runs, as a driver pod is (never while kwok is still starting it).
    for _ in range(3000):
        if (await core.read_namespaced_pod(name, namespace)).status.phase == "Running":
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError(f"{name} never ran")
    await core.delete_namespaced_pod(name, namespace)
    deadline = time.monotonic() + 30
    while True:
        try:
            new = await core.create_namespaced_pod(namespace, cast(Any, bound_pod(namespace, name, node)))
            break
        except ApiException as exc:
            assert exc.status == 409 and time.monotonic() < deadline, f"{name}: {exc.status} {exc.reason}"
    assert new.metadata.uid != old.metadata.uid
    watch_until = time.monotonic() + WATCH_SECONDS
    while time.monotonic() < watch_until:
        try:
            now = await core.read_namespaced_pod(name, namespace)
        except ApiException as exc:
            return f"{name}: the successor is gone ({exc.status})"
        if now.metadata.uid != new.metadata.uid:
            return f"{name}: the successor is gone (replaced)"
        if now.metadata.deletion_timestamp is not None:
            return f"{name}: the successor is being deleted"
        await asyncio.sleep(0.01)
    return None


def test_the_final_delete_of_a_terminating_pod_never_takes_its_successor(
    cluster: ClusterHandle, namespace: str
) -> None:
    node = cluster.kubectl_json("get", "nodes", "-l", "type=kwok")["items"][0]["metadata"]["name"]

    async def run() -> list[str]:
        async with await config.new_client_from_config(config_file=str(cluster.kubeconfig)) as api:
            core = client.CoreV1Api(api)
            fates = [await _successor_fate(core, namespace, f"reborn-{n}", node) for n in range(CYCLES)]
        return [fate for fate in fates if fate is not None]

    deleted = asyncio.run(run())
    assert not deleted, f"{len(deleted)} of {CYCLES} successors deleted by their predecessor's final delete: {deleted}"
