"""domain.status_waits: the one table of what may wait to be written, and for how long, held to the
docs that state it; the deadlines are worked out from the times given, nothing else."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sparkop.api.models import DriverPodInfo, ExecutorCounts, SparkApplicationStatus, SparkDriverStatus
from sparkop.domain import status_waits
from sparkop.domain.status_waits import Since, Wait

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api-writes.md"
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def test_every_field_that_may_wait_is_in_the_docs_table_with_its_wait() -> None:
    section = DOCS.read_text().split("## What waits, and for how long", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    tables = (("SparkDriver", status_waits.SPARK_DRIVER), ("SparkApplication", status_waits.SPARK_APPLICATION))
    for kind, table in tables:
        for field, wait in table.items():
            parent, _, sub = field.partition(".")
            names = {f"`{field}`", f"`.{sub}`"} if sub else {f"`{field}`"}
            found = [row for row in rows if row.startswith(f"| {kind} ") and any(n in row for n in names)]
            found = [row for row in found if parent in row]
            assert found, f"{kind} {field} is not in docs/api-writes.md's table"
            assert any(f"| {wait.seconds:g} s |" in row for row in found), (field, wait, found)
    first_pod = [row for row in rows if "its first status" in row]
    assert first_pod and f"| {status_waits.SPARK_DRIVER_FIRST_POD.seconds:g} s |" in first_pod[0]
    assert re.search(r"`EXECUTOR_CHANGE_SECONDS` \((\d+) s\)", section).group(1) == (  # type: ignore[union-attr]
        f"{status_waits.EXECUTOR_CHANGE_SECONDS:g}"
    )


def test_executor_counts_that_a_user_reads_never_wait() -> None:
    """Only pending executors may wait (for their Running); running, succeeded, failed: at once."""
    executors = {f for f in status_waits.SPARK_DRIVER if f.startswith("executors.")}
    assert executors == {"executors.pending"}
    assert "executors" not in status_waits.SPARK_APPLICATION


def test_changed_fields_by_subfield_where_asked() -> None:
    old = SparkDriverStatus(driverPod=DriverPodInfo(name="p"), executors=ExecutorCounts())
    new = old.model_copy(
        update={"driverPod": DriverPodInfo(name="p", nodeName="n"), "executors": ExecutorCounts(running=1)}
    )
    assert status_waits.changed_fields(old, new) == {"driverPod", "executors"}
    assert status_waits.changed_fields(old, new, by_field=("driverPod", "executors")) == {
        "driverPod.nodeName",
        "executors.running",
    }
    # None on one side has no fields to compare: the field as a whole
    assert status_waits.changed_fields(SparkDriverStatus(), new, by_field=("driverPod",)) >= {"driverPod"}
    app = SparkApplicationStatus()
    assert status_waits.changed_fields(app, app.model_copy(update={"currentDriver": "d"})) == {"currentDriver"}


def test_the_time_left_is_counted_from_the_time_given_and_only_from_it() -> None:
    wait = Wait(3.0, Since.OLDEST_PENDING_EXECUTOR)
    at = {Since.OLDEST_PENDING_EXECUTOR: NOW - timedelta(seconds=1)}
    assert status_waits.left(wait, at, NOW) == 2.0
    assert status_waits.left(wait, at, NOW + timedelta(seconds=5)) == 0.0  # past its deadline
    assert status_waits.left(wait, {Since.OLDEST_PENDING_EXECUTOR: NOW}, NOW) == 3.0
    assert status_waits.left(wait, {Since.OLDEST_PENDING_EXECUTOR: NOW + timedelta(hours=1)}, NOW) == 0.0
    assert status_waits.left(wait, {Since.OLDEST_PENDING_EXECUTOR: None}, NOW) == 0.0  # nothing to count from
    assert status_waits.left(None, at, NOW) == 0.0  # not in the table: at once
    table = {"a": Wait(30.0, Since.DRIVER_POD_STEP), "b": wait}
    since = {Since.DRIVER_POD_STEP: NOW, Since.OLDEST_PENDING_EXECUTOR: NOW - timedelta(seconds=1)}
    assert status_waits.may_wait({"a"}, table, since, NOW) == 30.0
    assert status_waits.may_wait({"a", "b"}, table, since, NOW) == 2.0  # the least of them
    assert status_waits.may_wait({"a", "c"}, table, since, NOW) == 0.0  # one that may not wait
    assert status_waits.may_wait(set(), table, since, NOW) == 0.0


def test_a_status_write_may_wait_as_long_as_its_changed_fields_may() -> None:
    since = {Since.DRIVER_POD_STEP: NOW - timedelta(seconds=10), Since.OLDEST_PENDING_EXECUTOR: NOW}
    table, by_field = status_waits.SPARK_DRIVER, ("driverPod", "executors")
    old = SparkDriverStatus(driverPod=DriverPodInfo(name="p"), executors=ExecutorCounts())
    progress = old.model_copy(update={"driverPod": DriverPodInfo(name="p", nodeName="n")})
    both = progress.model_copy(update={"executors": ExecutorCounts(pending=1)})
    phase = both.model_copy(update={"startTime": NOW})  # not in the table: at once
    for new in (old, progress, both, phase):
        changed = status_waits.changed_fields(old, new, by_field)
        expected = status_waits.may_wait(changed, table, since, NOW)
        assert status_waits.status_wait(old, new, table, since, NOW, by_field) == expected
    assert status_waits.status_wait(old, progress, table, since, NOW, by_field) == 20.0
    assert status_waits.status_wait(old, both, table, since, NOW, by_field) == 3.0
    assert status_waits.status_wait(old, phase, table, since, NOW, by_field) == 0.0
