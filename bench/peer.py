"""kubeflow's spark-operator beside sparkop and the API server's ceiling, in one run on one devcluster.

On one devcluster (KWOK nodes and the Spark-driver simulator), a burst of N SparkApplications created
at once (default 40), for three contenders one after another, each in a namespace of its own:

1. **kubeflow**: kubeflow's spark-operator (``KUBEFLOW_SPARK_OPERATOR_VERSION`` in
   devcluster/gobuild/versions.env), built once from its Go module (devcluster/gobuild/spark-operator,
   cached under ``~/.cache/sparkop/bin/<key>/``; minutes on the first run), running ``controller start``
   as a local process (10 controller threads, no webhook, no leader election, watching only its
   namespace) with its CRDs from the module's chart. It runs real ``spark-submit`` (pyspark 3.5.9, the
   machine's Java 17) for every app, as it does in a cluster: the Go process and the spark-submit JVMs
   it forks are one process tree, measured as a whole. The tree runs under a small reaper that is its
   child subreaper, so the JVMs bash orphans are reaped (and counted) too; the tree is read from /proc
   every ``SAMPLE_S``.
2. **sparkop** (``sparkop run``, bench/harness.py's Operator) on the same apps: the same kubeflow
   v1beta2 manifest with sparkop's apiVersion (docs/api.md, "Migrating from kubeflow").
3. **ceiling**: a bare client doing sparkop's submission writes (bench/throughput.py's).

Figures per contender: apps/s (first create -> the last app's driver pod), create -> driver pod
p50/p99, how long the burst took (to the last driver pod, to every app COMPLETED), CPU per app until the
contender is idle again (kubeflow: the whole tree, spark-submit JVMs included; sparkop: its process;
ceiling: the benchmark's own client), peak RSS (kubeflow: the operator process alone and the tree with
its concurrent spark-submits), writes per app (the API server's audit log by user agent; the audit
policy logs sparkop.io's kinds only, so kubeflow's own SparkApplication writes are counted from a watch,
one per new resourceVersion) and the API server's CPU per app over the same window.

    .venv/bin/python bench/peer.py                 # 40 apps, one round (kubeflow's part takes ~3 min)
    .venv/bin/python bench/peer.py --apps 5        # a quick look
    .venv/bin/python bench/peer.py --from-json bench/results/peer.json   # the table again
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
from typing import Any, Protocol
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
KUBEFLOW_MODULE = "github.com/kubeflow/spark-operator/v2"
KUBEFLOW_VERSION_KEY = "KUBEFLOW_SPARK_OPERATOR_VERSION"
KUBEFLOW_GROUP = "sparkoperator.k8s.io"
KUBEFLOW_API_VERSION = f"{KUBEFLOW_GROUP}/v1beta2"
KUBEFLOW_APPS = k8s.Resource(KUBEFLOW_GROUP, "v1beta2", "sparkapplications", "SparkApplication")
KUBEFLOW_CRDS_DIR = "charts/spark-operator-chart/crds"
KUBEFLOW_APP_LABEL = f"{KUBEFLOW_GROUP}/app-name"  # on the driver pods spark-submit creates for it
KUBEFLOW_CONTROLLER_THREADS = 10
# Who writes for kubeflow: its controller (client-go's default user agent, after the binary's name) and
# the spark-submit JVMs (fabric8's Kubernetes client).
KUBEFLOW_AGENTS = ("spark-operator/", "fabric8-kubernetes-client/")
SPARKOP_AGENTS = ("sparkop/",)
SPARK_VERSION = "3.5.9"
SAMPLE_S = 0.1  # how often kubeflow's process tree is read (a launcher JVM lives about a second)
QUIET_S = 3.0  # idle: under IDLE_SHARE of a core for this long
IDLE_SHARE = 0.02
BASELINE_S = 5.0  # the API server's idle CPU is measured this long before each burst
TERMINAL = ("COMPLETED", "FAILED")
CONTENDERS = ("kubeflow", "sparkop", "ceiling")


# -- the apps ----------------------------------------------------------------------------------------


def kubeflow_manifest(name: str, namespace: str) -> JSON:
    """kubeflow's v1beta2 SparkApplication: the small SparkPi the other benchmarks submit
    (harness.app_manifest), whose driver the simulator runs for 0 s, then succeeds."""
    return {
        "apiVersion": KUBEFLOW_API_VERSION,
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
            "driver": {
                "cores": 1,
                "memory": "512m",
                "annotations": {"sim.sparkop.io/run-seconds": "0", "sim.sparkop.io/outcome": "Succeeded"},
            },
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        },
    }


def sparkop_manifest(name: str, namespace: str) -> JSON:
    """The same app moved over to sparkop: only the apiVersion changes (docs/api.md)."""
    return {**kubeflow_manifest(name, namespace), "apiVersion": labels.API_VERSION}


# -- kubeflow's binary and CRDs ---------------------------------------------------------------------


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


def install_kubeflow_crds(bench: BenchCluster) -> None:
    module = scheduler_crds.module_dir(KUBEFLOW_MODULE, kubeflow_version())
    files = sorted((module / KUBEFLOW_CRDS_DIR).glob("*.yaml"))
    if not files:
        raise RuntimeError(f"no CRDs in {module / KUBEFLOW_CRDS_DIR}")
    scheduler_crds.install(bench.cluster.kubectl, bench.cluster.kubeconfig, files=files)


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
    cpu_seconds: float  # every process below the root, living or reaped (the root's own CPU left out)
    rss_mib: float  # resident memory of the living processes below the root
    jvms: frozenset[int]  # the java processes among them


def read_tree(root: int) -> TreeReading:
    """The tree below ``root`` (a reaper): its living processes' CPU and their reaped children's, plus
    the root's reaped orphans. Exact when nothing exits while it is read (at the end of a run); a
    process reaped mid-read may be missed or counted twice in one reading."""
    table = proc_table()
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    root_entry = table.get(root)
    ticks = root_entry.children_ticks if root_entry is not None else 0
    rss_pages, jvms = 0, set()
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
    """Reads the tree every ``interval`` seconds on a thread of its own: peak RSS, most JVMs at once."""

    root: int
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
            reading = read_tree(self.root)
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


# -- the contenders ----------------------------------------------------------------------------------


class Meter(Protocol):
    """What a burst reads from a contender."""

    def cpu_seconds(self) -> float: ...

    def wait_idle(self, timeout: float) -> float: ...


@dataclass
class KubeflowOperator:
    """kubeflow's ``spark-operator controller start`` under the reaper, with spark-submit's environment."""

    bench: BenchCluster
    binary: Path
    namespace: str
    workdir: Path
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    operator_pid: int = field(default=0, init=False)
    probe_port: int = field(default=0, init=False)
    sampler: TreeSampler | None = field(default=None, init=False)

    @property
    def log_path(self) -> Path:
        return Path("/tmp") / f"{self.bench.cluster.name}-kubeflow-{self.namespace}.log"

    def kubeconfig(self) -> Path:
        """An RSA client certificate (fabric8, Spark's Kubernetes client, cannot read the devcluster's
        EC keys), read by the Go client (--kubeconfig) and by every spark-submit (KUBECONFIG)."""
        pki = self.bench.cluster.directory / "pki"
        cert, key = conformance.client_cert(pki, self.workdir)
        path = self.workdir / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "devcluster",
                    "cluster": {"server": self.bench.cluster.server, "certificate-authority": str(pki / "ca.crt")},
                }
            ],
            "users": [{"name": "spark-submit", "user": {"client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": "devcluster", "context": {"cluster": "devcluster", "user": "spark-submit"}}],
            "current-context": "devcluster",
        }
        path.write_text(json.dumps(config, indent=2))
        return path

    def environment(self, kubeconfig: Path) -> dict[str, str]:
        """As in its image: SPARK_HOME (pyspark), the API server as KUBERNETES_SERVICE_HOST/PORT (its
        spark-submit master URL), plus the devcluster credentials for spark-submit (KUBECONFIG)."""
        home = conformance.ensure_spark(SPARK_VERSION)
        server = urlsplit(self.bench.cluster.server)
        env = {k: v for k, v in os.environ.items() if k not in conformance.FOREIGN_ENV}
        env.update(
            SPARK_HOME=str(home),
            SPARK_USER="spark",
            SPARK_LOCAL_IP="127.0.0.1",
            HOME=str(self.workdir),
            KUBECONFIG=str(kubeconfig),
            KUBERNETES_SERVICE_HOST=str(server.hostname),
            KUBERNETES_SERVICE_PORT=str(server.port or 443),
            PATH=f"{home / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        )
        return env

    def start(self) -> KubeflowOperator:
        kubeconfig = self.kubeconfig()
        (self.probe_port,) = free_ports(1)
        argv = [
            str(self.binary),
            "controller",
            "start",
            f"--kubeconfig={kubeconfig}",
            f"--namespaces={self.namespace}",
            f"--controller-threads={KUBEFLOW_CONTROLLER_THREADS}",
            "--leader-election=false",
            "--enable-metrics=false",
            "--metrics-bind-address=0",
            "--pprof-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
        ]
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", REAPER, *argv],
                env=self.environment(kubeconfig),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a process group of its own: stop() ends every JVM with it
            )
        self.operator_pid = self._find_operator()
        self.sampler = TreeSampler(self.process.pid).start()
        return self

    def _find_operator(self, timeout: float = 10) -> int:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            for pid, proc in proc_table().items():
                if proc.ppid == self.process.pid and proc.comm == "spark-operator":
                    return pid
            time.sleep(0.05)
        raise RuntimeError(f"kubeflow's operator did not start; see {self.log_path}")

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"kubeflow's operator exited with {self.process.returncode}; {self.log_path}:\n{tail}")

    def wait_ready(self, timeout: float = 120) -> float:
        """Until /readyz answers and the SparkApplication controller's workers run (caches synced)."""
        started = time.monotonic()
        deadline = started + timeout
        workers = re.compile(r"Starting workers.*\"sparkapplication\"|\"sparkapplication\".*Starting workers")
        while time.monotonic() < deadline:
            self._check_alive()
            if self._ready() and workers.search(self.log_path.read_text(errors="replace")):
                return time.monotonic() - started
            time.sleep(0.1)
        raise TimeoutError(f"kubeflow's operator was not ready within {timeout:.0f}s; see {self.log_path}")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}/readyz", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def tree(self) -> TreeReading:
        assert self.process is not None
        return read_tree(self.process.pid)

    def cpu_seconds(self) -> float:
        return self.tree().cpu_seconds

    def operator_cpu_seconds(self) -> float:
        """The Go process alone (its own CPU, none of its children's)."""
        entry = proc_table().get(self.operator_pid)
        return entry.cpu_ticks / CLOCK_TICKS if entry is not None else 0.0

    def operator_peak_rss_mib(self) -> float:
        status = Path(f"/proc/{self.operator_pid}/status").read_text()
        match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        return int(match.group(1)) / 1024 if match else 0.0

    def wait_idle(self, timeout: float) -> float:
        return wait_quiet(self.cpu_seconds, self._check_alive, timeout=timeout)

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()  # the reaper passes it on
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(30)
        with contextlib.suppress(ProcessLookupError):  # spark-submits still running, the reaper if it hung
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


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
    apps_audited: bool  # whether the audit policy logs writes to ``apps`` (sparkop.io's kinds only)


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
        return str(obj["metadata"]["name"]) if app_state(obj) in TERMINAL else None

    def version(obj: JSON) -> str | None:  # one stamp per resourceVersion: a write that changed the app
        return f"{obj['metadata']['name']}@{obj['metadata']['resourceVersion']}"

    async with bench.client() as kube:

        async def create(name: str) -> None:
            await kube._call("POST", target.apps.path(ns), body=target.manifest(name, ns), decode=False)
            created[name] = time.monotonic()

        pod_selector = f"{labels.SPARK_ROLE}={labels.ROLE_DRIVER}"
        async with (
            stamping(kube, k8s.PODS, driver_app, selector=pod_selector, namespace=ns) as pods,
            stamping(kube, target.apps, terminal, namespace=ns) as done,
            stamping(kube, target.apps, version, namespace=ns) as versions,
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
            app_versions = versions.count()
        figures = window.figures(count)
        states = Counter(app_state(obj) for obj in await _list(kube, target.apps, ns))
    accounted = cpu_after - cpu_before + sum(figures["cpu_seconds"].values())
    figures["machine_other_cpu_s"] = round(figures["machine_busy_cpu_s"] - accounted, 1)
    writes = writes_in(bench, since, ns)
    ours = [w for w in writes if str(w.get("userAgent", "")).startswith(target.agents)]
    app_writes = app_versions - count  # every version after the one the create made
    total_writes = len(ours) + (0 if target.apps_audited else app_writes)
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
        "writes_per_app": round(total_writes / count, 2),
        "audited_writes": dict(Counter(f"{agent_of(w)}: {_write_kind(w)}" for w in ours).most_common()),
        "app_writes_seen_by_watch": app_writes,
        "app_writes_counted_from_watch": not target.apps_audited,
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


def measure_kubeflow(
    bench: BenchCluster, binary: Path, namespace: str, names: Sequence[str], concurrency: int, timeout: float
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"{bench.cluster.name}-kubeflow-"))
    operator = KubeflowOperator(bench, binary, namespace, workdir).start()
    try:
        ready = operator.wait_ready()
        operator.wait_idle(120)
        target = Target(namespace, KUBEFLOW_APPS, KUBEFLOW_APP_LABEL, KUBEFLOW_AGENTS, kubeflow_manifest, False)
        assert operator.sampler is not None
        operator.sampler.reset_peaks()
        own_before = operator.operator_cpu_seconds()
        result = asyncio.run(burst(bench, target, operator, names, concurrency, timeout))
        sampler = operator.sampler
        result.update(
            ready_s=round(ready, 2),
            operator_cpu_ms_per_app=round((operator.operator_cpu_seconds() - own_before) / len(names) * 1000, 1),
            operator_peak_rss_mib=round(operator.operator_peak_rss_mib(), 1),
            tree_peak_rss_mib=round(sampler.peak_rss_mib, 1),
            peak_concurrent_jvms=sampler.peak_jvms,
            jvms_seen=len(sampler.jvms_seen),
            tree_samples=sampler.samples,
            log=str(operator.log_path),
        )
        return result
    finally:
        operator.stop()


