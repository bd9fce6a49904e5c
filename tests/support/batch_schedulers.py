"""What a batch scheduler would do with sparkop's pods, written from its documentation: YuniKorn's
task-group annotations parsed as YuniKorn reads them, and a pod bound to a node as its own scheduler
would (tests/unit/test_batch_schedulers.py, tests/integration/test_batch_schedulers.py, test_kubeflow_samples.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from devcluster.testing import ClusterHandle

# YuniKorn's TaskGroup (yunikorn-k8shim pkg/cache/amprotocol.go) and what its docs say of the
# annotations (user_guide/gang_scheduling.md, labels_and_annotations_in_yunikorn.md): the originating
# pod carries the JSON list of task groups; each member pod names its group; minMember > 0; minResource
# is a map of resource names to Kubernetes quantities; names are unique.
TASK_GROUP_FIELDS = {
    "name",
    "minMember",
    "minResource",
    "nodeSelector",
    "tolerations",
    "affinity",
    "labels",
    "annotations",
}


QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def parse_task_groups(annotations: dict[str, str]) -> dict[str, dict[str, Any]]:
    """A parser written from YuniKorn's documented format: refuses what YuniKorn would refuse."""
    groups = json.loads(annotations["yunikorn.apache.org/task-groups"])
    assert isinstance(groups, list) and groups
    found: dict[str, dict[str, Any]] = {}
    for group in groups:
        assert set(group) <= TASK_GROUP_FIELDS, set(group) - TASK_GROUP_FIELDS
        assert isinstance(group["name"], str) and group["name"] not in found
        assert isinstance(group["minMember"], int) and 0 < group["minMember"] < 2**31
        assert all(isinstance(v, str) and QUANTITY.match(v) for v in group["minResource"].values())
        assert all(isinstance(v, str) for v in group.get("nodeSelector", {}).values())
        assert isinstance(group.get("tolerations", []), list)
        found[group["name"]] = group
    return found


def bind(cluster: ClusterHandle, namespace: str, pod: str) -> None:
    """What the pod's own scheduler would do: bind it to a node (pods/binding)."""
    node = cluster.kubectl_json("get", "nodes")["items"][0]["metadata"]["name"]
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    cluster.kubectl("create", "--raw", f"/api/v1/namespaces/{namespace}/pods/{pod}/binding", "-f", "-",
                    input=json.dumps(binding))  # fmt: skip
