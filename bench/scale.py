"""Scale: N finished apps (10,000 by default; 50,000 for issue 48) and their SparkDrivers present; the operator's
memory, idle CPU and restart.

On one devcluster (KWOK nodes and the Spark-driver simulator), with the operator cluster-wide (no
``-n``, as a real install runs it: it then lists and watches every namespace, which is the case that
has to scale). The cluster's ScaleSettings (bench/README.md): every finished pod kept, etcd's quota
raised, the API server's GOMEMLIMIT, and after seeding no endpoints or endpoint-slice controllers
(quadratic in one namespace of 50,000 Services; sparkop reads neither):

1. **templates**: the real operator runs a few apps to completion (one of them failing); what each
   finished app leaves behind is listed (the SparkApplication and SparkDriver with their statuses, the
   driver pod, the two ConfigMaps and the Service) and kept as a template.
2. **seeding**: N clones of the templates, each renamed consistently: every occurrence of the
   template's app name, its uids and its spark.app.id (which sparkop derives from the SparkDriver's
   uid) becomes the clone's. Two ways (``--seed``):

   * ``etcd`` (the default; bench/etcd_seed.py): each clone written straight into the devcluster's
     etcd as the API server would store it (the template's objects as it answered them, statuses
     and managedFields included, with new uids and times moved to the seeding), with the Endpoints
     and EndpointSlice the controller manager keeps for its Service, in two etcd transactions. The
     API server's watch cache follows etcd, so they are listed and watched like any other objects.
     The controller manager is stopped meanwhile and started again after: its controllers list
     every clone before acting, and find nothing to do.
   * ``api``: the bench's own client creates each clone (so the audit log does not count them as
     the operator's): parents first so that ownerReferences carry the real uids; statuses through
     the status subresource; each driver pod bound to a KWOK node and given its template's terminal
     status at once (KWOK would run it to the same end, but far too slowly for 10,000 pods); the
     SparkDriver's status then written from that pod (uid, IP, node, times, exit code). About nine
     requests an app: 105 requests/s on this machine.

   Events are not cloned: sparkop does not watch them. Then the cluster's controllers are left to
   settle, so that what follows measures the operator.
3. **synced**: the operator starts over the N apps: time to ready, to its first reconcile and to idle,
   then its RSS and its idle CPU over ``--idle-seconds``, and the writes it made (0 if the clones are
   faithful: a finished app is frozen).
4. **restart**: that operator is stopped and a new one started: start -> first reconcile, start ->
   idle, the CPU seconds and peak RSS of the start, and its writes from the API server's audit log.

    .venv/bin/python bench/scale.py --apps 10000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import pstats
import random
import signal
import subprocess
import time
import tracemalloc
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from resource import RUSAGE_SELF, getrusage
from typing import Any, Final

import aiohttp
import etcd_seed
from harness import (
    ROOT,
    BenchCluster,
    Operator,
    app_manifest,
    app_state,
    bounded,
    cpu_seconds,
    log,
    now_utc,
    operator_python,
    operator_root,
    stamping,
    write_result,
)
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster import procs
from devcluster.components import ScaleSettings
from devcluster.ports import LOCALHOST
from sparkop.core import kube as k8s
from sparkop.core.jsontypes import JSON
from sparkop.domain import kinds, labels, naming

NAMESPACE: Final = "scale"
# Four templates that succeed and one that fails: both kinds of finished app are cloned.
TEMPLATE_OUTCOMES: Final = ("Succeeded", "Succeeded", "Succeeded", "Succeeded", "Failed")
FINISHED_STATES: Final = frozenset({"COMPLETED", "FAILED"})
TERMINAL_POD_PHASES: Final = frozenset({"Succeeded", "Failed"})
# Restarts over the finished apps, each measured against the floor beside it; the median one is reported.
# Five, not three: on two cores the API server's CPU for the very same listing varies 2-6 CPU-s from
# one minute to the next (its Go GC over the caches of 60,000 objects), in a start and in its floor
# alike, so one round in three can be seconds off either way.
RESTARTS: Final = 5
# What a finished app can leave behind, all found by the sparkop.io/app label (the app itself by name).
OWNED_KINDS: Final = (kinds.SPARK_DRIVERS, k8s.CONFIGMAPS, k8s.SERVICES, k8s.PODS, k8s.INGRESSES)
KEPT_METADATA: Final = ("name", "namespace", "labels", "annotations", "ownerReferences", "finalizers")
# Added to every pod by the ServiceAccount admission plugin: left for it to add to the clone again.
SERVICE_ACCOUNT_VOLUME_PREFIX: Final = etcd_seed.SERVICE_ACCOUNT_VOLUME_PREFIX
WRITES_LISTED: Final = 10
# What the controller manager keeps for each Service (its endpoints and endpoint-slice controllers):
# cloned beside the Service when seeding into etcd, so that its controllers find them as they would
# make them and write nothing.
ENDPOINTS: Final = k8s.Resource("", "v1", "endpoints", "Endpoints")
ENDPOINT_SLICES: Final = k8s.Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
# How the clones are made: written straight into etcd (minutes for 50,000 apps), or created through
# the API server by the bench's client (about nine requests an app: 105 requests/s on this machine).
SEED_PATHS: Final = ("etcd", "api")
# The controller manager's terminated-pod collector is off on this cluster (0): every clone keeps its
# driver pod, the most the operator's caches can be asked to hold. Kubernetes' default, 12,500,
# would delete all finished pods beyond it (oldest first, at the controller manager's 20 requests/s).
TERMINATED_POD_GC_THRESHOLD: Final = 0
# etcd's quota: 50,000 finished apps stored as JSON pass its 2 GiB default.
ETCD_QUOTA_BYTES: Final = 8 * 2**30
# The API server's soft memory limit (GOMEMLIMIT). Without one its heap grows to twice what it keeps
# alive between collections: at 50,000 apps it held 14.1 GiB of this 24 GiB machine (2026-12-07 04:23).
APISERVER_MEMORY_LIMIT: Final = "8GiB"
# Left out of the controller manager once it starts again after the clones are put into etcd (the
# templates' Services have their endpoints by then): in the clones' one namespace each of them, for
# each Service, lists every pod of the namespace and matches the Service's selector against it
# (endpoints_controller.go and endpointslice_controller.go, syncService), so their full sync at a
# start is quadratic: 50,000 Services held a core for over 12 minutes (2026-12-07). The clones carry
# their Endpoints and EndpointSlices as these controllers leave them, and sparkop reads neither.
CONTROLLERS_OFF: Final = ("endpoints-controller", "endpointslice-controller")
# The cluster has settled after seeding once each of its controllers (the controller manager, kwok, the
# simulator, the scheduler) used under this share of a core over SETTLE_WINDOW_S.
SETTLE_SHARE: Final = 0.1
SETTLE_WINDOW_S: Final = 10.0
SETTLED_COMPONENTS: Final = ("kube-controller-manager", "kwok", "sparksim", "kube-scheduler")


CLONE_PREFIX: Final = "app-"


def clone_name(index: int) -> str:
    return f"{CLONE_PREFIX}{index:05d}"


# -- templates: what a finished app leaves behind -----------------------------------------------------


@dataclass(frozen=True)
class Template:
    """One finished app and everything it left behind, as the API server holds them."""

    app: JSON
    driver: JSON
    pod: JSON
    others: tuple[JSON, ...]  # ConfigMaps, Services (and Ingresses, if any), owned by the SparkDriver
    # The Endpoints and EndpointSlices the controller manager made for its Services (it carries the
    # Service's labels over): what the operator never reads, cloned only into etcd.
    service_endpoints: tuple[JSON, ...] = ()

    @property
    def name(self) -> str:
        return str(self.app["metadata"]["name"])

    def objects(self) -> Iterator[JSON]:
        yield from (self.app, self.driver, *self.others, self.pod)

    def stored_objects(self) -> list[JSON]:
        """Everything a clone in etcd is made of, parents before children (owners first): the
        Endpoints and EndpointSlices as the controllers' full sync leaves them for a finished pod."""
        endpoints = [etcd_seed.settled_endpoints(o) for o in self.service_endpoints if o["kind"] == "Endpoints"]
        slices = [etcd_seed.settled_endpoint_slice(o) for o in self.service_endpoints if o["kind"] == "EndpointSlice"]
        return [self.app, self.driver, *self.others, *endpoints, *slices, self.pod]


