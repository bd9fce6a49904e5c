"""Every write the operator makes for a few apps, in order: what each API request was for.

One devcluster, one operator; ``--apps`` apps (default 3) created at once and run to COMPLETED by the
simulator. Prints, per app, each write of the operator (the API server's audit log, sparkop's user
agent) with its time from the app's create, and the count by kind per app: the breakdown behind
throughput.py's "writes per app".

    .venv/bin/python bench/writes.py [--apps 3] [--executors 1] [--run-seconds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from harness import BenchCluster, Operator, app_manifest, log, now_utc, stamping
from throughput import _write_kind

from sparkop.core.informer import Informer
from sparkop.core.jsontypes import JSON
from sparkop.core.kube import Kube
from sparkop.core.resources import Resource
from sparkop.core.store import EventType
from sparkop.domain import kinds

NAMESPACE = "writes"


def _app_of(event: Mapping[str, Any], apps: list[str]) -> str:
    name = str((event.get("objectRef") or {}).get("name") or "")
    # Every object of an app is named after it (the SparkDriver, its pods, ConfigMaps, Services);
    # an Event's name is its object's, plus a suffix.
    return next((a for a in sorted(apps, key=len, reverse=True) if name.startswith(a)), "?")


def _time(event: Mapping[str, Any]) -> datetime:
    return datetime.fromisoformat(str(event["requestReceivedTimestamp"]).replace("Z", "+00:00"))


def _changed(old: Any, new: Any, path: str = "") -> list[str]:
    """The paths (a.b.c) where ``new`` differs from ``old``."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[str] = []
        for key in sorted({*old, *new}):
            out += _changed(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if old == new else [path]


@asynccontextmanager
async def status_changes(kube: Kube, resource: Resource, names: set[str]) -> AsyncIterator[list[str]]:
    """Each status change of the named objects, as a line: the time, the object, the fields changed."""
    lines: list[str] = []
    informer = Informer(kube, resource, namespace=NAMESPACE)

    def handler(_: EventType, obj: JSON, old: JSON | None) -> None:
        name = str(obj["metadata"]["name"])
        if name in names:
            fields = _changed((old or {}).get("status") or {}, obj.get("status") or {})
            if fields:
                lines.append(f"{time.monotonic():.3f} {resource.kind} {name}: {', '.join(fields)}")

    informer.add_handler(handler)
    task = asyncio.create_task(informer.run())
    try:
        await informer.wait_synced()
        yield lines
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _run(bench: BenchCluster, apps: int, executors: int, run_seconds: float, show: int) -> dict[str, Any]:
    names = [f"w{i}" for i in range(apps)]
    shown = set(names) | {f"{n}-1" for n in names}

    def completed(obj: JSON) -> str | None:
        state = ((obj.get("status") or {}).get("applicationState") or {}).get("state")
        return str(obj["metadata"]["name"]) if state == "COMPLETED" else None

    async with (
        bench.client() as kube,
        status_changes(kube, kinds.SPARK_APPLICATIONS, shown) as apps_changed,
        status_changes(kube, kinds.SPARK_DRIVERS, shown) as drivers_changed,
        stamping(kube, kinds.SPARK_APPLICATIONS, completed, namespace=NAMESPACE) as done,
    ):
        since, started = now_utc(), time.monotonic()
        manifests = [app_manifest(n, NAMESPACE, run_seconds=run_seconds, executors=executors) for n in names]
        await asyncio.gather(*(kube.create(m) for m in manifests))
        async with asyncio.timeout(300):
            await done.wait_for(apps)
        await asyncio.sleep(3)  # the last status changes reach the watches
    changes = sorted(apps_changed + drivers_changed)
    return {"since": since, "names": names, "changes": [_from(line, started) for line in changes]}


def _what_changed(line: str) -> tuple[str, str]:
    """A status change's kind and the top-level status fields it changed (a line of ``changes``)."""
    _, kind, _, changed = line.split(maxsplit=3)
    fields = sorted({f.split(".", 1)[0] for f in changed.split(", ")})
    return kind, ", ".join(fields)


def _from(line: str, started: float) -> str:
    at, rest = line.split(" ", 1)
    return f"{float(at) - started:8.3f}s  {rest}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=3)
    parser.add_argument("--executors", type=int, default=1)
    parser.add_argument("--run-seconds", type=float, default=2.0)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds to wait after the last COMPLETED")
    parser.add_argument("--show", type=int, default=5, help="apps whose writes are listed one by one")
    args = parser.parse_args(argv)
    with BenchCluster.up(f"bench-writes-{os.getpid()}", namespaces=[NAMESPACE]) as bench:
        operator = Operator(bench, (NAMESPACE,)).start()
        try:
            operator.wait_ready()
            run = asyncio.run(_run(bench, args.apps, args.executors, args.run_seconds, args.show))
            time.sleep(args.settle)  # what follows completion (executors, finalizers) is counted too
            operator.wait_idle(timeout=120)
        finally:
            operator.stop()
        writes = bench.writes_since(run["since"])
    names: list[str] = run["names"]
    by_app: dict[str, list[JSON]] = defaultdict(list)
    for event in writes:
        by_app[_app_of(event, names)].append(event)
    # The apps with the most writes first: where the average comes from.
    names = sorted(names, key=lambda n: -len(by_app[n]))
    listed = set(names[: args.show]) | {f"{n}-1" for n in names[: args.show]}
    totals: Counter[str] = Counter()
    for shown, name in enumerate(names):
        events = sorted(by_app[name], key=_time)
        start = _time(events[0]) if events else None
        if shown < args.show:
            print(f"\n{name}: {len(events)} writes")
        for event in events:
            ref = event.get("objectRef") or {}
            at = (_time(event) - start).total_seconds() if start else 0.0
            if shown < args.show:
                print(f"  {at:7.3f}s  {_write_kind(event):40s} {ref.get('name', '')}")
            totals[_write_kind(event)] += 1
    print(f"\nstatus changes of those {args.show} apps, as a watch saw them (time from the creates):")
    for line in run["changes"]:
        if line.split()[2].rstrip(":") in listed:
            print(f"  {line}")
    print(f"\nstatus writes of all {len(names)} apps by what they changed (top-level fields), per app:")
    for (kind, fields), count in Counter(_what_changed(line) for line in run["changes"]).most_common():
        print(f"  {count / len(names):5.2f}  {kind}: {fields}")
    print(f"\nper app ({len(names)} apps, {len(writes) / len(names):.2f} writes each):")
    for kind, count in totals.most_common():
        print(f"  {count / len(names):5.2f}  {kind}")
    log(f"{len(writes)} writes, {len(writes) / len(names):.2f} per app")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
