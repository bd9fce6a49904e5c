"""schedule_controller.decide and api.scheduled's schedule reading: pure, no cluster.

The due computation is checked pass by pass (Forbid / Replace / Allow, history limits, suspend,
missed runs within and past startingDeadlineSeconds) and as a property: whatever the instants the
passes run at and whichever status writes are lost (a crash after the create), each scheduled time is
started at most once, under the name of its minute, and only the latest of a gap."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkop.api.scheduled import ScheduledSparkApplicationStatus, ScheduleError, ScheduleState, parse_schedule
from sparkop.core.plan import Create, Delete, Refusal, refusal_key
from sparkop.core.specs import lenient
from sparkop.core.times import format_time
from sparkop.domain import labels
from sparkop.schedule_controller.decide import decide, run_name
from sparkop.schedule_controller.events import Reason
from sparkop.schedule_controller.observed import Observed, RunView, ScheduledView

CREATED = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
UID = "sched-uid"


def body(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "ScheduledSparkApplication",
        "metadata": {
            "name": "nightly",
            "namespace": "ns",
            "uid": UID,
            "generation": 1,
            "creationTimestamp": format_time(CREATED),
            "labels": {"team": "data"},
        },
        "spec": {"schedule": "*/5 * * * *", "template": {"type": "Scala", "mainClass": "X"}, **spec},
    }


def run(at: datetime, state: str | None = None, owner: str = UID) -> RunView:
    return RunView(
        name=run_name("nightly", at),
        uid=f"uid-{at.timestamp()}",
        owner_uid=owner,
        scheduled=at,
        created=at,
        state=state,
    )


def observed(runs: tuple[RunView, ...] = (), status: dict[str, Any] | None = None, **spec: Any) -> Observed:
    b = body(**spec)
    return Observed(ScheduledView.from_body(b), runs, status=lenient(ScheduledSparkApplicationStatus, status), body=b)


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 1, 1, 0, 0, tzinfo=UTC) + timedelta(minutes=minute, seconds=second)


def created(plan: Any) -> list[str]:
    return [a.name for a in plan.before_status if isinstance(a, Create)]


def deleted(plan: Any) -> list[str]:
    return [a.name for a in plan.actions if isinstance(a, Delete)]


# ---------------------------------------------------------------------------------------------- names


def test_run_name_is_the_scheduled_minute_and_the_run_carries_its_time() -> None:
    plan = decide(observed(), at(5, 1))
    (create,) = [a for a in plan.before_status if isinstance(a, Create)]
    assert create.name == f"nightly-{int(at(5).timestamp()) // 60}" == "nightly-29453765"
    meta = create.manifest["metadata"]
    assert meta["annotations"] == {labels.SCHEDULED_TIME: "2026-01-01T00:05:00Z"}
    assert meta["labels"] == {
        "team": "data",
        labels.MANAGED_BY: "sparkop",
        labels.SCHEDULED_APP: "nightly",
        labels.KUBEFLOW_SCHEDULED_APP_NAME: "nightly",  # kubeflow's own label on a schedule's runs
    }
    assert meta["ownerReferences"][0]["uid"] == UID and meta["ownerReferences"][0]["controller"] is True
    assert create.manifest["spec"] == {"type": "Scala", "mainClass": "X"}
    assert plan.status is not None
    assert plan.status.lastRun == at(5) and plan.status.lastRunName == create.name
    assert plan.status.nextRun == at(10)
    assert plan.requeue_after == pytest.approx(299.05)


@given(name=st.from_regex(r"[a-z][a-z0-9.-]{0,252}", fullmatch=True), a=st.integers(0, 10**8), b=st.integers(0, 10**8))
def test_run_names_fit_and_differ_by_minute(name: str, a: int, b: int) -> None:
    one = run_name(name, datetime.fromtimestamp(a * 60, UTC))
    two = run_name(name, datetime.fromtimestamp(b * 60, UTC))
    assert len(one) <= 253 and one.endswith(f"-{a}")
    assert (one == two) == (a == b)


# ------------------------------------------------------------------------------------------- schedules


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        ("@hourly", at(0, 31), at(60)),
        ("@daily", at(0, 31), at(24 * 60)),
        ("@midnight", at(0, 31), at(24 * 60)),
        ("0 0 1 * *", at(0, 31), datetime(2026, 2, 1, tzinfo=UTC)),
        ("@every 3m", at(0, 31), at(3, 30)),  # creationTimestamp + k x 3m
        ("@every 1h30m", at(0, 31), at(90, 30)),
        ("@every 90s", at(2, 0), at(3, 30)),  # 00:00:30 + 90 s = 00:02:00, then 00:03:30
    ],
)
def test_next_scheduled_time(schedule: str, after: datetime, expected: datetime) -> None:
    assert parse_schedule(schedule, None, CREATED).next_after(after) == expected


@pytest.mark.parametrize(
    ("schedule", "zone", "field", "words"),
    [
        ("61 * * * *", None, "spec.schedule", "out of range"),
        ("* * * * * *", None, "spec.schedule", "not a schedule"),
        ("@every 30s", None, "spec.schedule", "shorter than a minute"),
        ("@every 5", None, "spec.schedule", "not a schedule"),
        ("@often", None, "spec.schedule", "not a schedule"),
        ("*/5 * * * *", "Mars/Olympus", "spec.timeZone", "unknown time zone"),
    ],
)
def test_unreadable_schedules_name_the_field_and_the_fix(
    schedule: str, zone: str | None, field: str, words: str
) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(schedule, zone, CREATED)
    assert caught.value.field == field and words in caught.value.message and caught.value.hint
    assert "\n" not in str(caught.value)


def times(schedule: str, zone: str, start: datetime, count: int, anchor: datetime | None = None) -> list[datetime]:
    parsed = parse_schedule(schedule, zone, anchor or start)
    out = [parsed.next_after(start)]
    while len(out) < count:
        out.append(parsed.next_after(out[-1]))
    return out


def test_dst_spring_forward_runs_a_skipped_time_once_after_the_gap() -> None:
    ny = ZoneInfo("America/New_York")  # 2026-03-08 02:00 EST -> 03:00 EDT
    got = times("30 2 * * *", "America/New_York", datetime(2026, 3, 6, 12, tzinfo=UTC), 3)
    assert [t.astimezone(ny).strftime("%m-%d %H:%M %Z") for t in got] == [
        "03-07 02:30 EST",
        "03-08 03:00 EDT",
        "03-09 02:30 EDT",
    ]


def test_dst_fall_back_runs_a_named_hour_once_and_a_wildcard_hour_twice() -> None:
    ny = ZoneInfo("America/New_York")  # 2026-11-01 02:00 EDT -> 01:00 EST: 01:xx happens twice
    daily = times("30 1 * * *", "America/New_York", datetime(2026, 10, 31, 12, tzinfo=UTC), 2)
    assert [t.astimezone(ny).strftime("%m-%d %H:%M %Z") for t in daily] == ["11-01 01:30 EDT", "11-02 01:30 EST"]
    half_hourly = times("*/30 * * * *", "America/New_York", datetime(2026, 11, 1, 4, 50, tzinfo=UTC), 6)
    assert [t.strftime("%H:%M") for t in half_hourly] == ["05:00", "05:30", "06:00", "06:30", "07:00", "07:30"]
    # latest() agrees with next_after() on the repeated hour.
    parsed = parse_schedule("30 1 * * *", "America/New_York", datetime(2026, 10, 1, tzinfo=UTC))
    assert parsed.latest(datetime(2026, 11, 1, 7, tzinfo=UTC)) == daily[0]


@given(
    schedule=st.sampled_from(["*/7 * * * *", "30 1 * * *", "0 */2 * * *", "15 2 * * 0", "@hourly", "@every 47m"]),
    zone=st.sampled_from(["UTC", "America/New_York", "Europe/Paris", "Australia/Lord_Howe"]),
    start=st.datetimes(datetime(2026, 1, 1), datetime(2027, 12, 31), timezones=st.just(UTC)),
)
@settings(max_examples=60, deadline=None)
def test_scheduled_times_increase_and_latest_inverts_next(schedule: str, zone: str, start: datetime) -> None:
    anchor = datetime(2025, 12, 1, 0, 0, 7, tzinfo=UTC)
    parsed = parse_schedule(schedule, zone, anchor)
    got = times(schedule, zone, start, 8, anchor)
    assert all(a < b for a, b in itertools.pairwise(got))
    for t in got:
        assert parsed.latest(t) == t
        assert parsed.latest(t + timedelta(seconds=1)) == t
        assert run_name("x", t) != run_name("x", parsed.next_after(t))


# ---------------------------------------------------------------------------------------------- passes


def test_nothing_is_due_before_the_first_time_after_creation() -> None:
    plan = decide(observed(), at(4, 59))
    assert created(plan) == [] and plan.status is not None and plan.status.nextRun == at(5)
    assert plan.status.scheduleState == ScheduleState.SCHEDULED


def test_a_time_with_its_run_present_is_not_started_again_even_if_status_lost_it() -> None:
    plan = decide(observed((run(at(5)),)), at(7))
    assert created(plan) == []
    assert plan.status is not None and plan.status.lastRunName == run_name("nightly", at(5))


def test_forbid_skips_while_a_run_is_active_and_records_the_time() -> None:
    plan = decide(observed((run(at(5), "RUNNING"),), concurrencyPolicy="Forbid"), at(10, 1))
    assert created(plan) == [] and [e.reason for e in plan.events] == [Reason.RUN_SKIPPED]
    assert plan.status is not None and plan.status.lastScheduledTime == at(10)
    # The skipped time stays skipped when the active run finishes before the next one.
    after = decide(observed((run(at(5), "COMPLETED"),), plan.status.to_json(), concurrencyPolicy="Forbid"), at(12))
    assert created(after) == []
    later = decide(observed((run(at(5), "COMPLETED"),), after.status.to_json(), concurrencyPolicy="Forbid"), at(15))
    assert created(later) == [run_name("nightly", at(15))]


def test_replace_deletes_the_active_run_before_starting_the_new_one() -> None:
    plan = decide(observed((run(at(5), "RUNNING"),), concurrencyPolicy="Replace"), at(10, 1))
    assert [type(a).__name__ for a in plan.before_status] == ["Delete", "Create"]
    delete = plan.before_status[0]
    assert isinstance(delete, Delete) and delete.name == run_name("nightly", at(5)) and delete.uid
    assert created(plan) == [run_name("nightly", at(10))]
    assert plan.status is not None and plan.status.activeRunNames == [run_name("nightly", at(10))]


def test_allow_overlaps() -> None:
    plan = decide(observed((run(at(5), "RUNNING"),)), at(10, 1))
    assert created(plan) == [run_name("nightly", at(10))] and deleted(plan) == []
    assert plan.status is not None and len(plan.status.activeRunNames or []) == 2


def test_history_limits_prune_the_oldest_finished_runs_after_the_status_write() -> None:
    runs = (
        run(at(5), "COMPLETED"),
        run(at(10), "FAILED"),
        run(at(15), "COMPLETED"),
        run(at(20), "FAILED"),
        run(at(25), "COMPLETED"),
        run(at(30), "RUNNING"),
    )
    plan = decide(observed(runs, successfulRunHistoryLimit=2, failedRunHistoryLimit=1), at(31))
    assert [a.name for a in plan.after_status if isinstance(a, Delete)] == [
        run_name("nightly", at(5)),
        run_name("nightly", at(10)),
    ]
    assert plan.before_status == ()
    assert plan.status is not None
    assert plan.status.pastSuccessfulRunNames == [run_name("nightly", at(25)), run_name("nightly", at(15))]
    assert plan.status.pastFailedRunNames == [run_name("nightly", at(20))]
    assert plan.status.activeRunNames == [run_name("nightly", at(30))]


def test_kubeflow_default_history_is_one_of_each() -> None:
    runs = (run(at(5), "COMPLETED"), run(at(10), "COMPLETED"), run(at(15), "FAILED"), run(at(20), "FAILED"))
    plan = decide(observed(runs), at(21))
    assert deleted(plan) == [run_name("nightly", at(5)), run_name("nightly", at(15))]


def test_suspend_starts_nothing_and_resuming_starts_the_latest_missed_time_within_the_deadline() -> None:
    plan = decide(observed(suspend=True), at(12))
    assert created(plan) == [] and plan.requeue_after is None
    assert plan.status is not None and plan.status.scheduleState == ScheduleState.SUSPENDED
    assert plan.status.nextRun is None
    resumed = decide(observed((), plan.status.to_json(), startingDeadlineSeconds=300), at(12))
    assert created(resumed) == [run_name("nightly", at(10))]


def test_a_suspended_schedule_of_kubeflows_group_keeps_kubeflows_state() -> None:
    """kubeflow's operator knows no Suspended state: a schedule suspended under sparkop and resumed under
    kubeflow's operator (the way back) must read as one it runs. Seen with kubeflow v2.5: a schedule left
    `Suspended` never started a run once resumed."""
    b = body(suspend=True)
    b["apiVersion"] = f"{labels.KUBEFLOW_GROUP}/v1beta2"
    plan = decide(
        Observed(ScheduledView.from_body(b), (), status=lenient(ScheduledSparkApplicationStatus, None), body=b), at(12)
    )
    assert created(plan) == []
    assert plan.status is not None and plan.status.scheduleState == ScheduleState.SCHEDULED
    assert plan.status.reason == "spec.suspend is true" and plan.status.nextRun is None


def test_missed_times_within_the_deadline_start_only_the_latest() -> None:
    plan = decide(observed(startingDeadlineSeconds=120), at(16))  # 5, 10 and 15 missed; 15 is 60 s late
    assert created(plan) == [run_name("nightly", at(15))]


def test_a_time_past_the_deadline_is_missed_not_started() -> None:
    plan = decide(observed(startingDeadlineSeconds=30), at(16))  # 15 is 60 s late
    assert created(plan) == [] and [e.reason for e in plan.events] == [Reason.RUN_MISSED]
    assert plan.status is not None and plan.status.lastScheduledTime == at(15) and plan.status.nextRun == at(20)
    assert decide(observed((), plan.status.to_json(), startingDeadlineSeconds=30), at(20, 10)).status is not None
    assert created(decide(observed((), plan.status.to_json(), startingDeadlineSeconds=30), at(20, 10))) == [
        run_name("nightly", at(20))
    ]


def test_without_a_deadline_the_latest_missed_time_starts_however_late() -> None:
    assert created(decide(observed(), at(60 * 24))) == [run_name("nightly", at(60 * 24))]


def test_a_refused_run_is_reported_once_and_not_retried() -> None:
    first = decide(observed(), at(5, 1))
    (create,) = [a for a in first.before_status if isinstance(a, Create)]
    seen = replace(observed(), refusals={refusal_key(create): Refusal(403, "Forbidden", "quota exceeded")})
    plan = decide(seen, at(5, 1))
    assert created(plan) == [] and [e.reason for e in plan.events] == [Reason.RUN_REFUSED]
    assert "quota exceeded" in plan.events[0].message
    assert plan.status is not None and plan.status.lastScheduledTime == at(5)


def test_an_unreadable_schedule_is_failed_validation_with_one_warning() -> None:
    plan = decide(observed(schedule="61 * * * *"), at(5))
    assert plan.status is not None and plan.status.scheduleState == ScheduleState.FAILED_VALIDATION
    assert plan.status.reason and "spec.schedule" in plan.status.reason
    assert len(plan.events) == 1 and created(plan) == []
    again = decide(observed((), plan.status.to_json(), schedule="61 * * * *"), at(6))
    assert again.events == ()


def test_runs_of_another_owner_are_not_ours() -> None:
    plan = decide(observed((run(at(5), "RUNNING", owner="someone-else"),), concurrencyPolicy="Forbid"), at(5, 1))
    assert created(plan) == [run_name("nightly", at(5))]


# ------------------------------------------------------------------------------------------ property


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, Any], list[tuple[int, bool, bool]]]:
    spec = {
        "schedule": draw(st.sampled_from(["*/5 * * * *", "*/3 * * * *", "@every 4m", "0 * * * *"])),
        "concurrencyPolicy": draw(st.sampled_from(["Allow", "Forbid", "Replace"])),
        "startingDeadlineSeconds": draw(st.sampled_from([None, 0, 30, 200, 1000])),
        "successfulRunHistoryLimit": draw(st.integers(0, 3)),
    }
    # Passes: (seconds since the previous pass, status write lost, the active runs finish first).
    steps = draw(st.lists(st.tuples(st.integers(0, 900), st.booleans(), st.booleans()), min_size=1, max_size=40))
    return spec, steps


@given(histories())
@settings(max_examples=200, deadline=None)
def test_each_scheduled_time_is_started_at_most_once_and_only_the_latest_of_a_gap(
    history: tuple[dict[str, Any], list[tuple[int, bool, bool]]],
) -> None:
    spec, steps = history
    schedule = parse_schedule(spec["schedule"], None, CREATED)
    runs: dict[str, RunView] = {}
    status: dict[str, Any] | None = None
    started: list[str] = []
    now = CREATED
    for gap, lost, finish in steps:
        now += timedelta(seconds=gap)
        if finish:
            runs = {n: replace(r, state="COMPLETED") if not r.finished else r for n, r in runs.items()}
        plan = decide(observed(tuple(runs.values()), status, **spec), now)
        # A lost status write: the pass stopped after its before_status actions (a crash, a Conflict).
        for action in plan.before_status if lost else plan.actions:
            if isinstance(action, Create):
                assert action.name not in started, f"{action.name} started twice"
                when = schedule.latest(now)
                assert when is not None and action.name == run_name("nightly", when)
                deadline = spec["startingDeadlineSeconds"]
                assert deadline is None or (now - when).total_seconds() <= deadline
                started.append(action.name)
                runs[action.name] = run(when)
            elif isinstance(action, Delete):
                runs.pop(action.name, None)
        if not lost and plan.status is not None:
            status = plan.status.to_json()
        if spec["concurrencyPolicy"] != "Allow":
            assert sum(not r.finished for r in runs.values()) <= 1


def test_a_schedule_kubeflows_operator_ran_goes_on_from_its_last_run_neither_again_nor_missing_one() -> None:
    # kubeflow's status after its run of minute 5: lastRun is when it started it (a second into the
    # minute), its run is named <schedule>-<unix time> and carries no scheduled-time of sparkop's.
    status = {
        "lastRun": format_time(at(5, 1)),
        "lastRunName": "nightly-1767225901",
        "nextRun": format_time(at(10)),
        "scheduleState": "Scheduled",
    }
    theirs = RunView(
        name="nightly-1767225901", uid="uid-kf", owner_uid=UID, scheduled=None, created=at(5, 1), state=None
    )
    for now in (at(5, 30), at(9, 59)):  # sparkop starts within kubeflow's minute, or before the next
        plan = decide(observed((theirs,), status), now)
        assert created(plan) == [], now
        assert plan.status is not None and plan.status.nextRun == at(10)
    plan = decide(observed((theirs,), status), at(10, 1))
    assert created(plan) == [run_name("nightly", at(10))]
