"""The commands for daily use: ``sparkop list``, ``logs``, ``events``, ``suspend`` and ``resume``.

They take kubectl's flags (--kubeconfig, --context, -n defaulting to the context's namespace) and
find every object the way the controllers do: SparkDrivers by their app label and controller owner,
pods by their SparkDriver, incarnation, Spark role and executor id labels, never by guessing a name.
An app is looked for in every group the cluster serves (sparkop's, and kubeflow's where the operator
runs with --kubeflow-api); where one name is taken in both, ``GROUP/NAME`` (``sparkoperator.k8s.io/pi``)
says which. What to show and which pod to read is decided by pure functions below, so it can be tested
without a cluster.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import aiohttp
import yaml
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException

from sparkop.core import kube as k8s
from sparkop.core.jsontypes import JSON
from sparkop.core.owners import controller_of
from sparkop.core.times import parse_time
from sparkop.domain import kinds, labels, naming
from sparkop.domain.kinds import API
from sparkop.driver_controller.submission import EXECUTOR_CONTAINER

LAST_ERROR_WIDTH = 60
# kubectl's own default-container annotation: a pod template may name the container to read.
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"


class Unavailable(Exception):
    """What the user asked for is not there; the message says what is and what to run instead."""


@dataclass(frozen=True)
class Target:
    """Where a command points: kubectl's connection flags, resolved."""

    kubeconfig: str | None
    context: str | None
    namespace: str | None  # None: the context's namespace


@dataclass(frozen=True)
class PodChoice:
    """Which pod of an app: the driver pod of run ``run`` (None: the current), its incarnation
    ``incarnation`` (None: the current), or that run's executor of Spark executor id ``executor``."""

    run: int | None = None
    incarnation: int | None = None
    executor: str | None = None


# ---------------------------------------------------------------------------------------------
# pure: formatting


