"""Issue 14's figures, measured in one run: prints the table (figure, measured, target) and writes
bench/results/perf.json and bench/results/perf.md; ``--readme`` also rewrites README.md's figures
from it (between the ``bench:perf`` markers; a unit test holds the two together).

One devcluster (KWOK nodes, the Spark-driver simulator), one operator (`sparkop run -n bench`):
  1. throughput: N apps at once against a bare client doing the same writes (bench/throughput.py);
  2. foreign churn: pods, ConfigMaps and Services of someone else's (bench/churn.py);
  3. recovery: driver pods deleted at once (bench/recovery.py);
  4. real spark-submit --deploy-mode cluster, 3.5.9 and 4.0.5, on the same API server (bench/submit_cost.py).
Then a devcluster of its own for scale: 10,000 finished apps, the operator's memory, idle CPU and a
restart (bench/scale.py).

    .venv/bin/python bench/perf.py [--apps 1000] [--scale-apps 10000] [--readme]

Everything shares this machine's cores: read the ratios, and the CPU split for who used them.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from churn import measure_churn
from harness import ROOT, BenchCluster, Operator, log, write_result
from recovery import measure_recovery
from submit_cost import measure_spark_submit
from throughput import CEILING_NAMESPACE, SPARKOP_NAMESPACE
from throughput import measure as measure_throughput

RESULTS = ROOT / "bench" / "results"
SUBMIT_NAMESPACE = "submit"
README = ROOT / "README.md"
BEGIN, END = "<!-- bench:perf begin -->", "<!-- bench:perf end -->"
# The target for create -> driver pod: p99 within what 13 apps/s gives a burst of 300 (25 s).
TARGET_APPS_PER_SECOND = 13


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"machine": {"cores": os.cpu_count(), "started": time.strftime("%Y-%m-%d %H:%M")}}
    namespaces = [SPARKOP_NAMESPACE, CEILING_NAMESPACE, SUBMIT_NAMESPACE]
    with BenchCluster.up(f"bench-perf-{os.getpid()}", namespaces=namespaces) as bench:
        operator = Operator(bench, (SPARKOP_NAMESPACE,)).start()
        try:
            operator.wait_ready()
            result["throughput"] = measure_throughput(bench, operator, args.apps, args.concurrency, args.timeout)
            result["churn"] = measure_churn(bench, operator, args.churn)
            result["recovery"] = measure_recovery(bench, operator, args.recovery)
        finally:
            operator.stop()
        if args.submissions:
            log("real spark-submit on the same API server")
            result["spark_submit"] = measure_spark_submit(bench, SUBMIT_NAMESPACE, submissions=args.submissions)
    if args.scale_apps:
        from scale import measure_scale

        result["scale"] = measure_scale(f"bench-scale-{os.getpid()}", args.scale_apps)
    result["machine"]["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    return result


# -- the table -------------------------------------------------------------------------------------


def _get(data: Mapping[str, Any], path: str) -> Any:
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def rows(r: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(figure, measured, target, met) for every figure the run has."""
    out: list[tuple[str, str, str, str]] = []

    def row(figure: str, measured: str, target: str = "", met: bool | None = None) -> None:
        out.append((figure, measured, target, "" if met is None else ("yes" if met else "**no**")))

    tp = r.get("throughput")
    if tp:
        s, c, n = tp["sparkop"], tp["ceiling"], tp["sparkop"]["apps"]
        row(
            f"apps/s, create → driver pod ({n} apps at once)",
            f"{s['apps_per_second']} ({tp['ratio_to_ceiling']:.0%} of the ceiling)",
            "≥ 50 % of the ceiling",
            tp["ratio_to_ceiling"] >= 0.5,
        )
        row("bare-client ceiling, same writes per app, same run", f"{c['apps_per_second']} apps/s")
        p = s["create_to_driver_pod"]
        limit = round(n / TARGET_APPS_PER_SECOND)
        row(
            "create → driver pod p50 / p99",
            f"{p['p50_s']} s / {p['p99_s']} s",
            f"p99 ≤ {limit} s ({n} apps at {TARGET_APPS_PER_SECOND} apps/s)",
            (p["p99_s"] or 1e9) <= limit,
        )
        d = s["create_to_completed"]
        row("create → COMPLETED p50 / p99", f"{d['p50_s']} s / {d['p99_s']} s")
        row("operator CPU per app (until idle again)", f"{s['operator_cpu_ms_per_app']} ms", "≤ 25 ms",
            s["operator_cpu_ms_per_app"] <= 25)  # fmt: skip
        row("operator writes per app, submission to completion",
            f"{s['operator_writes_per_app']} (the ceiling's submission alone: {c['writes_per_app']})")  # fmt: skip
        client_cpu = (c.get("cpu_seconds") or {}).get("bench client")
        if client_cpu:
            per_write_ms = client_cpu * 1000 / (c["apps"] * c["writes_per_app"])
            row("… the bare client's CPU per write (ceiling run) times the operator's writes per app: those requests "
                "alone, before watching or deciding",
                f"{per_write_ms:.2f} ms x {s['operator_writes_per_app']} = "
                f"{per_write_ms * s['operator_writes_per_app']:.1f} ms")  # fmt: skip
        row(f"operator RSS after {n} apps", f"{s['operator_rss_mib']} MiB")
    sub = r.get("spark_submit")
    if sub and tp:
        per_app = tp["sparkop"]["operator_cpu_ms_per_app"] / 1000
        for version, figures in sub.items():
            cpu, wall, rss = figures["cpu_s"]["median"], figures["wall_s"]["median"], figures["peak_rss_mib"]["median"]
            row(f"real spark-submit {version}, per submission (median)",
                f"{cpu} CPU-s, {wall} s wall, {rss} MiB peak; {cpu / per_app:.0f}x sparkop's per app")  # fmt: skip
    ch = r.get("churn")
    if ch:
        row(f"operator CPU while {ch['objects']} foreign pods/ConfigMaps/Services come and go",
            f"{ch['operator_cpu_seconds']} CPU-s (API server: {ch['apiserver_cpu_seconds']})", "≈ 0",
            ch["operator_cpu_seconds"] <= 0.5)  # fmt: skip
    rc = r.get("recovery")
    if rc:
        p = rc["delete_to_replacement_pod"]
        row(f"{rc['driver_pods_deleted']} driver pods deleted at once → replacement pod p50 / p99",
            f"{p['p50_s']} s / {p['p99_s']} s")  # fmt: skip
    sc = r.get("scale")
    if sc:
        for figure, measured, target, met in scale_rows(sc):
            row(figure, measured, target, met)
    return out


