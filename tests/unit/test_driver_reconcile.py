"""Table tests for decide(observed, now) -> Plan."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from sparkop.core.kube import merge_patch
from sparkop.core.plan import Delete, Patch, Plan, ReadLog
from sparkop.domain import labels
from sparkop.driver_controller.cleanup import EXECUTOR_CLEANUP_GRACE_SECONDS
from sparkop.driver_controller.decide import decide
from sparkop.driver_controller.facts import refusal_status
from sparkop.driver_controller.observed import NameHolder, Observed, Settings
from sparkop.driver_controller.render import parse, render
from sparkop.driver_controller.summaries import summarize_object, summarize_pod
from tests.support.driver_objects import (
    NOW,
    decided,
    deleting,
    driver,
    executor,
    kinds,
    log_of,
    objects,
    running,
    terminated,
    with_status,
)
from tests.support.patches import patched

ROOT = Path(__file__).resolve().parents[2]


def plan_for(body: dict[str, Any] | None, pods: list[dict[str, Any]] = (), cms: list[Any] = (),  # type: ignore[assignment]
             svcs: list[Any] = (), **settings: Any) -> Plan:  # type: ignore[assignment]  # fmt: skip
    observed = Observed.of(body, [summarize_pod(p) for p in pods], list(cms), list(svcs), Settings(**settings))
    return decided(observed, NOW)


def test_new_driver_creates_configmaps_and_service_before_the_pod() -> None:
    plan = plan_for(driver())
    assert kinds(plan) == [
        "ConfigMap/pi-1-podspec-conf-map", "ConfigMap/pi-1-conf-map", "Service/pi-1-driver-svc", "Pod/pi-driver",
    ]  # fmt: skip
    assert plan.status is not None
    assert plan.status.phase == "Pending" and plan.status.incarnation == 1
    assert [e.reason for e in plan.events] == ["DriverPodCreated"]


def test_everything_present_and_running() -> None:
    pod, cms, svcs = objects()
    st = {"phase": "Pending", "incarnation": 1, "driverPod": {"name": "pi-driver"}}
    plan = plan_for(driver(st), [running(pod), executor(1), executor(2, adopted=True)], cms, svcs)
    assert plan.creates == ()
    assert plan.status is not None and plan.status.phase == "Running"
    assert plan.status.executors.running == 2
    assert plan.status.driverPod is not None and plan.status.driverPod.uid == "pod-1"
    # Nothing is patched on the executors: Spark created them owned by the SparkDriver already (the
    # executor template's reference), whichever of its references says controller.
    assert plan.patches == ()
    assert plan.status_wait == 0  # observedGeneration, spark.app.id, UI address: first written now
    # The same pod seen (created 5 s ago): its progress may wait, counted from that step.
    first = plan_for(driver()).status
    assert first is not None
    seen = {**pod, "metadata": {**pod["metadata"], "creationTimestamp": "2026-01-01T11:59:55Z"}}
    pending = plan_for(driver(first.to_json()), [seen], cms, svcs)
    assert pending.status is not None and pending.status_wait == 25.0  # its uid
    started = plan_for(driver(first.to_json()), [running(seen)], cms, svcs)
    assert started.status is not None and started.status.phase == "Running"
    assert started.status_wait == 0  # a phase: the app's RUNNING, its event, its start latency
    # Executors: a running one is written by the pass that sees it; one asked for 1 s ago, not running
    # yet, may wait for its Running until 3 s after its creation.
    progress = plan_for(driver(started.status.to_json()), [running(seen), executor(1)], cms, svcs)
    assert progress.status is not None and progress.status.executors.running == 1 and progress.status_wait == 0
    asked = executor(1, phase="Pending", created="2026-01-01T11:59:59Z")
    pending_one = plan_for(driver(started.status.to_json()), [running(seen), asked], cms, svcs)
    assert pending_one.status is not None and pending_one.status.executors.pending == 1
    assert pending_one.status_wait == 2.0


def test_unchanged_status_is_not_written() -> None:
    pod, cms, svcs = objects()
    first = plan_for(driver({"incarnation": 1, "driverPod": {"name": "pi-driver"}}), [running(pod)], cms, svcs)
    assert first.status is not None
    again = plan_for(driver(first.status.to_json()), [running(pod)], cms, svcs)
    assert again.status is None and again.events == () and again.creates == ()


@pytest.mark.parametrize(
    ("code", "phase", "reason"), [(0, "Succeeded", "DriverSucceeded"), (1, "Failed", "DriverFailed")]
)
def test_finished_driver_is_recorded_and_released(code: int, phase: str, reason: str) -> None:
    pod, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    plan = plan_for(driver(st), [terminated(pod, code)], cms, svcs)
    assert plan.status is not None
    assert plan.status.phase == phase
    assert plan.status.termination is not None and plan.status.termination.exitCode == code
    assert (plan.status.incarnations or [])[-1].outcome == phase
    assert [e.reason for e in plan.events] == [reason]
    assert [p.reason for p in plan.patches] == ["OutcomeRecorded"]
    assert plan.creates == ()
    # Next pass: terminal, nothing more happens even if the pod disappears.
    final = plan_for(driver(plan.status.to_json()), [], cms, svcs)
    assert final.creates == () and final.status is None


@pytest.mark.parametrize(("code", "phase"), [(0, "Succeeded"), (3, "Failed")])
def test_a_terminated_driver_container_in_a_pod_still_running_is_the_outcome(code: int, phase: str) -> None:
    # What a real kubelet reports between the container's exit and the sandbox's teardown.
    pod, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    exited = {**terminated(pod, code), "status": {**terminated(pod, code)["status"], "phase": "Running"}}
    plan = plan_for(driver(st), [exited], cms, svcs)
    assert plan.status is not None
    assert plan.status.phase == phase and plan.status.to_json()["termination"]["exitCode"] == code
    # The status is frozen from here: it must not say the driver pod still runs.
    assert plan.status.driverPod is not None and plan.status.driverPod.phase == phase


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda p: deleting(running(p)), "Deleted"),
        (lambda p: with_status(p, "Failed", reason="Evicted", message="low memory"), "Evicted"),
        (
            lambda p: with_status(
                running(p),
                "Running",
                conditions=[{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}],
            ),
            "PreemptionByScheduler",
        ),
        (lambda p: deleting(terminated(p, 143, finished="2026-01-01T11:59:05Z")), "Deleted"),
        # Once the kubelet has killed the container it deletes the pod again with grace 0, which moves
        # deletionTimestamp past the container's end (our finalizer keeps the pod): seen only then (the
        # operator was down meanwhile), a driver killed by the deletion's SIGTERM is still lost.
        (
            lambda p: deleting(terminated(p, 143, finished="2026-01-01T11:59:05Z"), at="2026-01-01T11:59:08Z", grace=0),
            "Deleted",
        ),
        (
            lambda p: deleting(terminated(p, 137, finished="2026-01-01T11:59:05Z"), at="2026-01-01T11:59:08Z", grace=0),
            "Deleted",
        ),
    ],
)
def test_lost_driver_pod_is_replaced(change: Any, reason: str) -> None:
    pod, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    lost_pod = change(pod)
    plan = plan_for(driver(st), [lost_pod, executor(1, adopted=True)], cms, svcs)
    assert plan.status is not None
    assert plan.status.incarnation == 2 and plan.status.phase == "Pending"
    assert plan.status.to_json()["incarnations"] == [
        {"incarnation": 1, "podName": "pi-driver", "outcome": "Lost", "reason": reason,
         "message": plan.status.to_json()["incarnations"][0]["message"], "time": "2026-01-01T12:00:00Z",
         "logTail": log_of("pi-driver")}  # read before the pod may go
    ]  # fmt: skip
    # The next incarnation's pod has the same name: it waits for this one to be gone. Its ConfigMaps
    # and Service are made meanwhile.
    assert "Pod/pi-driver" not in kinds(plan)
    assert {"ConfigMap/pi-2-conf-map", "Service/pi-2-driver-svc"} <= set(kinds(plan))
    assert [e.reason for e in plan.events] == ["DriverPodLost"]
    # The old executor and the old ConfigMaps/Service go; the lost pod's finalizer is released.
    deleted = {(d.kind, d.name) for d in plan.deletes}
    assert ("Pod", "pi-1-exec-1") in deleted
    assert {("ConfigMap", "pi-1-conf-map"), ("Service", "pi-1-driver-svc")} <= deleted
    (release,) = [p for p in plan.patches if p.name == "pi-driver"]
    assert "finalizers" not in patched(lost_pod, release)["metadata"]
    # Released, the pod goes; once it is gone the next incarnation's pod is created, under its name.
    assert plan.status is not None
    later = plan_for(driver(plan.status.to_json()), [executor(1, adopted=True)], cms, svcs)
    assert "Pod/pi-driver" in kinds(later)
    assert [e.reason for e in later.events] == ["DriverPodCreated"]
    (created,) = [a.manifest for a in later.creates if a.manifest["kind"] == "Pod"]
    assert created["metadata"]["labels"][labels.INCARNATION] == "2"


def test_a_lost_driver_pods_name_waits_for_it_and_a_lost_nodes_pod_is_removed_at_once() -> None:
    pod, cms, svcs = objects()
    pod = {**pod, "spec": {**pod["spec"], "nodeName": "node-a"}}
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    gone = deleting(running(pod))  # taken away by the taint manager, say
    recorded = plan_for(driver(st), [gone], cms, svcs)
    assert recorded.status is not None and recorded.status.incarnation == 2
    assert [r.logTail for r in recorded.status.incarnations or ()] == [log_of("pi-driver")]
    # Recorded and released: it is still there (its kubelet has not finished with it).
    released = {**gone, "metadata": {**gone["metadata"], "finalizers": []}}
    waiting = plan_for(driver(recorded.status.to_json()), [released], cms, svcs)
    assert "Pod/pi-driver" not in kinds(waiting)
    assert not [d for d in waiting.deletes if d.kind == "Pod"]  # a kubelet that runs finishes it
    assert waiting.requeue_after is not None  # looked at again, should its node be lost meanwhile
    # Its node known lost (its kubelet stopped reporting): the pod is removed at once, grace 0.
    observed = Observed.of(driver(recorded.status.to_json()), [summarize_pod(released)], cms, svcs,
                        lost_nodes=frozenset({"node-a"}))  # fmt: skip
    lost = decided(observed, NOW)
    (removal,) = [d for d in lost.deletes if d.kind == "Pod"]
    assert (removal.name, removal.uid, removal.grace_seconds) == ("pi-driver", "pod-1", 0)
    assert "Pod/pi-driver" not in kinds(lost)  # created once the watch says it is gone


def test_a_driver_pod_evicted_from_a_lost_node_is_recorded_released_and_removed_in_one_pass() -> None:
    """The node lost first, then the pod evicted (the taint manager): no log read (its kubelet serves
    none), and the finalizer's release and the grace-0 removal in the pass that records the loss: the
    release's own echo asks for no pass, and nothing else would bring one."""
    pod, cms, svcs = objects()
    pod = {**pod, "spec": {**pod["spec"], "nodeName": "node-a"}}
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    evicted = deleting(running(pod))
    plan = decide(Observed.of(driver(st), [summarize_pod(evicted)], cms, svcs, lost_nodes=frozenset({"node-a"})), NOW)
    assert not [a for a in plan.before_status if isinstance(a, ReadLog)]
    assert plan.status is not None and plan.status.incarnation == 2
    (record,) = plan.status.incarnations or []
    assert record.logTail == "(unavailable: its node node-a is lost)"
    assert [(a.kind, a.name) for a in plan.after_status][:2] == [("Pod", "pi-driver"), ("Pod", "pi-driver")]
    release, removal = plan.after_status[:2]
    assert isinstance(release, Patch) and isinstance(removal, Delete) and removal.grace_seconds == 0