def _typed(resource: k8s.Resource, item: JSON) -> JSON:
    # Items of a LIST carry no apiVersion and kind: the list does.
    return {"apiVersion": resource.api_version, "kind": resource.kind, **item}


async def run_templates(bench: BenchCluster, kube: k8s.Kube, budget_seconds: float = 300) -> list[Template]:
    """Run ``TEMPLATE_OUTCOMES`` apps to completion with the real operator and capture what is left."""
    names = [f"tmpl-{i}" for i in range(len(TEMPLATE_OUTCOMES))]
    operator = Operator(bench, args=(), log_name="templates-operator.log").start()
    try:
        await asyncio.to_thread(operator.wait_ready)
        for name, outcome in zip(names, TEMPLATE_OUTCOMES, strict=True):
            await kube.create(app_manifest(name, NAMESPACE, outcome=outcome))
        async with asyncio.timeout(budget_seconds):
            while True:
                apps = await kube.list(kinds.SPARK_APPLICATIONS, NAMESPACE)
                pods = await kube.list(k8s.PODS, NAMESPACE, selector=labels.SPARK_ROLE)
                executors = [p for p in pods if _label(p, labels.SPARK_ROLE) == labels.ROLE_EXECUTOR]
                held = [p for p in pods if p["metadata"].get("finalizers")]
                if all(app_state(a) in FINISHED_STATES for a in apps) and not executors and not held:
                    break
                await asyncio.sleep(0.5)
        await asyncio.to_thread(operator.wait_idle)
    finally:
        operator.stop()
    return [await capture(kube, name) for name in names]


async def capture(kube: k8s.Kube, app_name: str) -> Template:
    app = await kube.get(kinds.SPARK_APPLICATIONS, NAMESPACE, app_name)
    assert app is not None, f"template app {app_name} is gone"
    owned: list[JSON] = []
    for resource in OWNED_KINDS:
        items = await kube.list(resource, NAMESPACE, selector=f"{labels.APP}={app_name}")
        owned += [_typed(resource, item) for item in items]
    by_kind = Counter(str(o["kind"]) for o in owned)
    drivers = [o for o in owned if o["kind"] == "SparkDriver"]
    pods = [o for o in owned if o["kind"] == "Pod"]
    if len(drivers) != 1 or len(pods) != 1:
        raise RuntimeError(f"template {app_name} left {dict(by_kind)}: expected one SparkDriver and one pod")
    others = tuple(o for o in owned if o["kind"] not in ("SparkDriver", "Pod"))
    services = [o for o in others if o["kind"] == "Service"]
    endpoints = await _service_endpoints(kube, app_name, len(services))
    return Template(_typed(kinds.SPARK_APPLICATIONS, app), drivers[0], pods[0], others, endpoints)


async def _service_endpoints(
    kube: k8s.Kube, app_name: str, services: int, budget_seconds: float = 60
) -> tuple[JSON, ...]:
    """The Endpoints and EndpointSlice of each of the app's Services, once the controller manager made them."""
    selector = f"{labels.APP}={app_name}"
    async with asyncio.timeout(budget_seconds):
        while True:
            found = {
                resource: [_typed(resource, item) for item in await kube.list(resource, NAMESPACE, selector=selector)]
                for resource in (ENDPOINTS, ENDPOINT_SLICES)
            }
            if all(len(items) >= services for items in found.values()):
                return tuple(found[ENDPOINTS] + found[ENDPOINT_SLICES])
            await asyncio.sleep(0.5)


def left_behind(template: Template) -> dict[str, int]:
    return dict(Counter(str(o["kind"]) for o in template.objects()))


# -- cloning ------------------------------------------------------------------------------------------


Replacements = list[tuple[str, str]]


def substitute(value: Any, replacements: Replacements) -> Any:
    """``value`` with every string (not keys) rewritten by ``replacements``, in order."""
    if isinstance(value, str):
        for old, new in replacements:
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {k: substitute(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, replacements) for v in value]
    return value


def creatable(obj: JSON) -> JSON:
    """What a client sends to create ``obj`` again: no status, no server-set metadata."""
    body = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("metadata", "status")}
    body["metadata"] = {k: copy.deepcopy(v) for k, v in obj["metadata"].items() if k in KEPT_METADATA}
    if obj["kind"] == "Pod":
        _drop_service_account_volume(body["spec"])
    return body


def _drop_service_account_volume(spec: JSON) -> None:
    spec["volumes"] = [v for v in spec.get("volumes") or [] if not v["name"].startswith(SERVICE_ACCOUNT_VOLUME_PREFIX)]
    for container in spec.get("containers") or []:
        container["volumeMounts"] = [
            m for m in container.get("volumeMounts") or [] if not m["name"].startswith(SERVICE_ACCOUNT_VOLUME_PREFIX)
        ]


