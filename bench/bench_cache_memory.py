"""What the operator's caches hold for each finished app, without a cluster.

N finished apps, each with what it leaves behind (its SparkApplication and SparkDriver, shaped as
bench/bench_listing.py shapes them, and the driver pod, ConfigMaps and Service the driver controller
renders for that SparkDriver, given a finished pod's status and the server's metadata), are streamed
as watch-list lines through the operator's own informers, with every controller registered (their
transforms, indexes and change handlers), then the work queues are emptied as the passes would empty
them. Reported: bytes per app by where they were allocated (tracemalloc), and the process's resident
memory before and after (what bench/scale.py measures with a cluster, less the cluster's time).

    .venv/bin/python bench/bench_cache_memory.py [--apps 50000] [--top 12]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import re
import tracemalloc
from pathlib import Path
from typing import Any

from bench_listing import STAMP, app, driver, finished_pair, first_listing, runtime, stream
from harness import ROOT

from sparkop.core import kube as k8s
from sparkop.core.jsontypes import JSON
from sparkop.domain import kinds
from sparkop.driver_controller.render import parse, render


def owned_objects(i: int, driver_body: JSON) -> list[JSON]:
    """The driver pod (finished), ConfigMaps and Service rendered for SparkDriver ``i``, as the server holds them."""
    out = render(parse(driver_body), 1)
    objects: list[JSON] = []
    for n, obj in enumerate([out.pod, *out.config_maps, out.service]):
        meta = {**obj["metadata"], "uid": f"uid-{i}-{n}", "resourceVersion": str(100_000 + 10 * i + n)}
        meta |= {"creationTimestamp": STAMP}
        objects.append({**obj, "metadata": meta})
    pod = objects[0]
    container = pod["spec"]["containers"][-1]["name"]
    terminated = {"exitCode": 0, "reason": "Completed", "startedAt": STAMP, "finishedAt": STAMP}
    pod["spec"] = {**pod["spec"], "nodeName": "kwok-node-1"}
    pod["status"] = {
        "phase": "Succeeded",
        "podIP": "10.0.0.1",
        "hostIP": "10.0.0.2",
        "startTime": STAMP,
        "conditions": [
            {"type": t, "status": "False", "lastTransitionTime": STAMP} for t in ("Ready", "ContainersReady")
        ],
        "containerStatuses": [
            {"name": container, "ready": False, "restartCount": 0, "state": {"terminated": terminated}}
        ],
    }
    return objects


def selected(selector: str | None, obj: JSON) -> bool:
    """Whether ``obj``'s labels match ``selector`` as the API server reads it (the forms the operator
    uses: ``key``, ``key=value``, ``key in (a,b)``, joined by commas outside parentheses)."""
    found: dict[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    for term in re.split(r",(?![^(]*\))", selector or ""):
        term = term.strip()
        if not term:
            continue
        if " in " in term:
            key, _, values = term.partition(" in ")
            if found.get(key.strip()) not in {v.strip() for v in values.strip("() ").split(",")}:
                return False
        elif "=" in term:
            key, _, value = term.partition("=")
            if found.get(key.strip()) != value.strip():
                return False
        elif term not in found:
            return False
    return True


def file_selected(made: Any, objects: dict[str, list[JSON]]) -> None:
    """Each object into every informer of its kind whose selection holds it (the server filters a watch)."""
    for informer in made.caches.all():
        chosen = [o for o in objects.get(informer.resource.path(), ()) if selected(informer.label_selector, o)]
        if chosen:
            first_listing(informer, stream(chosen))


def _site(frame: tracemalloc.Frame) -> str:
    return f"{frame.filename.removeprefix(str(ROOT) + '/')}:{frame.lineno}"


def rss_mib() -> float:
    text = Path("/proc/self/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) / 1024 if match else 0.0


def measure(apps: int, top: int) -> dict[str, Any]:
    app_shape, driver_shape = finished_pair()
    drivers = [driver(i, driver_shape) for i in range(apps)]
    owned: dict[str, list[JSON]] = {}
    for i, body in enumerate(drivers):
        for obj in owned_objects(i, body):
            owned.setdefault(k8s.resource_of(obj).path(), []).append(obj)
    objects = {
        kinds.SPARK_APPLICATIONS.path(): [app(i, app_shape) for i in range(apps)],
        kinds.SPARK_DRIVERS.path(): drivers,
        **owned,
    }
    line_bytes = sum(len(line) for listed in objects.values() for line in stream(listed))
    del drivers, owned

    async def filed() -> dict[str, Any]:
        made = runtime()
        gc.collect()
        before = rss_mib()
        tracemalloc.start(1)
        start = tracemalloc.take_snapshot()
        file_selected(made, objects)
        for queue in made.queues:  # as the first passes leave them: every key taken, none waiting
            queue._waiting.clear()
            queue._ready = type(queue._ready)()
        gc.collect()
        end = tracemalloc.take_snapshot()
        tracemalloc.stop()
        diff = end.compare_to(start, "lineno")
        held = sum(d.size_diff for d in diff)
        sites = [f"{round(d.size_diff / apps)} B/app  {_site(d.traceback[0])}" for d in diff[:top]]
        cached = {f"{i.name}": len(i.store) for i in made.caches.all() if len(i.store)}
        return {
            "held_bytes_per_app": round(held / apps),
            "rss_growth_mib": round(rss_mib() - before, 1),
            "sites": sites,
            "cached": cached,
        }

    result = asyncio.run(filed())
    return {"apps": apps, "listed_bytes_per_app": round(line_bytes / apps), **result}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=50_000)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    result = measure(args.apps, args.top)
    print(
        f"{result['apps']} finished apps ({result['listed_bytes_per_app']} bytes listed per app): the caches hold "
        f"{result['held_bytes_per_app']} bytes per app (tracemalloc); RSS grew {result['rss_growth_mib']} MiB"
    )
    print("cached:", result["cached"])
    for site in result["sites"]:
        print("  ", site)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