def test_deleted_after_it_finished_is_an_outcome_not_a_loss() -> None:
    pod, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    plan = plan_for(driver(st), [deleting(terminated(pod, 0, finished="2026-01-01T11:00:00Z"))], cms, svcs)
    assert plan.status is not None and plan.status.phase == "Succeeded"


def test_missing_pod_after_it_was_seen_is_lost() -> None:
    _, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    plan = plan_for(driver(st), [], cms, svcs)
    assert plan.status is not None and plan.status.incarnation == 2
    assert (plan.status.incarnations or [])[0].reason == "PodMissing"


def test_created_but_not_yet_seen_is_created_again_not_lost() -> None:
    _, cms, svcs = objects()
    first = plan_for(driver())
    assert first.status is not None
    plan = plan_for(driver(first.status.to_json()), [], cms, svcs)
    assert kinds(plan) == ["Pod/pi-driver"]  # idempotent: 409 if it exists
    assert plan.status is None and plan.events == ()


def test_replacements_are_bounded() -> None:
    pod, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    plan = plan_for(driver(st, replacements=0), [deleting(running(pod))], cms, svcs)
    assert plan.status is not None
    assert plan.status.phase == "Failed" and plan.status.to_json()["termination"]["reason"] == "DriverPodLost"
    assert plan.creates == ()
    assert any(p.name == "pi-driver" for p in plan.patches)