def _uid(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


def _label(obj: Mapping[str, Any], key: str) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(key)


def _app_id_replacements(old_app_id: str, new_app_id: str) -> Replacements:
    """spark.app.id, and the local directory sparkop derives from it (the same hex as a UUID)."""

    def as_uuid(app_id: str) -> str:
        return "spark-" + str(uuid.UUID(hex=app_id.removeprefix("spark-")[:32]))

    return [(old_app_id, new_app_id), (as_uuid(old_app_id), as_uuid(new_app_id))]


@dataclass
class Clone:
    """A clone being seeded: the replacements that turn its template into it, grown as uids appear."""

    name: str
    template: Template
    node: str
    replacements: Replacements = field(default_factory=list)
    pod_uid: str = ""


async def seed_clone(kube: k8s.Kube, clone: Clone) -> None:
    """Create the clone's app, SparkDriver, ConfigMaps, Service and pod (parents first, for their
    uids), and the app's status. The SparkDriver's status waits for the pod to finish (finish_driver)."""
    t = clone.template
    clone.replacements = [(t.name, clone.name)]
    app = await kube._call("POST", kinds.SPARK_APPLICATIONS.path(NAMESPACE), body=_body(t.app, clone))
    clone.replacements.append((_uid(t.app), _uid(app)))
    driver = await kube._call("POST", kinds.SPARK_DRIVERS.path(NAMESPACE), body=_body(t.driver, clone))
    incarnation = int(t.driver["status"]["incarnation"])
    clone.replacements += [
        (_uid(t.driver), _uid(driver)),
        *_app_id_replacements(
            naming.spark_app_id(_uid(t.driver), incarnation), naming.spark_app_id(_uid(driver), incarnation)
        ),
    ]
    app_status = substitute(t.app["status"], clone.replacements)
    await asyncio.gather(
        kube.patch(kinds.SPARK_APPLICATIONS, NAMESPACE, clone.name, {"status": app_status}, subresource="status"),
        *(kube._call("POST", k8s.resource_of(o).path(NAMESPACE), body=_body(o, clone)) for o in t.others),
    )
    pod_body = _body(t.pod, clone)
    # Bound at once to a KWOK node, without the scheduler, and given the template's terminal status
    # straight away: KWOK would run it to the same end, but with 10,000 pods it finished fewer than
    # one a second on this machine. A pod already ended matches none of KWOK's stages.
    pod_body["spec"]["nodeName"] = clone.node
    pod = await kube._call("POST", k8s.PODS.path(NAMESPACE), body=pod_body)
    clone.pod_uid = _uid(pod)
    status = substitute(t.pod["status"], [*clone.replacements, (_uid(t.pod), clone.pod_uid)])
    await kube.patch(k8s.PODS, NAMESPACE, pod["metadata"]["name"], {"status": status}, subresource="status")


def _body(obj: JSON, clone: Clone) -> JSON:
    body: JSON = substitute(creatable(obj), clone.replacements)
    return body


async def finish_driver(kube: k8s.Kube, clone: Clone, pod: JSON) -> None:
    """The SparkDriver's status as sparkop wrote the template's, with the facts of the clone's pod."""
    t = clone.template
    status: JSON = substitute(t.driver["status"], [*clone.replacements, (_uid(t.pod), clone.pod_uid)])
    pod_status = pod.get("status") or {}
    facts = {
        "name": pod["metadata"]["name"],
        "uid": clone.pod_uid,
        "phase": pod_status.get("phase"),
        "nodeName": pod["spec"].get("nodeName"),
        "podIP": pod_status.get("podIP"),
        "startTime": pod_status.get("startTime"),
    }
    status["driverPod"] = {k: facts[k] for k in status.get("driverPod") or {}}
    terminated = _terminated(pod)
    termination = status.get("termination")
    if termination is not None and terminated is not None:
        for key in ("exitCode", "finishedAt", "reason"):
            if key in termination and key in terminated:
                termination[key] = terminated[key]
    driver_name = naming.driver_name(clone.name, int(t.driver["spec"]["attempt"]))
    await kube.patch(kinds.SPARK_DRIVERS, NAMESPACE, driver_name, {"status": status}, subresource="status")


def _terminated(pod: JSON) -> JSON | None:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated is not None:
            result: JSON = terminated
            return result
    return None


async def count(kube: k8s.Kube, resource: k8s.Resource, *, selector: str | None = None, page: int = 1000) -> int:
    """How many ``resource`` objects NAMESPACE holds, listed a page at a time: 50,000 pods listed whole
    are half a gigabyte of JSON, decoded at once."""
    total, token = 0, ""
    while True:
        query = [("limit", str(page))] + ([("continue", token)] if token else [])
        if selector:
            query.append(("labelSelector", selector))
        listing = await kube._call("GET", resource.path(NAMESPACE), query=query)
        total += len(listing.get("items") or [])
        token = str((listing.get("metadata") or {}).get("continue") or "")
        if not token:
            return total


async def wait_pods_finished(kube: k8s.Kube, expected: int, budget_seconds: float) -> float:
    """Until KWOK has run every driver pod to its end and the simulator removed every executor."""
    started = time.monotonic()
    unfinished = "status.phase!=Succeeded,status.phase!=Failed"
    driver_pods = f"{labels.SPARK_ROLE}={labels.ROLE_DRIVER}"
    executor_pods = f"{labels.SPARK_ROLE}={labels.ROLE_EXECUTOR}"
    async with asyncio.timeout(budget_seconds):
        while True:
            try:
                running = await kube.list(k8s.PODS, NAMESPACE, selector=driver_pods, fields=unfinished)
                executors = await kube.list(k8s.PODS, NAMESPACE, selector=executor_pods)
            except ApiException as error:
                if error.status != 504:
                    raise
                # Right after its restart the API server answers a list from etcd until its watch cache
                # is filled: 50,000 pods scanned for a field selector outlast its 60 s request timeout.
                log("seeding: the API server timed out listing the pods (its watch cache is filling); asking again")
                await asyncio.sleep(5)
                continue
            if not running and not executors:
                break
            log(f"seeding: {len(running)} driver pods not finished, {len(executors)} executor pods left")
            await asyncio.sleep(5)
    listed = await count(kube, k8s.PODS, selector=driver_pods)
    if listed < expected:
        raise RuntimeError(f"{listed} driver pods, expected {expected}")
    return time.monotonic() - started


async def seed(
    bench: BenchCluster, templates: Sequence[Template], apps: int, concurrency: int, path: str = "etcd"
) -> dict[str, Any]:
    """``apps`` clones of ``templates``, seeded by ``path`` (SEED_PATHS), then the cluster left to settle;
    the time, CPU by process, counts and fidelity of it."""
    nodes = bench.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").split()
    clones = [Clone(clone_name(i), templates[i % len(templates)], nodes[i % len(nodes)]) for i in range(apps)]
    meter = CpuMeter(bench)
    started = time.monotonic()
    if path == "etcd":
        figures = await seed_into_etcd(bench, templates, clones, concurrency, meter)
    elif path == "api":
        figures = await seed_through_api(bench, templates, clones, concurrency)
    else:
        raise ValueError(f"seeding path {path!r}: choose from {SEED_PATHS}")
    async with bench.client() as kube:
        counts = {r.kind: await count(kube, r) for r in (kinds.SPARK_APPLICATIONS, *OWNED_KINDS)}
        fidelity = {c.name: await fidelity_diff(kube, c) for c in (clones[0], clones[-1])}
    seeded = time.monotonic() - started
    log(f"seeding: {apps} apps seeded in {seeded:.0f}s; waiting for the cluster's controllers to settle")
    settle = await asyncio.to_thread(wait_settled, bench)
    _raise_if_a_component_died(bench)
    if path == "etcd":
        async with aiohttp.ClientSession() as session:
            etcd = etcd_seed.Etcd(_etcd_url(bench), session)
            # What anyone wrote once the clones were in: the controllers' answer to them (0 objects
            # when each clone is what they would have made), beside their own heartbeats (leases).
            figures["written_by_the_cluster_after_seeding"] = await etcd.written_since(figures.pop("last_revision"))
            figures["etcd_db_size_mib"] = round(await etcd.db_size_bytes() / 2**20, 1)
    total = time.monotonic() - started
    meter.sample()
    return {
        "path": path,
        "apps": apps,
        "concurrency_apps_in_flight": concurrency,
        **figures,
        "seeded_seconds": round(seeded, 1),
        "settle": settle,
        "total_seconds": round(total, 1),
        "seconds_per_1000_apps": round(seeded * 1000 / apps, 1),
        "object_counts": counts,
        "cpu_seconds_by_process": meter.by_process(),
        "fidelity_differences": fidelity,
    }


async def seed_through_api(
    bench: BenchCluster, templates: Sequence[Template], clones: Sequence[Clone], concurrency: int
) -> dict[str, Any]:
    """Each clone created by the bench's client, its driver pod bound and ended at once, then its
    SparkDriver's status written from that pod."""
    async with bench.client() as kube:
        started = time.monotonic()
        await bounded([partial(seed_clone, kube, c) for c in clones], concurrency)
        created = time.monotonic() - started
        log(f"seeding: {len(clones)} apps created in {created:.0f}s; waiting for their driver pods to finish")
        waited = await wait_pods_finished(kube, len(templates) + len(clones), budget_seconds=1800)
        driver_pods = await kube.list(k8s.PODS, NAMESPACE, selector=f"{labels.SPARK_ROLE}={labels.ROLE_DRIVER}")
        pods = {str(p["metadata"]["name"]): _typed(k8s.PODS, p) for p in driver_pods}
        status_started = time.monotonic()
        calls = [partial(finish_driver, kube, c, pods[_renamed(c.template.pod, c)]) for c in clones]
        await bounded(calls, concurrency)
        statuses = time.monotonic() - status_started
    per_app = len(list(templates[0].objects())) + 3  # its creates; the app's, pod's, SparkDriver's status
    return {
        "requests_per_app": per_app,
        "create_seconds": round(created, 1),
        "wait_pods_finished_seconds": round(waited, 1),
        "driver_status_seconds": round(statuses, 1),
        "requests_per_second": round(per_app * len(clones) / (created + statuses), 1),
    }


def _etcd_url(bench: BenchCluster) -> str:
    return f"http://{LOCALHOST}:{bench.cluster.ports.etcd_client}"


async def seed_into_etcd(
    bench: BenchCluster, templates: Sequence[Template], clones: Sequence[Clone], concurrency: int, meter: CpuMeter
) -> dict[str, Any]:
    """Each clone written straight into etcd (bench/etcd_seed.py), with the controller manager stopped:
    started again afterwards, its controllers list every clone before their first pass, as after any
    restart of it, so none of them acts on a Service before it has the Service's endpoints, or on a
    dependent before its owner. Every object of a clone is there at once, its statuses included."""
    shift = _seeding_shift(templates)
    rng = random.Random(0)
    async with (
        bench.client() as kube,
        stamping(kube, kinds.SPARK_APPLICATIONS, _clone_name_of, namespace=NAMESPACE, transform=_identity) as told,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session,
    ):
        etcd = etcd_seed.Etcd(_etcd_url(bench), session)
        stored = {t.name: await _stored_template(etcd, t, shift) for t in templates}
        meter.sample()
        await asyncio.to_thread(bench.cluster.stop, "controller-manager")
        started = time.monotonic()
        written: dict[str, list[int]] = {}
        transactions: list[int] = []

        async def put(index: int, clone: Clone) -> None:
            batches = etcd_seed.transactions(_clone_puts(stored[clone.template.name], clone, index, rng))
            revisions = [await etcd.txn(batch) for batch in batches]
            transactions.append(len(batches))
            if index == 0:
                written[clone.name] = revisions

        await bounded([partial(put, i, c) for i, c in enumerate(clones)], concurrency)
        put_seconds = time.monotonic() - started
        last_revision = await etcd.revision()
        # A watch opened before the puts (the operator's kind of watch, on the API server's watch
        # cache) is told of every clone's SparkApplication, as of one the API server wrote.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(60 + len(clones) / 100):
                await told.wait_for(len(clones))
        watched = told.count()
    log(f"seeding: {len(clones)} apps put into etcd in {put_seconds:.0f}s; starting the controller manager again")
    restarted = time.monotonic()
    # On this thread, not a worker's: a process started with die_with_parent dies with the thread that
    # started it (PR_SET_PDEATHSIG), and asyncio's worker threads end with its loop.
    bench.cluster.restart_controller_manager(without=CONTROLLERS_OFF)
    restart_seconds = time.monotonic() - restarted
    async with bench.client() as kube:
        waited = await wait_pods_finished(kube, len(templates) + len(clones), budget_seconds=1800)
        as_written = await stored_as_written(kube, clones[0], written[clones[0].name], shift)
    return {
        "etcd_transactions": sum(transactions),
        "etcd_transactions_per_app": round(sum(transactions) / len(clones), 2),
        "put_seconds": round(put_seconds, 1),
        "controller_manager_restart_seconds": round(restart_seconds, 1),
        "wait_pods_finished_seconds": round(waited, 1),
        "stored_as_the_api_server_would": as_written,
        "apps_a_running_watch_was_told_of": watched,
        "time_shift": str(shift),
        "last_revision": last_revision,
    }


def _clone_name_of(obj: JSON) -> str | None:
    name = str(obj["metadata"]["name"])
    return name if name.startswith(CLONE_PREFIX) else None


def _identity(obj: JSON) -> JSON:
    """What a watch that only counts objects keeps of each."""
    meta = obj["metadata"]
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}}


