"""sparkop beside the Spark operators a user would pick today and the API server's ceiling, in one run
on one devcluster.

On one devcluster (KWOK nodes and the Spark-driver simulator), a burst of N SparkApplications created
at once (default 40), for each contender one after another, each in a namespace of its own:

1. **kubeflow** (``KUBEFLOW_SPARK_OPERATOR_VERSION`` in devcluster/gobuild/versions.env, its newest
   release): built once from its Go module (devcluster/gobuild/spark-operator, cached under
   ``~/.cache/sparkop/bin/<key>/``), ``controller start`` as a local process with its chart's settings,
   running real ``spark-submit`` (pyspark 3.5.9, the machine's Java 17) for every app: the Go process
   and the JVMs it forks are one process tree, measured as a whole.
2. **kubeflow-rest**: kubeflow's main branch with its ``RestSubmitter`` feature gate on, posting each
   app's spark-submit arguments to a long-running k8s-spark-submitter service (a JVM that submits
   in-process), run beside it as a local process; the two count as one.
3. **apache**: apache/spark-kubernetes-operator 1.0.0 (a JVM that builds the driver in-process with
   Spark's own submission code), with its CRDs.
4. **sparkop** (``sparkop run``, bench/harness.py's Operator) on the same apps.
5. **ceiling**: a bare client doing sparkop's submission writes (bench/throughput.py's).

kubeflow-rest and apache are not on any package registry: they run from builds made beforehand into
``~/.cache/sparkop/peers/`` (see bench/README.md); a peer whose build is not there is left out of the
run, and the result says why.

Figures per contender: apps/s (first create -> the last app's driver pod), create -> driver pod
p50/p99, how long the burst took, CPU per app until the contender is idle again (a peer: every process
of its tree; sparkop: its process; ceiling: the benchmark's own client), peak RSS (of the tree, sampled
every ``SAMPLE_S``), writes per app (the API server's audit log, by user agent) and the API server's CPU
per app over the same window.

    .venv/bin/python bench/peer.py                         # 40 apps, one round
    .venv/bin/python bench/peer.py --apps 40 1000 --rounds 3
    .venv/bin/python bench/peer.py --from-json bench/results/peer.json --readme   # the tables again
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

from harness import (
    BENCH_USER_AGENT,
    CLOCK_TICKS,
    ROOT,
    BenchCluster,
    Operator,
    app_state,
    audit_events,
    bounded,
    cpu_seconds,
    label,
    latency_summary,
    log,
    now_utc,
    stamping,
    write_result,
)
from submit_cost import wait_default_service_account
from throughput import CEILING_NAMESPACE, CpuSplit, _write_kind, ceiling_app, ceiling_bodies

from devcluster import build, scheduler_crds
from devcluster.paths import GOBUILD_DIR
from devcluster.ports import free_ports
from sparkop.core import kube as k8s
from sparkop.core.jsontypes import JSON
from sparkop.domain import kinds, labels
from tests.support import conformance

RESULTS = ROOT / "bench" / "results"
# Builds of the peers no registry serves (bench/README.md says how each was made).
PEERS_DIR = Path(os.environ.get("SPARKOP_PEERS_DIR", Path.home() / ".cache" / "sparkop" / "peers"))
SPARK_VERSION = "3.5.9"
SAMPLE_S = 0.1  # how often a peer's process tree is read (a launcher JVM lives about a second)
QUIET_S = 3.0  # idle: under IDLE_SHARE of a core for this long
IDLE_SHARE = 0.02
BASELINE_S = 5.0  # the API server's idle CPU is measured this long before each burst
# Every contender's client may send this many requests a second (bursts of twice as many): sparkop's
# default, so that no peer is held back by a client-side bound sparkop does not have.
CLIENT_QPS, CLIENT_BURST = 1000, 2000

KUBEFLOW_MODULE = "github.com/kubeflow/spark-operator/v2"
KUBEFLOW_VERSION_KEY = "KUBEFLOW_SPARK_OPERATOR_VERSION"
KUBEFLOW_GROUP = "sparkoperator.k8s.io"
KUBEFLOW_APPS = k8s.Resource(KUBEFLOW_GROUP, "v1beta2", "sparkapplications", "SparkApplication")
KUBEFLOW_CRDS_DIR = "charts/spark-operator-chart/crds"
KUBEFLOW_APP_LABEL = f"{KUBEFLOW_GROUP}/app-name"  # on the driver pods it has created
# kubeflow's chart's settings (values.yaml: controller.workers, controller.workqueueRateLimiter).
KUBEFLOW_CONTROLLER_THREADS = 10
KUBEFLOW_WORKQUEUE = ("--workqueue-ratelimiter-bucket-qps=50", "--workqueue-ratelimiter-bucket-size=500")
# kubeflow-rest's build (a directory under PEERS_DIR): the operator from kubeflow's main, the
# k8s-spark-submitter service, both CRDs, and a file naming the commits.
KUBEFLOW_MAIN_DIR = "kubeflow-spark-operator-main"
APACHE_DIR = "apache-spark-kubernetes-operator-1.0.0"
APACHE_GROUP = "spark.apache.org"
APACHE_APPS = k8s.Resource(APACHE_GROUP, "v1", "sparkapplications", "SparkApplication")
APACHE_APP_LABEL = "spark.operator/spark-app-name"
APACHE_PARALLELISM = 50  # spark.kubernetes.operator.reconciler.parallelism, its default
# Its chart's JVM flags (values.yaml operatorContainer.jvmArgs) in its chart's 2 GiB container, less
# -XX:InitialRAMPercentage=80 and -XX:+AlwaysPreTouch: they would make the heap resident from the start
# (1.6 GiB), so its RSS would show the setting, not what it needs.
APACHE_JVM = (
    "-Dfile.encoding=UTF8",
    "-XX:+UseParallelGC",
    "-XX:MaxRAM=2g",
    "-XX:MaxRAMPercentage=80",
    "-XX:+UseCompactObjectHeaders",
)
JAVA_25 = Path("/usr/lib/jvm/temurin-25-jdk-amd64/bin/java")
JAVA_17 = Path("/usr/lib/jvm/java-17-openjdk-amd64/bin/java")
SUBMITTER_THREADS = 50  # the k8s-spark-submitter's concurrent submissions (see bench/README.md)

# Who writes for each contender, by the product of its user agent: client-go's default is the binary's
# name; fabric8's Kubernetes client is spark-submit's, the submitter's and the Apache operator's.
FABRIC8 = "fabric8-kubernetes-client/"
SPARKOP_AGENTS = ("sparkop/",)
TERMINAL = ("COMPLETED", "FAILED")


@dataclass(frozen=True)
class Peer:
    key: str
    name: str  # as the table heads its column
    version: str
    in_process: bool  # whether it builds the driver pod in a process that lives on (no JVM per app)
    how: str  # how it submits, in a few words

    def record(self) -> dict[str, Any]:
        return {"key": self.key, "name": self.name, "version": self.version, "in_process": self.in_process}


SPARKOP = Peer("sparkop", "sparkop", "this checkout", True, "renders the driver pod in its own process")
CEILING = Peer("ceiling", "ceiling", "-", True, "a bare client doing sparkop's writes")


# -- the apps ----------------------------------------------------------------------------------------

SIM_ANNOTATIONS = {"sim.sparkop.io/run-seconds": "0", "sim.sparkop.io/outcome": "Succeeded"}


def kubeflow_manifest(name: str, namespace: str) -> JSON:
    """kubeflow's v1beta2 SparkApplication: the small SparkPi the other benchmarks submit
    (harness.app_manifest), whose driver the simulator runs for 0 s, then succeeds."""
    return {
        "apiVersion": f"{KUBEFLOW_GROUP}/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "sparkVersion": SPARK_VERSION,
            "image": f"apache/spark:{SPARK_VERSION}",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": f"local:///opt/spark/examples/jars/spark-examples_2.12-{SPARK_VERSION}.jar",
            "restartPolicy": {"type": "Never"},
            "driver": {"cores": 1, "memory": "512m", "annotations": dict(SIM_ANNOTATIONS)},
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        },
    }


def sparkop_manifest(name: str, namespace: str) -> JSON:
    """The same app moved over to sparkop: only the apiVersion changes (docs/api.md)."""
    return {**kubeflow_manifest(name, namespace), "apiVersion": labels.API_VERSION}


def apache_manifest(name: str, namespace: str) -> JSON:
    """The same app in the Apache operator's v1 API: Spark's own properties for the resources, the
    simulator's annotations as driver annotations; no restarts (its default restart policy)."""
    conf = {
        "spark.kubernetes.container.image": f"apache/spark:{SPARK_VERSION}",
        "spark.driver.cores": "1",
        "spark.driver.memory": "512m",
        "spark.executor.instances": "1",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        **{f"spark.kubernetes.driver.annotation.{k}": v for k, v in SIM_ANNOTATIONS.items()},
    }
    return {
        "apiVersion": f"{APACHE_GROUP}/v1",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "mainClass": "org.apache.spark.examples.SparkPi",
            "jars": f"local:///opt/spark/examples/jars/spark-examples_2.12-{SPARK_VERSION}.jar",
            "sparkConf": conf,
            "runtimeVersions": {"sparkVersion": SPARK_VERSION},
        },
    }


