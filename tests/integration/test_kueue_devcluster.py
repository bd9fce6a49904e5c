"""Kueue on the devcluster (issue 26): `python -m devcluster up --schedulers kueue` runs the real Kueue
controller manager (sigs.k8s.io/kueue at KUEUE_VERSION, built from its Go module), its CRDs, and its
webhooks for its own kinds. This module plays the external job controller sparkop will be, by hand and
over REST, to pin down the contract docs/kueue-contract.md writes out: a Workload of kueue.x-k8s.io/v1beta2
with a `driver` and an `executor` podSet, owned by another object, in a LocalQueue whose ClusterQueue has
quota for one such Workload.

* Two Workloads: the first gets quota and is admitted (QuotaReserved and Admitted True, status.admission
  naming the flavor of each resource), the second waits (QuotaReserved False, Kueue says why), and is
  admitted once the first is marked Finished (a server-side apply of that one condition on the status
  subresource, with a field manager of the controller's own).
* Priority preemption within the ClusterQueue: a higher WorkloadPriorityClass evicts the running lower
  Workload (Evicted True, reason Preempted, and Preempted True, reason InClusterQueue) but its quota stays
  reserved until the job controller, having stopped its pods, gives it back as Kueue's own job reconciler
  does (status.admission removed, QuotaReserved False reason Pending, Requeued True reason Preempted, in
  one merge patch guarded by resourceVersion). The higher one is then admitted; the lower one again when
  the higher one has finished.

The cluster is this module's own (one kwok node; no pod runs: Kueue admits Workloads, it does not place
pods). Every wait is on a condition Kueue writes, printed when it comes.
"""

from __future__ import annotations

import copy
import json
import os
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from devcluster import rest
from devcluster.cluster import Cluster
from devcluster.components import FAKE_NODE_LABEL, KUEUE_WEBHOOK_CONFIGURATIONS
from devcluster.testing import SESSION_PREFIX, ClusterHandle, temporary_namespace, unique_name, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.needs_build("kueue")]

GROUP = "kueue.x-k8s.io"
API = f"/apis/{GROUP}/v1beta2"
WORKLOADS = f"workloads.v1beta2.{GROUP}"
FINALIZER = f"{GROUP}/resource-in-use"
JOB_UID_LABEL = f"{GROUP}/job-uid"
# What sparkop will write with: a field manager of its own for the conditions it owns (Finished).
FIELD_MANAGER = "sparkop"
# One Workload: a driver of 1 CPU and 1 GiB, two executors of as much. The ClusterQueue holds one.
POD_CPU, POD_MEMORY = "1", "1Gi"
QUOTA = {"cpu": "3", "memory": "3Gi"}
# Kueue admits in scheduling cycles that follow each event; seconds, not minutes, on 2 cores.
WAIT_S = 60.0


@dataclass(frozen=True)
class Api:
    """Requests as a job controller makes them: straight to the API server, with any content type."""

    server: str
    context: ssl.SSLContext

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        req = urllib.request.Request(
            self.server + path, data=json.dumps(body).encode() if body is not None else None, method=method
        )
        req.add_header("Content-Type", content_type)
        req.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=30) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            raise ApiError(err.code, err.read().decode(errors="replace")) from None


