"""core.informer against the real control plane: server-side selection, events, a listing streamed over
the watch (watch-list) or paged, and a re-list that replaces the cache after a watch gap the API
server can no longer serve (410 Gone)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from devcluster.testing import ClusterHandle
from sparkop.core.informer import Informer
from sparkop.core.jsontypes import JSON
from sparkop.core.kube import Kube
from sparkop.core.resources import CONFIGMAPS
from sparkop.core.store import BY_CONTROLLER_UID, EventType, controller_uid
from tests.support.gap import compact_etcd_and_restart_apiserver

pytestmark = pytest.mark.cluster

LABEL = "informer-test.sparkop.io/run"
# How the informer lists: streamed over the watch (the default), or a paged LIST (the fallback).
LISTINGS = pytest.mark.parametrize("watch_list", [True, False], ids=["watch-list", "paged-list"])


async def eventually(predicate: Callable[[], Any], within: float = 30.0, message: str = "condition") -> Any:
    deadline = time.monotonic() + within
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {within:.0f}s waiting for {message}")
        await asyncio.sleep(0.05)
    return value


def config_map(namespace: str, name: str, labels: dict[str, str] | None = None, **meta: Any) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}, **meta},
        "data": {"k": "v"},
    }


class Recorder:
    """A handler that remembers every (type, name, old resourceVersion) it was given."""

    def __init__(self) -> None:
        self.seen: list[tuple[EventType, str, str | None]] = []

    def __call__(self, type_: EventType, obj: JSON, old: JSON | None) -> None:
        self.seen.append((type_, obj["metadata"]["name"], old["metadata"]["resourceVersion"] if old else None))

    def names(self) -> set[str]:
        return {name for _, name, _ in self.seen}

    def of(self, name: str) -> list[EventType]:
        return [t for t, n, _ in self.seen if n == name]


@asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(30):
            await informer.wait_synced()
        yield informer
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
async def kube(cluster: ClusterHandle) -> AsyncIterator[Kube]:
    client = await Kube.connect(str(cluster.kubeconfig))
    try:
        yield client
    finally:
        await client.close()


async def test_sync_with_a_label_selector_never_shows_unlabelled_objects(kube: Kube, namespace: str) -> None:
    run = uuid.uuid4().hex[:8]
    mine = [config_map(namespace, f"mine-{i}", {LABEL: run}) for i in range(5)]
    others = [config_map(namespace, f"other-{i}", {LABEL: "someone-else"}) for i in range(3)]
    others.append(config_map(namespace, "unlabelled"))
    await asyncio.gather(*(kube.create(o) for o in mine + others))

    recorder = Recorder()
    informer = Informer(
        kube, CONFIGMAPS, namespace=namespace, label_selector=f"{LABEL}={run}", page_size=2, watch_list=False
    )
    informer.add_handler(recorder)
    async with running(informer):
        assert sorted(name for _, name in informer.store) == [f"mine-{i}" for i in range(5)]
        assert recorder.names() == {f"mine-{i}" for i in range(5)}
        pages = [r for r in informer.requests if r.verb == "LIST"]
        assert len(pages) == 3 and all(r.param("limit") == "2" for r in pages)
        assert pages[0].param("continue") is None and all(r.param("continue") for r in pages[1:])

        # Watched too: an unlabelled object created before a labelled one is never delivered.
        await kube.create(config_map(namespace, "other-late", {LABEL: "someone-else"}))
        await kube.create(config_map(namespace, "mine-late", {LABEL: run}))
        await eventually(lambda: informer.store.get(namespace, "mine-late"), message="mine-late in the cache")
        assert not any(name.startswith(("other", "unlabelled")) for name in recorder.names())
        assert len(informer.store) == 6


async def test_a_streamed_listing_holds_exactly_the_selection_and_watches_on(kube: Kube, namespace: str) -> None:
    run = uuid.uuid4().hex[:8]
    mine = [config_map(namespace, f"mine-{i}", {LABEL: run}) for i in range(5)]
    await asyncio.gather(*(kube.create(o) for o in [*mine, config_map(namespace, "other", {LABEL: "else"})]))
    recorder = Recorder()
    informer = Informer(kube, CONFIGMAPS, namespace=namespace, label_selector=f"{LABEL}={run}")
    informer.add_handler(recorder)
    async with running(informer):
        assert sorted(name for _, name in informer.store) == [f"mine-{i}" for i in range(5)]
        assert recorder.names() == {f"mine-{i}" for i in range(5)} and informer.stats.lists == 1
        assert all("managedFields" not in obj["metadata"] for obj in informer.store.objects())
        # One request listed and watches on: the change arrives on it, with no LIST ever made.
        await kube.create(config_map(namespace, "mine-late", {LABEL: run}))
        await eventually(lambda: informer.store.get(namespace, "mine-late"), message="mine-late in the cache")
    (request,) = informer.requests
    assert request.verb == "WATCH" and request.param("sendInitialEvents") == "true"
    assert request.param("resourceVersionMatch") == "NotOlderThan" and request.param("resourceVersion") is None
    assert informer.store.resource_version is not None and int(informer.store.resource_version) > 0


@LISTINGS
async def test_every_list_and_watch_request_carries_the_selectors(kube: Kube, namespace: str, watch_list: bool) -> None:
    run = uuid.uuid4().hex[:8]
    selector, fields = f"{LABEL}={run}", f"metadata.namespace={namespace}"
    # Cluster-wide: the selection is the server's, the informer never sees another namespace's objects.
    informer = Informer(kube, CONFIGMAPS, label_selector=selector, field_selector=fields, watch_list=watch_list)
    async with running(informer):
        await kube.create(config_map(namespace, "seen", {LABEL: run}))
        await eventually(lambda: informer.store.get(namespace, "seen"), message="seen in the cache")
        await eventually(lambda: any(r.verb == "WATCH" for r in informer.requests), message="a watch request")
    verbs = [r.verb for r in informer.requests]
    assert verbs[0] == ("WATCH" if watch_list else "LIST") and "WATCH" in verbs
    for request in informer.requests:
        assert request.path == "/api/v1/configmaps"
        assert request.param("labelSelector") == selector and request.param("fieldSelector") == fields
    watch = next(r for r in informer.requests if r.verb == "WATCH")
    assert watch.param("allowWatchBookmarks") == "true"
    assert watch.param("sendInitialEvents" if watch_list else "resourceVersion")


async def test_added_modified_deleted_reach_the_store_and_the_handlers(kube: Kube, namespace: str) -> None:
    run = uuid.uuid4().hex[:8]
    await kube.create(config_map(namespace, "owner"))
    owner = await kube.get(CONFIGMAPS, namespace, "owner")
    assert owner is not None
    owner_ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    recorder = Recorder()
    informer = Informer(
        kube,
        CONFIGMAPS,
        namespace=namespace,
        label_selector=f"{LABEL}={run}",
        indexers={BY_CONTROLLER_UID: controller_uid},
    )
    informer.add_handler(recorder)
    async with running(informer):
        assert len(informer.store) == 0
        child = config_map(namespace, "child", {LABEL: run}, ownerReferences=[{**owner_ref, "controller": True}])
        await kube.create(child)
        added = await eventually(lambda: informer.store.get(namespace, "child"), message="child added")
        assert informer.store.by_index(BY_CONTROLLER_UID, owner["metadata"]["uid"]) == [added]
        assert "managedFields" not in added["metadata"]

        patched = await kube.patch(CONFIGMAPS, namespace, "child", {"data": {"k": "changed"}})
        assert patched is not None
        new_rv = patched["metadata"]["resourceVersion"]
        async with asyncio.timeout(30):
            await informer.wait_for_resource_version(new_rv)
        cached = informer.store.get(namespace, "child")
        assert cached is not None and cached["data"] == {"k": "changed"}
        assert ("MODIFIED", "child", added["metadata"]["resourceVersion"]) in recorder.seen

        await kube.delete(CONFIGMAPS, namespace, "child")
        await eventually(lambda: "DELETED" in recorder.of("child"), message="child deleted")
        assert informer.store.get(namespace, "child") is None
        assert informer.store.by_index(BY_CONTROLLER_UID, owner["metadata"]["uid"]) == []
        assert recorder.of("child") == ["ADDED", "MODIFIED", "DELETED"]


@LISTINGS
async def test_a_watch_gap_past_compaction_relists_and_drops_what_was_deleted(
    cluster: ClusterHandle, kube: Kube, namespace: str, watch_list: bool
) -> None:
    if not cluster.can_restart:
        pytest.skip("needs a devcluster it can restart (etcd compaction and a fresh watch cache)")
    run = uuid.uuid4().hex[:8]
    names = ["stays", "goes", "changes"]
    await asyncio.gather(*(kube.create(config_map(namespace, n, {LABEL: run})) for n in names))
    recorder = Recorder()
    informer = Informer(kube, CONFIGMAPS, namespace=namespace, label_selector=f"{LABEL}={run}", watch_list=watch_list)
    informer.add_handler(recorder)
    async with running(informer):
        pass  # synced; now the informer stops, as an operator stopped (SIGSTOP) for a while would
    goes = informer.store.get(namespace, "goes")
    assert goes is not None and len(informer.store) == 3
    gap_from = informer.store.resource_version

    await kube.delete(CONFIGMAPS, namespace, "goes")
    await kube.patch(CONFIGMAPS, namespace, "changes", {"data": {"k": "during the gap"}})
    await kube.create(config_map(namespace, "new", {LABEL: run}))
    compacted = await asyncio.to_thread(compact_etcd_and_restart_apiserver, cluster)
    assert int(gap_from or 0) < compacted

    await _resumed(informer, lambda: informer.stats.relists == 1)
    assert sorted(name for _, name in informer.store) == ["changes", "new", "stays"]
    assert not informer.store.holds_uid(goes["metadata"]["uid"])
    assert recorder.of("goes") == ["ADDED", "DELETED"]
    assert recorder.of("changes") == ["ADDED", "MODIFIED"] and recorder.of("new") == ["ADDED"]
    assert recorder.of("stays") == ["ADDED"]  # unchanged: nothing to tell
    # The watch resumed from the gap, was refused, and the informer listed again and watched on.
    verbs = [(r.verb, r.param("resourceVersion")) for r in informer.requests]
    assert ("WATCH", gap_from) in verbs and verbs[-1][0] == "WATCH"
    if watch_list:
        listings = [r for r in informer.requests if r.param("sendInitialEvents") == "true"]
        assert len(listings) == 2 and not any(verb == "LIST" for verb, _ in verbs)
    else:
        assert verbs.count(("LIST", None)) == 2


async def _resumed(informer: Informer, done: Callable[[], Any]) -> None:
    task = asyncio.create_task(informer.run())
    try:
        await eventually(done, within=60, message="the informer to re-list")
        await eventually(lambda: informer.requests[-1].verb == "WATCH", message="a watch after the re-list")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
