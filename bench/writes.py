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
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from harness import BenchCluster, Operator, app_manifest, log, now_utc, stamping
from throughput import _write_kind

from core.jsontypes import JSON
from domain import kinds

NAMESPACE = "writes"


def _app_of(event: Mapping[str, Any], apps: list[str]) -> str:
    name = str((event.get("objectRef") or {}).get("name") or "")
    # Every object of an app is named after it (the SparkDriver, its pods, ConfigMaps, Services);
    # an Event's name is its object's, plus a suffix.
    return next((a for a in sorted(apps, key=len, reverse=True) if name.startswith(a)), "?")


def _time(event: Mapping[str, Any]) -> datetime:
    return datetime.fromisoformat(str(event["requestReceivedTimestamp"]).replace("Z", "+00:00"))


async def _run(bench: BenchCluster, apps: int, executors: int, run_seconds: float) -> dict[str, Any]:
    names = [f"w{i}" for i in range(apps)]
    async with bench.client() as kube:

        def completed(obj: JSON) -> str | None:
            state = ((obj.get("status") or {}).get("applicationState") or {}).get("state")
            return str(obj["metadata"]["name"]) if state == "COMPLETED" else None

        async with stamping(kube, kinds.SPARK_APPLICATIONS, completed, namespace=NAMESPACE) as done:
            since = now_utc()
            await asyncio.gather(
                *(kube.create(app_manifest(n, NAMESPACE, run_seconds=run_seconds, executors=executors)) for n in names)
            )
            async with asyncio.timeout(300):
                await done.wait_for(apps)
    return {"since": since, "names": names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=3)
    parser.add_argument("--executors", type=int, default=1)
    parser.add_argument("--run-seconds", type=float, default=2.0)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds to wait after the last COMPLETED")
    args = parser.parse_args(argv)
    with BenchCluster.up(f"bench-writes-{os.getpid()}", namespaces=[NAMESPACE]) as bench:
        operator = Operator(bench, (NAMESPACE,)).start()
        try:
            operator.wait_ready()
            run = asyncio.run(_run(bench, args.apps, args.executors, args.run_seconds))
            time.sleep(args.settle)  # what follows completion (executors, finalizers) is counted too
            operator.wait_idle(quiet_seconds=3.0, timeout=120)
        finally:
            operator.stop()
        writes = bench.writes_since(run["since"])
    names: list[str] = run["names"]
    by_app: dict[str, list[JSON]] = defaultdict(list)
    for event in writes:
        by_app[_app_of(event, names)].append(event)
    totals: Counter[str] = Counter()
    for name in names:
        events = sorted(by_app[name], key=_time)
        start = _time(events[0]) if events else None
        print(f"\n{name}: {len(events)} writes")
        for event in events:
            ref = event.get("objectRef") or {}
            at = (_time(event) - start).total_seconds() if start else 0.0
            print(f"  {at:7.3f}s  {_write_kind(event):40s} {ref.get('name', '')}")
            totals[_write_kind(event)] += 1
    print(f"\nper app ({len(names)} apps, {len(writes) / len(names):.2f} writes each):")
    for kind, count in totals.most_common():
        print(f"  {count / len(names):5.2f}  {kind}")
    log(f"{len(writes)} writes, {len(writes) / len(names):.2f} per app")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
