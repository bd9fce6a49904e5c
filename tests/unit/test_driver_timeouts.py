"""A run's timeouts and its bound on failing executors, pure: each counted from a time status (or the
object's own creation) records, so a decision at any later moment, by any operator process, reaches the
same verdict at the same instant; each expiry ends the run with its reason and deletes its driver pod
and executors; the restart policy's infrastructure budget judges the start timeouts."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from sparkop.api.models import DriverPhase
from sparkop.core.times import format_time
from sparkop.domain import labels
from sparkop.driver_controller.decide import decide
from sparkop.driver_controller.observed import Limits, Observed, Settings
from sparkop.driver_controller.podbuild import POD_TEMPLATE_KEY
from sparkop.driver_controller.render import parse, render
from sparkop.driver_controller.summaries import summarize_pod
from sparkop.driver_controller.transitions import RUNS_TIMED_OUT
from tests.support.app_runs import BASE_SPEC
from tests.support.driver_objects import NOW, driver, executor, objects, running, with_status
from tests.support.simulation import SimCluster


def timed(status: dict[str, Any] | None = None, created_ago: float = 0, **spec: Any) -> dict[str, Any]:
    body = driver(status)
    body["metadata"]["creationTimestamp"] = format_time(NOW - timedelta(seconds=created_ago))
    body["spec"].update(spec)
    return body


def pod_created(pod: dict[str, Any], ago: float) -> dict[str, Any]:
    return {**pod, "metadata": {**pod["metadata"], "creationTimestamp": format_time(NOW - timedelta(seconds=ago))}}


def pulling(pod: dict[str, Any]) -> dict[str, Any]:
    waiting = {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "nope:1"'}
    return with_status(
        pod, "Pending", containerStatuses=[{"name": "spark-kubernetes-driver", "state": {"waiting": waiting}}]
    )


def decide_at(body: dict[str, Any], pods: list[dict[str, Any]], later: float = 0, **settings: Any) -> Any:
    _, cms, svcs = objects()
    observed = Observed.of(body, [summarize_pod(p) for p in pods], cms, svcs, Settings(**settings))
    return decide(observed, NOW + timedelta(seconds=later))


STARTED = {"phase": "Pending", "incarnation": 1, "driverPod": {"name": "pi-driver"}}


def test_a_driver_that_does_not_start_fails_its_run_at_the_deadline_its_pod_set() -> None:
    pod, _, _ = objects()
    waiting = pod_created(pulling(pod), 50)
    before = decide_at(timed(STARTED, 50, timeouts={"driverStartSeconds": 60}), [waiting])
    assert before.status.phase == DriverPhase.PENDING
    assert before.status.nextTimeout.reason == "DriverStartTimedOut"
    assert before.status.nextTimeout.time == NOW + timedelta(seconds=10)
    assert before.requeue_after == 10
    # Another process, any time later, from what status says and the pod shows: the same instant.
    again = timed(before.status.to_json(), 50, timeouts={"driverStartSeconds": 60})
    assert decide_at(again, [waiting], later=9.5).status is None  # nothing new to write
    over = decide_at(again, [waiting], later=10)
    assert over.status.phase == DriverPhase.FAILED
    assert over.status.termination.reason == "DriverStartTimedOut"
    assert "ImagePullBackOff" in over.status.termination.message and "60s" in over.status.termination.message
    assert [(d.kind, d.name) for d in over.deletes] == [("Pod", "pi-driver")]
    assert "DriverStartTimedOut" in [e.reason for e in over.events]
    assert any(
        o.metric == RUNS_TIMED_OUT and o.labels == (("reason", "DriverStartTimedOut"),) for o in over.observations
    )


def test_the_operators_default_applies_where_the_spec_is_silent_and_zero_turns_it_off() -> None:
    pod, _, _ = objects()
    stuck = pod_created(pulling(pod), 100)
    defaults = Limits(driver_start=30)
    assert decide_at(timed(STARTED, 100), [stuck], timeouts=defaults).status.phase == DriverPhase.FAILED
    off = timed(STARTED, 100, timeouts={"driverStartSeconds": 0})
    assert decide_at(off, [stuck], timeouts=defaults).status.phase == DriverPhase.PENDING


def test_a_run_past_its_deadline_is_stopped_and_its_executors_deleted() -> None:
    pod, _, _ = objects()
    live = [running(pod_created(pod, 100)), executor(1), executor(2)]
    body = timed({**STARTED, "phase": "Running"}, 120, activeDeadlineSeconds=120)
    plan = decide_at(body, live)
    assert plan.status.termination.reason == "DeadlineExceeded"
    assert sorted(d.name for d in plan.deletes) == ["pi-1-exec-1", "pi-1-exec-2", "pi-driver"]
    # A pass after the end (the one that ended it died before deleting): the pod still goes.
    after = decide_at(timed(plan.status.to_json(), 130, activeDeadlineSeconds=120), live, later=10)
    assert "pi-driver" in [d.name for d in after.deletes] and after.status is None


def test_executors_that_do_not_start_end_the_run_counted_from_the_drivers_start() -> None:
    pod, _, _ = objects()
    body = timed(STARTED, 0, timeouts={"executorsStartSeconds": 30}, executor={"instances": 2})
    first = decide_at(body, [running(pod), executor(1), executor(2, phase="Pending")])
    assert first.status.driverPod.runningTime == NOW and first.status.nextTimeout.reason == "ExecutorsStartTimedOut"
    later = timed(first.status.to_json(), 30, timeouts={"executorsStartSeconds": 30}, executor={"instances": 2})
    over = decide_at(later, [running(pod), executor(1), executor(2, phase="Pending")], later=30)
    assert over.status.termination.reason == "ExecutorsStartTimedOut"
    assert over.status.termination.message.startswith("1 of 2 executors running")
    both = decide_at(later, [running(pod), executor(1), executor(2)], later=29)
    assert both.status.executorsStartedTime is not None and both.status.nextTimeout is None


def failed_executor(n: int, message: str) -> dict[str, Any]:
    state = {"terminated": {"exitCode": 1, "reason": "Error", "message": message, "finishedAt": format_time(NOW)}}
    pod = executor(n, phase="Failed")
    pod["status"]["containerStatuses"] = [{"name": "spark-kubernetes-executor", "state": state}]
    pod["metadata"]["finalizers"] = [labels.EXECUTOR_OUTCOME_FINALIZER]
    return pod


def test_executors_failing_in_a_loop_end_the_run_naming_the_last_error_and_their_pods_are_let_go() -> None:
    pod, _, _ = objects()
    bound = {"maxFailures": 2, "windowSeconds": 600}
    body = timed({**STARTED, "phase": "Running"}, 0, executorFailures=bound)
    two = decide_at(body, [running(pod), failed_executor(1, "boom 1"), failed_executor(2, "boom 2")])
    assert [f.pod for f in two.status.executorFailures] == ["pi-1-exec-1", "pi-1-exec-2"]
    assert two.status.phase == DriverPhase.RUNNING
    assert sorted(p.name for p in two.patches) == ["pi-1-exec-1", "pi-1-exec-2"]  # counted: released
    # Spark deleted those two; a third fails.
    third = timed(two.status.to_json(), 0, executorFailures=bound)
    plan = decide_at(third, [running(pod), failed_executor(3, "java.lang.OutOfMemoryError: boom 3")], later=5)
    assert plan.status.termination.reason == "ExecutorsCrashLooping"
    message = plan.status.termination.message
    assert "3 executor pods failed within 600s" in message and "pi-1-exec-3" in message and "boom 3" in message
    # The finalizer goes on executor pods only where failures are bounded.
    assert labels.EXECUTOR_OUTCOME_FINALIZER in template(timed(None, 0, executorFailures=bound)).get("finalizers", [])
    assert "finalizers" not in template(timed(None, 0))


def template(body: dict[str, Any]) -> dict[str, Any]:
    """The executor pod template's metadata as rendered for ``body``."""
    config_map = render(parse(body), 1).executor_template
    assert config_map is not None
    meta: dict[str, Any] = json.loads(config_map["data"][POD_TEMPLATE_KEY]).get("metadata") or {}
    return meta