class ApiError(RuntimeError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Kueue:
    handle: ClusterHandle
    api: Api


@pytest.fixture(scope="module")
def kueue() -> Iterator[Kueue]:
    started = time.monotonic()
    cluster = Cluster.up(
        f"{SESSION_PREFIX}kueue-{os.getpid()}",
        nodes=1,
        node_cpu="8",
        node_memory="16Gi",
        simulator=False,
        schedulers=("kueue",),
        die_with_parent=True,
    )
    print(f"\ncluster with Kueue up in {time.monotonic() - started:.1f}s (a first build not counted)")
    pki = cluster.pki
    api = Api(cluster.server, rest.tls_context(pki.ca_cert, pki.admin_cert, pki.admin_key))
    try:
        yield Kueue(ClusterHandle(cluster.kubeconfig, cluster.kubectl, cluster), api)
    finally:
        cluster.down()


@pytest.fixture
def namespace(kueue: Kueue) -> Iterator[str]:
    with temporary_namespace(kueue.handle, prefix="kueue") as name:
        yield name


@dataclass(frozen=True)
class Queues:
    flavor: str
    cluster_queue: str
    local_queue: str  # in the test's namespace


@pytest.fixture
def queues(kueue: Kueue, namespace: str) -> Iterator[Queues]:
    """A ResourceFlavor for the kwok nodes, a ClusterQueue with quota for one Workload (preempting lower
    priorities inside itself), and a LocalQueue pointing at it in the test's namespace."""
    names = Queues(f"flavor-{namespace}", f"cq-{namespace}", "spark")
    key, value = FAKE_NODE_LABEL
    toleration = {"key": "sparkop.io/batch", "operator": "Exists", "effect": "NoSchedule"}
    flavor = {"metadata": {"name": names.flavor}, "spec": {"nodeLabels": {key: value}, "tolerations": [toleration]}}
    resources = [{"name": name, "nominalQuota": quantity} for name, quantity in QUOTA.items()]
    cluster_queue = {
        "metadata": {"name": names.cluster_queue},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {"coveredResources": list(QUOTA), "flavors": [{"name": names.flavor, "resources": resources}]}
            ],
            "preemption": {"withinClusterQueue": "LowerPriority"},
        },
    }
    local_queue = {"metadata": {"name": names.local_queue}, "spec": {"clusterQueue": names.cluster_queue}}
    kueue.api.call(
        "POST", f"{API}/resourceflavors", {"apiVersion": f"{GROUP}/v1beta2", "kind": "ResourceFlavor", **flavor}
    )
    kueue.api.call(
        "POST", f"{API}/clusterqueues", {"apiVersion": f"{GROUP}/v1beta2", "kind": "ClusterQueue", **cluster_queue}
    )
    kueue.api.call(
        "POST",
        f"{API}/namespaces/{namespace}/localqueues",
        {"apiVersion": f"{GROUP}/v1beta2", "kind": "LocalQueue", **local_queue},
    )
    wait_for(
        lambda: _condition(kueue.api.call("GET", f"{API}/clusterqueues/{names.cluster_queue}"), "Active", "True"),
        timeout=WAIT_S,
        message=f"ClusterQueue {names.cluster_queue} Active",
    )
    wait_for(
        lambda: _condition(
            kueue.api.call("GET", f"{API}/namespaces/{namespace}/localqueues/{names.local_queue}"), "Active", "True"
        ),
        timeout=WAIT_S,
        message=f"LocalQueue {names.local_queue} Active",
    )
    try:
        yield names
    finally:
        _release_workloads(kueue, namespace)
        for path in (f"{API}/clusterqueues/{names.cluster_queue}", f"{API}/resourceflavors/{names.flavor}"):
            try:
                kueue.api.call("DELETE", path)
            except ApiError as err:
                if err.status != 404:
                    raise


def _release_workloads(kueue: Kueue, namespace: str) -> None:
    """Drop the finalizer a job controller keeps on its Workloads, as it does once its job is gone, so
    that the namespace and the ClusterQueue can go."""
    listed = kueue.api.call("GET", f"{API}/namespaces/{namespace}/workloads")
    for item in listed["items"]:
        path = f"{API}/namespaces/{namespace}/workloads/{item['metadata']['name']}"
        kueue.api.call("PATCH", path, {"metadata": {"finalizers": None}}, "application/merge-patch+json")


def _condition(obj: dict[str, Any], type_: str, status: str, reason: str | None = None) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition["type"] == type_ and condition["status"] == status and reason in (None, condition["reason"]):
            return dict(condition)
    return None


def conditions(workload: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (workload.get("status") or {}).get("conditions") or []}


def pod_template(container: str) -> dict[str, Any]:
    requests = {"cpu": POD_CPU, "memory": POD_MEMORY}
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": container, "image": "apache/spark:3.5.9", "resources": {"requests": requests}}],
        }
    }


