"""core.runtime's change handlers: a change a controller cannot see asks for no pass."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from sparkop.core.informer import Informer
from sparkop.core.resources import PODS
from sparkop.core.runtime import COALESCE_SECONDS, Runtime
from sparkop.domain.status_waits import EXECUTOR_CHANGE_SECONDS
from sparkop.driver_controller.controller import pod_change_window
from sparkop.driver_controller.observed import owner_key
from sparkop.driver_controller.summaries import pod_view


class Queue:
    name = "test"

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.new: list[Any] = []

    def enqueue(self, key: Any, *, new: bool = False) -> None:
        self.keys.append(key)
        if new:
            self.new.append(key)


def pod(rv: str, **status: Any) -> dict[str, Any]:
    owner = {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "name": "pi-1",
        "uid": "d1",
        "controller": True,
    }
    meta = {"name": "pi-1-1-driver", "namespace": "ns", "uid": "p1", "resourceVersion": rv}
    meta |= {"labels": {"spark-role": "driver", "sparkop.io/driver": "pi-1"}, "ownerReferences": [owner]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": {"phase": "Running", **status}}


def handler(view: Any) -> tuple[Queue, Any]:
    runtime = Runtime(kube=SimpleNamespace(api=None))  # type: ignore[arg-type]
    queue = Queue()
    runtime.enqueue_on_change(PODS, queue, owner_key, view=view)  # type: ignore[arg-type]
    (informer,) = runtime.caches.informers(PODS)
    assert isinstance(informer, Informer)
    return queue, informer._handlers[0]


def test_a_change_invisible_to_the_controller_asks_for_no_pass() -> None:
    queue, on_change = handler(pod_view)
    before = pod("5", conditions=[{"type": "Ready", "status": "True", "lastProbeTime": "2026-01-01T00:00:00Z"}])
    after = copy.deepcopy(before)
    after["metadata"]["resourceVersion"] = "6"
    after["status"]["conditions"][0]["lastProbeTime"] = "2026-01-01T00:00:10Z"
    on_change("MODIFIED", after, before)
    assert queue.keys == []
    # What a pass reads changed: the phase.
    ended = copy.deepcopy(after)
    ended["metadata"]["resourceVersion"] = "7"
    ended["status"]["phase"] = "Succeeded"
    on_change("MODIFIED", ended, after)
    assert queue.keys == [("ns", "pi-1")]
    # Creations and deletions always ask.
    on_change("ADDED", before, None)
    on_change("DELETED", before, before)
    assert len(queue.keys) == 3


def test_each_version_is_viewed_once() -> None:
    viewed: list[str] = []

    def counting_view(body: dict[str, Any]) -> Any:
        viewed.append(body["metadata"]["resourceVersion"])
        return pod_view(body)

    queue, on_change = handler(counting_view)
    on_change("MODIFIED", pod("6"), pod("5"))
    on_change("MODIFIED", pod("7", phase="Succeeded"), pod("6"))
    # The old version of the second change is the new one of the first: viewed once.
    assert viewed == ["5", "6", "7"]
    assert queue.keys == [("ns", "pi-1")]


def test_without_a_view_every_change_asks_for_a_pass() -> None:
    queue, on_change = handler(None)
    on_change("MODIFIED", pod("6"), pod("5"))
    assert queue.keys == [("ns", "pi-1")]


def test_changes_of_owned_objects_are_coalesced_and_the_owners_own_are_not() -> None:
    class Soon(Queue):
        def enqueue_soon(self, key: Any, within: float) -> None:
            self.keys.append(("soon", key, within))

    runtime = Runtime(kube=SimpleNamespace(api=None))  # type: ignore[arg-type]
    queue = Soon()
    runtime.enqueue_on_change(PODS, queue, owner_key, view=pod_view, coalesce=True)  # type: ignore[arg-type]
    (informer,) = runtime.caches.informers(PODS)
    informer._handlers[0]("ADDED", pod("5"), None)
    assert queue.keys == [("soon", ("ns", "pi-1"), COALESCE_SECONDS)]
    assert 0 < COALESCE_SECONDS <= 0.5  # a pass waits for its owned objects' burst, not for long


def test_only_the_creation_of_an_object_no_pass_has_acted_on_goes_ahead() -> None:
    queue, on_change = handler(None)
    created = pod("5")
    del created["status"]
    on_change("ADDED", created, None)
    assert queue.new == [("ns", "pi-1")]
    # Listed again at a restart, with the status a pass wrote: in line with the rest.
    on_change("ADDED", pod("6"), None)
    # Changed, or gone: in line with the rest, status or not.
    on_change("MODIFIED", created, created)
    on_change("DELETED", created, created)
    assert len(queue.keys) == 4
    assert queue.new == [("ns", "pi-1")]


def test_an_executors_change_waits_longer_for_its_drivers_pass_than_the_driver_pods_own() -> None:
    """The driver controller's pods: an executor's steps only move counts (status progress, which
    waits anyway), so they ask for a pass within EXECUTOR_CHANGE_SECONDS; the driver pod's within
    COALESCE_SECONDS (its Running, its end). The queue merges the asks: the earliest wins."""

    class Soon(Queue):
        def enqueue_soon(self, key: Any, within: float) -> None:
            self.keys.append((key, within))

    runtime = Runtime(kube=SimpleNamespace(api=None))  # type: ignore[arg-type]
    queue = Soon()
    runtime.enqueue_on_change(  # type: ignore[arg-type]
        PODS, queue, owner_key, view=pod_view, coalesce=True, within=pod_change_window
    )
    (informer,) = runtime.caches.informers(PODS)
    executor = pod("5")
    executor["metadata"]["name"] = "pi-1-1-exec-1"
    executor["metadata"]["labels"]["spark-role"] = "executor"
    informer._handlers[0]("ADDED", executor, None)
    informer._handlers[0]("ADDED", pod("6"), None)
    assert queue.keys == [(("ns", "pi-1"), EXECUTOR_CHANGE_SECONDS), (("ns", "pi-1"), COALESCE_SECONDS)]
    assert COALESCE_SECONDS < EXECUTOR_CHANGE_SECONDS <= 5


def test_the_arrival_of_what_a_pass_of_ours_created_asks_for_no_pass() -> None:
    """The pass that created the object decided with it there; its ADDED only tells the Applier (the
    create is decided on what is observed again). Its later changes, its deletion, and the creation of
    anything a pass of ours did not make ask for passes as ever."""
    told: list[tuple[str, str]] = []

    def ours(type_: str, obj: dict[str, Any], keys: Sequence[Any]) -> bool:
        assert list(keys) == [("ns", "pi-1")]  # what the object is filed under, worked out once
        told.append((type_, obj["metadata"]["resourceVersion"]))
        return type_ == "ADDED" and obj["metadata"]["resourceVersion"] == "5"

    runtime = Runtime(kube=SimpleNamespace(api=None))  # type: ignore[arg-type]
    queue = Queue()
    runtime.enqueue_on_change(PODS, queue, owner_key, view=pod_view, ours=ours)  # type: ignore[arg-type]
    (informer,) = runtime.caches.informers(PODS)
    on_change = informer._handlers[0]
    on_change("ADDED", pod("5"), None)
    assert queue.keys == [] and told == [("ADDED", "5")]
    on_change("MODIFIED", pod("6", phase="Succeeded"), pod("5"))
    on_change("DELETED", pod("6", phase="Succeeded"), pod("6", phase="Succeeded"))
    on_change("ADDED", pod("9"), None)  # not ours (someone else's create, or a re-list)
    assert queue.keys == [("ns", "pi-1")] * 3 and [t for t, _ in told] == ["ADDED", "MODIFIED", "DELETED", "ADDED"]
