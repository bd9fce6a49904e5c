"""ScheduledSparkApplication on a real control plane, with the real operator (apps, driver and
scheduled controllers) and the devcluster's simulated drivers.

Time: the operator runs through ``tests/support/shifted_clock.py``, whose schedule controller's
clock is moved with the file ``SPARKOP_TEST_CLOCK_OFFSET_FILE``. Objects are created on the real
clock, so their first scheduled time M is the first 5-minute mark after creation (no earlier time is
due); each test then puts the operator's "now" two seconds before M (or later) and lets real time
carry it over; to reach the next scheduled time it moves the offset and touches the objects (an
annotation), whose change enqueues them. No test sleeps for a minute.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from tests.support import shifted_clock
from tests.support.operator import OperatorProcess
from tests.support.shifted_clock import CLOCK_OFFSET_ENV
from tests.support.watches import CreationWatch

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
LEAD = 2.0  # seconds of real time between a clock move and the scheduled instant it aims at


class FakeClock:
    """The operator's clock: real time plus the offset in a file it reads on every pass."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.write_text("0")

    def aim(self, scheduled: datetime, lead: float = LEAD) -> None:
        """Make the operator's now ``lead`` seconds before ``scheduled``."""
        self.path.write_text(str((scheduled - datetime.now(UTC)).total_seconds() - lead))


def minute_mark() -> datetime:
    """The first 5-minute mark after now, i.e. the first time of a "*/5" schedule created now. Waits
    (at most 20 s) when now is that close to it, so that objects created now share it."""

    def far_enough() -> datetime | None:
        now = datetime.now(UTC)
        mark = now.replace(second=0, microsecond=0) + timedelta(minutes=5 - now.minute % 5)
        return mark if (mark - now).total_seconds() > 20 else None

    return wait_for(far_enough, timeout=30, interval=0.5, message="not near a 5-minute mark")


def minutes(at: datetime) -> int:
    return int(at.timestamp()) // 60


class AppWatch(CreationWatch):
    """Every SparkApplication ever created in the namespace: a time started twice would show two
    uids (or a name it should not have)."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        super().__init__(cluster, namespace, "sparkapplications")

    def of(self, scheduled: str) -> dict[str, set[str]]:
        return self.created(scheduled)


@pytest.fixture
def clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    path = tmp_path / "clock-offset"
    monkeypatch.setenv(CLOCK_OFFSET_ENV, str(path))  # inherited by the operator process
    return FakeClock(path)


@pytest.fixture
def apps_watch(crds: ClusterHandle, namespace: str) -> Iterator[AppWatch]:
    watch = AppWatch(crds, namespace)
    yield watch
    watch.stop()


@pytest.fixture
def scheduled_operator(
    crds: ClusterHandle, namespace: str, tmp_path: Path, clock: FakeClock
) -> Iterator[OperatorProcess]:
    with OperatorProcess(
        crds.kubeconfig,
        controllers=("apps", "driver", "scheduled"),
        namespaces=[namespace],
        log_dir=tmp_path,
        module=shifted_clock.MODULE,
    ) as proc:
        yield proc


def scheduled_manifest(name: str, *, run_seconds: float = 1, outcome: str = "Succeeded", **spec: Any) -> Obj:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "ScheduledSparkApplication",
        "metadata": {"name": name, "labels": {"team": "etl"}},
        "spec": {
            "schedule": "*/5 * * * *",
            "template": {
                "type": "Scala",
                "image": "apache/spark:3.5.7",
                "sparkVersion": "3.5.7",
                "mainClass": "org.apache.spark.examples.SparkPi",
                "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples_2.12-3.5.7.jar",
                "restartPolicy": {"type": "Never"},
                "driver": {
                    "cores": 1,
                    "memory": "512m",
                    "annotations": {
                        "sim.sparkop.io/outcome": outcome,
                        "sim.sparkop.io/run-seconds": str(run_seconds),
                        **({"sim.sparkop.io/exit-code": "1"} if outcome == "Failed" else {}),
                    },
                },
                "executor": {"instances": 1, "cores": 1, "memory": "512m"},
            },
            **spec,
        },
    }


def get(cluster: ClusterHandle, namespace: str, kind: str, name: str) -> Obj | None:
    out = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found").stdout
    return json.loads(out) if out.strip() else None


def runs(cluster: ClusterHandle, namespace: str, scheduled: str) -> dict[str, Obj]:
    selector = f"sparkop.io/scheduled-app={scheduled}"
    listed = cluster.kubectl_json("get", "sparkapplications", "-n", namespace, "-l", selector)
    return {item["metadata"]["name"]: item for item in listed["items"]}


def status(cluster: ClusterHandle, namespace: str, name: str) -> Obj:
    return (get(cluster, namespace, "scheduledsparkapplication", name) or {}).get("status") or {}


def touch(cluster: ClusterHandle, namespace: str, *names: str) -> None:
    """Enqueue the objects: the operator's pending wake-ups were computed on the old clock."""
    stamp = str(time.monotonic_ns())
    for name in names:
        kind = "scheduledsparkapplication"
        cluster.kubectl("annotate", "--overwrite", "-n", namespace, kind, name, f"test/touch={stamp}")


