"""core.informer's listing without a cluster: a server that refuses to stream a watch's initial state
(the WatchList feature off, an API server before 1.27) is LISTed instead, and a stream cut before the
bookmark that ends its initial events leaves the cache unsynced and is asked again; and its backoff:
a watch that worked and then broke (an API server restart) is retried at once, however long the
last incident's backoff grew, while one refused again and again waits longer each time; and an
optional kind (a batch scheduler's CRD) that is not served is an empty, current cache until it is,
while a required one is never synced. The streamed
listing itself is tested against the real API server in tests/integration/test_informer.py."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from sparkop.core import informer as informer_module
from sparkop.core import lines as lines_module
from sparkop.core.informer import ABSENT_POLL_S, INITIAL_EVENTS_END, MIN_BACKOFF_S, Informer
from sparkop.core.jsontypes import JSON
from sparkop.core.resources import CONFIGMAPS, Resource


def config_map(name: str, rv: str) -> JSON:
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}", "resourceVersion": rv}}


def line(type_: str, obj: JSON) -> bytes:
    return json.dumps({"type": type_, "object": obj}).encode() + b"\n"


END = line("BOOKMARK", {"metadata": {"resourceVersion": "7", "annotations": {INITIAL_EVENTS_END: "true"}}})


class Body:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        await asyncio.Event().wait()  # a watch stays open until the server ends it

    def iter_chunked(self, size: int) -> AsyncIterator[bytes]:
        return self.iter_any()  # each chunk here is short


class Response:
    def __init__(self, status: int, body: bytes = b"", chunks: list[bytes] | None = None) -> None:
        self.status, self.reason, self.body = status, "", body
        self.content = Body(chunks or [])

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None: ...

    def close(self) -> None: ...


class Api:
    """Answers each request with the next scripted response; remembers the query of each."""

    def __init__(self, *responses: Response) -> None:
        self.responses = list(responses)
        self.queries: list[dict[str, str]] = []

    async def request(self, method: str, path: str, query: Any = (), **kwargs: Any) -> Response:
        self.queries.append(dict(query))
        if not self.responses:
            await asyncio.Event().wait()
        return self.responses.pop(0)


async def synced(informer: Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.wait_synced(), timeout=5)
    return task


async def until_told(seen: list[Any], count: int) -> None:
    """Until the handlers have been told ``count`` changes; the informer runs on this event loop. The
    bound is only there so that a test that would hang fails instead (its assertion then says what
    was told): generous, so that a busy machine never trips it."""
    for _ in range(3000):  # 30 s
        if len(seen) >= count:
            return
        await asyncio.sleep(0.01)


async def test_a_refused_watch_list_is_listed_instead() -> None:
    refusal = json.dumps({"kind": "Status", "reason": "Invalid", "message": "sendInitialEvents is forbidden"})
    listed = json.dumps({"metadata": {"resourceVersion": "5"}, "items": [config_map("a", "4")]})
    api = Api(Response(422, refusal.encode()), Response(200, listed.encode()), Response(200, chunks=[]))
    informer = Informer(api, CONFIGMAPS, namespace="ns")
    task = await synced(informer)
    try:
        assert [name for _, name in informer.store] == ["a"] and informer.store.resource_version == "5"
        streamed, paged, watch = api.queries[:3]
        assert streamed["sendInitialEvents"] == "true" and "watch" not in paged and paged["limit"]
        assert watch["resourceVersion"] == "5" and "sendInitialEvents" not in watch
        assert informer.watch_list is False  # asked once: the next re-list lists at once
    finally:
        task.cancel()


async def test_a_streamed_first_listing_is_synced_at_its_end_and_watched_on() -> None:
    stream = [line("ADDED", config_map("a", "3")), line("ADDED", config_map("b", "4"))]
    stream += [END, line("MODIFIED", config_map("a", "8"))]
    api = Api(Response(200, chunks=stream))
    informer = Informer(api, CONFIGMAPS, namespace="ns")
    seen: list[tuple[str, str]] = []

    def told(type_: str, obj: JSON, old: JSON | None) -> None:
        # The first listing of an empty cache is told object by object as it streams in, and the
        # cache says it has synced only at the bookmark that ends it (nothing reads it before).
        seen.append((type_, obj["metadata"]["name"]))
        assert informer.store.has_synced() == (len(seen) > 2)
        assert informer.store.resource_version == (None if len(seen) <= 2 else "8")

    informer.add_handler(told)
    task = await synced(informer)
    try:
        await until_told(seen, 3)
        assert seen == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]
        assert informer.store.resource_version == "8" and len(api.queries) == 1
    finally:
        task.cancel()


class Connection:
    """aiohttp's connection as far as the reader uses it: its protocol's pause and resume of reading,
    recorded between the chunks the body hands out."""

    def __init__(self, said: list[str]) -> None:
        self.protocol, self.said = self, said

    def pause_reading(self) -> None:
        self.said.append("pause")

    def resume_reading(self) -> None:
        self.said.append("resume")


class Recorded(Body):
    def __init__(self, chunks: list[bytes], said: list[str]) -> None:
        super().__init__(chunks)
        self.said = said

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.said.append(f"chunk {len(self.said)}")
            yield chunk
        await asyncio.Event().wait()


async def test_the_initial_events_are_read_in_gathered_reads_and_later_events_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lines_module, "GATHER_SECONDS", 0.0)
    said: list[str] = []
    a, b, c = (line("ADDED", config_map(n, rv)) for n, rv in (("a", "3"), ("b", "4"), ("c", "5")))
    later = [line("MODIFIED", config_map("a", "8")), line("MODIFIED", config_map("b", "9"))]
    response = Response(200)
    response.content = Recorded([a, b + c[:10], c[10:] + END, *later], said)
    response.connection = Connection(said)  # type: ignore[attr-defined]
    monkeypatch.setattr(lines_module, "GATHERED_BYTES", len(b) + 5)  # the second read is not short
    informer = Informer(Api(response), CONFIGMAPS, namespace="ns")
    seen: list[str] = []
    informer.add_handler(lambda type_, obj, old: seen.append(obj["metadata"]["resourceVersion"]))
    task = await synced(informer)
    try:
        await until_told(seen, 5)
        assert seen == ["3", "4", "5", "8", "9"]
        # After a short read of the initial events, the connection's reading pauses for the next read
        # to bring more; not after a long one, nor after their end (each later event is read at once).
        kinds = [s.split()[0] for s in said]
        assert kinds == ["chunk", "pause", "resume", "chunk", "chunk", "chunk", "chunk"]
    finally:
        task.cancel()


async def test_a_slow_first_listing_says_where_its_time_went(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(informer_module, "SLOW_LISTING_S", 0.0)  # every listing is slow here
    api = Api(Response(200, chunks=[line("ADDED", config_map("a", "3")), END]))
    informer = Informer(api, CONFIGMAPS, namespace="ns")
    with caplog.at_level(logging.INFO, logger="sparkop.core.informer"):
        task = await synced(informer)
    task.cancel()
    (said,) = [r.getMessage() for r in caplog.records if "listed" in r.getMessage()]
    assert said.startswith(f"{informer.name}: listed 1 objects in ")
    assert "the API server answered after" in said and "its first object came at" in said
    assert "its last at" in said and "CPU-s meanwhile" in said


async def test_a_stream_cut_before_its_end_is_never_synced_and_the_whole_one_replaces_it() -> None:
    cut = Response(200, chunks=[line("ADDED", config_map("a", "3"))])
    synced_after_cut: list[bool] = []

    async def ends() -> AsyncIterator[bytes]:
        yield line("ADDED", config_map("a", "3"))
        synced_after_cut.append(informer.store.has_synced())

    cut.content.iter_any = ends  # type: ignore[method-assign]
    whole = Response(200, chunks=[line("ADDED", config_map("b", "4")), END])
    api = Api(cut, whole)
    informer = Informer(api, CONFIGMAPS, namespace="ns", max_backoff_seconds=0.01)
    seen: list[tuple[str, str]] = []
    informer.add_handler(lambda type_, obj, old: seen.append((type_, obj["metadata"]["name"])))
    task = await synced(informer)
    try:
        # The cut stream's "a" was told but never read (the cache had not synced); the complete
        # stream replaced it: "a" was never a listed object, and its removal was told too.
        assert synced_after_cut == [False]
        assert [name for _, name in informer.store] == ["b"] and informer.stats.lists == 1
        assert seen == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "b")]
        assert [q.get("sendInitialEvents") for q in api.queries[:2]] == ["true", "true"]
    finally:
        task.cancel()


class Dropped(Body):
    """A watch whose connection breaks after its chunks (the API server went away)."""

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        raise aiohttp.ClientPayloadError("Response payload is not completed")


class Ended(Body):
    """A watch the server ends (its timeoutSeconds)."""

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def dropped(*chunks: bytes) -> Response:
    response = Response(200)
    response.content = Dropped(list(chunks))
    return response


def ended(*chunks: bytes) -> Response:
    response = Response(200)
    response.content = Ended(list(chunks))
    return response


async def backoffs_after(*responses: Response, count: int) -> list[float]:
    """The backoffs (before their jitter) the informer waits after each of ``responses``, once synced."""
    api = Api(ended(END), *responses)
    informer = Informer(api, CONFIGMAPS, namespace="ns")
    waited: list[float] = []
    done = asyncio.Event()

    async def back_off(seconds: float) -> None:
        waited.append(seconds)
        if len(waited) == count:
            done.set()

    informer._back_off = back_off  # type: ignore[method-assign]
    task = await synced(informer)
    try:
        await asyncio.wait_for(done.wait(), timeout=5)
    finally:
        task.cancel()
    return waited


async def test_a_watch_that_worked_and_broke_is_retried_with_the_shortest_backoff() -> None:
    # Each watch said something (a bookmark) before the connection broke: three separate incidents.
    bookmark = line("BOOKMARK", {"metadata": {"resourceVersion": "9"}})
    assert await backoffs_after(dropped(bookmark), dropped(bookmark), dropped(bookmark), count=3) == [MIN_BACKOFF_S] * 3


async def test_a_server_that_keeps_refusing_is_asked_less_and_less_often() -> None:
    unavailable = json.dumps({"kind": "Status", "message": "storage is (re)initializing"}).encode()
    refusals = [Response(429, unavailable) for _ in range(4)]
    waited = await backoffs_after(*refusals, count=4)
    assert waited == [MIN_BACKOFF_S * 2**n for n in range(4)]


# An optional kind (a batch scheduler's CRD): absent is an empty, current cache, looked for again.
OPTIONAL_GROUPS = Resource("scheduling.example.com", "v1", "groups", "Group", optional=True)
NOT_SERVED = json.dumps({"kind": "Status", "reason": "NotFound", "message": "the server could not find it"}).encode()


async def test_an_optional_kind_not_served_is_an_empty_current_cache_until_it_is() -> None:
    stream = [line("ADDED", config_map("g", "3")), END]
    api = Api(Response(404, NOT_SERVED), Response(403, b"{}"), Response(200, chunks=stream))
    informer = Informer(api, OPTIONAL_GROUPS, namespace="ns")
    polls: list[float] = []
    polled, added = asyncio.Event(), asyncio.Event()
    informer.add_handler(lambda type_, obj, old: added.set())

    async def back_off(seconds: float) -> None:
        polls.append(seconds)
        await polled.wait()  # the next look waits for the test

    informer._back_off = back_off  # type: ignore[method-assign]
    task = await synced(informer)
    try:
        # Listed, empty and current at once: a controller that reads the kind starts.
        assert informer.continuous and len(informer.store) == 0 and informer.absent is not None
        informer.relist()  # a gap elsewhere: nothing of an absent kind was missed
        assert informer.continuous
        polled.set()
        await asyncio.wait_for(added.wait(), timeout=5)
        assert [name for _, name in informer.store] == ["g"]
        assert polls == [ABSENT_POLL_S, ABSENT_POLL_S]  # after the 404 and the 403 alike
        assert informer.absent is None and informer.continuous
    finally:
        task.cancel()


async def test_a_required_kind_not_served_is_never_synced() -> None:
    api = Api(Response(404, NOT_SERVED), Response(404, NOT_SERVED))
    informer = Informer(api, Resource("scheduling.example.com", "v1", "groups", "Group"), namespace="ns")
    refused = asyncio.Event()

    async def back_off(seconds: float) -> None:
        refused.set()
        await asyncio.Event().wait()

    informer._back_off = back_off  # type: ignore[method-assign]
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(refused.wait(), timeout=5)
        assert not informer.has_synced() and informer.absent is None and len(api.queries) == 1
    finally:
        task.cancel()