def apache_state(obj: Mapping[str, Any]) -> str | None:
    """The Apache operator's app, in kubeflow's terms: COMPLETED or FAILED once it has released its
    resources (its terminal states), by whether it passed through Succeeded."""
    status = obj.get("status") or {}
    summary = (status.get("currentState") or {}).get("currentStateSummary")
    if summary not in ("ResourceReleased", "TerminatedWithoutReleaseResources"):
        return str(summary) if summary else None
    history = (status.get("stateTransitionHistory") or {}).values()
    succeeded = any((h or {}).get("currentStateSummary") == "Succeeded" for h in history)
    return "COMPLETED" if succeeded else "FAILED"


# -- the builds --------------------------------------------------------------------------------------


def kubeflow_version() -> str:
    version = build.read_versions()[KUBEFLOW_VERSION_KEY]
    go_mod = (GOBUILD_DIR / "spark-operator" / "go.mod").read_text()
    if f"require {KUBEFLOW_MODULE} {version}\n" not in go_mod:
        raise RuntimeError(f"devcluster/gobuild/spark-operator/go.mod does not require {KUBEFLOW_MODULE} {version}")
    return version


def kubeflow_binaries(version: str) -> build.BinarySet:
    """kubeflow's ``spark-operator``, stamped like its Makefile does; built only when this benchmark asks."""
    stamps = {"gitVersion": version, "gitTreeState": "clean"}
    ldflags = " ".join(["-s -w", *(f"-X k8s.io/component-base/version.{k}={v}" for k, v in stamps.items())])
    package = f"{KUBEFLOW_MODULE}/cmd/operator"
    go_build = build.GoBuild("spark-operator", "spark-operator", (package,), ldflags, "spark-operator")
    return build.BinarySet(f"kubeflow's spark-operator {version}", (go_build,), ("spark-operator",))


def ensure_kubeflow_operator() -> Path:
    """The binary, built into the cache on the first call (minutes), then found in a moment."""
    binaries = kubeflow_binaries(kubeflow_version())
    if not build.is_built(build.set_dir(binaries), binaries.binaries):
        log(f"building {binaries.description} once (about 5 minutes on 2 cores; cached afterwards)")
    return build.ensure_set_built(binaries, log) / "spark-operator"


def kubeflow_crds() -> list[Path]:
    module = scheduler_crds.module_dir(KUBEFLOW_MODULE, kubeflow_version())
    files = sorted((module / KUBEFLOW_CRDS_DIR).glob("*.yaml"))
    if not files:
        raise RuntimeError(f"no CRDs in {module / KUBEFLOW_CRDS_DIR}")
    return files


@dataclass(frozen=True)
class PrebuiltPeer:
    """A peer built beforehand into PEERS_DIR/<directory>: what it holds, or why it cannot run."""

    directory: Path
    required: tuple[str, ...]

    def missing(self) -> str | None:
        absent = [name for name in self.required if not (self.directory / name).exists()]
        if not absent:
            return None
        where = self.directory.relative_to(PEERS_DIR) if self.directory.is_relative_to(PEERS_DIR) else self.directory
        return f"no build in the peers' directory ({where}/: {', '.join(absent)} missing; see bench/README.md)"

    def read(self, name: str) -> str:
        path = self.directory / name
        return path.read_text().strip() if path.exists() else "?"


APACHE_BUILD = PrebuiltPeer(PEERS_DIR / APACHE_DIR, ("spark-kubernetes-operator.jar", "lib", "crds", "VERSION"))
KUBEFLOW_MAIN_BUILD = PrebuiltPeer(
    PEERS_DIR / KUBEFLOW_MAIN_DIR, ("spark-operator", "crds", "submitter/submitter.jar", "submitter/lib", "VERSION")
)


def install_crds(bench: BenchCluster, files: Sequence[Path]) -> None:
    scheduler_crds.install(bench.cluster.kubectl, bench.cluster.kubeconfig, files=list(files))


# -- a process tree, from /proc ----------------------------------------------------------------------

# Run as ``python -c REAPER argv...``: starts argv and reaps every descendant that is orphaned (it is
# their subreaper), so a reaped process's CPU always lands in some live ancestor's cutime/cstime. Goes
# with the benchmark (PR_SET_PDEATHSIG) and passes SIGTERM/SIGINT on to argv.
REAPER = """
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d" % ctypes.get_errno())
libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
main = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
def forward(signum, frame):
    try:
        os.kill(main, signum)
    except ProcessLookupError:
        pass
signal.signal(signal.SIGTERM, forward)
signal.signal(signal.SIGINT, forward)
code = 0
while True:
    try:
        pid, status = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    if pid == main:
        code = os.waitstatus_to_exitcode(status)
        break
sys.exit(code)
"""
PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / 2**20


@dataclass(frozen=True)
class ProcEntry:
    comm: str
    ppid: int
    cpu_ticks: int  # utime + stime
    children_ticks: int  # cutime + cstime: the children it reaped, and theirs
    rss_pages: int


def proc_table() -> dict[int, ProcEntry]:
    """Every process on the machine, from /proc/<pid>/stat (those that exit meanwhile left out)."""
    table: dict[int, ProcEntry] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        head, _, tail = text.rpartition(")")
        fields = tail.split()
        table[int(entry.name)] = ProcEntry(
            comm=head.partition("(")[2],
            ppid=int(fields[1]),
            cpu_ticks=int(fields[11]) + int(fields[12]),
            children_ticks=int(fields[13]) + int(fields[14]),
            rss_pages=int(fields[21]),
        )
    return table


@dataclass(frozen=True)
class TreeReading:
    cpu_seconds: float  # every process below the roots, living or reaped (the roots' own CPU left out)
    rss_mib: float  # resident memory of the living processes below the roots
    jvms: frozenset[int]  # the java processes among them


def read_tree(roots: Sequence[int]) -> TreeReading:
    """The trees below ``roots`` (reapers): their living processes' CPU and their reaped children's,
    plus the roots' reaped orphans. Exact when nothing exits while it is read (at the end of a run); a
    process reaped mid-read may be missed or counted twice in one reading."""
    table = proc_table()
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    ticks, rss_pages, jvms = 0, 0, set()
    for root in roots:
        root_entry = table.get(root)
        ticks += root_entry.children_ticks if root_entry is not None else 0
        stack = list(children.get(root, ()))
        while stack:
            pid = stack.pop()
            proc = table[pid]
            ticks += proc.cpu_ticks + proc.children_ticks
            rss_pages += proc.rss_pages
            if proc.comm == "java":
                jvms.add(pid)
            stack.extend(children.get(pid, ()))
    return TreeReading(ticks / CLOCK_TICKS, rss_pages * PAGE_MIB, frozenset(jvms))