def _seeding_shift(templates: Sequence[Template]) -> timedelta:
    """How far every time of the templates moves in their clones: the newest template's creation to now."""
    created = max(
        datetime.fromisoformat(str(o["metadata"]["creationTimestamp"]).replace("Z", "+00:00"))
        for t in templates
        for o in t.objects()
    )
    return timedelta(seconds=int((datetime.now(UTC) - created).total_seconds()))


async def _stored_template(etcd: etcd_seed.Etcd, template: Template, shift: timedelta) -> etcd_seed.StoredTemplate:
    """``template`` ready to clone, once each of its objects was found under the key a clone's goes to."""
    objects = template.stored_objects()
    for obj in objects:
        key = etcd_seed.registry_key(obj)
        if await etcd.get(key) is None:
            raise RuntimeError(f"the API server does not keep {obj['kind']} {obj['metadata']['name']} under {key}")
    for service in (o for o in objects if o["kind"] == "Service"):
        # A cluster IP is the API server's to allocate (an IPAddress object each, and a repair loop
        # that reallocates one it does not find): only headless Services (Spark's driver Service) are
        # cloned into etcd.
        if service["spec"].get("clusterIP") not in (None, "None"):
            raise RuntimeError(f"{service['metadata']['name']} has a cluster IP: seed with --seed api")
    pod_status = template.pod.get("status") or {}
    if not template.pod["spec"].get("nodeName") or not pod_status.get("podIP"):
        raise RuntimeError(f"template {template.name}'s driver pod has no node or no IP: {pod_status}")
    old_app_id = _template_app_id(template)
    return etcd_seed.stored_template(
        template.name,
        objects,
        [old for old, _ in _app_id_replacements(old_app_id, old_app_id)],
        node=str(template.pod["spec"]["nodeName"]),
        ip=str(pod_status["podIP"]),
        shift=shift,
    )


