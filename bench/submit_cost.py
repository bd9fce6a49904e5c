"""What one real ``spark-submit --deploy-mode cluster`` costs, for Spark 3.5 and 4.0, on a devcluster.

The yardstick for sparkop's operator CPU per app: kubeflow's operator runs one spark-submit JVM per
application, with ``spark.kubernetes.submission.waitAppCompletion=false`` so the submission ends once
the driver pod (its ConfigMaps and Service) exists. That is what is measured here, with the command
line kubeflow would build (``tests.conformance.harness.kubeflow_args``) for a small Scala app whose
driver the Spark-driver simulator runs for 0 s.

Per version: one warm-up submission that is not counted (page cache, the JVM's class data sharing
archive), then ``--submissions`` counted ones, one at a time so they do not compete for the 2 cores.
Each submission's figures:

* **wall_s**: from starting ``bin/spark-submit`` until it exits.
* **cpu_s**: user + system CPU of the whole process tree. ``bin/spark-submit`` execs
  ``bin/spark-class``, which runs a first JVM (``org.apache.spark.launcher.Main``, building the
  command line) in a process substitution and then execs the submitting JVM. Bash does not always
  reap a process substitution before it execs, and a descendant its parent never reaped is not in
  the parent's ``wait4`` figures (a plain ``wait4`` on ``spark-submit --version`` missed the launcher's
  0.3-0.4 CPU-s in two of three tries), so spark-submit runs under a small Python reaper (``REAPER``): a
  child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``) that waits for every descendant, orphans
  included, and reports ``getrusage(RUSAGE_CHILDREN)`` (which holds every reaped descendant's CPU and
  none of its own).
* **peak_rss_mib**: the ``ru_maxrss`` of that same tree, i.e. the largest resident set of any one
  process in it (the submitting JVM; the launcher JVM has exited before it starts).

Each counted submission's driver pod is then looked up (``spark-role=driver`` pods in the
namespace): ``driver_pods_created`` counts the ones found.

    .venv/bin/python bench/submit_cost.py --submissions 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import ROOT, BenchCluster, log, percentile, write_result

from sparkop.domain import naming
from tests.support import conformance

NAMESPACE = "submit"
VERSIONS = ("3.5.9", "4.0.5")
SUBMIT_TIMEOUT_S = 300.0

# Run as ``python -c REAPER <result file> <argv...>``: starts argv, reaps every descendant (it is their
# subreaper, so orphans come to it too), writes the tree's figures as JSON. Only os/sys/time/json/
# ctypes/resource are imported, to keep its own start-up out of the way (its CPU is not counted).
REAPER = """
import ctypes, json, os, resource, sys, time
PR_SET_CHILD_SUBREAPER = 36
if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d" % ctypes.get_errno())
out, argv = sys.argv[1], sys.argv[2:]
started = time.monotonic()
main = os.posix_spawnp(argv[0], argv, os.environ)
status, ended = 0, started
while True:
    try:
        pid, st, _ = os.wait4(-1, 0)
    except ChildProcessError:
        break
    if pid == main:
        status, ended = st, time.monotonic()
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(out, "w") as f:
    json.dump({
        "exit_code": os.waitstatus_to_exitcode(status),
        "wall_s": ended - started,
        "tree_wall_s": time.monotonic() - started,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "peak_rss_kib": usage.ru_maxrss,
    }, f)
