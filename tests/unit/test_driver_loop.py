"""The shell of the driver controller without a cluster: the order a plan is applied in, and
lastError for transient API errors (recorded by the next pass that gets through, without churn)."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from sparkop.core import kube
from sparkop.core.applier import ApplyFailed as Failed
from sparkop.core.kube import transient_error
from sparkop.core.queue import Result
from sparkop.driver_controller import controller as declaration
from tests.support.driver_objects import UID, driver, objects, running
from tests.support.fake_driver_runtime import KEY, FakeKube, FakeRuntime, api_error, controller


def see_status(runtime: FakeRuntime, fake: FakeKube) -> None:
    """The watch delivers the SparkDriver with the status just written."""
    body = runtime.indexes[declaration.INDEX_DRIVERS][KEY][0]
    runtime.indexes[declaration.INDEX_DRIVERS][KEY] = [{**body, "status": fake.statuses[-1]}]


async def test_configmaps_and_service_then_pod_then_status_then_events() -> None:
    fake = FakeKube()
    ctrl, _ = controller(fake, driver())
    await ctrl.reconcile(KEY)
    assert fake.calls == [
        "create ConfigMap pi-1-podspec-conf-map", "create ConfigMap pi-1-conf-map", "create Service pi-1-driver-svc",
        "create Pod pi-driver", "status", "event DriverPodCreated",
    ]  # fmt: skip


async def test_transient_create_error_is_recorded_by_the_next_pass() -> None:
    fake = FakeKube()
    fake.fail["create Pod"] = [api_error(503, "ServiceUnavailable", "etcd is unavailable")]
    ctrl, runtime = controller(fake, driver())
    with pytest.raises(Failed, match="creating Pod pi-driver"):
        await ctrl.reconcile(KEY)
    assert "status" not in fake.calls  # nothing written on a failed pass
    assert (ctrl.applier.expectations.learnt(KEY, UID).transient or {}).get("reason") == "ServiceUnavailable"
    await ctrl.reconcile(KEY)  # the queue's retry: gets through and says why it was slow
    error = fake.statuses[-1]["lastError"]
    assert error["reason"] == "ServiceUnavailable"
    assert error["message"] == "creating Pod pi-driver: 503 ServiceUnavailable: etcd is unavailable"
    assert error["time"]
    assert ctrl.applier.expectations.learnt(KEY, UID).transient is None
    # Nothing more to write while nothing changes.
    see_status(runtime, fake)
    writes = len(fake.statuses)
    await ctrl.reconcile(KEY)
    assert len(fake.statuses) == writes


async def test_transient_status_write_error_is_recorded_with_the_status() -> None:
    fake = FakeKube()
    fake.fail["status"] = [TimeoutError()]
    ctrl, _ = controller(fake, driver())
    with pytest.raises(Failed):
        await ctrl.reconcile(KEY)
    await ctrl.reconcile(KEY)
    assert fake.statuses[-1]["lastError"]["reason"] == "Timeout"
    assert fake.statuses[-1]["lastError"]["message"].startswith("writing the status: ")


async def test_refused_pod_is_submission_failed_not_transient() -> None:
    fake = FakeKube()
    fake.fail["create Pod"] = [kube.Refused(403, "Forbidden", "exceeded quota")]
    ctrl, _ = controller(fake, driver())
    assert await ctrl.reconcile(KEY) == Result.done()
    assert fake.statuses[-1]["phase"] == "SubmissionFailed"
    assert fake.statuses[-1]["lastError"]["message"] == "exceeded quota"
    assert fake.calls[-1] == "event SubmissionFailed"
    assert ctrl.applier.expectations.learnt(KEY, UID).transient is None


async def test_a_name_held_by_a_foreign_object_is_submission_failed_naming_it() -> None:
    """issue 9 item 5: core.kube refuses a 409 on an object whose controller is not this SparkDriver
    (409 AlreadyExists, the shape of kube.Taken); never a silent success, never the pod after it."""
    taken = "ConfigMap pi-1-conf-map already exists and has no controller, not by this object's owner"
    fake = FakeKube()
    fake.fail["create ConfigMap pi-1-conf-map"] = [kube.Refused(409, "AlreadyExists", taken)]
    ctrl, _ = controller(fake, driver())
    assert await ctrl.reconcile(KEY) == Result.done()
    assert not any(c.startswith("create Pod") for c in fake.calls)
    error = fake.statuses[-1]["lastError"]
    assert fake.statuses[-1]["phase"] == "SubmissionFailed"
    assert (error["reason"], error["message"]) == ("AlreadyExists", taken)
    assert fake.calls[-1] == "event SubmissionFailed"


async def test_conflicts_and_other_errors_are_not_transient() -> None:
    pod, _, _ = objects()
    st = {"phase": "Pending", "incarnation": 1, "driverPod": {"name": "pi-driver"}}
    fake = FakeKube()
    fake.fail["status"] = [kube.Conflict("stale")]
    ctrl, _ = controller(fake, driver(st), [running(pod)], with_objects=True)
    with pytest.raises(kube.Conflict):
        await ctrl.reconcile(KEY)
    fake.fail["status"] = [api_error(401, "Unauthorized", "no")]
    with pytest.raises(Failed):
        await ctrl.reconcile(KEY)
    assert ctrl.applier.expectations.learnt(KEY, UID).transient is None


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (api_error(500, "InternalError", "boom"), "InternalError"),
        (api_error(504, "Timeout", "slow"), "Timeout"),
        (ApiException(status=429, reason="Too Many Requests"), "TooManyRequests"),
        (TimeoutError(), "Timeout"),
        (ConnectionResetError(), "ConnectionError"),
        (api_error(404, "NotFound", "gone"), None),
        (api_error(409, "Conflict", "x"), None),
    ],
)
def test_transient_error_classification(exc: BaseException, reason: str | None) -> None:
    error = transient_error(exc, "creating Pod p")
    assert (error or {}).get("reason") == reason


def test_connection_errors_are_transient() -> None:
    import aiohttp

    error = transient_error(aiohttp.ClientConnectionError("connection refused"), "deleting Pod p")
    assert error is not None and error["reason"] == "ConnectionError"
    assert error["message"] == "deleting Pod p: connection refused"
