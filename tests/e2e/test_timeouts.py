"""No run waits forever, on real nodes, with the operator SIGKILLed in the middle of each wait: an app
whose image does not exist fails each run after its driver-start timeout (DriverStartTimedOut), is
retried by its infrastructure budget and ends FAILED; a run past its deadline is stopped (driver and
executors gone) and recorded (DeadlineExceeded); executors that fail in a loop end the run
(ExecutorsCrashLooping). Each wait ends when the times status recorded say, neither reset nor doubled
by the kill: the end is within SLACK_S of its deadline, where a reset would add the seconds before the
kill. The logic, case by case, is tests/unit/test_driver_timeouts.py's."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest

from sparkop.core.times import parse_time
from tests.support.spark_e2e import (
    JOBS_DIR,
    OLDEST_VERSION,
    STAGES_JOB,
    SparkNamespace,
    jobs_volume,
    python_application,
    spark_pi,
    spark_versions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.realnode]

VERSIONS = spark_versions(ci=(OLDEST_VERSION,), versions=(OLDEST_VERSION,))
# How late a deadline may be acted on: the operator's restart (a cold start of the process, its
# listing, the pass) on 2 busy cores. A wait reset by the kill would end KILL_AFTER_S later.
SLACK_S = 12.0
KILL_AFTER_S = 18.0
DOWN_S = 3.0


def _time(value: Any) -> datetime:
    parsed = parse_time(value)
    assert parsed is not None, value
    return parsed


def kill_during(spark: SparkNamespace, since: datetime, seconds: float) -> float:
    """SIGKILL the operator ``seconds`` after ``since`` (a time the cluster recorded), start it again
    DOWN_S later; the wall-clock time of the kill."""
    wait = seconds - (datetime.now(since.tzinfo) - since).total_seconds()
    if wait > 0:
        time.sleep(wait)  # the kill's moment is the point here, not a condition to wait for
    spark.operator.kill()
    killed = time.monotonic()
    time.sleep(DOWN_S)
    spark.operator.start()
    return killed


def wait_driver(spark: SparkNamespace, name: str, check: Any, timeout: float, message: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        found = spark.find("sparkdriver", name)
        return found if found is not None and check(found.get("status") or {}) else None

    result: dict[str, Any] = spark.wait_pod(reached, timeout=timeout, message=message)
    return result


@pytest.mark.parametrize("version", VERSIONS)
def test_an_image_that_does_not_exist_times_out_each_run_and_the_app_ends_failed(
    spark: SparkNamespace, version: str
) -> None:
    limit = 40
    manifest = spark_pi(
        "no-image",
        version,
        image="registry.example.invalid/no-such/spark:" + version,
        timeouts={"driverStartSeconds": limit},
        restartPolicy={"type": "Never", "onInfrastructureFailureRetries": 1, "onInfrastructureFailureRetryInterval": 2},
    )
    spark.apply(manifest)
    first = wait_driver(
        spark,
        "no-image-1",
        lambda s: (s.get("driverPod") or {}).get("createdTime") and (s.get("nextTimeout") or {}).get("time"),
        timeout=120,
        message="no-image-1's driver pod created, its start timeout pending",
    )
    created = _time(first["status"]["driverPod"]["createdTime"])
    assert first["status"]["nextTimeout"]["reason"] == "DriverStartTimedOut"
    kill_during(spark, created, KILL_AFTER_S)
    app = spark.wait_app("no-image", ["FAILED"], timeout=4 * limit + 120)
    status = app["status"]
    assert [a["reason"] for a in status["attempts"]] == ["DriverStartTimedOut", "DriverStartTimedOut"]
    assert status["infrastructureFailures"] == 2 and status["executionAttempts"] == 0
    assert (
        "DriverStartTimedOut" in status["lastError"]["reason"]
        or "DriverStartTimedOut" in status["lastError"]["message"]
    )
    for run in (1, 2):
        driver = spark.get("sparkdriver", f"no-image-{run}")["status"]
        assert driver["phase"] == "Failed" and driver["termination"]["reason"] == "DriverStartTimedOut"
        message = driver["termination"]["message"]
        assert "ImagePullBackOff" in message or "ErrImagePull" in message, message
        waited = (_time(driver["completionTime"]) - _time(driver["driverPod"]["createdTime"])).total_seconds()
        print(f"run {run}: DriverStartTimedOut {waited:.0f}s after its driver pod's creation (limit {limit}s)")
        assert limit <= waited <= limit + SLACK_S, waited
    spark.wait_pod(lambda: not spark.driver_pods("no-image"), timeout=60, message="no-image's driver pods gone")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_run_past_its_deadline_is_stopped_and_recorded(spark: SparkNamespace, version: str) -> None:
    deadline = 70
    spark.jobs({"stages.py": STAGES_JOB})
    manifest = python_application(
        "deadline",
        version,
        f"local://{JOBS_DIR}/stages.py",
        arguments=["60", "2", "2", "0.5"],
        activeDeadlineSeconds=deadline,
        **jobs_volume(),
    )
    spark.apply(manifest)
    running = spark.wait_app("deadline", ["RUNNING"], timeout=180)
    driver = spark.get("sparkdriver", running["status"]["currentDriver"])
    created = _time(driver["metadata"]["creationTimestamp"])
    kill_during(spark, created, 40)
    app = spark.wait_app("deadline", ["FAILED"], timeout=deadline + 120)
    (attempt,) = app["status"]["attempts"]
    assert attempt["reason"] == "DeadlineExceeded"
    status = spark.get("sparkdriver", "deadline-1")["status"]
    assert status["termination"]["reason"] == "DeadlineExceeded"
    waited = (_time(status["completionTime"]) - created).total_seconds()
    print(f"DeadlineExceeded {waited:.0f}s after the run's creation (activeDeadlineSeconds {deadline})")
    assert deadline <= waited <= deadline + SLACK_S, waited
    selector = "sparkop.io/driver=deadline-1"
    spark.wait_pod(lambda: not spark.pods(selector), timeout=90, message="deadline-1's driver and executors gone")


@pytest.mark.parametrize("version", VERSIONS)
def test_executors_failing_in_a_loop_end_the_run_naming_their_error(spark: SparkNamespace, version: str) -> None:
    """Every executor's JVM refuses to start (a thread stack below the JVM's minimum: Spark's executors
    run with -XX:+IgnoreUnrecognizedVMOptions, so an unknown -XX option would only be ignored) and exits
    1; the driver keeps asking for a new one (Spark's own bound, spark.executor.maxNumFailures since 3.5,
    set out of reach), so only executorFailures ends the run, with the operator SIGKILLed after the first
    failure is recorded."""
    max_failures = 3
    executor_log_as_message = {
        "spec": {
            "containers": [{"name": "spark-kubernetes-executor", "terminationMessagePolicy": "FallbackToLogsOnError"}]
        }
    }
    manifest = spark_pi(
        "crashing",
        version,
        slices=200,
        executor={"instances": 1, "javaOptions": "-Xss1k", "template": executor_log_as_message},
        executorFailures={"maxFailures": max_failures, "windowSeconds": 600},
        sparkConf={"spark.executor.maxNumFailures": "1000"},
    )
    spark.apply(manifest)
    first = wait_driver(
        spark,
        "crashing-1",
        lambda s: len(s.get("executorFailures") or []) >= 1 and s.get("phase") == "Running",
        timeout=240,
        message="crashing-1's first executor failure recorded, the run still going",
    )
    started = _time(first["status"]["driverPod"]["startTime"])
    spark.operator.kill()
    time.sleep(DOWN_S)
    spark.operator.start()
    app = spark.wait_app("crashing", ["FAILED"], timeout=240)
    (attempt,) = app["status"]["attempts"]
    assert attempt["reason"] == "ExecutorsCrashLooping"
    status = spark.get("sparkdriver", "crashing-1")["status"]
    message = status["termination"]["message"]
    failed = status["executorFailures"]
    took = (_time(status["completionTime"]) - started).total_seconds()
    print(
        f"ExecutorsCrashLooping after {len(failed)} executor failures, {took:.0f}s after the driver pod started: "
        f"{message}"
    )
    assert len(failed) > max_failures, failed
    assert f"{len(failed)} executor pods failed within 600s" in message and "exit code 1" in message
    assert "thread stack size specified is too small" in message, message
    assert all(f["exitCode"] == 1 for f in failed), failed
    spark.wait_pod(lambda: not spark.pods("sparkop.io/driver=crashing-1"), timeout=90, message="crashing-1's pods gone")