def test_incarnation_recovered_from_pod_labels_after_a_lost_status_write() -> None:
    old, _, _ = objects(1)
    new, cms, svcs = objects(2)
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    plan = plan_for(driver(st), [deleting(running(old)), running(new)], cms, svcs)
    assert plan.creates == ()  # nothing duplicated
    assert plan.status is not None and plan.status.incarnation == 2
    assert (plan.status.incarnations or [])[0].incarnation == 1
    assert any(p.name == "pi-driver" for p in plan.patches)


def test_terminal_phase_is_final() -> None:
    pod, cms, svcs = objects()
    st = {"phase": "Failed", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    plan = plan_for(driver(st), [deleting(running(pod))], cms, svcs)
    assert plan.creates == () and plan.events == ()
    assert plan.status is not None and plan.status.phase == "Failed" and plan.status.incarnation == 1
    assert [p.name for p in plan.patches] == ["pi-driver"]


def test_sparkdriver_being_deleted_only_releases_finalizers() -> None:
    pod, cms, svcs = objects()
    plan = plan_for(driver({"phase": "Running", "incarnation": 1}, deleting=True), [running(pod)], cms, svcs)
    assert plan.creates == () and plan.status is None and plan.deletes == ()
    assert [p.name for p in plan.patches] == ["pi-driver"]


def test_sparkdriver_gone_releases_its_pods() -> None:
    pod, _, _ = objects()
    plan = plan_for(None, [running(pod)])
    assert [p.name for p in plan.patches] == ["pi-driver"]


def test_image_pull_backoff_is_a_condition() -> None:
    pod, cms, svcs = objects()
    waiting = {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}
    stuck = with_status(pod, "Pending", containerStatuses=[{"name": "spark-kubernetes-driver", "state": waiting}])
    plan = plan_for(driver({"incarnation": 1, "phase": "Pending", "driverPod": {"name": "pi-driver"}}), [stuck],
                    cms, svcs)  # fmt: skip
    assert plan.status is not None
    assert plan.status.phase == "Pending"
    (cond,) = plan.status.conditions or []
    assert (cond.type, cond.status, cond.reason) == ("Stuck", "True", "ImagePullBackOff")
    assert [e.reason for e in plan.events] == ["DriverPodStuck"]


def test_unschedulable_becomes_a_condition_after_the_timeout() -> None:
    pod, cms, svcs = objects()

    def unschedulable(since: datetime) -> dict[str, Any]:
        cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "lastTransitionTime": since.strftime("%Y-%m-%dT%H:%M:%SZ"), "message": "0/3 nodes"}  # fmt: skip
        return with_status(pod, "Pending", conditions=[cond])

    st = {"incarnation": 1, "phase": "Pending", "driverPod": {"name": "pi-driver"}}
    early = plan_for(driver(st), [unschedulable(NOW - timedelta(seconds=60))], cms, svcs, unschedulable_timeout=300)
    assert early.requeue_after == pytest.approx(240)
    assert early.status is None or not early.status.conditions
    late = plan_for(driver(st), [unschedulable(NOW - timedelta(seconds=400))], cms, svcs, unschedulable_timeout=300)
    assert late.status is not None
    assert (late.status.conditions or [])[0].reason == "Unschedulable" and late.status.phase == "Pending"


