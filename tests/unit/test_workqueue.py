"""The work queue's guarantees, which every controller's correctness leans on."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from sparkop.core.kube import Conflict, NamespaceTerminating, Occupied, namespace_terminating
from sparkop.core.queue import NEW_IN_A_ROW, Result, WorkQueue
from sparkop.core.runtime import Runtime


async def _run_briefly(queue: WorkQueue[str], seconds: float) -> None:
    task = asyncio.create_task(queue.run())
    await asyncio.sleep(seconds)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_enqueues_of_a_waiting_key_collapse_into_one_reconcile() -> None:
    calls: Counter[str] = Counter()

    async def reconcile(key: str) -> Result:
        calls[key] += 1
        return Result.done()

    queue: WorkQueue[str] = WorkQueue("t", reconcile, workers=2)
    for _ in range(50):
        queue.enqueue("a")
    queue.enqueue("b")
    await _run_briefly(queue, 0.05)
    assert calls == Counter({"a": 1, "b": 1})


async def test_new_objects_keys_go_first_and_the_others_are_never_passed_over_for_long() -> None:
    order: list[str] = []
    everything = asyncio.Event()
    status = [f"status-{i}" for i in range(10)]
    new = [f"new-{i}" for i in range(20)]

    async def reconcile(key: str) -> Result:
        order.append(key)
        if len(order) == len(status) + len(new):
            everything.set()
        return Result.done()

    queue: WorkQueue[str] = WorkQueue("t", reconcile, workers=1)
    for key in status:
        queue.enqueue(key)
    queue.enqueue("status-0", new=True)  # a key already waiting keeps its place, and runs once
    for key in new:
        queue.enqueue(key, new=True)
    task = asyncio.create_task(queue.run())
    await asyncio.wait_for(everything.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    run = NEW_IN_A_ROW
    assert 2 * run < len(new)  # two full runs of new keys, each followed by one other
    assert order == [*new[:run], status[0], *new[run : 2 * run], status[1], *new[2 * run :], *status[2:]]


async def test_a_key_is_never_reconciled_concurrently_and_a_mid_run_enqueue_runs_again() -> None:
    running = 0
    peak = 0
    calls = 0
    queue: WorkQueue[str]

    async def reconcile(key: str) -> Result:
        nonlocal running, peak, calls
        running += 1
        peak = max(peak, running)
        calls += 1
        if calls == 1:
            queue.enqueue(key)  # arrives while this reconcile is in flight
        await asyncio.sleep(0.01)
        running -= 1
        return Result.done()

    queue = WorkQueue("t", reconcile, workers=4)
    queue.enqueue("a")
    await _run_briefly(queue, 0.1)
    assert peak == 1
    assert calls == 2


async def test_requeue_after_and_backoff_on_errors_and_conflicts() -> None:
    seen: list[tuple[str, float]] = []
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def reconcile(key: str) -> Result:
        seen.append((key, loop.time() - start))
        n = sum(1 for k, _ in seen if k == key)
        if key == "requeue" and n == 1:
            return Result.after(0.05)
        if key == "error" and n == 1:
            raise RuntimeError("boom")
        if key == "conflict" and n == 1:
            raise Conflict("stale")
        return Result.done()

    queue: WorkQueue[str] = WorkQueue("t", reconcile, workers=3, base_backoff=0.01)
    for key in ("requeue", "error", "conflict"):
        queue.enqueue(key)
    await _run_briefly(queue, 0.2)
    counts = Counter(k for k, _ in seen)
    assert counts == Counter({"requeue": 2, "error": 2, "conflict": 2})
    second_requeue = [t for k, t in seen if k == "requeue"][1]
    assert second_requeue >= 0.05


async def test_an_earlier_delayed_enqueue_wins() -> None:
    seen: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def reconcile(key: str) -> Result:
        seen.append(loop.time() - start)
        return Result.done()

    queue: WorkQueue[str] = WorkQueue("t", reconcile)
    queue.enqueue("a", after=5)
    queue.enqueue("a", after=0.02)
    queue.enqueue("a", after=3)
    await _run_briefly(queue, 0.1)
    assert len(seen) == 1
    assert 0.02 <= seen[0] < 0.1


async def test_enqueue_from_another_thread_wakes_the_queue() -> None:
    seen: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> Result:
        seen.append(key)
        done.set()
        return Result.done()

    queue: WorkQueue[str] = WorkQueue("t", reconcile)
    task = asyncio.create_task(queue.run())
    await asyncio.sleep(0)
    await asyncio.to_thread(queue.enqueue, "from-thread")
    await asyncio.wait_for(done.wait(), timeout=1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["from-thread"]


async def test_a_terminating_namespace_ends_the_reconcile_quietly_and_is_remembered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A controller may wrap the client's NamespaceTerminating (the driver controller does): the
    queue neither retries nor logs an error, and the shared runtime learns the namespace."""
    calls: Counter[str] = Counter()
    learned: list[str] = []

    async def reconcile(key: str) -> Result:
        calls[key] += 1
        try:
            raise NamespaceTerminating("gone")
        except NamespaceTerminating as exc:
            raise RuntimeError("creating Pod x-1-1-driver") from exc

    queue: WorkQueue[str] = WorkQueue("t", reconcile, base_backoff=0.001, on_namespace_terminating=learned.append)
    queue.enqueue("gone/app")
    with caplog.at_level(logging.DEBUG, logger="sparkop.core.queue"):
        await _run_briefly(queue, 0.1)
    assert calls == Counter({"gone/app": 1}) and learned == ["gone"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_runtime_tracks_terminating_namespaces_from_their_watch() -> None:
    runtime = Runtime(kube=None)  # type: ignore[arg-type]
    active = {"metadata": {"name": "ns"}, "status": {"phase": "Active"}}
    terminating = {"metadata": {"name": "ns", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    runtime.observe_namespace("ns", active)
    assert not runtime.namespace_terminating("ns")
    runtime.observe_namespace("ns", terminating)
    assert runtime.namespace_terminating("ns")
    runtime.observe_namespace("ns", None)  # deleted
    assert not runtime.namespace_terminating("ns")
    runtime.observe_namespace("ns", {"metadata": {"name": "ns"}, "status": {"phase": "Terminating"}})
    runtime.observe_namespace("ns", active)  # a new namespace of the same name
    assert not runtime.namespace_terminating("ns")


def test_a_403_is_namespace_terminating_only_with_that_cause() -> None:
    def refused(causes: list[dict[str, str]], status: int = 403) -> ApiException:
        exc = ApiException(status=status, reason="Forbidden")
        exc.body = json.dumps({"kind": "Status", "reason": "Forbidden", "details": {"causes": causes}})
        return exc

    terminating = [{"type": "NamespaceTerminating", "message": "namespace ns is being terminated"}]
    assert namespace_terminating(refused(terminating))
    assert not namespace_terminating(refused([]))
    assert not namespace_terminating(refused(terminating, status=409))


async def test_a_name_on_its_way_out_is_waited_for_with_a_bounded_backoff_and_no_error_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """kube.Occupied (raised as is, or wrapped by a controller): retried, backing off up to
    OCCUPIED_MAX_BACKOFF, without a traceback in the log."""
    seen: list[str] = []

    async def reconcile(key: str) -> Result:
        seen.append(key)
        if seen.count(key) > 3:
            return Result.done()
        if key == "wrapped":
            try:
                raise Occupied("Pod x-1-1-driver is being removed")
            except Occupied as exc:
                raise RuntimeError("creating Pod x-1-1-driver") from exc
        raise Occupied("SparkDriver x-1 is being removed")

    queue: WorkQueue[str] = WorkQueue("t", reconcile, base_backoff=0.001)
    queue.enqueue("plain")
    queue.enqueue("wrapped")
    with caplog.at_level(logging.DEBUG, logger="sparkop.core.queue"):
        await _run_briefly(queue, 0.3)
    assert Counter(seen) == Counter({"plain": 4, "wrapped": 4})
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_changes_asked_soon_make_one_pass_and_bring_a_distant_requeue_forward() -> None:
    passes: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> Result:
        passes.append(key)
        done.set()
        return Result.done()

    queue: WorkQueue[str] = WorkQueue("t", reconcile)
    queue.enqueue("a", after=300)  # a requeue minutes away ...
    task = asyncio.create_task(queue.run())
    try:
        for _ in range(20):  # ... and a burst of changes to what "a" owns
            queue.enqueue_soon("a", 0.05)
        async with asyncio.timeout(5):
            await done.wait()
        # One pass for the burst, long before the requeue; nothing else is due for minutes.
        assert passes == ["a"] and "a" not in queue._timers and not queue._waiting
        done.clear()
        queue.enqueue("b")
        queue.enqueue_soon("b", 60)  # already waiting: the pass due now covers it
        async with asyncio.timeout(5):
            await done.wait()
        assert passes == ["a", "b"] and "b" not in queue._timers
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_pass_that_succeeds_supersedes_what_was_asked_before_it_began_but_not_after() -> None:
    """A requeue left from an earlier pass (a held write's window) makes no pass once a later pass has
    decided on a newer view; a change that arrives while a pass runs still gets its pass."""
    passes: list[str] = []
    running = asyncio.Event()
    release = asyncio.Event()
    done = asyncio.Event()
    second = asyncio.Event()

    async def reconcile(key: str) -> Result:
        passes.append(key)
        if key == "b" and len(passes) == 2:
            running.set()
            await release.wait()
        if passes.count("b") == 2:
            second.set()
        done.set()
        return Result.done()

    queue: WorkQueue[str] = WorkQueue("t", reconcile)
    task = asyncio.create_task(queue.run())
    try:
        queue.enqueue("a", after=0.2)  # an earlier pass's requeue
        queue.enqueue("a")  # a change: this pass decides on it, and on what the requeue was for
        async with asyncio.timeout(5):
            await done.wait()
        assert passes == ["a"] and "a" not in queue._timers
        queue.enqueue("b")
        async with asyncio.timeout(5):
            await running.wait()
        queue.enqueue_soon("b", 0.05)  # a change while the pass runs: it saw none of it
        release.set()
        async with asyncio.timeout(5):
            await second.wait()
        assert passes == ["a", "b", "b"] and not queue._timers and not queue._waiting
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_change_while_a_pass_runs_gets_its_pass_though_an_earlier_ask_is_still_due() -> None:
    """A change asked for soon, then a pass that begins before that ask is due (it decides on the
    change), then another change while the pass runs: the second change's ask joins the first's
    timer, which the pass's success must not cancel, since the pass read the caches before it."""
    passes: list[float] = []
    running = asyncio.Event()
    release = asyncio.Event()
    second = asyncio.Event()

    async def reconcile(key: str) -> Result:
        passes.append(asyncio.get_running_loop().time())
        if len(passes) == 1:
            running.set()
            await release.wait()
        else:
            second.set()
        return Result.done()

    queue: WorkQueue[str] = WorkQueue("t", reconcile)
    task = asyncio.create_task(queue.run())
    try:
        queue.enqueue_soon("a", 0.3)  # a change of something "a" owns (a Workload's creation)
        queue.enqueue("a")  # "a" itself changed: a pass now, which sees that change too
        async with asyncio.timeout(5):
            await running.wait()
        queue.enqueue_soon("a", 0.3)  # a change the running pass did not see (Kueue admits)
        release.set()
        async with asyncio.timeout(5):
            await second.wait()
        assert len(passes) == 2 and not queue._timers and not queue._waiting
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_passes_that_never_suspend_still_let_the_rest_of_the_loop_run_between_them() -> None:
    """A restart enqueues every key, and a pass over a finished object makes no request: the workers
    must still hand the loop to the watches, the metrics endpoint and the lease renewals."""
    keys = [f"k{i}" for i in range(500)]
    done: list[str] = []
    seen_by_others: list[int] = []
    all_done = asyncio.Event()

    async def reconcile(key: str) -> Result:
        done.append(key)  # no await: as a pass with nothing to do
        if len(done) == len(keys):
            all_done.set()
        return Result.done()

    async def another_task() -> None:
        while not all_done.is_set():
            seen_by_others.append(len(done))
            await asyncio.sleep(0)

    queue: WorkQueue[str] = WorkQueue("t", reconcile, workers=1)
    for key in keys:
        queue.enqueue(key)
    runner = asyncio.create_task(queue.run())
    other = asyncio.create_task(another_task())
    await all_done.wait()
    await other
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert sorted(done) == sorted(keys)
    # The other task ran while the keys were being worked through, not only before and after.
    assert len({n for n in seen_by_others if 0 < n < len(keys)}) > len(keys) // 2


async def test_an_error_a_retry_may_mend_is_one_warning_line_and_a_bug_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The API server restarting (a lost connection), a 503 or a timeout under a controller's wrapper:
    a warning naming what failed, no traceback; anything else is an error with its traceback."""
    failures = {
        "connection": aiohttp.ClientOSError(None, "Can not write request body"),
        "unavailable": ApiException(status=503, reason="Service Unavailable"),
        "timeout": TimeoutError(),
        "bug": KeyError("status"),
    }
    seen: Counter[str] = Counter()
    retried = asyncio.Event()

    async def reconcile(key: str) -> Result:
        seen[key] += 1
        if all(seen[k] >= 2 for k in failures):
            retried.set()
        if seen[key] > 1:
            return Result.done()
        try:
            raise failures[key]
        except Exception as exc:
            raise RuntimeError("writing the status") from exc

    queue: WorkQueue[str] = WorkQueue("t", reconcile, base_backoff=0.001)
    for key in failures:
        queue.enqueue(key)
    task = asyncio.create_task(queue.run())
    with caplog.at_level(logging.INFO, logger="sparkop.core.queue"):
        await asyncio.wait_for(retried.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    by_key = {key: [r for r in caplog.records if f" {key} failed" in r.getMessage()] for key in failures}
    for key in ("connection", "unavailable", "timeout"):
        [record] = by_key[key]
        assert record.levelno == logging.WARNING and record.exc_info is None, record
        assert "writing the status" in record.getMessage(), record.getMessage()
    assert "Can not write request body" in by_key["connection"][0].getMessage()
    assert "503" in by_key["unavailable"][0].getMessage()
    [bug] = by_key["bug"]
    assert bug.levelno == logging.ERROR and bug.exc_info is not None