"""

# The executor pod template kubeflow_args passes (sparkop's property); spark-submit stores it in a
# ConfigMap of its own, one more write per submission.
EXECUTOR_TEMPLATE = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: spark-kubernetes-executor\n"


@dataclass(frozen=True)
class Submission:
    driver_pod: str
    wall_s: float
    cpu_s: float
    user_s: float
    sys_s: float
    peak_rss_mib: float


@dataclass(frozen=True)
class Credentials:
    server: str
    ca: Path
    cert: Path
    key: Path


def driver_manifest(name: str, namespace: str, version: str) -> dict[str, Any]:
    """A small Scala SparkDriver (one executor, 0 s in the simulator), for ``kubeflow_args``."""
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "Scala",
            "sparkVersion": version,
            "image": f"apache/spark:{version}",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            "driver": {
                "cores": 1,
                "memory": "512m",
                "annotations": {"sim.sparkop.io/run-seconds": "0", "sim.sparkop.io/outcome": "Succeeded"},
            },
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        },
    }


def submit_once(version: str, name: str, namespace: str, credentials: Credentials, workdir: Path) -> Submission:
    """One spark-submit (as ``conformance.spark_submit`` runs it) under the reaper; its figures."""
    template = workdir / "executor-template.yaml"
    template.write_text(EXECUTOR_TEMPLATE)
    manifest = driver_manifest(name, namespace, version)
    args = conformance.kubeflow_args(manifest, template, None)
    c = credentials
    argv, env = conformance.spark_submit_command(version, c.server, c.ca, c.cert, c.key, args, workdir)
    figures_path, log_path = workdir / f"{name}.json", workdir / f"{name}.log"
    figures_path.unlink(missing_ok=True)
    with log_path.open("wb") as out:
        reaper = subprocess.Popen(
            [sys.executable, "-c", REAPER, str(figures_path), *argv],
            env=env,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a timeout kills the whole tree
        )
        try:
            reaper.wait(SUBMIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(reaper.pid, signal.SIGKILL)
            reaper.wait()
            message = f"spark-submit {version} did not finish within {SUBMIT_TIMEOUT_S:.0f}s; see {log_path}"
            raise TimeoutError(message) from None
    if reaper.returncode != 0 or not figures_path.exists():
        raise RuntimeError(f"the reaper around spark-submit {version} failed ({reaper.returncode}); see {log_path}")
    figures = json.loads(figures_path.read_text())
    if figures["exit_code"] != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"spark-submit {version} exited with {figures['exit_code']}; {log_path}:\n{tail}")
    return Submission(
        driver_pod=naming.driver_pod_name(name),
        wall_s=float(figures["wall_s"]),
        cpu_s=float(figures["cpu_s"]),
        user_s=float(figures["user_s"]),
        sys_s=float(figures["sys_s"]),
        peak_rss_mib=int(figures["peak_rss_kib"]) / 1024,
    )


def driver_pods(bench: BenchCluster, namespace: str) -> set[str]:
    listed = json.loads(bench.kubectl("get", "pods", "-n", namespace, "-l", "spark-role=driver", "-o", "json"))
    return {str(pod["metadata"]["name"]) for pod in listed.get("items", [])}


def wait_default_service_account(bench: BenchCluster, namespace: str, timeout: float = 60) -> None:
    # The ServiceAccount admission plugin rejects the driver pod (no serviceAccountName: `default`)
    # until the controller manager has created `default` in a new namespace.
    deadline = time.monotonic() + timeout
    while True:
        try:
            bench.kubectl("get", "serviceaccount", "default", "-n", namespace)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                message = f"service account default in {namespace} not created within {timeout:.0f}s"
                raise TimeoutError(message) from None
            time.sleep(0.2)


def summary(values: Sequence[float], digits: int = 3) -> dict[str, float | None]:
    median, top = percentile(values, 50), max(values) if values else None
    return {
        "median": None if median is None else round(median, digits),
        "max": None if top is None else round(top, digits),
    }


def measure_spark_submit(
    bench: BenchCluster, namespace: str, versions: Sequence[str] = VERSIONS, submissions: int = 3
) -> dict[str, Any]:
    """Per Spark version: wall seconds, CPU seconds (the whole process tree) and peak RSS (MiB) of
    ``submissions`` sequential spark-submits after one uncounted warm-up, as median and max, and how
    many of the counted submissions' driver pods exist in ``namespace``."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("spark-submit needs Java 17: install it (apt-get install openjdk-17-jre-headless)")
    wait_default_service_account(bench, namespace)
    workdir = Path(tempfile.mkdtemp(prefix=f"{bench.cluster.name}-submit-"))
    cert, key = conformance.client_cert(bench.cluster.directory / "pki", workdir)
    credentials = Credentials(bench.cluster.server, bench.cluster.directory / "pki" / "ca.crt", cert, key)
    results: dict[str, Any] = {}
    try:
        for version in versions:
            conformance.ensure_spark(version)
            tag = version.replace(".", "")
            log(f"spark-submit {version}: warm-up")
            warm = submit_once(version, f"submit-{tag}-warmup", namespace, credentials, workdir)
            log(f"spark-submit {version}: warm-up {warm.wall_s:.1f}s wall, {warm.cpu_s:.1f} CPU-s")
            counted: list[Submission] = []
            for index in range(submissions):
                one = submit_once(version, f"submit-{tag}-{index}", namespace, credentials, workdir)
                log(
                    f"spark-submit {version} #{index + 1}/{submissions}: {one.wall_s:.2f}s wall, "
                    f"{one.cpu_s:.2f} CPU-s, peak RSS {one.peak_rss_mib:.0f} MiB"
                )
                counted.append(one)
            present = driver_pods(bench, namespace)
            results[version] = {
                "submissions": len(counted),
                "wall_s": summary([s.wall_s for s in counted]),
                "cpu_s": summary([s.cpu_s for s in counted]),
                "user_s": summary([s.user_s for s in counted]),
                "sys_s": summary([s.sys_s for s in counted]),
                "peak_rss_mib": summary([s.peak_rss_mib for s in counted], digits=1),
                "driver_pods_created": sum(s.driver_pod in present for s in counted),
                "warmup": {"wall_s": round(warm.wall_s, 3), "cpu_s": round(warm.cpu_s, 3)},
            }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def table(result: Mapping[str, Any]) -> str:
    header = ("spark-submit", "n", "wall s med/max", "CPU-s med/max", "peak RSS MiB med/max", "driver pods")
    rows = [header]
    for version, r in result.items():
        rows.append(
            (
                version,
                str(r["submissions"]),
                f"{r['wall_s']['median']} / {r['wall_s']['max']}",
                f"{r['cpu_s']['median']} / {r['cpu_s']['max']}",
                f"{r['peak_rss_mib']['median']} / {r['peak_rss_mib']['max']}",
                str(r["driver_pods_created"]),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=3, help="counted submissions per version")
    parser.add_argument("--version", action="append", dest="versions", help=f"Spark version (default {VERSIONS})")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "submit_cost.json"))
    args = parser.parse_args(argv)
    if args.submissions < 1:
        parser.error("--submissions must be at least 1")
    versions = tuple(args.versions or VERSIONS)
    with BenchCluster.up(f"bench-submit-{os.getpid()}", nodes=1, namespaces=[NAMESPACE]) as bench:
        result = measure_spark_submit(bench, NAMESPACE, versions, args.submissions)
    write_result(Path(args.out), result)
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