def human_duration(seconds: float) -> str:
    """kubectl's duration.HumanDuration (its AGE column), so both tables read alike."""
    total = int(seconds)
    if total < 0:
        return "0s"
    if total < 120:
        return f"{total}s"
    minutes = total // 60
    if minutes < 10:
        return f"{minutes}m" + (f"{total % 60}s" if total % 60 else "")
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h" + (f"{minutes % 60}m" if minutes % 60 else "")
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" + (f"{hours % 24}h" if hours % 24 else "")
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = divmod(hours // 24, 365)
        return f"{years}y" + (f"{days}d" if days else "")
    return f"{hours // (24 * 365)}y"


def _since(stamp: object, now: datetime) -> str:
    when = parse_time(stamp)
    return human_duration((now - when).total_seconds()) if when else "-"


def state_of(app: JSON) -> str:
    return str(((app.get("status") or {}).get("applicationState") or {}).get("state") or "NEW")


def run_duration(app: JSON, now: datetime) -> str:
    """How long the current (or last) run has taken: from its start to the app's finish, or to now
    while it runs. "-" before the first run starts."""
    status = app.get("status") or {}
    started = parse_time(status.get("lastSubmissionAttemptTime"))
    if started is None:
        return "-"
    finished = parse_time(status.get("terminationTime")) if state_of(app) in ("COMPLETED", "FAILED") else None
    return human_duration(((finished or now) - started).total_seconds())


def last_error(app: JSON, width: int = LAST_ERROR_WIDTH) -> str:
    """The app's last error on one line, cut to ``width``: "Reason: message"."""
    status = app.get("status") or {}
    error = status.get("lastError") or {}
    message = error.get("message") or (status.get("applicationState") or {}).get("errorMessage") or ""
    reason = error.get("reason") or ""
    line = " ".join((f"{reason}: {message}" if reason and message else reason or message).split())
    if not line:
        return "-"
    return line if len(line) <= width else line[: width - 3] + "..."


def render_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns three spaces apart, as kubectl prints them; the last is not padded."""
    table = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers) - 1)]
    lines = []
    for row in table:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("   ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


# The columns `sparkop list -o wide` adds.
WIDE_HEADERS: Final = ("SPARK", "DRIVER POD", "SPARK APP ID")


def group_of(app: JSON) -> str:
    return str(app.get("apiVersion") or labels.API_VERSION).rpartition("/")[0]


def list_headers(*, all_namespaces: bool, wide: bool, groups: bool = False) -> list[str]:
    """``groups``: a GROUP column, where apps of kubeflow's group are listed too."""
    headers = ["NAME", "STATE", "ATTEMPTS", "EXECUTORS", "DURATION", "AGE", "LAST ERROR"]
    if groups:
        headers.insert(1, "GROUP")
    if wide:
        headers[-1:-1] = WIDE_HEADERS  # LAST ERROR stays last: it is the column that may hold spaces
    if all_namespaces:
        headers.insert(0, "NAMESPACE")
    return headers


def list_row(app: JSON, now: datetime, *, all_namespaces: bool, wide: bool, groups: bool = False) -> list[str]:
    meta, status = app["metadata"], app.get("status") or {}
    row = [
        meta["name"],
        state_of(app),
        str(status.get("executionAttempts", 0)),
        str((status.get("executors") or {}).get("running", 0)),
        run_duration(app, now),
        _since(meta.get("creationTimestamp"), now),
    ]
    if wide:
        row += [
            str((app.get("spec") or {}).get("sparkVersion") or "-"),
            str((status.get("driverInfo") or {}).get("podName") or "-"),
            str(status.get("sparkApplicationId") or "-"),
        ]
    row.append(last_error(app))
    if groups:
        row.insert(1, group_of(app))
    if all_namespaces:
        row.insert(0, meta.get("namespace", ""))
    return row


def render_list(
    apps: Iterable[JSON], now: datetime, *, all_namespaces: bool, wide: bool = False, groups: bool | None = None
) -> str:
    """``sparkop list``'s table: kubectl get spark's columns plus the run's duration and last error;
    ``wide`` (``-o wide``) adds the Spark version, the driver pod and the Spark application id; a GROUP
    column when apps of kubeflow's group are among them (``groups`` says so instead, where later rows
    must line up: a watch)."""
    apps = list(apps)
    if groups is None:
        groups = any(group_of(app) != labels.GROUP for app in apps)
    ordered = sorted(apps, key=lambda a: (a["metadata"].get("namespace", ""), a["metadata"]["name"], group_of(a)))
    rows = [list_row(app, now, all_namespaces=all_namespaces, wide=wide, groups=groups) for app in ordered]
    return render_table(list_headers(all_namespaces=all_namespaces, wide=wide, groups=groups), rows)


def object_name(obj: JSON) -> str:
    """kubectl's ``-o name``: ``<kind>.<group>/<name>``, e.g. ``sparkapplication.sparkop.io/spark-pi``."""
    group = str(obj.get("apiVersion") or kinds.SPARK_APPLICATIONS.api_version).rpartition("/")[0]
    kind = str(obj.get("kind") or kinds.SPARK_APPLICATIONS.kind).lower()
    return f"{kind}.{group}/{obj['metadata']['name']}" if group else f"{kind}/{obj['metadata']['name']}"


def render_objects(apps: Sequence[JSON], output: str) -> str:
    """``-o json``/``-o yaml`` of a listing, as kubectl prints one: a v1 List of the objects as the API
    server sent them; ``-o name``: one name a line."""
    if output == "name":
        return "\n".join(object_name(app) for app in apps)
    listing = {"apiVersion": "v1", "items": list(apps), "kind": "List", "metadata": {"resourceVersion": ""}}
    return render_object(listing, output)


def render_object(obj: JSON, output: str) -> str:
    """One object in ``-o json|yaml|name``, as kubectl prints each one of a watch."""
    if output == "name":
        return object_name(obj)
    if output == "json":
        return json.dumps(obj, indent=4, ensure_ascii=False)
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True).rstrip("\n")


def app_reference(text: str) -> tuple[tuple[API, ...], str]:
    """(the groups to look in, the name) of an APP argument: ``NAME`` (every group), or ``GROUP/NAME``."""
    group, _, name = text.rpartition("/")
    if not group:
        return kinds.APIS, name
    apis = tuple(a for a in kinds.APIS if a.group == group)
    if not apis:
        known = ", ".join(a.group for a in kinds.APIS)
        raise Unavailable(f"{text!r}: {group!r} is not a group sparkop serves ({known}); write NAME or GROUP/NAME")
    return apis, name


def own_drivers(app: JSON, drivers: Iterable[JSON]) -> list[JSON]:
    """The SparkDrivers ``app`` controls, among those labelled with its name (an app of the same name in
    the other group labels its own alike)."""
    meta = app["metadata"]
    group, uid = group_of(app), meta.get("uid")
    return [d for d in drivers if controller_of(d, group, "SparkApplication", uid) is not None]