def test_failed_init_container_fails_the_driver() -> None:
    pod, cms, svcs = objects()
    init = [{"name": "init", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]
    plan = plan_for(driver({"incarnation": 1, "driverPod": {"name": "pi-driver"}}),
                    [with_status(pod, "Failed", initContainerStatuses=init)], cms, svcs)  # fmt: skip
    assert plan.status is not None and plan.status.phase == "Failed"
    assert plan.status.termination is not None and plan.status.termination.reason == "InitContainerFailed"


def test_invalid_spec_is_submission_failed() -> None:
    body = driver()
    body["spec"]["sparkConf"] = {"spark.driver.host": "nope"}
    plan = plan_for(body)
    assert plan.creates == ()
    assert plan.status is not None and plan.status.phase == "SubmissionFailed"
    assert plan.status.lastError is not None and plan.status.lastError.reason == "InvalidSpec"


def test_fields_only_a_newer_crd_has_wait_instead_of_failing() -> None:
    body = driver()
    body["spec"]["upgradeNote"] = "from a newer CRD"
    plan = plan_for(body)
    assert plan.creates == () and plan.status is not None and plan.status.phase != "SubmissionFailed"
    assert plan.status.lastError is not None and plan.status.lastError.reason == "UnknownSpecFields"
    assert "spec.upgradeNote" in plan.status.lastError.message
    assert [e.reason for e in plan.events] == ["UnknownSpecFields"]
    again = plan_for(driver(plan.status.to_json()) | {"spec": body["spec"]})
    assert again.status is None and again.events == () and again.creates == ()
    body["spec"]["sparkConf"] = {"spark.driver.host": "nope"}
    body["spec"]["type"] = "Cobol"
    mixed = plan_for(body)
    assert mixed.status is not None and mixed.status.phase == "SubmissionFailed"


def test_submission_failed_status() -> None:
    read = Observed.of(driver({"incarnation": 1, "phase": "Pending", "driverPod": {"name": "pi-driver"}})).driver
    assert read is not None
    status = refusal_status(read.status, "pi-driver", 1, NOW, 1, "SubmissionFailed", "forbidden")
    assert status.phase == "SubmissionFailed" and "driverPod" not in status.to_json()
    assert (status.incarnations or [])[-1].outcome == "SubmissionFailed"


def test_strangers_pods_are_released_not_adopted() -> None:
    pod, cms, svcs = objects()
    other = {**pod, "metadata": {**pod["metadata"], "ownerReferences": [{**pod["metadata"]["ownerReferences"][0],
                                                                          "uid": "someone-else"}]}}  # fmt: skip
    plan = plan_for(driver(), [running(other)], cms, svcs)
    assert any(p.reason == "OwnerGoneOrDeleting" for p in plan.patches)
    assert "Pod/pi-driver" in kinds(plan)


def test_merge_patch_nulls_removed_keys() -> None:
    old = {"phase": "Running", "driverPod": {"name": "a", "uid": "1"}, "lastError": {"reason": "x"}}
    new = {"phase": "Pending", "driverPod": {"name": "b"}}
    assert merge_patch(old, new) == {"phase": "Pending", "driverPod": {"name": "b", "uid": None}, "lastError": None}


def test_steady_state_does_not_render(monkeypatch: pytest.MonkeyPatch) -> None:
    pod, cms, svcs = objects()
    first = plan_for(driver({"incarnation": 1, "driverPod": {"name": "pi-driver"}}), [running(pod)], cms, svcs)
    assert first.status is not None

    def no_render(*_: Any) -> Any:
        raise AssertionError("rendered although nothing is missing")

    monkeypatch.setattr("sparkop.driver_controller.facts.render", no_render)
    again = plan_for(driver(first.status.to_json()), [running(pod)], cms, svcs)
    assert again.status is None and again.creates == ()
    assert first.status.webUIAddress == "pi-1-driver-svc.ns.svc:4040"
    assert first.status.sparkApplicationId == render(parse(driver()), 1).properties["spark.app.id"]


MONITORED = {"exposeDriverMetrics": True, "exposeExecutorMetrics": True, "prometheus": {"jmxExporterJar": "/j.jar"}}


def test_metrics_configmap_is_created_before_the_pod_and_goes_with_its_incarnation() -> None:
    body = driver()
    body["spec"]["monitoring"] = MONITORED
    assert kinds(plan_for(body)) == [
        "ConfigMap/pi-1-podspec-conf-map", "ConfigMap/pi-1-conf-map", "ConfigMap/pi-1-prom-conf",
        "Service/pi-1-driver-svc", "Pod/pi-driver",
    ]  # fmt: skip
    # Only the missing one is created again.
    out = render(parse(body), 1)
    have = [summarize_object({**cm, "metadata": {**cm["metadata"], "uid": "cm"}}) for cm in out.config_maps[:2]]
    svcs = [summarize_object({**out.service, "metadata": {**out.service["metadata"], "uid": "svc"}})]
    pod = {**out.pod, "metadata": {**out.pod["metadata"], "uid": "pod-1", "resourceVersion": "5"}}
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    assert kinds(plan_for({**body, "status": st}, [running(pod)], have, svcs)) == ["ConfigMap/pi-1-prom-conf"]
    # A lost driver pod: the next incarnation gets its own, the old one is deleted.
    metrics = summarize_object({**out.config_maps[2], "metadata": {**out.config_maps[2]["metadata"], "uid": "m"}})
    plan = plan_for({**body, "status": st}, [deleting(running(pod))], [*have, metrics], svcs)
    assert "ConfigMap/pi-2-prom-conf" in kinds(plan)
    assert ("ConfigMap", "pi-1-prom-conf") in {(d.kind, d.name) for d in plan.deletes}


# --- lastError for transient errors -----------------------------------------------------------------

TRANSIENT = {
    "reason": "ServiceUnavailable",
    "message": "creating Pod pi-driver: 503 ...",
    "time": "2026-01-01T11:59:59Z",
}


def transient_plan(status: dict[str, Any], pods: list[dict[str, Any]], error: Any = TRANSIENT) -> Plan:
    _, cms, svcs = objects()
    observed = Observed.of(driver(status), [summarize_pod(p) for p in pods], cms, svcs, transient_error=error)
    return decided(observed, NOW)


def test_transient_error_is_recorded_once_and_kept_until_the_phase_changes() -> None:
    pod, _, _ = objects()
    pending = {"phase": "Pending", "incarnation": 1, "driverPod": {"name": "pi-driver"}}
    first = transient_plan(pending, [])  # the pod create had failed: it is created again, and why is recorded
    assert kinds(first) == ["Pod/pi-driver"]
    assert first.status is not None and first.status.to_json()["lastError"] == TRANSIENT
    # The same error again (the handler saw it once more): nothing to write, the first time stays.
    again = transient_plan(first.status.to_json(), [], {**TRANSIENT, "time": "2026-01-01T12:00:05Z"})
    assert again.status is None
    # A clean pass in the same phase keeps it: no write just to drop it.
    quiet = transient_plan(first.status.to_json(), [with_status(pod, "Pending")], None)
    assert quiet.status is not None and quiet.status.to_json()["lastError"] == TRANSIENT  # (driverPod uid is new)
    assert transient_plan(quiet.status.to_json(), [with_status(pod, "Pending")], None).status is None
    # The driver moves on: dropped in the write that records the new phase.
    moved = transient_plan(quiet.status.to_json(), [running(pod)], None)
    assert moved.status is not None and moved.status.phase == "Running" and moved.status.lastError is None


def test_a_different_transient_error_replaces_the_recorded_one() -> None:
    st = {"phase": "Pending", "incarnation": 1, "driverPod": {"name": "pi-driver"}, "lastError": TRANSIENT}
    other = {"reason": "Timeout", "message": "writing the status: the API server did not answer in time",
             "time": "2026-01-01T12:00:00Z"}  # fmt: skip
    plan = transient_plan(st, [], other)
    assert plan.status is not None and plan.status.to_json()["lastError"] == other


def test_terminal_lasterror_is_not_replaced_by_a_transient_one() -> None:
    invalid = {"reason": "InvalidSpec", "message": "mainClass is required", "time": "2026-01-01T11:00:00Z"}
    st = {"phase": "SubmissionFailed", "incarnation": 1, "lastError": invalid, "observedGeneration": 1}
    assert transient_plan(st, []).status is None
    pod, _, _ = objects()
    running_st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"},
                  "lastError": TRANSIENT}  # fmt: skip
    done = transient_plan(running_st, [terminated(pod, 0)], None)
    assert done.status is not None and done.status.phase == "Succeeded" and done.status.lastError is None