def create_owned_workload(
    kueue: Kueue, namespace: str, app: str, queue: str, priority_class: tuple[str, int] | None = None
) -> dict[str, Any]:
    """What sparkop will create for an app: an object that stands for the job (a ConfigMap here, a
    SparkApplication there), and a Workload it controls, shaped as Kueue's own integrations shape theirs
    (jobframework.ConstructWorkload): the job-uid label, Kueue's finalizer, a controller reference, one
    podSet per kind of pod."""
    owner = kueue.api.call(
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": app}},
    )
    workload: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"sparkapplication-{app}",
            "labels": {JOB_UID_LABEL: owner["metadata"]["uid"]},
            "finalizers": [FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": app,
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": queue,
            "podSets": [
                {"name": "driver", "count": 1, "template": pod_template("spark-kubernetes-driver")},
                {"name": "executor", "count": 2, "template": pod_template("spark-kubernetes-executor")},
            ],
        },
    }
    if priority_class is not None:
        # The reference and the value both: the job controller reads the class's value itself (a CEL
        # rule refuses a priorityClassRef without a priority).
        name, value = priority_class
        workload["spec"]["priorityClassRef"] = {"group": GROUP, "kind": "WorkloadPriorityClass", "name": name}
        workload["spec"]["priority"] = value
    created = kueue.api.call("POST", f"{API}/namespaces/{namespace}/workloads", workload)
    return dict(created)


def get_workload(kueue: Kueue, namespace: str, name: str) -> dict[str, Any]:
    return dict(kueue.api.call("GET", f"{API}/namespaces/{namespace}/workloads/{name}"))


def wait_condition(
    kueue: Kueue, namespace: str, name: str, type_: str, status: str, reason: str | None = None
) -> dict[str, Any]:
    """The Workload once it has the condition; how long it took is printed."""
    started = time.monotonic()

    def has_it() -> dict[str, Any] | None:
        workload = get_workload(kueue, namespace, name)
        return workload if _condition(workload, type_, status, reason) else None

    workload = wait_for(has_it, timeout=WAIT_S, interval=0.05, message=f"{name}: {type_}={status} {reason or ''}")
    print(f"{name}: {type_}={status} after {time.monotonic() - started:.2f}s; conditions {conditions(workload)}")
    return workload


def mark_finished(kueue: Kueue, namespace: str, name: str, reason: str, message: str) -> dict[str, Any]:
    """How the job controller says its job ended: a server-side apply of the Finished condition alone,
    on the status subresource, under its own field manager. conditions is a map list keyed by type, so
    the conditions Kueue owns (QuotaReserved, Admitted) are left as they are."""
    applied = {
        "apiVersion": f"{GROUP}/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "status": {
            "conditions": [
                {
                    "type": "Finished",
                    "status": "True",
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
            ]
        },
    }
    path = f"{API}/namespaces/{namespace}/workloads/{name}/status?fieldManager={FIELD_MANAGER}&force=true"
    print(f"finish {name}: PATCH {path} (application/apply-patch+yaml)\n{json.dumps(applied, indent=1)}")
    return dict(kueue.api.call("PATCH", path, applied, "application/apply-patch+yaml"))


def requeue_after_eviction(kueue: Kueue, namespace: str, name: str) -> dict[str, Any]:
    """What Kueue's job reconciler does for its own jobs once an evicted job's pods are gone
    (jobframework.ReconcileGenericJob, step 6): Requeued set (True for Preempted and NodeFailures, which
    requeue at once; False for the other reasons, which Kueue sets True itself after a backoff or
    reactivation), and workload.UnsetQuotaReservationWithCondition: QuotaReserved False with reason
    Pending and the Evicted condition's message, status.admission removed, Admitted synced to False
    (NoReservation). One JSON merge patch of the status subresource: it replaces the whole conditions
    list and nulls admission, whatever field manager owns them, and the resourceVersion in it makes a
    stale read fail with 409 instead of overwriting what Kueue wrote meanwhile."""
    workload = get_workload(kueue, namespace, name)
    evicted = _condition(workload, "Evicted", "True")
    assert evicted is not None, workload["status"]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    generation = workload["metadata"]["generation"]

    def condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
            "observedGeneration": generation,
        }

    replaced = {
        "QuotaReserved": condition("QuotaReserved", "False", "Pending", evicted["message"]),
        "Admitted": condition("Admitted", "False", "NoReservation", "The workload has no reservation"),
        "Requeued": condition(
            "Requeued", "True" if evicted["reason"] in ("Preempted", "NodeFailures") else "False", evicted["reason"],
            evicted["message"],
        ),
    }  # fmt: skip
    kept = [c for c in workload["status"]["conditions"] if c["type"] not in replaced]
    patch = {
        "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
        "status": {"admission": None, "conditions": kept + list(replaced.values())},
    }
    path = f"{API}/namespaces/{namespace}/workloads/{name}/status"
    print(f"requeue {name}: PATCH {path} (application/merge-patch+json)\n{json.dumps(patch, indent=1)}")
    return dict(kueue.api.call("PATCH", path, patch, "application/merge-patch+json"))