# ---------------------------------------------------------------------------------------------
# pure: which SparkDriver and pod `sparkop logs` reads


def _run_of(driver: JSON) -> int:
    try:
        return int(((driver.get("metadata") or {}).get("labels") or {}).get(labels.RUN, "0"))
    except ValueError:
        return 0


def _incarnation_of(pod: JSON) -> int:
    try:
        return int(((pod.get("metadata") or {}).get("labels") or {}).get(labels.INCARNATION, "0"))
    except ValueError:
        return 0


def choose_driver(app: JSON, drivers: Sequence[JSON], run: int | None = None) -> JSON:
    """The SparkDriver of run ``run`` of ``app`` (its sparkop.io/run label), by default the current
    one (status.currentDriver, else the newest run). ``drivers`` are those labelled with the app."""
    meta = app["metadata"]
    where = f"-n {meta['namespace']}"
    runs = sorted(_run_of(d) for d in drivers)
    if run is not None:
        chosen = next((d for d in drivers if _run_of(d) == run), None)
        if chosen is None:
            kept = ", ".join(map(str, runs)) or "none"
            raise Unavailable(
                f"SparkApplication {meta['name']!r} has no run {run} (runs kept: {kept}); "
                f"sparkop status {meta['name']} {where} lists them"
            )
        return chosen
    current = (app.get("status") or {}).get("currentDriver")
    chosen = next((d for d in drivers if d["metadata"]["name"] == current), None)
    if chosen is None and drivers:
        chosen = max(drivers, key=_run_of)
    if chosen is None:
        raise Unavailable(
            f"SparkApplication {meta['name']!r} has no run yet (state {state_of(app)}); "
            f"sparkop events {meta['name']} {where} says why"
        )
    return chosen


def choose_pod(
    driver: JSON, pods: Sequence[JSON], *, incarnation: int | None = None, executor: str | None = None
) -> JSON:
    """The driver pod (or, with ``executor``, the executor pod of that Spark executor id) of one
    incarnation of ``driver``, by default its current one. ``pods`` are those labelled with the
    SparkDriver."""
    name = driver["metadata"]["name"]
    current = int((driver.get("status") or {}).get("incarnation") or 0)
    role = labels.ROLE_EXECUTOR if executor is not None else labels.ROLE_DRIVER
    mine = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(labels.SPARK_ROLE) == role]
    if incarnation is None:
        incarnation = current or max((_incarnation_of(p) for p in mine), default=0)
        if incarnation == 0:
            phase = (driver.get("status") or {}).get("phase") or "Pending"
            raise Unavailable(f"SparkDriver {name!r} has no driver pod yet (phase {phase})")
    same = [p for p in mine if _incarnation_of(p) == incarnation]
    if executor is None:
        if same:
            return same[0]
        kept = sorted({_incarnation_of(p) for p in mine})
        raise Unavailable(
            f"SparkDriver {name!r} has no driver pod of incarnation {incarnation} "
            f"(current: {current}; pods kept: {', '.join(map(str, kept)) or 'none'})"
        )
    for pod in same:
        if pod["metadata"].get("labels", {}).get(labels.SPARK_EXEC_ID) == executor:
            return pod
    ids = sorted(
        {str(p["metadata"].get("labels", {}).get(labels.SPARK_EXEC_ID)) for p in same},
        key=lambda i: (len(i), i),
    )
    raise Unavailable(
        f"SparkDriver {name!r} incarnation {incarnation} has no executor {executor} "
        f"(executor ids: {', '.join(ids) or 'none'})"
    )


def log_container(pod: JSON) -> str | None:
    """The Spark container of a driver or executor pod: the one kubectl's default-container
    annotation names, else a driver pod's last container (Spark appends its own after the
    template's), else an executor pod's Spark container; None when the pod has only one."""
    annotated = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CONTAINER_ANNOTATION)
    if annotated:
        return str(annotated)
    containers = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or ()]
    if len(containers) <= 1:
        return None
    role = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.SPARK_ROLE)
    if role == labels.ROLE_DRIVER:
        return containers[-1]
    return EXECUTOR_CONTAINER if EXECUTOR_CONTAINER in containers else containers[0]


# ---------------------------------------------------------------------------------------------
# pure: `sparkop events`


def event_time(event: JSON) -> datetime:
    """When an event was last seen, as precisely as it says (eventTime has microseconds, the
    legacy timestamps whole seconds)."""
    series = event.get("series") or {}
    stamps = (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    )
    times = [t for t in (parse_time(s) for s in stamps) if t is not None]
    return max(times, default=datetime.min.replace(tzinfo=UTC))


