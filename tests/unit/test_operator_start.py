"""An operator's start: each controller's queue waits for the caches it reads, not for every cache, so
on a busy cluster the apps controller reconciles while pods, ConfigMaps and Services are still listed."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from types import SimpleNamespace

import pytest

from sparkop.core.informer import Informer
from sparkop.core.manager import run_when_synced, served_kinds
from sparkop.core.runtime import Runtime
from sparkop.operator import YOUNG_COLLECTION_ALLOTMENT, controller_registrations, event_loop_factory


def runtime_with(*controllers: str) -> Runtime:
    runtime = Runtime(kube=SimpleNamespace(api=None))  # type: ignore[arg-type]
    for register in controller_registrations(controllers):
        register(runtime)
    return runtime


def kinds(informers: list[Informer]) -> set[str]:
    return {f"{i.resource.kind}[{i.label_selector or '*'}]" for i in informers}


def test_each_queue_waits_for_what_it_reads() -> None:
    runtime = runtime_with("apps", "driver")
    apps, driver = (kinds(runtime.sources[name]) for name in ("apps", "driver"))
    assert {"SparkApplication[*]", "SparkDriver[*]"} <= apps
    assert not any(kind.startswith(("Pod", "ConfigMap")) for kind in apps)
    assert driver == {
        "SparkDriver[*]",
        "Pod[sparkop.io/driver]",
        "ConfigMap[sparkop.io/driver]",
        "Service[sparkop.io/driver]",
        "NetworkPolicy[sparkop.io/driver]",
        # Optional kinds (where the schedulers are installed): Volcano's and scheduler-plugins'
        # PodGroups, Kueue's Workloads, and the ResourceFlavors and WorkloadPriorityClasses they name.
        "PodGroup[sparkop.io/driver]",
        "Workload[sparkop.io/driver]",
        "ResourceFlavor[*]",
        "WorkloadPriorityClass[*]",
        # Whether a deleted driver pod's node is lost (where the operator may read Nodes).
        "Node[*]",
    }
    # Every cache a queue waits for is one its reconciles read through an index.
    indexed = {id(informer) for index in runtime.indexes.values() for informer in index.informers}
    assert all(id(informer) in indexed for informer in runtime.sources["apps"] + runtime.sources["driver"])


async def test_a_queue_starts_once_its_own_caches_listed() -> None:
    runtime = runtime_with("apps", "driver")
    started: list[str] = []

    class Queue:
        def __init__(self, name: str) -> None:
            self.name = name

        async def run(self) -> None:
            started.append(self.name)

    tasks = [asyncio.create_task(run_when_synced(runtime, Queue(name))) for name in ("apps", "driver")]  # type: ignore[arg-type]
    await asyncio.sleep(0)
    for informer in runtime.sources["apps"]:
        informer.store.replace([], "1")
        informer._synced.set()
    await asyncio.wait_for(tasks[0], timeout=5)
    assert started == ["apps"] and not tasks[1].done()  # the pods have not been listed yet
    for informer in runtime.caches.all():
        informer._synced.set()
    await asyncio.wait_for(tasks[1], timeout=5)
    assert started == ["apps", "driver"]


def test_what_every_app_has_many_of_is_listed_after_what_the_other_controllers_read() -> None:
    """The apps, scheduled and connect controllers' selections (and the Namespaces) list first; the
    pods, ConfigMaps, Services, NetworkPolicies, PodGroups and Workloads the drivers own after them
    (core.caches.Caches.run(later=...)), so none of those controllers waits for them at a start."""
    runtime = runtime_with("apps", "driver", "scheduled", "connect")
    # The driver controller's own selections, but for the SparkDrivers and the configuration it reads.
    read = {"SparkDriver[*]", "ResourceFlavor[*]", "WorkloadPriorityClass[*]", "Node[*]"}
    owned = kinds(runtime.sources["driver"]) - read
    assert kinds(runtime.listed_later) == owned and "Pod[sparkop.io/driver]" in owned
    deferred = {id(i) for i in runtime.listed_later}
    for name in ("apps", "scheduled", "connect"):
        assert not any(id(i) in deferred for i in runtime.sources[name]), name


def test_the_operator_process_sets_its_collector_for_a_long_run() -> None:
    # In a process of its own: the collector's settings are the whole process's.
    probe = (
        "import gc, json; from sparkop.operator import settle_collector; settle_collector(); "
        "print(json.dumps([gc.get_threshold(), gc.get_freeze_count()]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    threshold, frozen = json.loads(done.stdout)
    assert threshold[0] == YOUNG_COLLECTION_ALLOTMENT > 700
    assert frozen > 10_000  # the controllers' modules, classes and functions, loaded before the run


def test_the_operator_runs_on_asyncios_loop_where_uvloop_is_not_installed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """uvloop is an optional dependency (it does not build everywhere): without it, `sparkop run`
    starts on asyncio's own event loop and says so."""
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what an absent package looks like to import
    with caplog.at_level(logging.INFO, logger="sparkop.operator"):
        assert event_loop_factory() is asyncio.new_event_loop
    assert "uvloop is not installed" in caplog.text


@pytest.mark.parametrize(
    ("controllers", "served"),
    [
        (("apps", "driver", "scheduled", "connect"),
         ["SparkApplication", "SparkDriver", "ScheduledSparkApplication", "SparkConnect"]),
        (("apps",), ["SparkApplication", "SparkDriver"]),  # its runs' kind is installed beside its own
        (("driver",), ["SparkDriver"]),
        (("scheduled",), ["ScheduledSparkApplication", "SparkApplication"]),
    ],
)  # fmt: skip
def test_the_manager_waits_for_the_kinds_its_controllers_declare(
    controllers: tuple[str, ...], served: list[str]
) -> None:
    runtime = Runtime(kube=SimpleNamespace(api=None))  # type: ignore[arg-type]
    declared = [c for register in controller_registrations(controllers) for c in register(runtime)]
    assert [r.kind for r in served_kinds(declared)] == served
