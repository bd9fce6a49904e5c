"""`imagePullPolicy: Always` on real nodes: the kubelet's pull goes to devcluster/registry.py (no
registry outside is reachable), which answers from the node's own containerd store, so the pull
resolves to the digest the node already holds and the pod starts on it."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import kubeflow_e2e  # noqa: E402

from devcluster import images, realnodes, registry  # noqa: E402
from devcluster.nodes import RealNode  # noqa: E402
from devcluster.testing import ClusterHandle, wait_for  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

POD_DONE_S = 120.0


def pod(name: str, image: str, node: str, pull_policy: str = "Always") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 2,
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": pull_policy,
                    "command": ["/bin/sh", "-c", "echo ran"],
                }
            ],
        },
    }


def held(node: RealNode, image: str) -> registry.Target:
    """What `image` names in the node's containerd right now."""
    listed = realnodes.ctr(node, "images", "ls", f"name=={json.dumps(image)}", timeout=30)
    assert listed.returncode == 0, listed.stderr
    target = registry.parse_image_list(listed.stdout).get(image)
    assert target is not None, f"{node.name} holds no {image}:\n{listed.stdout}"
    return target


def run(cluster: ClusterHandle, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    cluster.apply(manifest, namespace=namespace)
    name = manifest["metadata"]["name"]

    def finished() -> dict[str, Any] | None:
        current: dict[str, Any] = cluster.kubectl_json("get", "pod", name, "-n", namespace)
        return current if current.get("status", {}).get("phase") in ("Succeeded", "Failed") else None

    return wait_for(finished, timeout=POD_DONE_S, interval=0.5, message=f"pod {name} to finish")


def events(cluster: ClusterHandle, namespace: str, name: str) -> list[dict[str, Any]]:
    listed = cluster.kubectl_json("get", "events", "-n", namespace, f"--field-selector=involvedObject.name={name}")
    return list(listed["items"])


def registry_log(cluster: ClusterHandle) -> str:
    assert cluster.cluster is not None
    return Path(cluster.cluster.state.processes["registry"].log).read_text()


@pytest.mark.parametrize(
    ("image", "stored_as", "node_index"),
    [
        ("apache/spark:3.5.9", "docker.io/apache/spark:3.5.9", 0),
        # Another registry host: every host's pulls come to the node's own store.
        (f"{images.BASE_REPO}:latest", f"{images.BASE_REPO}:latest", 1),
    ],
)
def test_a_pod_that_always_pulls_runs_the_image_its_node_holds(
    real_cluster: ClusterHandle, real_namespace: str, image: str, stored_as: str, node_index: int
) -> None:
    assert real_cluster.cluster is not None
    node = real_cluster.cluster.real_nodes[node_index]
    before = held(node, stored_as)
    name = f"always-{node_index}"
    done = run(real_cluster, real_namespace, pod(name, image, node.name))
    assert done["status"]["phase"] == "Succeeded", json.dumps(done["status"], indent=1)
    assert real_cluster.kubectl("logs", name, "-n", real_namespace).stdout == "ran\n"
    pulled = [e for e in events(real_cluster, real_namespace, name) if e["reason"] == "Pulled"]
    assert pulled and "Successfully pulled image" in pulled[0]["message"], pulled
    # The pull resolved the tag to what the node held, and replaced nothing.
    repository = stored_as.rsplit(":", 1)[0]
    assert done["status"]["containerStatuses"][0]["imageID"] == f"{repository}@{before.digest}"
    assert held(node, stored_as) == before
    # One HEAD for the tag, and no blob: containerd holds every one the manifest names.
    name_path, tag = stored_as.split("/", 1)[1].rsplit(":", 1)
    log = registry_log(real_cluster)
    assert f"HEAD /{node.name}/v2/{name_path}/manifests/{tag}?ns={stored_as.split('/')[0]} 200" in log
    assert "/blobs/" not in log


def test_kubeflows_examples_image_pulls_as_the_alias_the_nodes_hold(
    real_cluster: ClusterHandle, real_namespace: str
) -> None:
    """bench/kubeflow_e2e.py names the 4.0.5 image docker.io/apache/spark:4.0.4 on each node, and
    kubeflow's SparkConnect example runs it with `imagePullPolicy: Always`."""
    assert real_cluster.cluster is not None
    kubeflow_e2e.alias_examples_image(real_cluster.cluster)
    for node in real_cluster.cluster.real_nodes:
        assert held(node, kubeflow_e2e.EXAMPLES_IMAGE) == held(node, "docker.io/apache/spark:4.0.5")
    node = real_cluster.cluster.real_nodes[1]
    done = run(real_cluster, real_namespace, pod("alias", kubeflow_e2e.EXAMPLES_IMAGE, node.name))
    assert done["status"]["phase"] == "Succeeded", json.dumps(done["status"], indent=1)
    image_id = done["status"]["containerStatuses"][0]["imageID"]
    assert image_id == f"docker.io/apache/spark@{held(node, 'docker.io/apache/spark:4.0.5').digest}"
    # The image the kubelet pulled under the alias still starts under the name every other test gives it,
    # never pulled (the kubelet's pull records once refused it: devcluster/nodes.py, kubelet_config).
    for name, image in (("never-short", "apache/spark:4.0.5"), ("never-full", "docker.io/apache/spark:4.0.5")):
        done = run(real_cluster, real_namespace, pod(name, image, node.name, pull_policy="Never"))
        assert done["status"]["phase"] == "Succeeded", json.dumps(done["status"], indent=1)


def test_an_image_no_node_holds_is_not_found_at_once(real_cluster: ClusterHandle, real_namespace: str) -> None:
    assert real_cluster.cluster is not None
    missing = f"docker.io/sparkop-test/absent:{uuid.uuid4().hex[:8]}"
    name = "absent"
    real_cluster.apply(pod(name, missing, real_cluster.cluster.real_nodes[0].name), namespace=real_namespace)

    def pull_failed() -> dict[str, Any] | None:
        current = real_cluster.kubectl_json("get", "pod", name, "-n", real_namespace)
        for status in current.get("status", {}).get("containerStatuses") or ():
            waiting = status.get("state", {}).get("waiting") or {}
            if waiting.get("reason") in ("ErrImagePull", "ImagePullBackOff"):
                return dict(waiting)
        return None

    wait_for(pull_failed, timeout=POD_DONE_S, interval=0.5, message=f"pod {name}'s pull to fail")
    failed = [e["message"] for e in events(real_cluster, real_namespace, name) if e["reason"] == "Failed"]
    assert any("not found" in message for message in failed), failed