def driver_names(app: JSON, drivers: Iterable[JSON]) -> set[str]:
    """Every SparkDriver the app has had that we can still name: those that exist and those its
    status remembers (a pruned run's events outlive it)."""
    status = app.get("status") or {}
    names = {d["metadata"]["name"] for d in drivers}
    names.update(str(a["driver"]) for a in status.get("attempts") or () if a.get("driver"))
    if status.get("currentDriver"):
        names.add(str(status["currentDriver"]))
    return names


def app_events(app: JSON, drivers: Iterable[JSON], events: Iterable[JSON]) -> list[JSON]:
    """The app's events and its SparkDrivers', oldest first. Events from before the app was
    created are left out: they are about an earlier object of the same name."""
    meta = app["metadata"]
    created = parse_time(meta.get("creationTimestamp"))
    names = driver_names(app, drivers)
    chosen = []
    for event in events:
        involved = event.get("involvedObject") or {}
        kind, name = involved.get("kind"), involved.get("name")
        if kind == "SparkApplication":
            if name != meta["name"] or (involved.get("uid") and meta.get("uid") and involved["uid"] != meta["uid"]):
                continue
        elif kind != "SparkDriver" or name not in names:
            continue
        if created is not None and event_time(event) < created:
            continue
        chosen.append(event)
    return sorted(chosen, key=lambda e: (event_time(e), e.get("metadata", {}).get("name", "")))


def render_events(events: Sequence[JSON], now: datetime) -> str:
    """kubectl events' columns: LAST SEEN (with the count), TYPE, REASON, OBJECT, MESSAGE."""
    rows = []
    for event in events:
        involved = event.get("involvedObject") or {}
        seen = human_duration((now - event_time(event)).total_seconds())
        count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
        if count > 1:
            first = parse_time(event.get("firstTimestamp")) or event_time(event)
            seen += f" (x{count} over {human_duration((now - first).total_seconds())})"
        message = " ".join(str(event.get("message") or event.get("note") or "").split())
        rows.append(
            [
                seen,
                str(event.get("type") or ""),
                str(event.get("reason") or ""),
                f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
                message,
            ]
        )
    return render_table(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], rows)


# ---------------------------------------------------------------------------------------------
# pure: `sparkop suspend|resume`


def suspension_patch(app: JSON, suspend: bool) -> JSON | None:
    """The merge patch that sets spec.suspend, or None when it already says so."""
    if bool((app.get("spec") or {}).get("suspend")) == suspend:
        return None
    return {"spec": {"suspend": suspend}}


def describe_suspension(app: JSON, suspend: bool, *, changed: bool) -> str:
    meta = app["metadata"]
    who = f"sparkapplication {meta['namespace']}/{meta['name']}"
    back = f"sparkop resume {meta['name']} -n {meta['namespace']}"
    state = state_of(app)
    if not changed:
        if suspend:
            return f"{who} is already suspended (state {state}); {back} starts a new run"
        return f"{who} is not suspended (state {state}); nothing to do"
    if suspend:
        current = (app.get("status") or {}).get("currentDriver")
        stopping = f"its run {current} is stopped and " if current and state not in ("COMPLETED", "FAILED") else ""
        return f"{who} suspended (was {state}): {stopping}no new run starts until {back}"
    return f"{who} resumed (was {state}): sparkop starts a new run"


# ---------------------------------------------------------------------------------------------
# the commands


def _app_selector(app_name: str) -> str:
    return f"{labels.APP}={naming.label_value(app_name)}"


async def find_app(kube: k8s.Kube, namespace: str, reference: str) -> JSON:
    """The SparkApplication ``reference`` (NAME or GROUP/NAME) names, in whichever served group has it."""
    apis, name = app_reference(reference)
    found = [app for api in apis if (app := await kube.get(api.applications, namespace, name)) is not None]
    if not found:
        raise Unavailable(f"no SparkApplication {name!r} in namespace {namespace!r}; sparkop list -n {namespace}")
    if len(found) > 1:
        named = " and ".join(f"{group_of(app)}/{name}" for app in found)
        raise Unavailable(f"SparkApplication {name!r} exists in two groups in {namespace!r}: say which, {named}")
    return found[0]


async def app_drivers(kube: k8s.Kube, app: JSON) -> list[JSON]:
    meta = app["metadata"]
    return own_drivers(
        app, await kube.list(kinds.SPARK_DRIVERS, meta["namespace"], selector=_app_selector(meta["name"]))
    )