@dataclass
class TreeSampler:
    """Reads the trees every ``interval`` seconds on a thread of its own: peak RSS, most JVMs at once."""

    roots: tuple[int, ...]
    interval: float = SAMPLE_S
    peak_rss_mib: float = 0.0
    peak_jvms: int = 0
    jvms_seen: set[int] = field(default_factory=set)
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TreeSampler:
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
        self._thread.start()
        return self

    def reset_peaks(self) -> None:
        self.peak_rss_mib, self.peak_jvms, self.jvms_seen, self.samples = 0.0, 0, set(), 0

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            reading = read_tree(self.roots)
            self.samples += 1
            self.peak_rss_mib = max(self.peak_rss_mib, reading.rss_mib)
            self.peak_jvms = max(self.peak_jvms, len(reading.jvms))
            self.jvms_seen |= reading.jvms

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def wait_quiet(
    read_cpu: Callable[[], float],
    check_alive: Callable[[], None],
    *,
    timeout: float,
    quiet_seconds: float = QUIET_S,
    cpu_share: float = IDLE_SHARE,
) -> float:
    """Seconds from now until CPU use (``read_cpu``) stayed under ``cpu_share`` of a core for
    ``quiet_seconds`` (the start of that quiet spell), like harness.Operator.wait_idle."""
    began = time.monotonic()
    deadline = began + timeout
    window: list[tuple[float, float]] = []
    while time.monotonic() < deadline:
        check_alive()
        now = time.monotonic()
        window.append((now, read_cpu()))
        while len(window) > 1 and now - window[1][0] >= quiet_seconds:
            window.pop(0)
        first_t, first_cpu = window[0]
        if now - first_t >= quiet_seconds and (window[-1][1] - first_cpu) <= cpu_share * (now - first_t):
            return first_t - began
        time.sleep(SAMPLE_S)
    raise TimeoutError(f"not idle within {timeout:.0f}s")