def measure_sparkop(
    bench: BenchCluster, namespace: str, names: Sequence[str], concurrency: int, timeout: float
) -> dict[str, Any]:
    operator = Operator(bench, (namespace,), log_name=f"peer-sparkop-{namespace}.log").start()
    try:
        ready = operator.wait_ready()
        operator.wait_idle(quiet_seconds=QUIET_S, timeout=120, cpu_share=IDLE_SHARE)
        target = Target(namespace, kinds.SPARK_APPLICATIONS, labels.APP, SPARKOP_AGENTS, sparkop_manifest, True)
        result = asyncio.run(burst(bench, target, SparkopMeter(operator), names, concurrency, timeout))
        stats = operator.stats()
        result.update(
            ready_s=round(ready, 2),
            operator_cpu_ms_per_app=result["cpu_ms_per_app"],
            operator_peak_rss_mib=round(stats.peak_rss_mib, 1),
            tree_peak_rss_mib=round(stats.peak_rss_mib, 1),
            log=str(operator.log_path),
        )
        return result
    finally:
        operator.stop()


def measure_peer(
    bench: BenchCluster,
    apps: int = 40,
    rounds: int = 1,
    *,
    concurrency: int = 50,
    timeout: float = 900,
    binary: Path | None = None,
) -> dict[str, Any]:
    """The three contenders on ``bench``, ``rounds`` times each in turn (fresh namespaces each round):
    every round's figures, and their medians under "summary"."""
    started = time.strftime("%Y-%m-%d %H:%M")
    binary = binary or ensure_kubeflow_operator()
    version = kubeflow_version()
    install_kubeflow_crds(bench)
    conformance.ensure_spark(SPARK_VERSION)
    settle(bench)
    _namespace(bench, CEILING_NAMESPACE)
    per_round: list[dict[str, Any]] = []
    for r in range(1, rounds + 1):
        one: dict[str, Any] = {}
        namespace = _namespace(bench, f"peer-kubeflow-{r}")
        log(f"round {r}/{rounds}: kubeflow's spark-operator {version}, {apps} apps")
        one["kubeflow"] = measure_kubeflow(bench, binary, namespace, _names("kf", apps), concurrency, timeout)
        log(f"kubeflow: {one['kubeflow']['apps_per_second']} apps/s, {one['kubeflow']['cpu_ms_per_app']} ms CPU/app")
        settle(bench)
        namespace = _namespace(bench, f"peer-sparkop-{r}")
        log(f"round {r}/{rounds}: sparkop, {apps} apps")
        one["sparkop"] = measure_sparkop(bench, namespace, _names("so", apps), concurrency, timeout)
        log(f"sparkop: {one['sparkop']['apps_per_second']} apps/s, {one['sparkop']['cpu_ms_per_app']} ms CPU/app")
        settle(bench)
        log(f"round {r}/{rounds}: ceiling, {apps} apps' writes by a bare client")
        one["ceiling"] = asyncio.run(ceiling_burst(bench, _names(f"peer-ceil-{r}", apps), concurrency))
        log(f"ceiling: {one['ceiling']['apps_per_second']} apps/s")
        settle(bench)
        per_round.append(one)
    return {
        "apps": apps,
        "rounds": rounds,
        "kubeflow_version": version,
        "kubeflow_controller_threads": KUBEFLOW_CONTROLLER_THREADS,
        "spark_submit_version": SPARK_VERSION,
        "machine": {
            "cores": os.cpu_count(),
            "started": started,
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "summary": {name: _medians([one[name] for one in per_round]) for name in CONTENDERS},
        "per_round": per_round,
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
            out[key] = _medians([run[key] for run in runs])
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


def _ratio(kubeflow: Any, sparkop: Any, higher_is_better: bool, better: str, worse: str) -> str:
    if not isinstance(kubeflow, (int, float)) or not isinstance(sparkop, (int, float)) or not kubeflow or not sparkop:
        return "—"
    ratio = sparkop / kubeflow if higher_is_better else kubeflow / sparkop
    word = better
    if ratio < 1:
        ratio, word = 1 / ratio, worse
    shown = f"{ratio:,.0f}" if ratio >= 10 else f"{ratio:.1f}"
    return f"{shown}\N{MULTIPLICATION SIGN} {word}"


def table_rows(result: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    s = result["summary"]

    def row(
        title: str,
        get: Callable[[Mapping[str, Any]], Any],
        unit: str,
        ratio: tuple[bool, str, str] | None,
        contenders: tuple[str, ...] = CONTENDERS,
    ) -> tuple[str, str, str, str, str]:
        values = [get(s[name]) if name in contenders else None for name in CONTENDERS]
        shown = [_num(v, unit) for v in values]
        compared = _ratio(values[0], values[1], *ratio) if ratio else "—"
        return (title, shown[0], shown[1], shown[2], compared)

    def pct(name: str, q: str) -> Callable[[Mapping[str, Any]], Any]:
        return lambda fig: fig[name][q]

    return [
        row("apps/s (create → last app's driver pod)", lambda f: f["apps_per_second"], "", (True, "faster", "slower")),
        row("create → driver pod p50", pct("create_to_driver_pod", "p50_s"), " s", (False, "lower", "higher")),
        row("create → driver pod p99", pct("create_to_driver_pod", "p99_s"), " s", (False, "lower", "higher")),
        row(
            "burst: first create → last driver pod",
            lambda f: f["seconds_to_last_driver_pod"],
            " s",
            (False, "shorter", "longer"),
        ),
        row(
            "burst: first create → every app finished",
            lambda f: f.get("seconds_to_all_finished"),
            " s",
            (False, "shorter", "longer"),
            ("kubeflow", "sparkop"),
        ),
        row(
            "apps COMPLETED (the others FAILED)",
            lambda f: f"{_num((f.get('final_states') or {}).get('COMPLETED', 0))} / {_num(f['apps'])}",
            "",
            None,
            ("kubeflow", "sparkop"),
        ),
        row(
            "CPU per app, until idle (kubeflow: operator + spark-submit JVMs; ceiling: the client)",
            lambda f: f["cpu_ms_per_app"],
            " ms",
            (False, "less", "more"),
        ),
        row(
            "CPU per app, the operator process alone",
            lambda f: f.get("operator_cpu_ms_per_app"),
            " ms",
            (False, "less", "more"),
            ("kubeflow", "sparkop"),
        ),
        row(
            "peak RSS, the operator process",
            lambda f: f.get("operator_peak_rss_mib"),
            " MiB",
            (False, "less", "more"),
            ("kubeflow", "sparkop"),
        ),
        row(
            "peak RSS, process tree incl. concurrent spark-submits",
            lambda f: f.get("tree_peak_rss_mib"),
            " MiB",
            (False, "less", "more"),
            ("kubeflow", "sparkop"),
        ),
        row("most spark-submit JVMs at once", lambda f: f.get("peak_concurrent_jvms"), "", None, ("kubeflow",)),
        row(
            "writes per app (audit log; kubeflow's app writes from a watch)",
            lambda f: f["writes_per_app"],
            "",
            (False, "fewer", "more"),
        ),
        row(
            "API server CPU per app (its idle rate taken off)",
            lambda f: f["apiserver_cpu_ms_per_app"],
            " ms",
            (False, "less", "more"),
        ),
    ]


def table(result: Mapping[str, Any]) -> str:
    header = ("figure", f"kubeflow {result['kubeflow_version']}", "sparkop", "ceiling", "sparkop vs kubeflow")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(result)]
    return "\n".join(lines)


NOTES = """\
* apps/s: apps over the seconds from the first create to the last app's driver pod. create → driver pod:
  from each app's create (the ceiling: from its first write) to its driver pod, as a watch sees it.
* CPU per app: from the first create until the contender is idle again (every app COMPLETED), over the
  apps. kubeflow: the operator and every spark-submit it ran (launcher and submitting JVMs included);
  the ceiling: the benchmark's own client. The API server's CPU is over the same window, less its idle
  rate (measured for 5 s before each burst) times the window: a long burst is not charged for the
  watches and leases it merely outlasted (the raw figure is in the JSON).
* writes per app: the API server's audit log, by user agent (kubeflow: its controller and spark-submit's
  fabric8 client), the user's create left out. The audit policy does not log kubeflow's
  SparkApplication kind: its writes to the apps are counted from a watch, one per new resourceVersion.
"""


def markdown(result: Mapping[str, Any]) -> str:
    machine = result["machine"]
    rounds = result["rounds"]
    medians = f", medians of {rounds} rounds" if rounds > 1 else ""
    return (
        f"# kubeflow's spark-operator beside sparkop\n\n"
        f"{result['apps']} SparkApplications created at once{medians}, on one devcluster (KWOK nodes, the "
        f"Spark-driver simulator), {machine['cores']} cores, {machine['started']}. kubeflow "
        f"{result['kubeflow_version']} runs {result['kubeflow_controller_threads']} controller threads and real "
        f"spark-submit {result['spark_submit_version']}. `bench/peer.py`.\n\n{table(result)}\n\n{NOTES}"
        f"{sharing(result)}"
    )


def sharing(result: Mapping[str, Any]) -> str:
    """What else used the cores during each burst: the figures are only as good as the machine was quiet."""
    parts = []
    for name in CONTENDERS:
        fig = result["summary"][name]
        parts.append(
            f"{name} {_num(fig.get('machine_other_cpu_s'), ' CPU-s')} in {_num(fig.get('window_s'), ' s')} "
            f"(load {fig.get('load_average_1m_before')} before)"
        )
    return f"* other processes on the machine during each burst: {'; '.join(parts)}.\n"


README = ROOT / "README.md"
README_BEGIN, README_END = "<!-- bench:peer begin -->", "<!-- bench:peer end -->"


def readme_block(result: Mapping[str, Any]) -> str:
    """README's kubeflow comparison, rendered from a recorded run (a unit test holds the two together)."""
    machine = result["machine"]
    return (
        f"{README_BEGIN}\nMeasured by `bench/peer.py` on {machine['started']}, {result['apps']} apps created at "
        f"once for each in turn on one devcluster ({machine['cores']} cores; kubeflow with real spark-submit "
        f"{result['spark_submit_version']}):\n\n{table(result)}\n\n{sharing(result)}{README_END}"
    )


def write_readme(result: Mapping[str, Any]) -> None:
    text = README.read_text()
    start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    README.write_text(text[:start] + readme_block(result) + text[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apps", type=int, default=40, help="apps created at once per contender")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the three contenders; the table shows medians")
    parser.add_argument("--concurrency", type=int, default=50, help="creates in flight")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a burst may take")
    parser.add_argument("--out", default=str(RESULTS / "peer.json"))
    parser.add_argument("--markdown", default=str(RESULTS / "peer.md"))
    parser.add_argument("--from-json", type=Path, help="only render the table and markdown of a recorded run")
    parser.add_argument("--readme", action="store_true", help="rewrite README.md's kubeflow table from the run")
    args = parser.parse_args(argv)
    if args.from_json is not None:
        recorded = json.loads(args.from_json.read_text())
        Path(args.markdown).write_text(markdown(recorded))
        if args.readme:
            write_readme(recorded)
        print(table(recorded))
        return 0
    if args.apps < 1 or args.rounds < 1:
        parser.error("--apps and --rounds must be at least 1")
    binary = ensure_kubeflow_operator()  # before the cluster: a first build takes minutes
    with BenchCluster.up(f"bench-peer-{os.getpid()}") as bench:
        result = measure_peer(
            bench, args.apps, args.rounds, concurrency=args.concurrency, timeout=args.timeout, binary=binary
        )
    write_result(Path(args.out), result)
    Path(args.markdown).write_text(markdown(result))
    if args.readme:
        write_readme(result)
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