@dataclass(frozen=True)
class ListOptions:
    """``sparkop list``'s kubectl flags: -A, -o, -l and -w."""

    all_namespaces: bool = False
    output: str | None = None  # None: the table
    selector: str | None = None
    watch: bool = False


async def _list(kube: k8s.Kube, target: Target, options: ListOptions) -> int:
    namespace = None if options.all_namespaces else (target.namespace or kube.namespace)
    listings = await _list_served(kube, namespace, options.selector)
    apps = [app for listing in listings.values() for app in listing.get("items") or []]
    table = options.output in (None, "wide")
    wide = options.output == "wide"
    # A watch's later rows line up with the table's columns: GROUP wherever kubeflow's group is served.
    groups = len(listings) > 1 if options.watch else None
    if apps:
        if table:
            print(render_list(apps, datetime.now(UTC), all_namespaces=options.all_namespaces, wide=wide, groups=groups))
        elif options.watch:  # kubectl get -w prints each object of the listing by itself, then each change
            for app in apps:
                print(render_object(app, str(options.output)))
        else:
            print(render_objects(apps, str(options.output)))
    elif options.output in ("json", "yaml") and not options.watch:
        print(render_objects([], options.output))  # kubectl prints the empty List, and nothing on stderr
    elif table:
        where = "any namespace" if namespace is None else f"namespace {namespace!r}"
        print(f"No SparkApplications in {where}.", file=sys.stderr)
    if not options.watch:
        return 0
    printer = _WatchPrinter(options, header=table and not apps, groups=bool(groups))
    try:
        async with asyncio.TaskGroup() as watches:  # one watch per served group, printed as they come
            for resource, listing in listings.items():
                version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
                watches.create_task(_watch(kube, resource, namespace, version, options.selector, printer))
    except* Unavailable as ended:
        raise ended.exceptions[0] from None
    return 0


async def _list_served(kube: k8s.Kube, namespace: str | None, selector: str | None) -> dict[k8s.Resource, JSON]:
    """The listing of SparkApplications of each group the API server serves: sparkop's (refused with
    how to install its CRDs where it is not served), and kubeflow's where the operator runs with
    --kubeflow-api."""
    listings: dict[k8s.Resource, JSON] = {}
    for api in kinds.APIS:
        try:
            listings[api.applications] = await kube.listing(api.applications, namespace, selector=selector)
        except ApiException as exc:
            if exc.status != 404:
                raise
            if api is kinds.SPARKOP_API:
                raise Unavailable(
                    "the API server does not serve sparkapplications.sparkop.io; install the CRDs: "
                    "sparkop crds --out crds && kubectl apply --server-side -f crds/"
                ) from None
    return listings


@dataclass
class _WatchPrinter:
    """Prints each change a watch of ``sparkop list -w`` sees, as kubectl get -w does: a table row (the
    header once, before the first row, where the listing printed none) or the object itself."""

    options: ListOptions
    header: bool
    groups: bool

    def print(self, app: JSON) -> None:
        if self.options.output not in (None, "wide"):
            print(render_object(app, str(self.options.output)), flush=True)
            return
        wide, everywhere = self.options.output == "wide", self.options.all_namespaces
        row = list_row(app, datetime.now(UTC), all_namespaces=everywhere, wide=wide, groups=self.groups)
        headers = list_headers(all_namespaces=everywhere, wide=wide, groups=self.groups)
        lines = render_table(headers, [row]).splitlines()
        print("\n".join(lines if self.header else lines[1:]), flush=True)
        self.header = False


async def _watch(
    kube: k8s.Kube,
    resource: k8s.Resource,
    namespace: str | None,
    version: str,
    selector: str | None,
    printer: _WatchPrinter,
) -> None:
    """kubectl get -w for one group's SparkApplications: each change, until Ctrl-C; a watch the server
    ends is started again from the last version seen."""
    while True:
        async for event in kube.watch(resource, namespace, version, selector=selector):
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                if obj.get("code") == 410:  # the version is too old to watch from: list again
                    listing = await kube.listing(resource, namespace, selector=selector)
                    version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
                    break
                raise Unavailable(f"the watch ended: {obj.get('message') or obj}")
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if event.get("type") != "BOOKMARK":
                printer.print(obj)


