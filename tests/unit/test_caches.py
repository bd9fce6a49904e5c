"""core.caches without a cluster: informers shared per selection, indexes across namespaces, and a gap
on one watch making every cache re-list, reads refusing until they have."""

from __future__ import annotations

from typing import Any

import pytest

from sparkop.core.caches import Caches, NotCurrent
from sparkop.core.informer import Informer
from sparkop.core.jsontypes import JSON
from sparkop.core.resources import NAMESPACES, PODS
from sparkop.domain.kinds import SPARK_DRIVERS


def pod(namespace: str, name: str, driver: str) -> JSON:
    meta = {"namespace": namespace, "name": name, "uid": f"{namespace}-{name}", "resourceVersion": "1"}
    return {"metadata": {**meta, "labels": {"sparkop.io/driver": driver}}}


def synced(informer: Informer, *objs: JSON) -> None:
    """As if its first list returned ``objs``."""
    informer.store.replace(objs, "10")
    informer.continuous = True


def by_driver(obj: JSON) -> list[tuple[str, str]]:
    meta = obj["metadata"]
    return [(meta["namespace"], meta["labels"]["sparkop.io/driver"])]


def test_one_informer_per_selection_and_namespace_shared_by_every_reader() -> None:
    caches = Caches(api=None, namespaces=["a", "b"])  # type: ignore[arg-type]
    pods = caches.informers(PODS, "sparkop.io/driver")
    assert [i.namespace for i in pods] == ["a", "b"] and all(i.label_selector == "sparkop.io/driver" for i in pods)
    assert caches.informers(PODS, "sparkop.io/driver") is pods
    assert caches.informers(PODS) is not pods  # another selection, another informer
    # Namespaces are cluster-scoped: the served ones are selected by name.
    assert [(i.namespace, i.field_selector) for i in caches.informers(NAMESPACES)] == [
        (None, "metadata.name=a"),
        (None, "metadata.name=b"),
    ]
    assert [i.namespace for i in Caches(api=None).informers(SPARK_DRIVERS)] == [None]  # type: ignore[arg-type]


def test_an_index_reads_across_namespaces_and_refuses_until_every_cache_listed() -> None:
    caches = Caches(api=None, namespaces=["a", "b"])  # type: ignore[arg-type]
    index = caches.index("by-driver", PODS, by_driver, lambda o: o["metadata"]["name"], "sparkop.io/driver")
    a, b = caches.informers(PODS, "sparkop.io/driver")
    synced(a, pod("a", "p1", "d"), pod("a", "p2", "d"), pod("a", "p3", "e"))
    with pytest.raises(NotCurrent):
        index.get(("a", "d"))  # b has not listed yet
    synced(b, pod("b", "p1", "d"))
    assert index.get(("a", "d")) == ["p1", "p2"] and index.get(("b", "d")) == ["p1"]
    assert index.get(("a", "x")) is None


def test_a_gap_on_one_watch_makes_every_cache_relist_and_reads_wait_for_all() -> None:
    caches = Caches(api=None)  # type: ignore[arg-type]
    drivers = caches.index("drivers", SPARK_DRIVERS, lambda o: [("a", o["metadata"]["name"])], lambda o: o)
    pods = caches.index("pods", PODS, by_driver, lambda o: o, "sparkop.io/driver")
    (driver_informer,) = caches.informers(SPARK_DRIVERS)
    (pod_informer,) = caches.informers(PODS, "sparkop.io/driver")
    synced(driver_informer, {"metadata": {"namespace": "a", "name": "d", "uid": "u", "resourceVersion": "1"}})
    synced(pod_informer, pod("a", "p1", "d"))
    assert caches.continuous and drivers.get(("a", "d")) and pods.get(("a", "d"))

    # The pods' watch got 410 Gone: the SparkDriver cache may have missed a deletion just as well.
    pod_informer.continuous = False
    pod_informer._gap()
    assert not driver_informer.continuous and driver_informer._relist_requested
    pod_informer.continuous = True  # the pods re-listed first ...
    with pytest.raises(NotCurrent):
        drivers.get(("a", "d"))  # ... the SparkDriver cache has not: nothing is decided on it
    deltas: list[Any] = driver_informer.store.replace([], "20")  # its re-list: the SparkDriver is gone
    driver_informer.continuous = True
    assert [d.type for d in deltas] == ["DELETED"]
    assert drivers.get(("a", "d")) is None