# --- the end of a driver: its executors go, its status is frozen -------------------------------------


def only_sparkdriver_owned(pod: dict[str, Any]) -> dict[str, Any]:
    """An executor after the GC dropped the reference to its deleted driver pod."""
    refs = [r for r in pod["metadata"]["ownerReferences"] if r["kind"] == "SparkDriver"]
    return {**pod, "metadata": {**pod["metadata"], "ownerReferences": refs}}


def test_executors_of_the_last_incarnation_are_deleted_when_its_loss_fails_the_driver() -> None:
    _, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"},
          "executors": {"pending": 0, "running": 1, "succeeded": 0, "failed": 0, "unknown": 0}}  # fmt: skip
    leftover = only_sparkdriver_owned(executor(1, adopted=True))
    plan = plan_for(driver(st, replacements=0), [leftover], cms, svcs)  # the driver pod is gone
    assert plan.status is not None and plan.status.phase == "Failed"
    assert [(d.kind, d.name, d.uid, d.reason) for d in plan.deletes] == [("Pod", "pi-1-exec-1", "e1", "DriverEnded")]
    none = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0, "unknown": 0}
    assert plan.status.to_json()["executors"] == none


def test_a_succeeded_driver_deletes_its_live_executors_and_keeps_finished_ones_if_asked() -> None:
    pod, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    execs = [executor(1, adopted=True), executor(2, adopted=True, phase="Succeeded"),
             deleting(executor(3, adopted=True))]  # fmt: skip
    plan = plan_for(driver(st), [terminated(pod, 0), *execs], cms, svcs)
    assert plan.status is not None and plan.status.phase == "Succeeded"
    assert plan.status_wait == 0  # an outcome is written at once
    # The driver exited by itself: Spark's own clean-up deletes its executors; the controller looks
    # again once that had its moment, and the counts are already those that stay.
    assert plan.deletes == () and plan.requeue_after == EXECUTOR_CLEANUP_GRACE_SECONDS
    assert plan.status.executors.running == 0 and plan.status.executors.succeeded == 0
    ended = plan.status.to_json()
    later = NOW + timedelta(seconds=EXECUTOR_CLEANUP_GRACE_SECONDS)
    left = decided(
        Observed.of(driver(ended), [summarize_pod(p) for p in [terminated(pod, 0), *execs]], cms, svcs), later
    )
    assert left.status is None  # frozen
    assert sorted(d.name for d in left.deletes) == ["pi-1-exec-1", "pi-1-exec-2"]
    keep = driver(ended)
    keep["spec"]["executor"] = {"deleteOnTermination": False}
    kept = decided(Observed.of(keep, [summarize_pod(p) for p in [terminated(pod, 0), *execs]], cms, svcs), later)
    assert [d.name for d in kept.deletes] == ["pi-1-exec-1"]