def _template_app_id(template: Template) -> str:
    return naming.spark_app_id(_uid(template.driver), int(template.driver["status"]["incarnation"]))


def _clone_puts(
    stored: etcd_seed.StoredTemplate, clone: Clone, index: int, rng: random.Random
) -> list[tuple[str, str]]:
    """The clone's keys and values; its renames kept on ``clone`` for fidelity_diff."""
    t = clone.template
    news = etcd_seed.clone_renames(stored, clone.name, node=clone.node, ip=etcd_seed.pod_ip(index), rng=rng)
    incarnation = int(t.driver["status"]["incarnation"])
    new_app_id = naming.spark_app_id(news[_uid(t.driver)], incarnation)
    app_ids = _app_id_replacements(_template_app_id(t), new_app_id)
    news.update(app_ids)
    clone.replacements = [(t.name, clone.name), *((uid, news[uid]) for uid in stored.uids), *app_ids]
    clone.pod_uid = news[_uid(t.pod)]
    return etcd_seed.clone_puts(stored, news)


async def clone_objects(kube: k8s.Kube, clone: Clone) -> tuple[list[str], list[tuple[JSON, str, JSON]]]:
    """Each of ``clone``'s objects as the API server answers for it, beside its template's object and its
    name; and one difference for each that is missing."""
    missing: list[str] = []
    found: list[tuple[JSON, str, JSON]] = []
    for original in clone.template.objects():
        name = _renamed(original, clone)
        current = await kube.get(k8s.resource_of(original), NAMESPACE, name)
        if current is None:
            missing.append(f"{original['kind']} {name}: missing")
        else:
            found.append((original, name, current))
    return missing, found


async def stored_as_written(kube: k8s.Kube, clone: Clone, revisions: Sequence[int], shift: timedelta) -> list[str]:
    """Where what the API server answers for ``clone``'s objects differs from what it sets itself on a
    create: a uid of its own (the renamed one), the resourceVersion of the revision that wrote it (one
    per object of a resource), creationTimestamp (the template's, moved by ``shift``) and generation."""
    uids = dict(clone.replacements)
    differences, found = await clone_objects(kube, clone)
    for original, name, current in found:
        meta, template_meta = current["metadata"], original["metadata"]
        created = etcd_seed.shift_times(f'"{template_meta["creationTimestamp"]}"', shift).strip('"')
        expected = {
            "uid": uids[_uid(original)],
            "creationTimestamp": created,
            "generation": template_meta.get("generation"),
        }
        for key, value in expected.items():
            if meta.get(key) != value:
                differences.append(f"{original['kind']} {name}: {key} {meta.get(key)!r}, expected {value!r}")
        if int(meta["resourceVersion"]) not in revisions:
            differences.append(
                f"{original['kind']} {name}: resourceVersion {meta['resourceVersion']} not in {revisions}"
            )
    return differences


def _raise_if_a_component_died(bench: BenchCluster) -> None:
    for name, record in bench.cluster.state.processes.items():
        if not procs.is_alive(record.pid):
            raise RuntimeError(f"{name} exited while seeding; its log's end:\n{procs.log_tail(Path(record.log))}")