@dataclass
class Reaped:
    """One process of a peer, started under the reaper in a process group of its own."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log_path: Path
    comm: str  # the name the reaped main process shows in /proc (to find its pid)
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    main_pid: int = field(default=0, init=False)

    def start(self) -> Reaped:
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", REAPER, *self.argv],
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a process group of its own: stop() ends every child with it
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            self.check_alive()
            for pid, proc in proc_table().items():
                if proc.ppid == self.process.pid and proc.comm == self.comm:
                    self.main_pid = pid
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"{self.argv[0]} did not start; see {self.log_path}")

    @property
    def root(self) -> int:
        assert self.process is not None
        return self.process.pid

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.argv[0]} exited with {self.process.returncode}; {self.log_path}:\n{tail}")

    def own_cpu_seconds(self) -> float:
        """The main process alone (its own CPU, none of its children's)."""
        entry = proc_table().get(self.main_pid)
        return entry.cpu_ticks / CLOCK_TICKS if entry is not None else 0.0

    def own_peak_rss_mib(self) -> float:
        status = Path(f"/proc/{self.main_pid}/status").read_text()
        match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        return int(match.group(1)) / 1024 if match else 0.0

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()  # the reaper passes it on
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(30)
        with contextlib.suppress(ProcessLookupError):  # children still running, the reaper if it hung
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def rsa_kubeconfig(bench: BenchCluster, workdir: Path) -> Path:
    """A kubeconfig with an RSA client certificate: fabric8 (Spark's Kubernetes client, the Apache
    operator's, the submitter's) cannot read the devcluster's EC keys; the Go client reads it too."""
    pki = bench.cluster.directory / "pki"
    cert, key = conformance.client_cert(pki, workdir)
    path = workdir / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "devcluster",
                "cluster": {"server": bench.cluster.server, "certificate-authority": str(pki / "ca.crt")},
            }
        ],
        "users": [{"name": "peer", "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "devcluster", "context": {"cluster": "devcluster", "user": "peer"}}],
        "current-context": "devcluster",
    }
    path.write_text(json.dumps(config, indent=2))
    return path


def base_environment(bench: BenchCluster, workdir: Path, kubeconfig: Path) -> dict[str, str]:
    """As in a pod: the API server as KUBERNETES_SERVICE_HOST/PORT, plus its credentials (KUBECONFIG)."""
    server = urlsplit(bench.cluster.server)
    env = {k: v for k, v in os.environ.items() if k not in conformance.FOREIGN_ENV}
    env.update(
        HOME=str(workdir),
        KUBECONFIG=str(kubeconfig),
        KUBERNETES_SERVICE_HOST=str(server.hostname),
        KUBERNETES_SERVICE_PORT=str(server.port or 443),
    )
    return env


# -- the contenders ----------------------------------------------------------------------------------


class Meter(Protocol):
    """What a burst reads from a contender."""

    def cpu_seconds(self) -> float: ...

    def wait_idle(self, timeout: float) -> float: ...


@dataclass
class PeerProcesses:
    """A peer's processes (an operator, and a submitter service beside it), measured as one tree."""

    processes: list[Reaped]
    ready: Callable[[], bool]
    sampler: TreeSampler | None = field(default=None, init=False)
    started: float = field(default_factory=time.monotonic)

    def start(self) -> PeerProcesses:
        for process in self.processes:
            process.start()
        self.sampler = TreeSampler(tuple(p.root for p in self.processes)).start()
        return self

    def check_alive(self) -> None:
        for process in self.processes:
            process.check_alive()

    def wait_ready(self, timeout: float = 180) -> float:
        deadline = self.started + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            if self.ready():
                return time.monotonic() - self.started
            time.sleep(0.1)
        logs = ", ".join(str(p.log_path) for p in self.processes)
        raise TimeoutError(f"not ready within {timeout:.0f}s; see {logs}")

    def cpu_seconds(self) -> float:
        return read_tree([p.root for p in self.processes]).cpu_seconds

    def operator_cpu_seconds(self) -> float:
        return self.processes[0].own_cpu_seconds()

    def wait_idle(self, timeout: float) -> float:
        return wait_quiet(self.cpu_seconds, self.check_alive, timeout=timeout)

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        for process in reversed(self.processes):
            process.stop()


def _log_path(bench: BenchCluster, name: str, namespace: str) -> Path:
    return Path("/tmp") / f"{bench.cluster.name}-{name}-{namespace}.log"


def kubeflow_processes(
    bench: BenchCluster, binary: Path, namespace: str, workdir: Path, *, submitter: Path | None = None
) -> PeerProcesses:
    """kubeflow's ``controller start`` with its chart's settings (no webhook, no leader election,
    watching only ``namespace``). With ``submitter`` (a k8s-spark-submitter build), the submitter
    service beside it and the ``RestSubmitter`` gate on; else real spark-submit, as in its image."""
    kubeconfig = rsa_kubeconfig(bench, workdir)
    env = base_environment(bench, workdir, kubeconfig)
    home = conformance.ensure_spark(SPARK_VERSION)
    env.update(
        SPARK_HOME=str(home),
        SPARK_USER="spark",
        SPARK_LOCAL_IP="127.0.0.1",
        PATH=f"{home / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    )
    probe_port, submitter_port = free_ports(2)
    argv = [
        str(binary),
        "controller",
        "start",
        f"--kubeconfig={kubeconfig}",
        f"--namespaces={namespace}",
        f"--controller-threads={KUBEFLOW_CONTROLLER_THREADS}",
        *KUBEFLOW_WORKQUEUE,
        f"--kube-api-qps={CLIENT_QPS}",
        f"--kube-api-burst={CLIENT_BURST}",
        "--leader-election=false",
        "--enable-metrics=false",
        "--metrics-bind-address=0",
        "--pprof-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{probe_port}",
    ]
    processes = []
    if submitter is not None:
        argv += [
            "--feature-gates=RestSubmitter=true",
            f"--submitter-service-url=http://127.0.0.1:{submitter_port}/api/v1/spark-submit",
        ]
    operator_log = _log_path(bench, "kubeflow-rest" if submitter else "kubeflow", namespace)
    processes.append(Reaped(argv, env, workdir, operator_log, "spark-operator"))
    if submitter is not None:
        processes.append(submitter_process(bench, submitter, namespace, workdir, env, submitter_port))
    workers = re.compile(r"Starting workers.*\"sparkapplication\"|\"sparkapplication\".*Starting workers")

    def ready() -> bool:
        return http_ok(f"http://127.0.0.1:{probe_port}/readyz") and bool(
            workers.search(operator_log.read_text(errors="replace"))
        )

    # The operator checks the submitter at its start: the submitter goes first.
    return PeerProcesses(processes[::-1] if submitter is not None else processes, ready)


def submitter_process(
    bench: BenchCluster, build_dir: Path, namespace: str, workdir: Path, env: Mapping[str, str], port: int
) -> Reaped:
    """The k8s-spark-submitter service (a JVM that runs Spark's own submission client in-process),
    plain HTTP on loopback, its Kubernetes client from KUBECONFIG."""
    settings = json.loads((build_dir / "settings.json").read_text()) if (build_dir / "settings.json").exists() else {}
    classpath = f"{build_dir / 'submitter.jar'}:{build_dir / 'lib'}/*"
    jvm = [
        str(JAVA_17),
        *settings.get("jvm", ()),
        "-cp",
        classpath,
        settings.get("main", "io.spark.k8s.submit.SparkSubmitServer"),
    ]
    server_env = dict(env)
    for key, value in settings.get("env", {}).items():
        server_env[key] = str(value).format(port=port, threads=SUBMITTER_THREADS, namespace=namespace)
    return Reaped(jvm, server_env, workdir, _log_path(bench, "submitter", namespace), "java")


def apache_processes(bench: BenchCluster, namespace: str, workdir: Path) -> PeerProcesses:
    """apache/spark-kubernetes-operator as its chart runs it (``java ... SparkOperator``), its settings
    as system properties, watching only ``namespace``; its probe port tells when it is ready."""
    kubeconfig = rsa_kubeconfig(bench, workdir)
    env = base_environment(bench, workdir, kubeconfig)
    probe_port, metrics_port = free_ports(2)
    log4j = workdir / "log4j2.properties"
    log4j.write_text(
        "rootLogger.level=INFO\nrootLogger.appenderRef.stdout.ref=console\nappender.console.type=Console\n"
        "appender.console.name=console\nappender.console.target=SYSTEM_ERR\nappender.console.layout.type=PatternLayout\n"
        "appender.console.layout.pattern=%d{HH:mm:ss.SSS} %p %X{resource.name} %C{1.} %m%n%ex\n"
    )
    properties = {
        "spark.kubernetes.operator.namespace": namespace,
        "spark.kubernetes.operator.watchedNamespaces": namespace,
        "spark.kubernetes.operator.health.probePort": probe_port,
        "spark.kubernetes.operator.metrics.port": metrics_port,
        "spark.kubernetes.operator.metrics.josdkMetricsEnabled": "false",
        "spark.kubernetes.operator.reconciler.parallelism": APACHE_PARALLELISM,
        "spark.kubernetes.operator.basePropertyFileName": workdir / "none.properties",
        "spark.kubernetes.operator.metrics.propertyFileName": workdir / "none.properties",
    }
    directory = APACHE_BUILD.directory
    argv = [
        str(JAVA_25),
        *APACHE_JVM,
        f"-Dlog4j.configurationFile={log4j}",
        *(f"-D{k}={v}" for k, v in properties.items()),
        "-cp",
        f"{directory / 'spark-kubernetes-operator.jar'}:{directory / 'lib'}/*",
        "org.apache.spark.k8s.operator.SparkOperator",
    ]
    process = Reaped(argv, env, workdir, _log_path(bench, "apache", namespace), "java")
    return PeerProcesses([process], lambda: http_ok(f"http://127.0.0.1:{probe_port}/readyz"))


@dataclass
class SparkopMeter:
    operator: Operator

    def cpu_seconds(self) -> float:
        return self.operator.stats().cpu_seconds

    def wait_idle(self, timeout: float) -> float:
        started = time.monotonic()
        self.operator.wait_idle(quiet_seconds=QUIET_S, timeout=timeout, cpu_share=IDLE_SHARE)
        return time.monotonic() - started


# -- one burst ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    namespace: str
    apps: k8s.Resource
    app_label: str  # the driver pod's label naming its app
    agents: tuple[str, ...]  # user agents that write for the contender
    manifest: Callable[[str, str], JSON]
    state: Callable[[Mapping[str, Any]], str | None] = app_state  # COMPLETED / FAILED once terminal


def writes_in(bench: BenchCluster, since: datetime, namespace: str) -> list[JSON]:
    """The audit log's writes in ``namespace`` since ``since``, by anyone."""
    events = audit_events(bench.cluster.audit_log, since, "", writes_only=True)
    return [e for e in events if (e.get("objectRef") or {}).get("namespace") == namespace]


def agent_of(event: Mapping[str, Any]) -> str:
    """The product of a user agent: ``spark-operator/v2.5.0 (linux/amd64) ...`` -> ``spark-operator``."""
    return str(event.get("userAgent", "")).split("/", 1)[0].split(" ", 1)[0]


def apiserver_seconds(cpu: Mapping[str, float]) -> float:
    return sum(v for k, v in cpu.items() if "apiserver" in k)


def machine_cpu() -> tuple[float, float]:
    """CPU seconds this machine has been busy (every process), and of that at nice > 0, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS, nice / CLOCK_TICKS


def settle(bench: BenchCluster, quiet_seconds: float = 2.0, share: float = 0.2, timeout: float = 180) -> None:
    """Until the API server and etcd together use less than ``share`` of a core for ``quiet_seconds``
    (after a CRD install the API server rebuilds its OpenAPI documents for a while)."""
    pids = [pid for name, pid in bench.component_pids().items() if "apiserver" in name or name == "etcd"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = sum(cpu_seconds(p) for p in pids)
        time.sleep(quiet_seconds)
        if sum(cpu_seconds(p) for p in pids) - before < share * quiet_seconds:
            return


async def apiserver_idle_rate(bench: BenchCluster, seconds: float = BASELINE_S) -> float:
    """The API server's CPU per second while nothing happens (the least of one-second readings, once it
    settled): what a burst's window holds besides the burst (watches, leases, the controller manager),
    taken off its CPU per app."""
    await asyncio.to_thread(settle, bench)
    rates = []
    for _ in range(max(1, round(seconds))):
        before = apiserver_seconds(bench.component_cpu())
        await asyncio.sleep(1.0)
        rates.append(apiserver_seconds(bench.component_cpu()) - before)
    return min(rates)


@dataclass
class Window:
    """The API server's and the machine's CPU over a burst, the API server's idle share taken off."""

    bench: BenchCluster
    idle_rate: float
    started: float = field(default_factory=time.monotonic)
    split: CpuSplit = field(init=False)
    machine: tuple[float, float] = field(default_factory=machine_cpu)
    load_before: float = field(default_factory=lambda: os.getloadavg()[0])

    def __post_init__(self) -> None:
        self.split = CpuSplit(self.bench)

    def figures(self, apps: int) -> dict[str, Any]:
        cpu = self.split.delta()
        seconds = time.monotonic() - self.started
        busy, nice = (round(b - a, 2) for a, b in zip(self.machine, machine_cpu(), strict=True))
        net = apiserver_seconds(cpu) - self.idle_rate * seconds
        return {
            "window_s": round(seconds, 2),
            "apiserver_idle_cpu_share": round(self.idle_rate, 4),
            "apiserver_cpu_ms_per_app": round(max(net, 0.0) / apps * 1000, 1),
            "apiserver_cpu_ms_per_app_raw": round(apiserver_seconds(cpu) / apps * 1000, 1),
            "machine_busy_cpu_s": busy,
            "machine_niced_cpu_s": nice,  # other people's niced work (tests, builds) sharing the cores
            "load_average_1m_before": round(self.load_before, 2),
            "load_average_1m_after": round(os.getloadavg()[0], 2),
            "cpu_seconds": cpu,
        }


async def burst(
    bench: BenchCluster, target: Target, meter: Meter, names: Sequence[str], concurrency: int, budget: float
) -> dict[str, Any]:
    """Create ``names`` at once; stamp each app's driver pod and terminal state; wait until the contender
    is idle again. Its figures, and the API server's, over that window."""
    ns, count = target.namespace, len(names)
    created: dict[str, float] = {}

    def driver_app(obj: JSON) -> str | None:
        return label(obj, target.app_label)

    def terminal(obj: JSON) -> str | None:
        return str(obj["metadata"]["name"]) if target.state(obj) in TERMINAL else None

    async with bench.client() as kube:

        async def create(name: str) -> None:
            await kube._call("POST", target.apps.path(ns), body=target.manifest(name, ns), decode=False)
            created[name] = time.monotonic()

        pod_selector = f"{labels.SPARK_ROLE}={labels.ROLE_DRIVER}"
        async with (
            stamping(kube, k8s.PODS, driver_app, selector=pod_selector, namespace=ns) as pods,
            stamping(kube, target.apps, terminal, namespace=ns) as done,
        ):
            idle_rate = await apiserver_idle_rate(bench)
            since = now_utc()
            window = Window(bench, idle_rate)
            cpu_before = meter.cpu_seconds()
            start = time.monotonic()
            await bounded([partial(create, n) for n in names], concurrency)
            create_seconds = time.monotonic() - start
            try:
                async with asyncio.timeout(budget):
                    await pods.wait_for(count)
                    cpu_at_last_pod = meter.cpu_seconds()
                    await done.wait_for(count)
            except TimeoutError:
                raise TimeoutError(
                    f"{ns}: after {budget:.0f}s, {pods.count()}/{count} driver pods, {done.count()}/{count} apps "
                    "finished; see the operator's log"
                ) from None
            at_done = time.monotonic()
            idle_after = await asyncio.to_thread(meter.wait_idle, 600)
            cpu_after = meter.cpu_seconds()
        figures = window.figures(count)
        states = Counter(target.state(obj) for obj in await _list(kube, target.apps, ns))
    accounted = cpu_after - cpu_before + sum(figures["cpu_seconds"].values())
    figures["machine_other_cpu_s"] = round(figures["machine_busy_cpu_s"] - accounted, 1)
    writes = writes_in(bench, since, ns)
    ours = [w for w in writes if str(w.get("userAgent", "")).startswith(target.agents)]
    others = Counter(agent_of(w) for w in writes if not str(w.get("userAgent", "")).startswith(target.agents))
    last_pod = max(pods.seen.values()) - start
    return {
        "apps": count,
        "namespace": ns,
        "final_states": dict(states),
        "create_seconds": round(create_seconds, 2),
        "seconds_to_last_driver_pod": round(last_pod, 2),
        "apps_per_second": round(count / last_pod, 3),
        "seconds_to_all_finished": round(at_done - start, 2),
        "idle_after_s": round(idle_after, 1),
        "create_to_driver_pod": latency_summary(pods.seen[n] - created[n] for n in names),
        "create_to_finished": latency_summary(done.seen[n] - created[n] for n in names),
        "cpu_seconds_to_last_driver_pod": round(cpu_at_last_pod - cpu_before, 2),
        "cpu_seconds_to_idle": round(cpu_after - cpu_before, 2),
        "cpu_ms_per_app": round((cpu_after - cpu_before) / count * 1000, 1),
        "writes_per_app": round(len(ours) / count, 2),
        "audited_writes": dict(Counter(f"{agent_of(w)}: {_write_kind(w)}" for w in ours).most_common()),
        "other_writers": dict(others.most_common()),  # the user's creates, the simulator's executors, ...
        **figures,
    }


async def _list(kube: k8s.Kube, resource: k8s.Resource, namespace: str) -> list[JSON]:
    listed = await kube._call("GET", resource.path(namespace))
    return list(listed.get("items") or [])


async def ceiling_burst(bench: BenchCluster, names: Sequence[str], concurrency: int) -> dict[str, Any]:
    """throughput.py's bare client doing sparkop's writes for ``names``; create -> driver pod is from the
    start of each app's first write (its SparkApplication's create) to its driver pod's."""
    bodies = {name: ceiling_bodies(name) for name in names}  # rendered before the clock starts
    began: dict[str, float] = {}
    pods: dict[str, float] = {}
    idle_rate = await apiserver_idle_rate(bench)
    since = now_utc()
    window = Window(bench, idle_rate)
    async with bench.client() as kube:

        async def one(name: str) -> None:
            began[name] = time.monotonic()
            await ceiling_app(kube, bodies[name], pods)

        start = time.monotonic()
        await bounded([partial(one, n) for n in names], concurrency)
        seconds = time.monotonic() - start
    figures = window.figures(len(names))
    figures["machine_other_cpu_s"] = round(figures["machine_busy_cpu_s"] - sum(figures["cpu_seconds"].values()), 1)
    count = len(names)
    writes = [
        w
        for w in writes_in(bench, since, CEILING_NAMESPACE)
        if str(w.get("userAgent", "")).startswith(BENCH_USER_AGENT)
    ]
    # The app's own create is the user's write, not the operator's: left out, as for the contenders.
    submission = [w for w in writes if _write_kind(w) != "create sparkapplications"]
    last_pod = max(pods.values()) - start
    return {
        "apps": count,
        "namespace": CEILING_NAMESPACE,
        "seconds_to_last_driver_pod": round(last_pod, 2),
        "apps_per_second": round(count / last_pod, 3),
        "seconds_with_status_writes": round(seconds, 2),
        "create_to_driver_pod": latency_summary(pods[n] - began[n] for n in names),
        "cpu_ms_per_app": round(figures["cpu_seconds"].get("bench client", 0.0) / count * 1000, 1),
        "writes_per_app": round(len(submission) / count, 2),
        "audited_writes": dict(Counter(_write_kind(w) for w in submission).most_common()),
        **figures,
    }


# -- the run -----------------------------------------------------------------------------------------


def _namespace(bench: BenchCluster, name: str) -> str:
    try:
        bench.kubectl("create", "namespace", name)
    except RuntimeError as err:
        if "AlreadyExists" not in str(err):
            raise
    wait_default_service_account(bench, name)
    return name


def measure_processes(
    bench: BenchCluster, peer: PeerProcesses, target: Target, names: Sequence[str], concurrency: int, timeout: float
) -> dict[str, Any]:
    peer.start()
    try:
        ready = peer.wait_ready()
        peer.wait_idle(120)
        assert peer.sampler is not None
        peer.sampler.reset_peaks()
        own_before = peer.operator_cpu_seconds()
        result = asyncio.run(burst(bench, target, peer, names, concurrency, timeout))
        sampler = peer.sampler
        result.update(
            ready_s=round(ready, 2),
            operator_cpu_ms_per_app=round((peer.operator_cpu_seconds() - own_before) / len(names) * 1000, 1),
            operator_peak_rss_mib=round(peer.processes[0].own_peak_rss_mib(), 1),
            tree_peak_rss_mib=round(sampler.peak_rss_mib, 1),
            peak_concurrent_jvms=sampler.peak_jvms,
            jvms_seen=len(sampler.jvms_seen),
            tree_samples=sampler.samples,
            logs=[str(p.log_path) for p in peer.processes],
        )
        return result
    finally:
        peer.stop()


def measure_sparkop(
    bench: BenchCluster, namespace: str, names: Sequence[str], concurrency: int, timeout: float
) -> dict[str, Any]:
    operator = Operator(bench, (namespace,), log_name=f"peer-sparkop-{namespace}.log").start()
    try:
        ready = operator.wait_ready()
        operator.wait_idle(quiet_seconds=QUIET_S, timeout=120, cpu_share=IDLE_SHARE)
        target = Target(namespace, kinds.SPARK_APPLICATIONS, labels.APP, SPARKOP_AGENTS, sparkop_manifest)
        result = asyncio.run(burst(bench, target, SparkopMeter(operator), names, concurrency, timeout))
        stats = operator.stats()
        result.update(
            ready_s=round(ready, 2),
            operator_cpu_ms_per_app=result["cpu_ms_per_app"],
            operator_peak_rss_mib=round(stats.peak_rss_mib, 1),
            tree_peak_rss_mib=round(stats.peak_rss_mib, 1),
            logs=[str(operator.log_path)],
        )
        return result
    finally:
        operator.stop()


@dataclass(frozen=True)
class Contender:
    """A peer as a run measures it: who it is, and how to run one burst of it in a namespace."""

    peer: Peer
    run: Callable[[BenchCluster, str, Sequence[str], int, float], dict[str, Any]]


def kubeflow_contender(binary: Path, version: str) -> Contender:
    peer = Peer("kubeflow", "kubeflow", version, False, "one spark-submit JVM per app")

    def run(bench: BenchCluster, ns: str, names: Sequence[str], concurrency: int, timeout: float) -> dict[str, Any]:
        workdir = Path(tempfile.mkdtemp(prefix=f"{bench.cluster.name}-kubeflow-"))
        processes = kubeflow_processes(bench, binary, ns, workdir)
        target = Target(ns, KUBEFLOW_APPS, KUBEFLOW_APP_LABEL, ("spark-operator/", FABRIC8), kubeflow_manifest)
        return measure_processes(bench, processes, target, names, concurrency, timeout)

    return Contender(peer, run)


def kubeflow_rest_contender() -> Contender:
    build_dir = KUBEFLOW_MAIN_BUILD.directory
    version = KUBEFLOW_MAIN_BUILD.read("VERSION")
    peer = Peer("kubeflow-rest", "kubeflow main, RestSubmitter", version, True, "posts to a k8s-spark-submitter JVM")

    def run(bench: BenchCluster, ns: str, names: Sequence[str], concurrency: int, timeout: float) -> dict[str, Any]:
        workdir = Path(tempfile.mkdtemp(prefix=f"{bench.cluster.name}-kubeflow-rest-"))
        processes = kubeflow_processes(
            bench, build_dir / "spark-operator", ns, workdir, submitter=build_dir / "submitter"
        )
        target = Target(ns, KUBEFLOW_APPS, KUBEFLOW_APP_LABEL, ("spark-operator/", FABRIC8), kubeflow_manifest)
        return measure_processes(bench, processes, target, names, concurrency, timeout)

    return Contender(peer, run)


def apache_contender() -> Contender:
    version = APACHE_BUILD.read("VERSION")
    peer = Peer("apache", "Apache spark-kubernetes-operator", version, True, "Spark's submission code in its JVM")

    def run(bench: BenchCluster, ns: str, names: Sequence[str], concurrency: int, timeout: float) -> dict[str, Any]:
        workdir = Path(tempfile.mkdtemp(prefix=f"{bench.cluster.name}-apache-"))
        target = Target(ns, APACHE_APPS, APACHE_APP_LABEL, (FABRIC8,), apache_manifest, apache_state)
        return measure_processes(bench, apache_processes(bench, ns, workdir), target, names, concurrency, timeout)

    return Contender(peer, run)


PEER_KEYS = ("kubeflow", "kubeflow-rest", "apache")


def contenders(wanted: Sequence[str]) -> tuple[list[Contender], dict[str, str]]:
    """The peers asked for that can run here, and why each other one cannot."""
    chosen: list[Contender] = []
    left_out: dict[str, str] = {}
    for key in wanted:
        if key == "kubeflow":
            chosen.append(kubeflow_contender(ensure_kubeflow_operator(), kubeflow_version()))
        elif key == "kubeflow-rest":
            missing = KUBEFLOW_MAIN_BUILD.missing()
            if missing:
                left_out[key] = f"its k8s-spark-submitter service could not be built here, {missing}"
            else:
                chosen.append(kubeflow_rest_contender())
        elif key == "apache":
            missing = APACHE_BUILD.missing()
            if missing:
                left_out[key] = missing
            else:
                chosen.append(apache_contender())
    return chosen, left_out


def install_peer_crds(bench: BenchCluster, chosen: Sequence[Contender]) -> None:
    keys = {c.peer.key for c in chosen}
    if keys & {"kubeflow", "kubeflow-rest"}:
        # kubeflow main's CRDs are a superset of the release's: one set serves both.
        crds = sorted((KUBEFLOW_MAIN_BUILD.directory / "crds").glob("*.yaml")) if "kubeflow-rest" in keys else []
        install_crds(bench, crds or kubeflow_crds())
    if "apache" in keys:
        install_crds(bench, sorted((APACHE_BUILD.directory / "crds").glob("*.yaml")))


def measure_burst(
    bench: BenchCluster,
    chosen: Sequence[Contender],
    apps: int,
    rounds: int,
    *,
    concurrency: int,
    timeout: float,
    spark_submit_max_apps: int,
    left_out: Mapping[str, str],
    after_round: Callable[[dict[str, Any]], None] = lambda burst: None,
) -> dict[str, Any]:
    """Every contender on ``bench``, ``rounds`` times each in turn (fresh namespaces each round): every
    round's figures, their medians under "summary", and one entry per operator under "operators".
    ``after_round`` is given the result as of each round (so a run stopped early keeps what it measured)."""
    started = time.strftime("%Y-%m-%d %H:%M")
    running = [c for c in chosen if c.peer.in_process or apps <= spark_submit_max_apps]
    skipped = dict(left_out)
    for c in chosen:
        if c not in running:
            skipped[c.peer.key] = f"forks a spark-submit JVM per app: run up to {spark_submit_max_apps} apps"
    peers = [*(c.peer for c in running), SPARKOP, CEILING]
    per_round: list[dict[str, Any]] = []
    for r in range(1, rounds + 1):
        one: dict[str, Any] = {}
        for contender in running:
            key = contender.peer.key
            namespace = _namespace(bench, f"peer-{key}-{apps}-{r}")
            log(f"round {r}/{rounds}: {contender.peer.name} {contender.peer.version}, {apps} apps")
            one[key] = contender.run(bench, namespace, _names(key[:2], apps), concurrency, timeout)
            log(f"{key}: {one[key]['apps_per_second']} apps/s, {one[key]['cpu_ms_per_app']} ms CPU/app")
            settle(bench)
        namespace = _namespace(bench, f"peer-sparkop-{apps}-{r}")
        log(f"round {r}/{rounds}: sparkop, {apps} apps")
        one["sparkop"] = measure_sparkop(bench, namespace, _names("so", apps), concurrency, timeout)
        log(f"sparkop: {one['sparkop']['apps_per_second']} apps/s, {one['sparkop']['cpu_ms_per_app']} ms CPU/app")
        settle(bench)
        log(f"round {r}/{rounds}: ceiling, {apps} apps' writes by a bare client")
        one["ceiling"] = asyncio.run(ceiling_burst(bench, _names(f"peer-ceil-{apps}-{r}", apps), concurrency))
        log(f"ceiling: {one['ceiling']['apps_per_second']} apps/s")
        settle(bench)
        per_round.append(one)
        after_round(_burst_result(apps, started, peers, skipped, per_round))
    return _burst_result(apps, started, peers, skipped, per_round)


def _burst_result(
    apps: int, started: str, peers: Sequence[Peer], skipped: Mapping[str, str], per_round: list[dict[str, Any]]
) -> dict[str, Any]:
    summary = {p.key: _medians([one[p.key] for one in per_round]) for p in peers}
    return {
        "apps": apps,
        "rounds": len(per_round),
        "machine": {
            "cores": os.cpu_count(),
            "started": started,
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "peers": [{**p.record(), "submits": p.how} for p in peers],
        "left_out": dict(skipped),
        "operators": [operator_entry(p, summary[p.key]) for p in peers],
        "summary": summary,
        "per_round": list(per_round),
    }


def carry_over(burst: dict[str, Any], recorded: Mapping[str, Any] | None, key: str) -> None:
    """Put ``key``'s figures from an earlier recorded run of the same burst size into ``burst``, first,
    marked with when they were taken and over how many rounds (a peer too slow to run again in the
    time there is: kubeflow's spark-submit takes half an hour for 40 apps on a busy machine)."""
    if recorded is None or key not in (recorded.get("summary") or {}):
        burst["left_out"][key] = (
            f"not run in this run (--carry), and no earlier run of {burst['apps']} apps is recorded for it"
        )
        return
    (peer,) = [p for p in recorded["peers"] if p["key"] == key]
    taken = {"measured": recorded["machine"]["started"], "rounds": recorded["rounds"]}
    burst["peers"] = [{**peer, "carried_over": taken}, *burst["peers"]]
    burst["summary"] = {key: recorded["summary"][key], **burst["summary"]}
    entries = [e for e in recorded["operators"] if e["key"] == key]
    burst["operators"] = [{**e, "carried_over": taken} for e in entries] + burst["operators"]
    burst["left_out"].pop(key, None)


def operator_entry(peer: Peer, fig: Mapping[str, Any]) -> dict[str, Any]:
    """The issue's figures of one operator, flat."""
    return {
        **peer.record(),
        "apps_per_s": fig["apps_per_second"],
        "p50_s": fig["create_to_driver_pod"]["p50_s"],
        "p99_s": fig["create_to_driver_pod"]["p99_s"],
        "cpu_ms_per_app": fig["cpu_ms_per_app"],
        "peak_rss_mib": fig.get("tree_peak_rss_mib"),
        "writes_per_app": fig["writes_per_app"],
        "apiserver_cpu_ms_per_app": fig["apiserver_cpu_ms_per_app"],
        # The machine is shared: the load before and after, beside the other processes' CPU (QUIET_OTHER_SHARE).
        "load_average_1m_before": fig.get("load_average_1m_before"),
        "load_average_1m_after": fig.get("load_average_1m_after"),
    }


def _names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i:04d}" for i in range(count)]


def _medians(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Each numeric figure's median over the rounds (nested ones too); anything else from the first."""
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, bool) or not isinstance(value, (int, float, dict)):
            out[key] = value
        elif isinstance(value, dict):
            out[key] = _medians([run.get(key) or {} for run in runs])
        else:
            numbers = [run[key] for run in runs if isinstance(run.get(key), (int, float))]
            out[key] = round(statistics.median(numbers), 3) if numbers else None
    return out


# -- the table ---------------------------------------------------------------------------------------


def _num(value: Any, unit: str = "") -> str:
    if isinstance(value, str):
        return value
    if not isinstance(value, (int, float)):
        return "—"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    if value >= 100:
        return f"{value:,.0f}{unit}"
    return f"{value:.1f}{unit}" if value >= 10 else f"{value:.2f}{unit}"


def _ratio(best: Any, sparkop: Any, higher_is_better: bool) -> str:
    """sparkop against the best in-process peer: "3.1x better" or "1.4x worse" (with the multiplication sign)."""
    if not isinstance(best, (int, float)) or not isinstance(sparkop, (int, float)) or not best or not sparkop:
        return "—"
    ratio = sparkop / best if higher_is_better else best / sparkop
    word = "better"
    if ratio < 1:
        ratio, word = 1 / ratio, "worse"
    shown = f"{ratio:,.0f}" if ratio >= 10 else f"{ratio:.1f}"
    return f"{shown}\N{MULTIPLICATION SIGN} {word}"


@dataclass(frozen=True)
class Row:
    title: str
    get: Callable[[Mapping[str, Any]], Any]
    unit: str = ""
    higher_is_better: bool | None = None  # None: not compared
    ceiling: bool = True  # whether the ceiling has this figure


def _pct(q: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda fig: fig["create_to_driver_pod"][q]


ROWS = (
    Row("apps/s (create → last app's driver pod)", lambda f: f["apps_per_second"], "", True),
    Row("create → driver pod p50", _pct("p50_s"), " s", False),
    Row("create → driver pod p99", _pct("p99_s"), " s", False),
    Row("burst: first create → every app finished", lambda f: f.get("seconds_to_all_finished"), " s", False, False),
    Row(
        "apps COMPLETED (the others FAILED)",
        lambda f: f"{_num((f.get('final_states') or {}).get('COMPLETED', 0))} / {_num(f['apps'])}",
        ceiling=False,
    ),
    Row(
        "CPU per app until idle, whole process tree (ceiling: the client)", lambda f: f["cpu_ms_per_app"], " ms", False
    ),
    Row("CPU per app, the operator process alone", lambda f: f.get("operator_cpu_ms_per_app"), " ms", False, False),
    Row("peak RSS, whole process tree", lambda f: f.get("tree_peak_rss_mib"), " MiB", False, False),
    Row("writes per app (audit log)", lambda f: f["writes_per_app"], "", False),
    Row("API server CPU per app (its idle rate taken off)", lambda f: f["apiserver_cpu_ms_per_app"], " ms", False),
    Row(
        "machine's load average (1 min) before → after",
        lambda f: f"{_num(f.get('load_average_1m_before'))} → {_num(f.get('load_average_1m_after'))}",
    ),
)
QUIET_OTHER_SHARE: Final = 0.1
"""Other processes using more than this share of the machine's cores during a burst: its times and CPU
need re-taking. Not the load average, which counts the contender's own processes too (kubeflow's
spark-submit JVMs alone put it at 18 on a quiet machine)."""


def table_rows(burst_result: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One row per figure: its title, each operator's value, and sparkop against the best in-process peer."""
    summary = burst_result["summary"]
    peers = [p for p in burst_result["peers"]]
    in_process = [p["key"] for p in peers if p["in_process"] and p["key"] not in ("sparkop", "ceiling")]
    rows = []
    for row in ROWS:
        values = [None if (p["key"] == "ceiling" and not row.ceiling) else row.get(summary[p["key"]]) for p in peers]
        compared = "—"
        if row.higher_is_better is not None and in_process:
            peer_values = [row.get(summary[k]) for k in in_process]
            numbers = [v for v in peer_values if isinstance(v, (int, float)) and v]
            if numbers:
                best = max(numbers) if row.higher_is_better else min(numbers)
                compared = _ratio(best, row.get(summary["sparkop"]), row.higher_is_better)
        rows.append((row.title, *(_num(v, row.unit) for v in values), compared))
    return rows


def table(burst_result: Mapping[str, Any]) -> str:
    header = [
        "figure",
        *(
            f"{p['name']} {p['version']}" if p["key"] not in ("sparkop", "ceiling") else p["name"]
            for p in burst_result["peers"]
        ),
        "sparkop vs the best in-process peer",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(burst_result)]
    return "\n".join(lines)


NOTES = """\
* apps/s: apps over the seconds from the first create to the last app's driver pod. create → driver pod:
  from each app's create (the ceiling: from its first write) to its driver pod, as a watch sees it.
* CPU per app: from the first create until the contender is idle again (every app finished), over the
  apps, for every process of the contender: kubeflow's operator and each spark-submit it forked;
  kubeflow-rest's operator and its submitter service; the Apache operator's JVM; sparkop's process;
  the ceiling's own client. The API server's CPU is over the same window, less its idle rate times the
  window (the raw figure is in the JSON).
* peak RSS: the whole process tree, read every 0.1 s (kubeflow: with its concurrent spark-submits).
* writes per app: the API server's audit log, by user agent (client-go's for the Go operators,
  fabric8's for spark-submit, the submitter and the Apache operator), the user's create left out.
"""


def _other_share(figures: Mapping[str, Any], cores: int) -> float | None:
    """The share of the machine's cores that processes other than the contender's and the cluster's
    used during its burst."""
    other, window = figures.get("machine_other_cpu_s"), figures.get("window_s")
    if not isinstance(other, (int, float)) or not isinstance(window, (int, float)) or window <= 0:
        return None
    return max(0.0, other) / (window * cores)


def sharing(burst_result: Mapping[str, Any]) -> str:
    """What else used the cores during each burst: the figures are only as good as the machine was quiet."""
    parts = []
    for p in burst_result["peers"]:
        fig = burst_result["summary"][p["key"]]
        parts.append(
            f"{p['key']} {_num(fig.get('machine_other_cpu_s'), ' CPU-s')} in {_num(fig.get('window_s'), ' s')} "
            f"(load {fig.get('load_average_1m_before')} before)"
        )
    text = f"* other processes on the machine during each burst: {'; '.join(parts)}.\n"
    cores = burst_result["machine"]["cores"]
    busy = [
        f"{p['key']} {share:.0%}"
        for p in burst_result["peers"]
        if (share := _other_share(burst_result["summary"][p["key"]], cores)) is not None and share > QUIET_OTHER_SHARE
    ]
    if busy:
        text += (
            f"* other processes used over {QUIET_OTHER_SHARE:.0%} of the {cores} cores during a burst "
            f"({', '.join(busy)}): its times and CPU figures need re-taking on a quiet machine; "
            "the writes are counts and hold.\n"
        )
    for p in burst_result["peers"]:
        if taken := p.get("carried_over"):
            text += (
                f"* {p['key']}'s figures are carried over from the run of {taken['measured']} "
                f"({taken['rounds']} round(s)), not taken in this one.\n"
            )
    for key, why in (burst_result.get("left_out") or {}).items():
        text += f"* {key} not run at {burst_result['apps']} apps: {why}.\n"
    return text


def _bursts(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [result["bursts"][k] for k in sorted(result["bursts"], key=int)]


def markdown(result: Mapping[str, Any]) -> str:
    parts = ["# sparkop beside the Spark operators users pick today\n"]
    for b in _bursts(result):
        medians = f", medians of {b['rounds']} rounds" if b["rounds"] > 1 else ""
        parts.append(
            f"## {b['apps']:,} apps\n\n{b['apps']:,} SparkApplications created at once{medians}, on one devcluster "
            f"(KWOK nodes, the Spark-driver simulator), {b['machine']['cores']} cores, {b['machine']['started']}. "
            f"`bench/peer.py`.\n\n{table(b)}\n\n{sharing(b)}"
        )
    return "\n".join(parts) + "\n" + NOTES


README = ROOT / "README.md"
README_BEGIN, README_END = "<!-- bench:peer begin -->", "<!-- bench:peer end -->"


def readme_block(result: Mapping[str, Any]) -> str:
    """README's comparison, rendered from a recorded run (a unit test holds the two together)."""
    parts = [README_BEGIN]
    for b in _bursts(result):
        medians = f", medians of {b['rounds']} rounds" if b["rounds"] > 1 else ""
        parts.append(
            f"Measured by `bench/peer.py` on {b['machine']['started']}: {b['apps']:,} apps created at once for each "
            f"in turn on one devcluster ({b['machine']['cores']} cores{medians}; load average "
            f"{b['machine']['load_average_1m_at_end']} at the end):\n\n{table(b)}\n\n{sharing(b)}"
        )
    parts.append(README_END)
    return "\n".join(parts)


def write_readme(result: Mapping[str, Any]) -> None:
    text = README.read_text()
    start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    README.write_text(text[:start] + readme_block(result) + text[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, nargs="+", default=[40], help="burst sizes (apps created at once)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the contenders; the table shows medians")
    parser.add_argument("--peers", default=",".join(PEER_KEYS), help=f"comma-separated, of {', '.join(PEER_KEYS)}")
    parser.add_argument(
        "--spark-submit-max-apps", type=int, default=40, help="largest burst for kubeflow's spark-submit"
    )
    parser.add_argument("--concurrency", type=int, default=50, help="creates in flight")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a burst may take")
    parser.add_argument("--out", default=str(RESULTS / "peer.json"))
    parser.add_argument("--markdown", default=str(RESULTS / "peer.md"))
    parser.add_argument(
        "--replace", action="store_true", help="drop the recorded burst sizes this run does not measure"
    )
    parser.add_argument("--from-json", type=Path, help="only render the tables and markdown of a recorded run")
    parser.add_argument("--readme", action="store_true", help="rewrite README.md's comparison from the result")
    parser.add_argument(
        "--carry",
        default="",
        help="comma-separated peers not run again: their figures of each burst size come from the recorded --out",
    )
    args = parser.parse_args(argv)
    if args.from_json is not None:
        recorded = json.loads(args.from_json.read_text())
        Path(args.markdown).write_text(markdown(recorded))
        if args.readme:
            write_readme(recorded)
        print(markdown(recorded))
        return 0
    carried = [k for k in args.carry.split(",") if k]
    wanted = [k for k in args.peers.split(",") if k and k not in carried]
    if unknown := set(wanted + carried) - set(PEER_KEYS):
        parser.error(f"unknown peers {sorted(unknown)}; choose from {', '.join(PEER_KEYS)}")
    if min(args.apps) < 1 or args.rounds < 1:
        parser.error("--apps and --rounds must be at least 1")
    chosen, left_out = contenders(wanted)  # before the cluster: a first build of kubeflow takes minutes
    for key, why in left_out.items():
        log(f"{key}: left out: {why}")
    conformance.ensure_spark(SPARK_VERSION)
    out = Path(args.out)
    result: dict[str, Any] = {"bursts": {}}
    earlier: dict[str, Any] = json.loads(out.read_text()).get("bursts") or {} if out.exists() else {}
    if not args.replace:
        result["bursts"] = dict(earlier)

    def record(apps: int, burst: dict[str, Any]) -> None:
        for key in carried:
            if key == "kubeflow" and apps > args.spark_submit_max_apps:
                burst["left_out"][key] = (
                    f"forks a spark-submit JVM per app: run up to {args.spark_submit_max_apps} apps"
                )
            else:
                carry_over(burst, earlier.get(str(apps)), key)
        result["bursts"][str(apps)] = burst
        write_result(out, result)

    with BenchCluster.up(f"bench-peer-{os.getpid()}") as bench:
        install_peer_crds(bench, chosen)
        settle(bench)
        _namespace(bench, CEILING_NAMESPACE)
        for apps in args.apps:
            burst = measure_burst(
                bench,
                chosen,
                apps,
                args.rounds,
                concurrency=args.concurrency,
                timeout=args.timeout,
                spark_submit_max_apps=args.spark_submit_max_apps,
                left_out=left_out,
                after_round=partial(record, apps),
            )
            record(apps, burst)
    Path(args.markdown).write_text(markdown(result))
    if args.readme:
        write_readme(result)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