def managers(workload: dict[str, Any]) -> dict[str, list[str]]:
    """Field manager -> the status fields it owns, from managedFields."""
    owned: dict[str, list[str]] = {}
    for entry in workload["metadata"].get("managedFields") or []:
        if entry.get("subresource") == "status":
            status = entry.get("fieldsV1", {}).get("f:status", {})
            owned.setdefault(f"{entry['manager']} ({entry['operation']})", []).extend(sorted(status))
    return owned


def shown(workload: dict[str, Any]) -> str:
    trimmed = copy.deepcopy(workload)
    trimmed["metadata"].pop("managedFields", None)
    return json.dumps(trimmed, indent=1)


def test_the_devcluster_registers_only_kueues_own_webhooks(kueue: Kueue) -> None:
    """Jobs', pods' and Deployments' webhooks would put Kueue in the path of every pod: left out."""
    for kind, name in KUEUE_WEBHOOK_CONFIGURATIONS.items():
        path = f"/apis/admissionregistration.k8s.io/v1/{kind.lower()}s/{name}"
        hooks = kueue.api.call("GET", path)["webhooks"]
        assert hooks, name
        for hook in hooks:
            assert all(rule["apiGroups"] == [GROUP] for rule in hook["rules"]), hook
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:"), hook["clientConfig"]
        print(f"{name}: {sorted(hook['name'] for hook in hooks)}")


def test_one_workload_at_a_time_the_second_admitted_once_the_first_is_finished(
    kueue: Kueue, namespace: str, queues: Queues
) -> None:
    started = time.monotonic()
    first = create_owned_workload(kueue, namespace, "app-a", queues.local_queue)["metadata"]["name"]
    print(f"created:\n{shown(get_workload(kueue, namespace, first))}")
    admitted = wait_condition(kueue, namespace, first, "Admitted", "True")
    print(f"admission latency (create to Admitted observed): {time.monotonic() - started:.2f}s")
    assert _condition(admitted, "QuotaReserved", "True", "QuotaReserved")
    admission = admitted["status"]["admission"]
    assert admission["clusterQueue"] == queues.cluster_queue
    assignments = {a["name"]: a for a in admission["podSetAssignments"]}
    assert set(assignments) == {"driver", "executor"}
    for name, count in (("driver", 1), ("executor", 2)):
        assert assignments[name]["flavors"] == {"cpu": queues.flavor, "memory": queues.flavor}, assignments
        assert assignments[name]["count"] == count
        assert assignments[name]["resourceUsage"] == {"cpu": str(count), "memory": f"{count}Gi"}, assignments
    print(f"admitted, status as Kueue wrote it:\n{json.dumps(admitted['status'], indent=1)}")
    print(f"status field managers: {managers(admitted)}")

    # The webhooks run: a podSet cannot change while its Workload holds quota (vworkload.kb.io; the CRD's
    # own rules only compare the number of podSets with the number of assignments).
    more_executors = copy.deepcopy(admitted["spec"]["podSets"])
    more_executors[1]["count"] = 3
    with pytest.raises(ApiError) as refused:
        kueue.api.call(
            "PATCH",
            f"{API}/namespaces/{namespace}/workloads/{first}",
            {"spec": {"podSets": more_executors}},
            "application/merge-patch+json",
        )
    assert refused.value.status in (403, 422) and "immutable" in refused.value.body, refused.value.body
    print(f"changing the podSets of an admitted Workload: {refused.value.status} {refused.value.body[:300]}")

    second = create_owned_workload(kueue, namespace, "app-b", queues.local_queue)["metadata"]["name"]
    waiting = wait_condition(kueue, namespace, second, "QuotaReserved", "False")
    reason = _condition(waiting, "QuotaReserved", "False")
    assert reason is not None and reason["reason"] == "Pending", reason
    assert "insufficient" in reason["message"] or "quota" in reason["message"], reason
    assert "admission" not in waiting["status"] and not _condition(waiting, "Admitted", "True")
    print(f"second Workload waits: reason {reason['reason']!r}, message {reason['message']!r}")
    print(f"its status: {json.dumps(waiting['status'], indent=1)}")

    finished = mark_finished(kueue, namespace, first, "Succeeded", "the Spark application completed")
    assert conditions(finished)["Finished"] == ("True", "Succeeded")
    # Finishing returns nothing by itself: the quota is free because the Workload is Finished, and its
    # QuotaReserved and Admitted conditions stay as Kueue wrote them.
    assert conditions(finished)["QuotaReserved"] == ("True", "QuotaReserved")
    print(f"status field managers after Finished: {managers(finished)}")
    started = time.monotonic()
    wait_condition(kueue, namespace, second, "Admitted", "True")
    print(f"second admitted {time.monotonic() - started:.2f}s after the first was marked Finished")
    assert "admission" in get_workload(kueue, namespace, first)["status"]


