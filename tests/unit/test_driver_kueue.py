"""A SparkDriver that queues in Kueue (driver_controller.kueue, decide): its Workload first and nothing
else, pods only once Kueue admitted it and where the admission's ResourceFlavors say, an eviction
that stops its pods and then hands the quota back as Kueue's own reconciler does, a new incarnation
at the next admission (not counted against maxDriverPodReplacements), and Finished once the driver
ended. Kueue's side (what it writes in the Workload's status) is the real Kueue's, as
tests/integration/test_kueue.py shows against it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sparkop.core.plan import Create, Patch, Plan, Refusal, refusal_key
from sparkop.domain import labels
from sparkop.driver_controller import kueue
from sparkop.driver_controller.decide import decide
from sparkop.driver_controller.kueue_summaries import FlavorSummary, WorkloadSummary, summarize_workload
from sparkop.driver_controller.observed import Observed
from sparkop.driver_controller.render import parse, render
from sparkop.driver_controller.summaries import summarize_object, summarize_pod
from tests.support.driver_objects import NOW, decided, driver, kinds, running, terminated

WORKLOAD = "pi-workload"
QUEUE = "team-a"
EARLIER = "2026-01-01T11:00:00Z"
SPOT = FlavorSummary("spot", {"node.kubernetes.io/lifecycle": "spot"}, ({"key": "spot", "operator": "Exists"},))


def queued(status: dict[str, Any] | None = None, *, priority_class: str | None = None) -> dict[str, Any]:
    body = driver(status)
    body["metadata"]["labels"] = {labels.KUEUE_QUEUE_NAME: QUEUE}
    if priority_class:
        body["metadata"]["labels"][labels.KUEUE_PRIORITY_CLASS] = priority_class
    return body


def condition(kind: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": EARLIER}


def workload(*conditions: dict[str, Any], flavors: dict[str, str] | None = None) -> WorkloadSummary:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if flavors is not None:
        assignments = [{"name": pod_set, "flavors": {"cpu": f, "memory": f}} for pod_set, f in flavors.items()]
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": assignments}
    uid = driver()["metadata"]["uid"]
    owner = [{"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkDriver", "name": "pi", "uid": uid, "controller": True}]
    meta = {"name": WORKLOAD, "uid": "wl-uid", "resourceVersion": "33", "generation": 1, "ownerReferences": owner}
    return summarize_workload({"metadata": meta, "status": status})


PENDING = workload(
    condition("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set driver: insufficient quota")
)
ADMITTED = workload(
    condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
    condition("Admitted", "True", "Admitted", "The workload is admitted"),
    flavors={"driver": "spot", "executor": "spot"},
)
EVICTED = workload(
    *ADMITTED.conditions,
    condition("Evicted", "True", "Preempted", "Preempted to accommodate a workload (UID: x) due to prioritization"),
    flavors={"driver": "spot", "executor": "spot"},
)


def plan_for(body: dict[str, Any], *workloads: WorkloadSummary, pods: list[dict[str, Any]] = (),  # type: ignore[assignment]
             objects: bool = False, refusals: dict[str, Refusal] | None = None,
             priority_classes: dict[str, int] | None = None) -> Plan:  # fmt: skip
    cms, svcs = [], []
    if objects:
        out = render(parse(body), int(body["status"].get("incarnation") or 1))
        cms = [summarize_object({**cm, "metadata": {**cm["metadata"], "uid": "cm"}})
               for cm in (out.config_map, out.executor_template)]  # fmt: skip
        svcs = [summarize_object({**out.service, "metadata": {**out.service["metadata"], "uid": "svc"}})]
    observed = Observed.of(
        body,
        [summarize_pod(p) for p in pods],
        cms,
        svcs,
        refusals=refusals or {},
        workloads=list(workloads),
        flavors={"spot": SPOT},
        priority_classes=priority_classes or {},
    )
    return decided(observed, NOW)


def queued_condition(plan: Plan) -> tuple[str, str, str]:
    assert plan.status is not None
    found = next(c for c in plan.status.conditions or () if c.type == "Queued")
    return found.status, found.reason or "", found.message or ""


def test_a_queued_run_creates_its_workload_and_nothing_else() -> None:
    plan = plan_for(queued())
    assert kinds(plan) == [f"Workload/{WORKLOAD}"]
    (create,) = plan.creates
    wl = create.manifest
    assert wl["apiVersion"] == "kueue.x-k8s.io/v1beta2" and wl["spec"]["queueName"] == QUEUE
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "SparkDriver"
    assert wl["metadata"]["ownerReferences"][0]["controller"] is True
    assert wl["metadata"]["labels"][labels.DRIVER] == "pi"  # the driver controller's watch selects by it
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == driver()["metadata"]["uid"]
    pod_sets = {s["name"]: s for s in wl["spec"]["podSets"]}
    # SparkPi's defaults as Spark requests them: driver 1 CPU, 1g + 384m; two executors alike.
    assert pod_sets["driver"]["count"] == 1 and pod_sets["executor"]["count"] == 2
    requests = pod_sets["executor"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": "1", "memory": "1408Mi"}
    assert "priorityClassRef" not in wl["spec"]
    assert plan.status is not None and plan.status.phase == "Pending"
    assert queued_condition(plan)[:2] == ("True", "Pending")


def test_a_priority_class_is_resolved_to_its_value_or_waited_for() -> None:
    waiting = plan_for(queued(priority_class="high"))
    assert waiting.creates == () and queued_condition(waiting)[1] == "PriorityClassNotFound"
    assert waiting.requeue_after is not None
    (create,) = plan_for(queued(priority_class="high"), priority_classes={"high": 1000}).creates
    spec = create.manifest["spec"]
    assert spec["priority"] == 1000
    assert spec["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}


def test_a_pending_workload_waits_saying_what_kueue_says() -> None:
    plan = plan_for(queued({"incarnation": 1, "phase": "Pending"}), PENDING)
    assert plan.creates == ()
    status, reason, message = queued_condition(plan)
    assert (status, reason) == ("True", "Pending") and "insufficient quota" in message and QUEUE in message


def test_an_admitted_run_starts_where_its_flavor_says() -> None:
    held = [{**condition("Queued", "True", "Pending", "waiting"), "observedGeneration": 1}]
    plan = plan_for(queued({"incarnation": 1, "phase": "Pending", "conditions": held}), ADMITTED)
    assert kinds(plan)[-1] == "Pod/pi-driver"
    pod = plan.creates[-1].manifest
    assert pod["spec"]["nodeSelector"]["node.kubernetes.io/lifecycle"] == "spot"
    assert {"key": "spot", "operator": "Exists"} in pod["spec"]["tolerations"]
    conf = next(c for c in plan.creates if c.manifest["metadata"]["name"] == "pi-1-conf-map").manifest
    properties = next(iter(conf["data"].values()))
    # The executors are placed the same way: through the properties Spark builds them from.
    assert "spark.kubernetes.executor.node.selector.node.kubernetes.io/lifecycle=spot" in properties
    assert queued_condition(plan)[:2] == ("False", "Admitted")


def test_an_eviction_stops_the_pods_then_hands_the_quota_back() -> None:
    pod = render(parse(queued()), 1).pod
    pod = running({**pod, "metadata": {**pod["metadata"], "uid": "pod-1", "resourceVersion": "5"}})
    status = {"incarnation": 1, "phase": "Running", "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    stopping = plan_for(queued(status), EVICTED, pods=[pod], objects=True)
    assert stopping.status is not None
    assert stopping.status.incarnation == 2 and stopping.status.queueEvictions == 1
    (record,) = stopping.status.incarnations or ()
    assert (record.incarnation, record.outcome, record.reason) == (1, "Lost", "KueuePreempted")
    assert "Delete/Pod/pi-driver" in [f"Delete/{d.kind}/{d.name}" for d in stopping.deletes]
    assert not [p for p in stopping.patches if p.kind == "Workload"]  # its pod still runs: quota held
    assert stopping.creates == ()  # the next incarnation waits for the next admission
    # The pod is gone: the quota goes back, as Kueue's reconciler gives it back.
    gone = plan_for(queued(stopping.status.to_json()), EVICTED)
    (release,) = [p for p in gone.patches if p.kind == "Workload"]
    assert isinstance(release, Patch) and release.subresource == "status" and release.resource_version == "33"
    released = release.body["status"]
    assert released["admission"] is None
    by_type = {c["type"]: c for c in released["conditions"]}
    assert (by_type["QuotaReserved"]["status"], by_type["QuotaReserved"]["reason"]) == ("False", "Pending")
    assert (by_type["Admitted"]["status"], by_type["Admitted"]["reason"]) == ("False", "NoReservation")
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("True", "Preempted")
    assert by_type["Evicted"] == EVICTED.condition("Evicted")  # Kueue's own, as it wrote it
    assert gone.status is None or gone.status.incarnation == 2  # no second stop for the same eviction


def test_the_next_admission_starts_the_next_incarnation_not_counted_as_a_replacement() -> None:
    status = {
        "incarnation": 2, "phase": "Pending", "queueEvictions": 3,
        "incarnations": [{"incarnation": 1, "podName": "pi-driver", "outcome": "Lost", "reason": "KueuePreempted",
                          "time": EARLIER}],
    }  # fmt: skip
    body = queued(status)
    body["spec"]["maxDriverPodReplacements"] = 0
    plan = plan_for(body, ADMITTED)
    assert kinds(plan)[-1] == "Pod/pi-driver"


def test_the_end_of_the_driver_finishes_the_workload_once() -> None:
    pod = render(parse(queued()), 1).pod
    done = terminated({**pod, "metadata": {**pod["metadata"], "uid": "pod-1", "resourceVersion": "5"}}, 0)
    status = {"incarnation": 1, "phase": "Running", "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    plan = plan_for(queued(status), ADMITTED, pods=[done], objects=True)
    assert plan.status is not None and plan.status.phase == "Succeeded"
    (finish,) = [p for p in plan.patches if p.kind == "Workload"]
    finished = next(c for c in finish.body["status"]["conditions"] if c["type"] == "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
    over = workload(*ADMITTED.conditions, condition("Finished", "True", "Succeeded"), flavors={"driver": "spot"})
    again = plan_for(queued(plan.status.to_json()), over, pods=[done], objects=True)
    assert not [p for p in again.patches if p.kind == "Workload"]


def test_a_cluster_without_kueue_fails_the_submission_naming_the_fix() -> None:
    key = refusal_key(Create({"kind": "Workload", "metadata": {"name": WORKLOAD}}))
    refusal = Refusal(
        404, "NotFound", "the server could not find the requested resource (post workloads.kueue.x-k8s.io)"
    )
    plan = plan_for(queued(), refusals={key: refusal})
    assert plan.status is not None and plan.status.phase == "SubmissionFailed"
    assert plan.status.lastError is not None and "install Kueue" in (plan.status.lastError.message or "")
    assert labels.KUEUE_QUEUE_NAME in (plan.status.lastError.message or "")


def test_a_pod_lost_after_an_eviction_is_replaced_within_the_limit_the_eviction_did_not_use() -> None:
    status = {
        "incarnation": 2,
        "phase": "Running",
        "queueEvictions": 1,
        "driverPod": {"name": "pi-driver", "uid": "p2"},
    }
    body = queued(status)
    body["spec"]["maxDriverPodReplacements"] = 1
    plan = plan_for(body, ADMITTED, objects=True)  # its pod vanished
    assert plan.status is not None and plan.status.phase == "Pending" and plan.status.incarnation == 3


def with_finalizer(wl: WorkloadSummary, *, deleting: bool = False) -> WorkloadSummary:
    return replace(wl, finalizers=(kueue.RESOURCE_IN_USE,), deleting=deleting)


def test_kueues_finalizer_goes_once_the_workload_is_finished_or_its_driver_is_going() -> None:
    over = with_finalizer(workload(*ADMITTED.conditions, condition("Finished", "True", "Succeeded")))
    status = {"incarnation": 1, "phase": "Succeeded", "driverPod": {"name": "pi-driver"}}
    (let_go,) = [p for p in plan_for(queued(status), over).patches if p.kind == "Workload"]
    assert let_go.body == [
        {"op": "test", "path": "/metadata/finalizers", "value": [kueue.RESOURCE_IN_USE]},
        {"op": "remove", "path": "/metadata/finalizers"},
    ]
    gone = decide(Observed.of(None, workloads=[with_finalizer(ADMITTED)]), NOW)
    assert [p.kind for p in gone.patches] == ["Workload"]


def test_a_deleted_workload_stops_the_run_then_lets_go_and_is_made_anew() -> None:
    pod = render(parse(queued()), 1).pod
    pod = running({**pod, "metadata": {**pod["metadata"], "uid": "pod-1", "resourceVersion": "5"}})
    status = {"incarnation": 1, "phase": "Running", "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    going = with_finalizer(ADMITTED, deleting=True)
    stopping = plan_for(queued(status), going, pods=[pod], objects=True)
    assert stopping.status is not None and stopping.status.incarnation == 2
    assert not [p for p in stopping.patches if p.kind == "Workload"]  # the pod first
    stopped = plan_for(queued(stopping.status.to_json()), going)
    assert [p.reason for p in stopped.patches if p.kind == "Workload"] == ["ResourceNoLongerInUse"]
    assert kinds(plan_for(queued(stopping.status.to_json()))) == [f"Workload/{WORKLOAD}"]


def test_dynamic_allocation_that_could_outgrow_its_workload_is_refused_naming_the_fix() -> None:
    body = queued()
    body["spec"]["dynamicAllocation"] = {"enabled": True, "initialExecutors": 1, "maxExecutors": 4}
    plan = plan_for(body)
    assert plan.creates == () and plan.status is not None and plan.status.phase == "SubmissionFailed"
    message = plan.status.lastError.message if plan.status.lastError else ""
    assert "set dynamicAllocation.maxExecutors to at most 1" in (message or ""), message
    body["spec"]["dynamicAllocation"]["maxExecutors"] = 1  # scales within what Kueue admitted
    (create,) = plan_for(body).creates
    assert {s["name"]: s["count"] for s in create.manifest["spec"]["podSets"]} == {"driver": 1, "executor": 1}