def test_a_start_that_timed_out_is_judged_by_the_infrastructure_budget_whatever_the_type() -> None:
    policy = {"type": "Never", "onInfrastructureFailureRetries": 1, "onInfrastructureFailureRetryInterval": 2}
    c = SimCluster(spec={**BASE_SPEC, "restartPolicy": policy}, name="pi")
    for run in (1, 2):
        c.run_until_quiet()
        c.set_phase(f"pi-{run}", DriverPhase.FAILED, "DriverStartTimedOut")
        c.run_until_quiet()
        c.advance(3)
    c.run_until_quiet()
    assert c.status["applicationState"]["state"] == "FAILED"
    assert c.status["infrastructureFailures"] == 2 and c.status["executionAttempts"] == 0
    assert [a["reason"] for a in c.status["attempts"]] == ["DriverStartTimedOut", "DriverStartTimedOut"]
    # Without the budget, the same failure is an ordinary one: Never runs it once.
    plain = SimCluster(spec={**BASE_SPEC}, name="pi")
    plain.run_until_quiet()
    plain.set_phase("pi-1", DriverPhase.FAILED, "DriverStartTimedOut")
    plain.run_until_quiet()
    assert plain.status["applicationState"]["state"] == "FAILED" and plain.status["executionAttempts"] == 1


def test_a_jvm_that_cannot_start_is_named_by_the_lines_above_its_closing_error() -> None:
    jvm = (
        "The Java thread stack size specified is too small. Specify at least 136k\n"
        "Error: Could not create the Java Virtual Machine.\n"
        "Error: A fatal exception has occurred. Program will exit.\n"
    )
    pod, _, _ = objects()
    bound = {"maxFailures": 1, "windowSeconds": 600}
    body = timed({**STARTED, "phase": "Running"}, 0, executorFailures=bound)
    plan = decide_at(body, [running(pod), failed_executor(1, jvm), failed_executor(2, jvm)])
    message = plan.status.termination.message
    assert plan.status.termination.reason == "ExecutorsCrashLooping"
    assert "exit code 1" in message and "thread stack size specified is too small" in message, message