def patch(cluster: ClusterHandle, namespace: str, name: str, spec: Obj) -> None:
    body = json.dumps({"spec": spec})
    cluster.kubectl("patch", "scheduledsparkapplication", name, "-n", namespace, "--type=merge", "-p", body)


def state(app: Obj) -> str | None:
    return ((app.get("status") or {}).get("applicationState") or {}).get("state")


# ------------------------------------------------------------------------------------------------ tests


def test_a_schedule_creates_runs_named_and_stamped_by_their_scheduled_minute(
    crds: ClusterHandle, namespace: str, clock: FakeClock, scheduled_operator: OperatorProcess, apps_watch: AppWatch
) -> None:
    mark = minute_mark()
    clock.aim(mark)
    crds.apply(scheduled_manifest("pi"), namespace)
    first = f"pi-{minutes(mark)}"
    got = wait_for(lambda: runs(crds, namespace, "pi").get(first), timeout=30, message=f"run {first}")
    meta = got["metadata"]
    assert meta["annotations"]["sparkop.io/scheduled-time"] == mark.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert meta["labels"]["team"] == "etl" and meta["labels"]["sparkop.io/scheduled-app"] == "pi"
    assert meta["ownerReferences"][0]["kind"] == "ScheduledSparkApplication"
    assert got["spec"]["mainClass"] == "org.apache.spark.examples.SparkPi"
    wait_for(lambda: state(runs(crds, namespace, "pi")[first]) == "COMPLETED", timeout=60, message="run 1 completes")
    st = wait_for(lambda: (s := status(crds, namespace, "pi")).get("pastSuccessfulRunNames") and s, timeout=30)
    assert st["lastRunName"] == first and st["scheduleState"] == "Scheduled"
    assert st["lastRun"] == mark.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert st["nextRun"] == (mark + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert st["pastSuccessfulRunNames"] == [first]

    second_mark = mark + timedelta(minutes=5)
    clock.aim(second_mark)
    touch(crds, namespace, "pi")
    second = f"pi-{minutes(second_mark)}"
    wait_for(lambda: second in runs(crds, namespace, "pi"), timeout=30, message=f"run {second}")
    # The history limit (kubeflow's default, 1) deletes the first run once the second has completed.
    wait_for(lambda: set(runs(crds, namespace, "pi")) == {second}, timeout=60, message="history pruned")
    printed = crds.kubectl("get", "scheduledsparkapp", "pi", "-n", namespace).stdout.splitlines()[0].split()
    assert printed[:5] == ["NAME", "SCHEDULE", "SUSPEND", "LAST", "RUN"], printed
    assert apps_watch.of("pi") and all(len(u) == 1 for u in apps_watch.of("pi").values())
    assert set(apps_watch.of("pi")) == {first, second}


def test_forbid_skips_replace_replaces_allow_overlaps(
    crds: ClusterHandle, namespace: str, clock: FakeClock, scheduled_operator: OperatorProcess
) -> None:
    mark = minute_mark()
    clock.aim(mark)
    for policy in ("Allow", "Forbid", "Replace"):
        crds.apply(scheduled_manifest(policy.lower(), run_seconds=600, concurrencyPolicy=policy), namespace)
    first = {p: f"{p}-{minutes(mark)}" for p in ("allow", "forbid", "replace")}
    for name, run in first.items():
        wait_for(lambda n=name, r=run: r in runs(crds, namespace, n), timeout=30, message=f"first run of {name}")

    second_mark = mark + timedelta(minutes=5)
    clock.aim(second_mark)
    touch(crds, namespace, *first)
    second = {p: f"{p}-{minutes(second_mark)}" for p in first}
    wait_for(lambda: set(runs(crds, namespace, "allow")) == {first["allow"], second["allow"]}, timeout=30)
    wait_for(lambda: set(runs(crds, namespace, "replace")) == {second["replace"]}, timeout=30)
    skipped = wait_for(
        lambda: (
            (s := status(crds, namespace, "forbid")).get("lastScheduledTime")
            == second_mark.strftime("%Y-%m-%dT%H:%M:%SZ")
            and s
        ),
        timeout=30,
        message="forbid records the skipped time",
    )
    assert set(runs(crds, namespace, "forbid")) == {first["forbid"]}
    assert skipped["activeRunNames"] == [first["forbid"]] and skipped["lastRunName"] == first["forbid"]
    events = crds.kubectl_json("get", "events", "-n", namespace, "--field-selector", "involvedObject.name=forbid")
    assert any(e["reason"] == "RunSkipped" and second["forbid"] in e["message"] for e in events["items"])
    assert all(state(a) not in ("COMPLETED", "FAILED") for a in runs(crds, namespace, "allow").values())


def test_history_limits_keep_the_newest_finished_runs(
    crds: ClusterHandle, namespace: str, clock: FakeClock, scheduled_operator: OperatorProcess
) -> None:
    mark = minute_mark()
    names = []
    for i in range(3):
        at = mark + timedelta(minutes=5 * i)
        clock.aim(at)
        if i == 0:
            manifest = scheduled_manifest(
                "hist", outcome="Failed", successfulRunHistoryLimit=0, failedRunHistoryLimit=2
            )
            crds.apply(manifest, namespace)
        else:
            touch(crds, namespace, "hist")
        names.append(f"hist-{minutes(at)}")
        wait_for(lambda n=names[-1]: state(runs(crds, namespace, "hist").get(n) or {}) == "FAILED", timeout=60)
    wait_for(lambda: set(runs(crds, namespace, "hist")) == set(names[1:]), timeout=30, message="oldest failed pruned")
    st = wait_for(lambda: (s := status(crds, namespace, "hist")).get("pastFailedRunNames") == names[:0:-1] and s)
    assert "pastSuccessfulRunNames" not in st


def test_suspend_starts_nothing_and_resume_starts_the_latest_missed_time(
    crds: ClusterHandle, namespace: str, clock: FakeClock, scheduled_operator: OperatorProcess
) -> None:
    mark = minute_mark()
    clock.aim(mark, lead=-30)  # 30 s past M
    crds.apply(scheduled_manifest("paused", suspend=True, startingDeadlineSeconds=600), namespace)
    st = wait_for(lambda: (s := status(crds, namespace, "paused")).get("scheduleState") == "Suspended" and s)
    assert "nextRun" not in st and st["observedGeneration"] == 1
    assert runs(crds, namespace, "paused") == {}
    patch(crds, namespace, "paused", {"suspend": False})
    resumed = f"paused-{minutes(mark)}"
    wait_for(lambda: set(runs(crds, namespace, "paused")) == {resumed}, timeout=30, message="the missed time runs")
    # The run is created before the status write that records it: wait for that write, then the runs again.
    wait_for(
        lambda: status(crds, namespace, "paused").get("scheduleState") == "Scheduled",
        timeout=30,
        message="scheduleState Scheduled",
    )
    assert set(runs(crds, namespace, "paused")) == {resumed}


def test_an_operator_down_across_two_scheduled_times_starts_only_what_its_deadline_allows_once(
    crds: ClusterHandle, namespace: str, clock: FakeClock, scheduled_operator: OperatorProcess, apps_watch: AppWatch
) -> None:
    mark = minute_mark()
    clock.aim(mark)
    deadlines = {"wide": 1000, "narrow": 120, "tight": 30}
    for name, deadline in deadlines.items():
        crds.apply(scheduled_manifest(name, startingDeadlineSeconds=deadline), namespace)
    for name in deadlines:
        wait_for(lambda n=name: f"{n}-{minutes(mark)}" in runs(crds, namespace, n), timeout=30, message=f"{name} M")
    scheduled_operator.stop()

    # Down across M+5 and M+10; back 60 s after M+10: M+5 is 360 s late, M+10 60 s late.
    clock.aim(mark + timedelta(minutes=11), lead=0)
    scheduled_operator.start()
    m5, m10 = minutes(mark + timedelta(minutes=5)), minutes(mark + timedelta(minutes=10))
    for name in ("wide", "narrow"):  # only the latest of a gap, and only within the deadline
        wait_for(lambda n=name: f"{n}-{m10}" in runs(crds, namespace, n), timeout=30, message=f"{name} M+10")
    tight = wait_for(
        lambda: (
            (s := status(crds, namespace, "tight"))
            .get("lastScheduledTime", "")
            .startswith((mark + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M"))
            and s
        ),
        timeout=30,
        message="tight records M+10 as missed",
    )
    assert tight["lastRunName"] == f"tight-{minutes(mark)}"

    # Once each: another hard restart and a spec change (a pass is proven by observedGeneration).
    scheduled_operator.restart(hard=True)
    for name in deadlines:
        patch(crds, namespace, name, {"failedRunHistoryLimit": 3})
    for name in deadlines:
        wait_for(lambda n=name: status(crds, namespace, n).get("observedGeneration") == 2, timeout=30)
    for name in ("wide", "narrow"):
        assert set(apps_watch.of(name)) == {f"{name}-{minutes(mark)}", f"{name}-{m10}"}, apps_watch.of(name)
        assert f"{name}-{m5}" not in apps_watch.uids
    assert set(apps_watch.of("tight")) == {f"tight-{minutes(mark)}"}
    assert all(len(uids) == 1 for uids in apps_watch.uids.values()), apps_watch.uids