def scale_rows(sc: Mapping[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    apps = sc.get("apps")
    restart = sc.get("restart") or {}
    rss = _get(sc, "steady.rss_mib")
    idle_cpu = _get(sc, "steady.idle_cpu_seconds_per_minute")
    first, idle, writes = (restart.get(k) for k in ("first_reconcile_seconds", "idle_seconds", "writes"))
    return [
        (f"operator RSS with {apps} finished apps and their SparkDrivers", f"{rss} MiB", "≤ 250 MB",
         rss is not None and rss * 1.048576 <= 250),
        (f"operator idle CPU with {apps} apps", f"{idle_cpu} CPU-s per minute", "", None),
        (f"restart with {apps} apps: start → first reconcile", f"{first} s", "≤ 5 s", first is not None and first <= 5),
        *_floor_rows(restart),
        (f"restart with {apps} apps: start → idle", f"{idle} s", "≤ 30 s", idle is not None and idle <= 30),
        (f"restart with {apps} apps: writes", f"{writes}", "0", writes == 0),
    ]  # fmt: skip


def _floor_rows(restart: Mapping[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """What no start can beat here (bench/scale.py's restart_floor), beside the first reconcile."""
    floor = restart.get("floor")
    if not floor:
        return []
    total = round(floor["import_seconds"] + floor["list_seconds"], 2)
    return [
        ("… what no start can beat here: importing the operator + a bare client's LIST of the "
         f"{floor['objects_listed']} SparkApplications and SparkDrivers, same cluster",
         f"{floor['import_seconds']} s + {floor['list_seconds']} s = {total} s", "", None),
    ]  # fmt: skip


def markdown(r: Mapping[str, Any]) -> str:
    lines = ["| figure | measured | target | met |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows(r)]
    return "\n".join(lines) + "\n"


def readme_block(r: Mapping[str, Any]) -> str:
    machine = r.get("machine", {})
    note = (
        f"Measured by `bench/perf.py` on {machine.get('started', '?')[:10]}, on this project's "
        f"{machine.get('cores')}-core machine, where the API server, etcd, KWOK, the Spark-driver simulator "
        "and the benchmark share the cores with the operator (bench/results/perf.json has every figure, "
        "including who used the CPU):"
    )
    return f"{BEGIN}\n{note}\n\n{markdown(r)}{END}"


def update_readme(r: Mapping[str, Any], readme: Path = README) -> None:
    text = readme.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(head + readme_block(r) + tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--churn", type=int, default=1000, help="foreign objects of each kind")
    parser.add_argument("--recovery", type=int, default=100, help="driver pods deleted at once")
    parser.add_argument("--submissions", type=int, default=3, help="real spark-submit runs per version (0: none)")
    parser.add_argument("--scale-apps", type=int, default=10_000, help="finished apps for the scale run (0: none)")
    parser.add_argument("--out", type=Path, default=RESULTS / "perf.json")
    parser.add_argument("--readme", action="store_true", help="rewrite README.md's figures from this run")
    parser.add_argument("--from-json", type=Path, help="print (and with --readme, write) from an earlier run")
    args = parser.parse_args()
    if args.from_json:
        result = json.loads(args.from_json.read_text())
    else:
        result = run(args)
        write_result(args.out, result)
        args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    if args.readme:
        update_readme(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