def test_the_executors_of_a_killed_driver_are_deleted_at_once() -> None:
    """No clean-up of Spark's ran: the driver container was killed (OOMKilled, SIGKILL)."""
    pod, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    for exit_code, reason in ((137, "OOMKilled"), (137, "Error")):
        killed = terminated(pod, exit_code)
        killed["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = reason
        plan = plan_for(driver(st), [killed, executor(1, adopted=True)], cms, svcs)
        assert plan.status is not None and plan.status.phase == "Failed"
        assert [d.name for d in plan.deletes] == ["pi-1-exec-1"]


def ended_status(phase: str) -> dict[str, Any]:
    """The status a pass wrote when the driver ended (``phase``)."""
    pod, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    ending = {
        "Succeeded": [terminated(pod, 0), executor(1, adopted=True)],
        "Failed": [terminated(pod, 1), executor(1, adopted=True)],
        "Lost": [deleting(running(pod)), executor(1, adopted=True)],
    }[phase]
    plan = plan_for(driver(st, replacements=0), ending, cms, svcs)
    assert plan.status is not None and plan.status.phase in ("Succeeded", "Failed")
    return plan.status.to_json()


EXECUTOR_PHASES = hst.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"])


@hst.composite
def owned_objects(draw: hst.DrawFn) -> tuple[list[dict[str, Any]], list[Any], list[Any]]:
    """Any mix of what a SparkDriver can own once it ended: its driver pod in any state or gone,
    executors of any incarnation and phase, being deleted or not, ConfigMaps and Service or not."""
    pod, cms, svcs = objects(draw(hst.integers(1, 2)))
    pods: list[dict[str, Any]] = []
    driver_state = draw(hst.sampled_from(["gone", "running", "succeeded", "failed", "deleting"]))
    if driver_state != "gone":
        shaped = {"running": running, "succeeded": lambda p: terminated(p, 0), "failed": lambda p: terminated(p, 1),
                  "deleting": lambda p: deleting(running(p))}[driver_state](pod)  # fmt: skip
        pods.append(shaped)
    for n in range(draw(hst.integers(0, 4))):
        exec_pod = executor(n, draw(hst.integers(1, 2)), adopted=draw(hst.booleans()), phase=draw(EXECUTOR_PHASES))
        if draw(hst.booleans()):
            exec_pod = deleting(exec_pod)
        if draw(hst.booleans()):
            exec_pod = only_sparkdriver_owned(exec_pod)
        pods.append(exec_pod)
    return pods, cms if draw(hst.booleans()) else [], svcs if draw(hst.booleans()) else []


@settings(max_examples=300, deadline=None)
@given(ended=hst.sampled_from(["Succeeded", "Failed", "Lost"]), owned=owned_objects(), keep=hst.booleans())
def test_an_ended_driver_never_writes_status_again(ended: str, owned: Any, keep: bool) -> None:
    """issue 9 item 2: whatever happens to what it owns afterwards, no status write."""
    status = ended_status(ended)
    body = driver(status, replacements=0)
    if keep:
        body["spec"]["executor"] = {"deleteOnTermination": False}
        body["metadata"]["generation"] = status["observedGeneration"]  # same spec generation
    pods, cms, svcs = owned
    plan = plan_for(body, pods, cms, svcs)
    assert plan.status is None
    assert plan.creates == () and plan.events == ()
    assert all(d.uid for d in plan.deletes)  # every delete carries its uid precondition


def test_an_ended_driver_acknowledges_a_spec_change_and_nothing_else() -> None:
    status = ended_status("Succeeded")
    body = driver(status)
    body["metadata"]["generation"] = 2
    pod, cms, svcs = objects()
    plan = plan_for(body, [deleting(terminated(pod, 0)), executor(1, adopted=True)], cms, svcs)
    assert plan.status is not None and plan.status.to_json() == {**status, "observedGeneration": 2}


def test_a_spec_too_large_for_its_configmap_fails_the_driver_once() -> None:
    body = driver()
    body["spec"]["sparkConf"] = {f"spark.example.value{n}": "v" * 60_000 for n in range(20)}
    plan = plan_for(body)
    assert plan.creates == ()
    assert plan.status is not None and plan.status.phase == "SubmissionFailed"
    error = plan.status.to_json()["lastError"]
    assert error["reason"] == "InvalidSpec"
    assert error["message"].startswith("spec.sparkConf / spec.hadoopConf: too large, ConfigMap ")
    assert [e.reason for e in plan.events] == ["InvalidSpec"]
    again = plan_for({**body, "status": plan.status.to_json()})
    assert again.status is None and again.creates == () and again.events == ()


# The end of a real Spark 3.5.9 driver's log (its termination message) when the API server restarted
# while its SparkContext started (seen in the chaos suite).
API_DOWN_AT_START = "\n".join(
    (
        "py4j.protocol.Py4JJavaError: An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.",
        ": org.apache.spark.SparkException: External scheduler cannot be instantiated",
        "Caused by: io.fabric8.kubernetes.client.KubernetesClientException: Operation: [get]  for kind: [Pod]  "
        "with name: [pi-driver]  in namespace: [ns]  failed.",
        "Caused by: java.io.IOException: Failed to connect to kubernetes.default.svc/10.0.0.1:443",
        "Caused by: java.net.ConnectException: Connection refused",
    )
)


# Spark 3.5's, as the kubelet keeps it (the last 2 KB): okhttp's frames, no "External scheduler" line.
API_DOWN_AT_START_TAIL = (
    "tp3.internal.platform.Platform.connectSocket(Platform.java:129)\n"
    "Caused by: java.net.ConnectException: Failed to connect to kubernetes.default.svc/10.0.0.1:443\n"
    "Caused by: java.net.ConnectException: Connection refused\n\t... 21 more\n"
)


# A real PySpark 3.5.9 driver's termination message, the API server restarted 1 s after the driver pod
# was Running: the trace is printed twice (Java's, then py4j's), and the window holds okhttp's frames only.
PYSPARK_API_DOWN_AT_START = (
    ROOT / "tests" / "snapshots" / "termination-messages" / "pyspark-3.5.9-api-server-down-at-start.txt"
).read_text()


@pytest.mark.parametrize(
    ("message", "executors", "lost"),
    [
        (API_DOWN_AT_START, False, True),
        (API_DOWN_AT_START_TAIL, False, True),
        (PYSPARK_API_DOWN_AT_START, False, True),
        (PYSPARK_API_DOWN_AT_START, True, False),
        (API_DOWN_AT_START_TAIL, True, False),  # it ran: executors were created for it
        (API_DOWN_AT_START.replace("java.net.ConnectException: Connection refused", "Forbidden"), False, False),
        ("java.lang.IllegalArgumentException: bad argument", False, False),
    ],
)
def test_a_driver_that_could_not_reach_the_api_server_at_start_is_lost_not_failed(
    message: str, executors: bool, lost: bool
) -> None:
    pod, cms, svcs = objects()
    st = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    ended = terminated(pod, 1)
    ended["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = message
    plan = plan_for(driver(st), [ended, *([executor(1, adopted=True)] if executors else [])], cms, svcs)
    assert plan.status is not None
    if lost:
        assert plan.status.incarnation == 2 and plan.status.phase == "Pending"
        record = (plan.status.incarnations or [])[0]
        assert (record.outcome, record.reason) == ("Lost", "APIServerUnreachable")
    else:
        assert plan.status.phase == "Failed" and plan.status.incarnation == 1


def held_by(holder_pod: dict[str, Any], **facts: Any) -> Plan:
    """A new SparkDriver "pi" whose driver pod's name is held by another SparkDriver's pod."""
    observed = Observed.of(driver(), [], name_holder=NameHolder(summarize_pod(holder_pod), "pi-old", **facts))
    return decided(observed, NOW)


def earlier_runs_pod(**meta: Any) -> dict[str, Any]:
    pod, _, _ = objects()
    done = terminated(pod, 0)
    return {**done, "metadata": {**done["metadata"], "uid": "old-pod", "finalizers": [], **meta}}


def test_an_earlier_runs_ended_pod_is_deleted_for_the_next_and_waited_for() -> None:
    plan = held_by(earlier_runs_pod(), same_owner=True, ended=True)
    assert "Pod/pi-driver" not in kinds(plan)  # not until it is gone
    assert {"ConfigMap/pi-1-conf-map", "Service/pi-1-driver-svc"} <= set(kinds(plan))  # made meanwhile
    (delete,) = [d for d in plan.deletes if d.kind == "Pod"]
    assert (delete.name, delete.uid, delete.grace_seconds) == ("pi-driver", "old-pod", None)
    assert plan.requeue_after is not None  # its deletion brings its own SparkDriver a pass, not this one
    assert [e.reason for e in plan.events] == ["DriverPodReleased"]


@pytest.mark.parametrize(
    "facts",
    [
        {"same_owner": True, "ended": False},  # an earlier run still ending: its SparkDriver records it first
        {"going": True},  # its SparkDriver is gone (an app deleted and applied again): the GC takes it
    ],
)
def test_a_name_held_by_a_pod_that_will_go_is_waited_for_untouched(facts: dict[str, Any]) -> None:
    plan = held_by(earlier_runs_pod(), **facts)
    assert "Pod/pi-driver" not in kinds(plan) and not [d for d in plan.deletes if d.kind == "Pod"]
    assert plan.requeue_after is not None
    assert plan.status is None or plan.status.phase != "SubmissionFailed"


def test_a_name_held_by_another_live_owners_pod_refuses_the_submission_and_leaves_it() -> None:
    plan = held_by(earlier_runs_pod(), same_owner=False, ended=False)
    assert plan.creates == () and plan.deletes == ()
    assert plan.status is not None and plan.status.phase == "SubmissionFailed"
    assert plan.status.lastError is not None and plan.status.lastError.reason == "DriverPodNameTaken"
    assert "held by the driver pod of SparkDriver pi-old" in (plan.status.lastError.message or "")
    assert "spec.driver.podName" in (plan.status.lastError.message or "")


def test_an_earlier_runs_pod_stuck_on_a_lost_node_is_removed_at_once() -> None:
    stuck = earlier_runs_pod(deletionTimestamp="2026-01-01T11:59:00Z", deletionGracePeriodSeconds=30)
    stuck = {**stuck, "spec": {**stuck["spec"], "nodeName": "node-a"}}
    _, cms, svcs = objects()
    holder = NameHolder(summarize_pod(stuck), "pi-old", same_owner=True, ended=True)
    observed = Observed.of(driver(), [], cms, svcs, name_holder=holder, lost_nodes=frozenset({"node-a"}))
    (removal,) = [d for d in decided(observed, NOW).deletes if d.kind == "Pod"]
    assert (removal.uid, removal.grace_seconds) == ("old-pod", 0)
    # Another's pod on a lost node is not ours to remove.
    foreign = Observed.of(driver(), [], cms, svcs, name_holder=replace(holder, same_owner=False),
                       lost_nodes=frozenset({"node-a"}))  # fmt: skip
    assert not [d for d in decided(foreign, NOW).deletes if d.kind == "Pod"]