async def _logs(kube: k8s.Kube, target: Target, name: str, choice: PodChoice, reading: k8s.LogReading) -> int:
    namespace = target.namespace or kube.namespace
    app = await find_app(kube, namespace, name)
    driver = choose_driver(app, await app_drivers(kube, app), choice.run)
    selector = f"{labels.DRIVER}={naming.label_value(driver['metadata']['name'])}"
    pods = await kube.list(k8s.PODS, namespace, selector=selector)
    pod = choose_pod(driver, pods, incarnation=choice.incarnation, executor=choice.executor)
    pod_name = pod["metadata"]["name"]
    chosen = reading.container or log_container(pod)
    print(f"sparkop logs: pod {namespace}/{pod_name}" + (f", container {chosen}" if chosen else ""), file=sys.stderr)
    out = sys.stdout.buffer
    try:
        async for chunk in kube.pod_log(namespace, pod_name, replace(reading, container=chosen)):
            out.write(chunk)
            out.flush()
    except ApiException as exc:
        raise Unavailable(f"cannot read the log of pod {namespace}/{pod_name}: {_api_message(exc)}") from None
    return 0


async def _events(kube: k8s.Kube, target: Target, reference: str) -> int:
    namespace = target.namespace or kube.namespace
    app = await find_app(kube, namespace, reference)
    name = app["metadata"]["name"]
    drivers = await app_drivers(kube, app)
    of_app = await kube.list(
        k8s.EVENTS, namespace, fields=f"involvedObject.kind=SparkApplication,involvedObject.name={name}"
    )
    of_drivers = await kube.list(k8s.EVENTS, namespace, fields="involvedObject.kind=SparkDriver")
    events = app_events(app, drivers, [*of_app, *of_drivers])
    if not events:
        print(f"No events for SparkApplication {namespace}/{name} or its SparkDrivers.", file=sys.stderr)
        return 0
    print(render_events(events, datetime.now(UTC)))
    return 0


async def _suspend(kube: k8s.Kube, target: Target, reference: str, suspend: bool) -> int:
    namespace = target.namespace or kube.namespace
    app = await find_app(kube, namespace, reference)
    name = app["metadata"]["name"]
    api = kinds.api_of(str(app.get("apiVersion")), "SparkApplication") or kinds.SPARKOP_API
    patch = suspension_patch(app, suspend)
    if patch is not None and await kube.patch(api.applications, namespace, name, patch) is None:
        raise Unavailable(f"SparkApplication {name!r} in namespace {namespace!r} was deleted meanwhile")
    print(describe_suspension(app, suspend, changed=patch is not None))
    return 0


def _api_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return f"{exc.status} {exc.reason}" + (f": {message}" if message else "")


def run_command(command: str, target: Target, work: Callable[[k8s.Kube], Awaitable[int]]) -> int:
    """Run one command against the API server; every failure is one line on stderr, exit 1."""

    async def connected() -> int:
        kube = await k8s.Kube.connect(target.kubeconfig, target.context)
        try:
            return await work(kube)
        finally:
            await kube.close()

    try:
        if target.kubeconfig is not None and not Path(target.kubeconfig).expanduser().is_file():
            raise Unavailable(f"kubeconfig {target.kubeconfig} does not exist; pass the file kubectl uses")
        return asyncio.run(connected())
    except Unavailable as exc:
        problem = str(exc)
    except ConfigException as exc:
        problem = f"kubeconfig: {exc}; pass --kubeconfig FILE (and --context NAME) or set KUBECONFIG"
    except ApiException as exc:
        problem = f"the API server refused: {_api_message(exc)}"
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        problem = f"cannot reach the API server: {exc or type(exc).__name__}"
    except KeyboardInterrupt:
        return 130
    print(f"sparkop {command}: {problem}", file=sys.stderr)
    return 1


def list_main(target: Target, options: ListOptions) -> int:
    return run_command("list", target, lambda kube: _list(kube, target, options))


def logs_main(target: Target, name: str, pod: PodChoice, reading: k8s.LogReading) -> int:
    """The log of ``pod`` of app ``name``; ``reading``: which container (None: the Spark one) and what of it."""
    return run_command("logs", target, lambda kube: _logs(kube, target, name, pod, reading))


def events_main(target: Target, name: str) -> int:
    return run_command("events", target, lambda kube: _events(kube, target, name))


def suspend_main(target: Target, name: str, *, suspend: bool) -> int:
    return run_command("suspend" if suspend else "resume", target, lambda kube: _suspend(kube, target, name, suspend))