async def test_a_reconcile_that_met_caches_relisting_runs_again_shortly_without_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import asyncio

    from sparkop.core.queue import Result, WorkQueue

    runs: list[str] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> Result:
        runs.append(key)
        if len(runs) == 1:
            raise NotCurrent("re-listing")
        done.set()
        return Result.done()

    queue: WorkQueue[str] = WorkQueue("test", reconcile, workers=1)
    task = asyncio.create_task(queue.run())
    queue.enqueue("k")
    async with asyncio.timeout(5):
        await done.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert runs == ["k", "k"]
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_an_index_reads_once_its_own_caches_listed_while_others_still_list() -> None:
    caches = Caches(api=None)  # type: ignore[arg-type]
    drivers = caches.index("drivers", SPARK_DRIVERS, lambda o: [("a", o["metadata"]["name"])], lambda o: o)
    pods = caches.index("pods", PODS, by_driver, lambda o: o, "sparkop.io/driver")
    (driver_informer,) = caches.informers(SPARK_DRIVERS)
    (pod_informer,) = caches.informers(PODS, "sparkop.io/driver")
    synced(driver_informer, {"metadata": {"namespace": "a", "name": "d", "uid": "u", "resourceVersion": "1"}})
    # The pods are still being listed: whoever reads only SparkDrivers may decide already.
    assert not caches.continuous and drivers.get(("a", "d"))
    with pytest.raises(NotCurrent, match="Pod"):
        pods.get(("a", "d"))
    # A gap found by the pods' watch still stops the SparkDriver readers until their cache re-listed.
    synced(pod_informer, pod("a", "p1", "d"))
    pod_informer.continuous = False
    pod_informer._gap()
    with pytest.raises(NotCurrent, match="SparkDriver"):
        drivers.get(("a", "d"))


def test_a_shared_index_decodes_each_version_until_it_is_read_again_and_then_keeps_it() -> None:
    caches = Caches(api=None)  # type: ignore[arg-type]
    decoded: list[str] = []

    def summary(obj: JSON) -> tuple[str, str]:
        decoded.append(obj["metadata"]["resourceVersion"])
        return (obj["metadata"]["name"], obj["metadata"]["resourceVersion"])

    index = caches.index("by-driver", PODS, by_driver, summary, "sparkop.io/driver", memo=2)
    (informer,) = caches.informers(PODS, "sparkop.io/driver")
    synced(informer, pod("a", "p1", "d"))
    # Read once (a finished app at start-up): nothing kept. Read again: kept, and handed out from then on.
    first, second, third = (index.get(("a", "d")) for _ in range(3))
    assert first == second == third == [("p1", "1")] and decoded == ["1", "1"]
    assert index.holds(("a", "d"), "a-p1") and not index.holds(("a", "d"), "other") and decoded == ["1", "1"]
    # A new version is decoded afresh: a kept value is never handed out for another version.
    changed = pod("a", "p1", "d")
    changed["metadata"]["resourceVersion"] = "2"
    informer.store.upsert(changed)
    assert index.get(("a", "d")) == [("p1", "2")] and decoded == ["1", "1", "2"]
    # Bounded: older versions make room for newer ones.
    for version in "3456":
        changed["metadata"]["resourceVersion"] = version
        informer.store.upsert(changed)
        index.get(("a", "d"))
        index.get(("a", "d"))
    assert len(index._memo) == 2 and len(index._memo._read_once) <= 2


def test_an_index_of_values_a_reader_may_change_hands_out_a_fresh_copy_on_every_read() -> None:
    caches = Caches(api=None)  # type: ignore[arg-type]
    index = caches.index("by-driver", PODS, by_driver, lambda o: o, "sparkop.io/driver")
    (informer,) = caches.informers(PODS, "sparkop.io/driver")
    synced(informer, pod("a", "p1", "d"))
    reads = [index.get(("a", "d")) for _ in range(3)]
    assert reads[0] == reads[1] == reads[2]
    assert len({id(r[0]) for r in reads if r}) == 3
