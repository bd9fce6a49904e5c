"""The driver controller's decision as an ordered table of steps (driver_controller.decide): the rows
in order, where each kind of pass stops, that no step changes the facts it was given, and that a pass
renders the incarnation at most once."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from sparkop.api.models import DriverPhase, ExecutorCounts, SparkDriver
from sparkop.core.expectations import LogTail
from sparkop.core.plan import Create, Plan, Refusal, refusal_key
from sparkop.core.times import format_time
from sparkop.domain import labels
from sparkop.driver_controller import facts as facts_module
from sparkop.driver_controller.decide import CLOSING, STEPS, decide
from sparkop.driver_controller.facts import Facts, Stop, Why, run
from sparkop.driver_controller.observed import Observed, Settings
from sparkop.driver_controller.summaries import summarize_pod
from tests.support.driver_objects import NOW, deleting, driver, executor, objects, running, terminated


def test_the_decision_reads_as_its_steps_in_order() -> None:
    # Adding a step (a timeout, a history link) is adding a row here and in decide.STEPS.
    assert [step.__name__ for step in STEPS] == [
        "recover_incarnation",
        "adopt_driver_pod",
        "deadline",
        "admission",
        "follow_driver_pod",
        "waits",
        "made_elsewhere",
        "create_missing",
    ]
    assert [step.__name__ for step in CLOSING] == ["workload_finished", "executors", "stale_incarnations"]


def first_facts(observed: Observed) -> Facts:
    assert observed.driver is not None and isinstance(observed.driver.spec, SparkDriver)
    return Facts.first(observed, observed.driver.spec, NOW, Plan())


def stop_of(observed: Observed) -> tuple[str, str] | None:
    """(the step that stopped, why), or None when every step ran."""
    facts = first_facts(observed)
    for step in STEPS:
        outcome = step(facts)
        if isinstance(outcome, Stop):
            return step.__name__, outcome.reason
        facts = outcome.facts
    return None


def test_a_new_driver_runs_every_step() -> None:
    assert stop_of(Observed.of(driver())) is None


def test_an_ended_driver_stops_at_its_incarnation() -> None:
    ended = {"phase": "Succeeded", "incarnation": 1, "driverPod": {"name": "pi-1-driver"}}
    assert stop_of(Observed.of(driver(ended))) == ("recover_incarnation", Why.ENDED)


def test_a_driver_pod_that_finished_stops_the_decision_where_it_is_followed() -> None:
    pod, cms, svcs = objects()
    status = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    pods = [summarize_pod(terminated(pod, 0))]
    # First the end of its log is read (the pod may go once its outcome is recorded, and the log with it).
    reading = Observed.of(driver(status), pods, cms, svcs)
    assert stop_of(reading) == ("follow_driver_pod", Why.READING_LOG)
    assert [read.pod for read in decide(reading, NOW).reads] == ["pi-driver"]
    observed = Observed.of(driver(status), pods, cms, svcs, logs={"pod-1": LogTail("Pi is roughly 3.14\n")})
    assert stop_of(observed) == ("follow_driver_pod", Why.FINISHED)


def test_an_operator_that_keeps_no_log_tails_records_an_outcome_without_reading_the_log() -> None:
    """--driver-log-tail-lines 0: the outcome is recorded in the pass that sees it, nothing is read (the
    operator may have no pods/log right), and the record keeps no log tail."""
    pod, cms, svcs = objects()
    status = {"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-driver", "uid": "pod-1"}}
    settings = Settings(log_tail_lines=0)
    observed = Observed.of(driver(status), [summarize_pod(terminated(pod, 1))], cms, svcs, settings)
    assert stop_of(observed) == ("follow_driver_pod", Why.FINISHED)
    plan = decide(observed, NOW)
    assert plan.reads == () and plan.status is not None
    (record,) = plan.status.incarnations or []
    assert (record.outcome, record.logTail) == ("Failed", None)
    assert plan.status.phase is DriverPhase.FAILED


def test_a_refused_create_is_a_visible_stop() -> None:
    key = refusal_key(Create({"kind": "Pod", "metadata": {"name": "pi-driver"}}))
    observed = Observed.of(driver(), refusals={key: Refusal(403, "Forbidden", "exceeded quota")})
    assert stop_of(observed) == ("create_missing", Why.REFUSED)


def test_a_run_waiting_for_kueue_stops_at_its_admission() -> None:
    body = driver()
    body["metadata"]["labels"] = {labels.KUEUE_QUEUE_NAME: "team-a"}
    assert stop_of(Observed.of(body)) == ("admission", Why.WAITING_FOR_KUEUE)


def past_deadline(body: dict[str, Any], seconds: int = 60) -> dict[str, Any]:
    """``body`` created ``seconds`` + 1 before NOW, with activeDeadlineSeconds ``seconds``."""
    body["metadata"]["creationTimestamp"] = format_time(NOW - timedelta(seconds=seconds + 1))
    body["spec"]["activeDeadlineSeconds"] = seconds
    return body


def test_a_run_past_its_deadline_stops_before_anything_else_is_decided_even_while_queued() -> None:
    assert stop_of(Observed.of(past_deadline(driver()))) == ("deadline", Why.TIMED_OUT)
    queued = past_deadline(driver())
    queued["metadata"]["labels"] = {labels.KUEUE_QUEUE_NAME: "team-a"}
    assert stop_of(Observed.of(queued)) == ("deadline", Why.TIMED_OUT)


def test_a_driver_that_does_not_start_in_time_stops_where_its_waits_are_checked() -> None:
    pod, cms, svcs = objects()
    pod["metadata"]["creationTimestamp"] = format_time(NOW - timedelta(seconds=61))
    body = driver({"phase": "Pending", "incarnation": 1, "driverPod": {"name": "pi-1-driver"}})
    body["spec"]["timeouts"] = {"driverStartSeconds": 60}
    assert stop_of(Observed.of(body, [summarize_pod(pod)], cms, svcs)) == ("waits", Why.TIMED_OUT)


SCENARIOS: dict[str, Any] = {
    "new": lambda: Observed.of(driver()),
    "running": lambda: (
        lambda pod, cms, svcs: Observed.of(
            driver({"phase": "Pending", "incarnation": 1, "driverPod": {"name": "pi-1-driver"}}),
            [summarize_pod(running(pod)), summarize_pod(executor(1))],
            cms,
            svcs,
        )
    )(*objects()),
    "lost": lambda: (
        lambda pod, cms, svcs: Observed.of(
            driver({"phase": "Running", "incarnation": 1, "driverPod": {"name": "pi-1-driver", "uid": "pod-1"}}),
            [summarize_pod(deleting(running(pod)))],
            cms,
            svcs,
        )
    )(*objects()),
    "timed out": lambda: Observed.of(past_deadline(driver())),
    "queued": lambda: Observed.of(
        {**driver(), "metadata": {**driver()["metadata"], "labels": {labels.KUEUE_QUEUE_NAME: "team-a"}}}
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_no_step_changes_the_facts_it_was_given(scenario: str) -> None:
    facts = first_facts(SCENARIOS[scenario]())
    for step in STEPS:
        status, plan = copy.deepcopy(facts.status.model_dump()), copy.deepcopy(facts.plan)
        outcome = step(facts)
        assert facts.status.model_dump() == status and facts.plan == plan, step.__name__
        facts = outcome.facts
        if isinstance(outcome, Stop):
            break
    for closing in CLOSING:
        status, plan = copy.deepcopy(facts.status.model_dump()), copy.deepcopy(facts.plan)
        after = closing(facts)
        assert facts.status.model_dump() == status and facts.plan == plan, closing.__name__
        facts = after


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_pass_renders_its_incarnation_at_most_once(scenario: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rendered: list[int] = []
    real = facts_module.render

    def counted(*args: Any) -> Any:
        rendered.append(1)
        return real(*args)

    monkeypatch.setattr(facts_module, "render", counted)
    plan = decide(SCENARIOS[scenario](), NOW)
    assert len(rendered) <= 1
    assert bool(rendered) == bool(plan.creates)  # and only when something is created


def test_run_stops_at_the_first_stop() -> None:
    ended = {"phase": "Failed", "incarnation": 2, "driverPod": {"name": "pi-2-driver"}}
    facts, stop = run(STEPS, first_facts(Observed.of(driver(ended))))
    assert stop is not None and stop.reason == Why.ENDED and facts.incarnation == 2


def test_an_update_that_replaces_nothing_keeps_the_facts_and_their_status() -> None:
    facts = first_facts(SCENARIOS["running"]())
    status = facts.status
    assert status.phase is DriverPhase.PENDING and status.executors.model_fields_set == set()
    assert facts.update(phase=DriverPhase.PENDING, incarnation=status.incarnation) is facts
    assert facts.update(driverPod=status.driverPod.model_copy() if status.driverPod else None) is facts  # equal
    # Anything else is a new status: another value, a str for its StrEnum member, executors with other
    # counts set (their JSON is what was set), and a pass that changed nothing ends with the status read.
    assert facts.update(phase=DriverPhase.RUNNING).status.phase is DriverPhase.RUNNING
    assert facts.update(phase="Pending").status is not status
    assert facts.update(executors=ExecutorCounts(running=0)).status is not status
    written = decide(SCENARIOS["running"](), NOW).status  # the pod runs: status says so
    assert written is not None
    steady = first_facts(Observed.of(driver(written.to_json()), *running_objects()))
    steady, stop = run(STEPS, steady)
    for closing in CLOSING:
        steady = closing(steady)
    assert stop is None and steady.status is steady.read


def running_objects() -> tuple[list[Any], list[Any], list[Any]]:
    """The running driver pod with an executor, the ConfigMaps and the Service of incarnation 1."""
    pod, cms, svcs = objects()
    return [summarize_pod(running(pod)), summarize_pod(executor(1))], cms, svcs