def test_a_higher_priority_workload_preempts_the_running_one_which_is_requeued_by_its_job_controller(
    kueue: Kueue, namespace: str, queues: Queues
) -> None:
    classes = {"low": 10, "high": 1000}
    names = {level: unique_name(level) for level in classes}
    for level, value in classes.items():
        kueue.api.call(
            "POST",
            f"{API}/workloadpriorityclasses",
            {
                "apiVersion": f"{GROUP}/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": names[level]},
                "value": value,
            },
        )
    try:
        low = create_owned_workload(kueue, namespace, "low", queues.local_queue, (names["low"], classes["low"]))
        low_name = low["metadata"]["name"]
        wait_condition(kueue, namespace, low_name, "Admitted", "True")

        high = create_owned_workload(kueue, namespace, "high", queues.local_queue, (names["high"], classes["high"]))
        high_name = high["metadata"]["name"]
        evicted = wait_condition(kueue, namespace, low_name, "Evicted", "True", "Preempted")
        preempted = _condition(evicted, "Preempted", "True")
        assert preempted is not None and preempted["reason"] == "InClusterQueue", evicted["status"]
        print(f"evicted: {json.dumps(evicted['status'], indent=1)}")
        # Kueue only asks: the quota stays reserved until the job controller has stopped the job and
        # says so, and the higher Workload waits for it.
        assert conditions(evicted)["QuotaReserved"] == ("True", "QuotaReserved"), evicted["status"]
        assert "admission" in evicted["status"]
        pending = wait_condition(kueue, namespace, high_name, "QuotaReserved", "False")
        print(f"preemptor waits for the eviction to complete: {_condition(pending, 'QuotaReserved', 'False')}")

        started = time.monotonic()
        requeued = requeue_after_eviction(kueue, namespace, low_name)
        assert "admission" not in requeued["status"], requeued["status"]
        wait_condition(kueue, namespace, high_name, "Admitted", "True")
        print(f"preemptor admitted {time.monotonic() - started:.2f}s after the requeue patch")
        back_in_queue = wait_condition(kueue, namespace, low_name, "QuotaReserved", "False")
        print(f"requeued Workload waits again: {json.dumps(back_in_queue['status'], indent=1)}")
        assert conditions(back_in_queue)["Requeued"] == ("True", "Preempted")

        mark_finished(kueue, namespace, high_name, "Succeeded", "the Spark application completed")
        readmitted = wait_condition(kueue, namespace, low_name, "Admitted", "True")
        # A fresh reservation turns the eviction's conditions False ("Previously: ...").
        assert conditions(readmitted)["Evicted"] == ("False", "QuotaReserved"), readmitted["status"]
        assert conditions(readmitted)["Preempted"] == ("False", "QuotaReserved"), readmitted["status"]
        assert readmitted["status"]["admission"]["clusterQueue"] == queues.cluster_queue
        print(f"re-admitted: {json.dumps(readmitted['status'], indent=1)}")
    finally:
        for name in names.values():
            kueue.api.call("DELETE", f"{API}/workloadpriorityclasses/{name}")