@dataclass
class CpuMeter:
    """CPU seconds each devcluster process and the bench's own used since the meter was made, a
    process started again (the controller manager) counted across its restart: ``sample`` before
    stopping one and after, and at the end."""

    bench: BenchCluster
    used: dict[str, float] = field(default_factory=dict)
    last: dict[str, tuple[int, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.last = self._read()
        self.used = dict.fromkeys(self.last, 0.0)

    def _read(self) -> dict[str, tuple[int, float]]:
        read = {name: (pid, cpu_seconds(pid)) for name, pid in self.bench.component_pids().items()}
        read["bench client"] = (os.getpid(), _self_cpu())
        return read

    def sample(self) -> None:
        for name, (pid, cpu) in self._read().items():
            before = self.last.get(name)
            # A process started since the last sample used all its CPU since then.
            self.used[name] = self.used.get(name, 0.0) + (cpu - before[1] if before and before[0] == pid else cpu)
            self.last[name] = (pid, cpu)

    def by_process(self) -> dict[str, float]:
        return {k: round(v, 1) for k, v in sorted(self.used.items(), key=lambda kv: -kv[1])}


def wait_settled(
    bench: BenchCluster, *, share: float = SETTLE_SHARE, window: float = SETTLE_WINDOW_S, timeout: float = 1800
) -> dict[str, Any]:
    """Until each of SETTLED_COMPONENTS used under ``share`` of a core over ``window`` seconds: the
    controllers done with the clones, so that what follows measures the operator. Their rates over
    the last window, and the seconds it took (None: not within ``timeout``, measured anyway)."""
    started = time.monotonic()
    samples: list[tuple[float, dict[str, float]]] = []
    rates: dict[str, float] = {}
    while time.monotonic() - started < timeout:
        now = time.monotonic()
        samples.append((now, bench.component_cpu()))
        while len(samples) > 1 and now - samples[1][0] >= window:
            samples.pop(0)
        first_t, first = samples[0]
        if now - first_t >= window:
            last = samples[-1][1]
            rates = {n: round((last.get(n, 0.0) - first.get(n, 0.0)) / (now - first_t), 3) for n in SETTLED_COMPONENTS}
            if all(0 <= r < share for r in rates.values()):
                return {"seconds": round(now - started, 1), "cpu_share_last_window": rates}
        time.sleep(1.0)
    log(f"the cluster did not settle within {timeout:.0f}s ({rates}); measuring anyway")
    return {"seconds": None, "cpu_share_last_window": rates}


def _self_cpu() -> float:
    usage = getrusage(RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _renamed(obj: JSON, clone: Clone) -> str:
    return str(substitute(obj["metadata"]["name"], clone.replacements))


# Fields that differ between any two runs of the same app: times, addresses, server-set metadata.
VOLATILE: Final = (
    "metadata.uid",
    "metadata.resourceVersion",
    "metadata.creationTimestamp",
    "metadata.managedFields",
    "Time",
    "At",
    "startTime",
    "podIP",
    "hostIP",
    "nodeName",
    "data.spark.properties",  # spark.app.submitTime
)


async def fidelity_diff(kube: k8s.Kube, clone: Clone) -> list[str]:
    """Paths where the clone's objects, renamed back, differ from its template's (volatile fields
    left out): what the operator would see that the real finished app did not have."""
    back = [(new, old) for old, new in reversed(clone.replacements)]
    back.append((clone.pod_uid, _uid(clone.template.pod)))
    differences, found = await clone_objects(kube, clone)
    for original, _name, current in found:
        seen = substitute(_typed(k8s.resource_of(original), current), back)
        expected = copy.deepcopy(original)
        if original["kind"] == "Pod":  # the ServiceAccount plugin's volume has a random name
            _drop_service_account_volume(expected["spec"])
            _drop_service_account_volume(seen["spec"])
        differences += [f"{original['kind']} {d}" for d in _diff(expected, seen, "") if not _volatile(d)]
    return differences


def _volatile(path: str) -> bool:
    # A field named "time" is one (an incarnation's, the last error's): a clone's times are moved.
    return any(v in path for v in VOLATILE) or path.endswith(".time")


def _diff(a: Any, b: Any, path: str) -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _diff(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _diff(x, y, f"{path}[{i}]")
    elif a != b:
        yield path


# -- the operator over N finished apps ----------------------------------------------------------------


def wait_started(
    operator: Operator, timeout: float = 600, on_first: Callable[[], None] = lambda: None
) -> tuple[float, float]:
    """Seconds from start until /readyz first says ready, and until the reconcile counter first
    moves (``on_first`` is called then), watched together: a controller starts once its own caches
    have listed, which may be well before every cache has (readiness)."""
    deadline = operator.started + timeout
    ready: float | None = None
    first: float | None = None
    while ready is None or first is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the operator was not ready or reconciled nothing within {timeout:.0f}s")
        operator._check_alive()
        now = time.monotonic() - operator.started
        if first is None and sum(operator.reconciles().values()) > 0:
            first = now
            on_first()
        if ready is None and operator.ready():
            ready = now
        time.sleep(0.05)
    return ready, first


def operator_start(bench: BenchCluster, log_name: str, args: tuple[str, ...]) -> tuple[Operator, dict[str, Any]]:
    """Start the operator and follow it to idle: its start's figures and the writes it made."""
    since = now_utc()
    api_cpu = apiserver_cpu(bench)
    api_cpu_to_first: list[float] = []
    operator = Operator(bench, args=args, log_name=log_name).start()
    ready, first = wait_started(operator, on_first=lambda: api_cpu_to_first.append(apiserver_cpu(bench) - api_cpu))
    idle = operator.wait_idle(timeout=1200)
    stats = operator.stats()
    reconciles = operator.reconciles()
    writes = bench.writes_since(since)
    return operator, {
        "ready_seconds": round(ready, 2),
        "first_reconcile_seconds": round(first, 2),
        "apiserver_cpu_seconds_to_first_reconcile": round(api_cpu_to_first[0], 2),
        "idle_seconds": round(idle, 2),
        "cpu_seconds": round(stats.cpu_seconds, 2),
        "rss_mib": round(stats.rss_mib, 1),
        "peak_rss_mib": round(stats.peak_rss_mib, 1),
        "reconciles": {k: int(v) for k, v in reconciles.items()},
        "writes": len(writes),
        "writes_by_kind": dict(Counter(_write_kind(w) for w in writes).most_common()),
        "first_writes": [_write_line(w) for w in writes[:WRITES_LISTED]],
    }


def apiserver_cpu(bench: BenchCluster) -> float:
    """The API server's CPU seconds so far."""
    return bench.component_cpu()["kube-apiserver"]


def apiserver_idle_rate(bench: BenchCluster, seconds: float = 2.0) -> float:
    """The API server's CPU seconds per second with no client of ours at work (its own controllers,
    KWOK's leases, its Go GC): taken off a start's and a floor's figures, whose windows differ."""
    before = apiserver_cpu(bench)
    time.sleep(seconds)
    return (apiserver_cpu(bench) - before) / seconds


def _net_of_idle(cpu: float | None, rate: float | None, seconds: float) -> float | None:
    return cpu if cpu is None or rate is None else round(cpu - rate * seconds, 2)


def restart_floor(bench: BenchCluster) -> dict[str, Any]:
    """What no start of the operator can beat on this machine, measured on the same cluster: the
    interpreter importing the operator, and a bare client's LISTs of every SparkApplication and
    SparkDriver at once (what the apps controller must have before its first pass), decoded as the
    operator decodes them."""
    started = time.monotonic()
    subprocess.run([operator_python(), "-c", "import sparkop.operator"], check=True, cwd=operator_root())
    imports = time.monotonic() - started

    async def listing() -> tuple[float, float, list[list[JSON]]]:
        async with bench.client() as kube:
            listed_kinds = (kinds.SPARK_APPLICATIONS, kinds.SPARK_DRIVERS)
            for _ in range(60):
                started, api_cpu = time.monotonic(), apiserver_cpu(bench)
                try:
                    listed = await asyncio.gather(*(kube.list(kind, None) for kind in listed_kinds))
                except ApiException as exc:
                    if exc.status != 429:  # the API server's cache of a kind still filling: soon served
                        raise
                    await asyncio.sleep(1)
                    continue
                return time.monotonic() - started, apiserver_cpu(bench) - api_cpu, listed
            raise TimeoutError("the API server kept answering 429 to the listing")

    seconds, api_cpu, listed = asyncio.run(listing())
    return {
        "import_seconds": round(imports, 2),
        "list_seconds": round(seconds, 2),
        "apiserver_cpu_seconds": round(api_cpu, 2),
        "objects_listed": sum(len(items) for items in listed),
    }


def _write_kind(event: Mapping[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
    return f"{event.get('verb')} {ref.get('resource')}{sub}"


def _write_line(event: Mapping[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    code = (event.get("responseStatus") or {}).get("code")
    return f"{_write_kind(event)} {ref.get('namespace')}/{ref.get('name')} -> {code}"


def idle_cpu(operator: Operator, seconds: float) -> dict[str, float]:
    before = operator.stats()
    time.sleep(seconds)
    after = operator.stats()
    return {
        "idle_window_s": seconds,
        "idle_cpu_seconds_per_minute": round((after.cpu_seconds - before.cpu_seconds) * 60 / seconds, 3),
        "rss_mib": round(after.rss_mib, 1),
        "peak_rss_mib": round(after.peak_rss_mib, 1),
    }


@dataclass
class ProfiledOperator(Operator):
    """The operator under cProfile (py-spy cannot read another process's memory in every sandbox);
    the profile is written when it stops. cProfile slows it down: its figures are not the restart's."""

    profile_out: Path = Path("operator.prof")

    def interpreter_args(self) -> list[str]:
        return ["-m", "cProfile", "-o", str(self.profile_out), *super().interpreter_args()]


def profile_restart(bench: BenchCluster, out: Path, args: tuple[str, ...], top: int = 5) -> dict[str, Any]:
    """A restart under cProfile: seconds to idle (slowed by the profiler) and the top functions by
    their own time and by cumulative time."""
    operator = ProfiledOperator(bench, args=args, log_name="profiled-operator.log", profile_out=out)
    operator.start()
    try:
        idle = operator.wait_idle(timeout=1200)
    finally:
        operator.stop()
    return {
        "profile": str(out),
        "start_to_idle_profiled_s": round(idle, 2),
        **top_functions(out, top),
    }


@dataclass
class MemoryTracedOperator(Operator):
    """The operator under tracemalloc (bench/traced_operator.py): :meth:`snapshot` has it write what it
    holds, by the line that allocated it. Tracing slows it and adds its own memory: its RSS is not the
    operator's."""

    snapshot_out: Path = Path("operator.snapshot")

    def interpreter_args(self) -> list[str]:
        return ["-X", "tracemalloc=1", str(Path(__file__).parent / "traced_operator.py")]

    def environment(self) -> dict[str, str]:
        # A script's folder, not the working directory, leads the import path: the checkout measured goes first.
        return {**os.environ, "SPARKOP_MEMORY_SNAPSHOT": str(self.snapshot_out), "PYTHONPATH": str(operator_root())}

    def snapshot(self, timeout: float = 300) -> Path:
        self.snapshot_out.unlink(missing_ok=True)
        assert self.process is not None, "the operator was not started"
        self.process.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + timeout
        while not self.snapshot_out.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"no memory snapshot within {timeout:.0f}s")
            time.sleep(0.2)
        return self.snapshot_out


def memory_snapshot(bench: BenchCluster, out: Path, args: tuple[str, ...], apps: int, top: int = 15) -> dict[str, Any]:
    """One more start, under tracemalloc, followed to idle: what the operator holds then, by the
    lines and the files that allocated it, in bytes per app."""
    operator = MemoryTracedOperator(bench, args=args, log_name="traced-operator.log", snapshot_out=out)
    operator.start()
    try:
        operator.wait_idle(timeout=1800)
        rss = operator.stats().rss_mib
        snapshot = tracemalloc.Snapshot.load(str(operator.snapshot()))
    finally:
        operator.stop()
    return {"snapshot": str(out), "rss_mib_traced": round(rss, 1), **held_by_site(snapshot, apps, top)}


def held_by_site(snapshot: tracemalloc.Snapshot, apps: int, top: int) -> dict[str, Any]:
    def site(frame: tracemalloc.Frame) -> str:
        return frame.filename.removeprefix(str(ROOT) + "/") + (f":{frame.lineno}" if frame.lineno else "")

    def ranked(key: str) -> list[str]:
        stats = snapshot.statistics(key)[:top]
        return [
            f"{s.size / 2**20:.1f} MiB ({round(s.size / apps)} B/app, {s.count} blocks) {site(s.traceback[0])}"
            for s in stats
        ]

    total = sum(s.size for s in snapshot.statistics("filename"))
    return {"traced_mib": round(total / 2**20, 1), "by_line": ranked("lineno"), "by_file": ranked("filename")}


def top_functions(profile: Path, top: int = 5) -> dict[str, list[str]]:
    """The functions with the most own time (waiting in epoll left out: that is idle), and sparkop's
    own functions with the most cumulative time."""
    entries: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    entries = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]

    def where(key: tuple[str, int, str]) -> str:
        path, line, function = key
        shown = Path(path).relative_to(ROOT) if path.startswith(str(ROOT)) else Path(path).name
        return f"{function} ({shown}:{line})"

    def ranked(column: int, keep: Callable[[str], bool]) -> list[str]:
        rows = sorted(((k, v) for k, v in entries.items() if keep(k[0] + k[2])), key=lambda kv: -kv[1][column])
        return [f"{where(k)}: {v[column]:.2f}s" for k, v in rows[:top]]

    ours = str(ROOT) + "/"
    return {
        "top_own_time": ranked(2, lambda name: "epoll" not in name and "select" not in name),
        "top_cumulative_sparkop": ranked(
            3, lambda name: name.startswith(ours) and "/.venv/" not in name and "__main__" not in name
        ),
    }


# -- the run ------------------------------------------------------------------------------------------


def measure_scale(
    name: str,
    apps: int = 10_000,
    *,
    concurrency: int = 48,
    idle_seconds: float = 30,
    nodes: int = 4,
    profile: Path | None = None,
    memory: Path | None = None,
    restarts: int = RESTARTS,
    seed_path: str = "etcd",
    terminated_pod_gc_threshold: int = TERMINATED_POD_GC_THRESHOLD,
) -> dict[str, Any]:
    """Seed ``apps`` finished apps on a devcluster of its own, then measure the operator over them:
    ``restarts`` restarts, each followed by the floor measured beside it (the floor itself moves by
    seconds within minutes here, so one restart against one floor says little)."""
    settings = ScaleSettings(
        terminated_pod_gc_threshold=terminated_pod_gc_threshold,
        etcd_quota_bytes=ETCD_QUOTA_BYTES,
        apiserver_memory_limit=APISERVER_MEMORY_LIMIT,
    )
    with BenchCluster.up(name, nodes=nodes, namespaces=[NAMESPACE], scale=settings) as bench:

        async def prepare() -> tuple[list[Template], dict[str, Any]]:
            async with bench.client() as kube:
                log("templates: running a few apps to completion with the operator")
                templates = await run_templates(bench, kube)
            log(f"seeding ({seed_path}): {apps} clones of {[t.name for t in templates]}, {concurrency} apps in flight")
            return templates, await seed(bench, templates, apps, concurrency, seed_path)

        templates, seeding = asyncio.run(prepare())
        log(f"seeding: {seeding['total_seconds']}s, {seeding['object_counts']}")
        operator_args: tuple[str, ...] = ()
        log("synced: starting the operator over them")
        operator, synced = operator_start(bench, "synced-operator.log", operator_args)
        try:
            log(f"synced: idle after {synced['idle_seconds']}s; idle CPU over {idle_seconds:.0f}s")
            steady = idle_cpu(operator, idle_seconds)
        finally:
            operator.stop()
        rounds: list[dict[str, Any]] = []
        restarts = max(1, restarts)
        for n in range(restarts):
            log(f"restart {n + 1} of {restarts}: a new operator")
            idle_rate = apiserver_idle_rate(bench)
            operator, figures = operator_start(bench, f"restart-operator-{n + 1}.log", operator_args)
            figures["apiserver_idle_cpu_per_second"] = round(idle_rate, 3)
            operator.stop()
            log("restart floor: the interpreter's start, and a bare client listing the custom objects")
            figures["floor"] = restart_floor(bench)
            rounds.append(figures)
        restart = restart_summary(rounds)
        if profile is not None:
            log(f"profile: one more start, under cProfile, into {profile}")
            restart["profile"] = profile_restart(bench, profile, operator_args)
        if memory is not None:
            log(f"memory: one more start, under tracemalloc, its snapshot at idle into {memory}")
            restart["memory"] = memory_snapshot(bench, memory, operator_args, apps)
    return {
        "apps": apps,
        "operator_mode": "cluster-wide (no -n), as a real install",
        "cluster": {**asdict(settings), "controllers_off_after_seeding": list(CONTROLLERS_OFF)},
        "left_behind_per_finished_app": {t.name: left_behind(t) for t in templates},
        "seeding": seeding,
        "steady": steady,
        "synced": synced,
        "restart": restart,
        "targets": {"rss_mib": 250 * 1e6 / 2**20, "first_reconcile_s": 5, "idle_s": 30, "writes": 0},
    }


def floor_seconds(floor: Mapping[str, Any]) -> float:
    """The floor's whole: importing the operator, then listing what its first pass needs."""
    total: float = floor["import_seconds"] + floor["list_seconds"]
    return round(total, 2)


def over_floor(figures: Mapping[str, Any]) -> float:
    """Seconds from a start to its first reconcile beyond the floor measured beside it."""
    first: float = figures["first_reconcile_seconds"]
    return round(first - floor_seconds(figures["floor"]), 2)


def restart_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round whose distance from its floor is the median's (its figures, writes and floor), with
    every round's first reconcile, floor and distance beside it. Writes are every round's."""
    ranked = sorted(rounds, key=over_floor)
    summary = dict(ranked[(len(ranked) - 1) // 2])
    summary["writes"] = sum(r["writes"] for r in rounds)
    summary["rounds"] = [
        {
            "first_reconcile_seconds": r["first_reconcile_seconds"],
            "floor_seconds": floor_seconds(r["floor"]),
            "over_floor_seconds": over_floor(r),
            # The API server's CPU for the same two listings, in the start (import included) and in
            # its floor, its idle rate taken off: where a round's distance comes from when the two
            # differ by seconds.
            "apiserver_cpu_seconds": _net_of_idle(
                r.get("apiserver_cpu_seconds_to_first_reconcile"),
                r.get("apiserver_idle_cpu_per_second"),
                r["first_reconcile_seconds"],
            ),
            "floor_apiserver_cpu_seconds": _net_of_idle(
                r["floor"].get("apiserver_cpu_seconds"),
                r.get("apiserver_idle_cpu_per_second"),
                r["floor"]["list_seconds"],
            ),
            "apiserver_idle_cpu_per_second": r.get("apiserver_idle_cpu_per_second"),
            "idle_seconds": r["idle_seconds"],
            "writes": r["writes"],
        }
        for r in rounds
    ]
    return summary


def table(result: Mapping[str, Any]) -> str:
    s, y, r, idle = result["seeding"], result["synced"], result["restart"], result["steady"]
    rows: list[tuple[str, str]] = [
        ("finished apps (with their SparkDrivers, pods, ConfigMaps, Services)", str(result["apps"])),
        _seeding_row(s),
        ("objects", ", ".join(f"{k} {v}" for k, v in s["object_counts"].items())),
        ("synced: RSS (target <= 238 MiB = 250 MB)", f"{idle['rss_mib']} MiB (peak {idle['peak_rss_mib']})"),
        ("synced: idle CPU", f"{idle['idle_cpu_seconds_per_minute']} CPU-s/min"),
        ("first start: ready / first reconcile / idle", _start(y)),
        ("first start: writes", str(y["writes"])),
        ("restart: ready / first reconcile / idle (<= 5 s / <= 30 s)", _start(r)),
        ("restart: CPU / peak RSS", f"{r['cpu_seconds']} CPU-s / {r['peak_rss_mib']} MiB"),
        ("restart floor: imports + a bare client's LIST of the custom objects", _floor(r)),
        ("restart: writes (target 0)", str(r["writes"]) + (f": {r['first_writes'][:3]}" if r["writes"] else "")),
    ]
    for line in (r.get("profile") or {}).get("top_cumulative_sparkop", []):
        rows.append(("restart under cProfile: top cumulative", line))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def _seeding_row(s: Mapping[str, Any]) -> tuple[str, str]:
    settled = (s.get("settle") or {}).get("seconds")
    if s.get("path", "api") == "etcd":
        return (
            "seeding into etcd: seeded (puts) / settled after / per 1,000 apps",
            f"{s['seeded_seconds']} ({s['put_seconds']}) / {settled} / {s['seconds_per_1000_apps']} s",
        )
    if "seeded_seconds" not in s:  # recorded before the seeding paths
        return (
            "seeding: total / creates / driver statuses",
            f"{s['total_seconds']} / {s['create_seconds']} / "
            f"{s['driver_status_seconds']} s ({s['requests_per_second']} req/s)",
        )
    return (
        "seeding through the API server: seeded / settled after / per 1,000 apps",
        f"{s['seeded_seconds']} / {settled} / {s['seconds_per_1000_apps']} s ({s['requests_per_second']} req/s)",
    )


def _floor(restart: Mapping[str, Any]) -> str:
    floor = restart.get("floor")
    if not floor:
        return "not measured"
    return f"{floor['import_seconds']} s + {floor['list_seconds']} s ({floor['objects_listed']} objects)"


def _start(figures: Mapping[str, Any]) -> str:
    return f"{figures['ready_seconds']} / {figures['first_reconcile_seconds']} / {figures['idle_seconds']} s"


def main(argv: list[str] | None = None, run: Callable[..., dict[str, Any]] = measure_scale) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=48, help="clones being seeded at once")
    parser.add_argument(
        "--seed",
        choices=SEED_PATHS,
        default="etcd",
        help="write the clones straight into etcd (default), or create them through the API server (slow)",
    )
    parser.add_argument(
        "--terminated-pod-gc-threshold",
        type=int,
        default=TERMINATED_POD_GC_THRESHOLD,
        help="the controller manager's (0, the default here: off, every finished pod kept; Kubernetes' is 12500)",
    )
    parser.add_argument("--idle-seconds", type=float, default=30)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "scale.json"))
    parser.add_argument("--profile", type=Path, help="also profile a restart with cProfile into this file")
    parser.add_argument(
        "--memory-snapshot", type=Path, help="also start once under tracemalloc, its snapshot at idle into this file"
    )
    parser.add_argument("--restarts", type=int, default=RESTARTS, help="restarts, each beside its floor")
    args = parser.parse_args(argv)
    result = run(
        f"bench-scale-{os.getpid()}",
        args.apps,
        concurrency=args.concurrency,
        idle_seconds=args.idle_seconds,
        profile=args.profile,
        memory=args.memory_snapshot,
        restarts=args.restarts,
        seed_path=args.seed,
        terminated_pod_gc_threshold=args.terminated_pod_gc_threshold,
    )
    write_result(Path(args.out), result)
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
