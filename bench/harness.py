"""What the benchmarks share: a devcluster with the CRDs, the operator as a process of its own, the
figures read from /proc, the API server's audit log, and a watch that stamps when objects appear.

Benchmarks are scripts, not tests: they print a table and write JSON under bench/results/. Every
process of the devcluster runs on this machine, so figures are read as ratios measured in one run
(sparkop against a bare client doing the same writes, on the same API server, at the same time).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from devcluster.cluster import Cluster  # noqa: E402
from devcluster.components import DEFAULT_SCALE, ScaleSettings  # noqa: E402
from devcluster.ports import free_ports  # noqa: E402
from sparkop.core import kube as k8s  # noqa: E402
from sparkop.core.informer import Informer  # noqa: E402
from sparkop.core.jsontypes import JSON  # noqa: E402
from sparkop.core.store import EventType, drop_managed_fields  # noqa: E402
from sparkop.domain import labels  # noqa: E402
from sparkop.driver_controller.cleanup import EXECUTOR_CLEANUP_GRACE_SECONDS  # noqa: E402

# The benchmark's own client is told apart from the operator (user agent "sparkop/<version>") in the
# audit log and in the API server's priority-and-fairness accounting.
BENCH_USER_AGENT = "sparkop-bench"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# How long the operator must stay quiet to count as idle after work: longer than the work it defers
# after an app ends (the passes that delete the executors Spark's own clean-up left), so "until idle"
# counts that work too, and the next measurement does not.
AFTER_WORK_QUIET_SECONDS = EXECUTOR_CLEANUP_GRACE_SECONDS + 5.0
# Another checkout whose operator the benchmarks run instead of this one's (its own .venv), so the
# code before a change is measured by the same benchmark, on the same machine, in the same hour.
OPERATOR_ROOT_ENV = "SPARKOP_BENCH_OPERATOR_ROOT"


def operator_root() -> Path:
    return Path(os.environ.get(OPERATOR_ROOT_ENV) or ROOT)


def operator_python() -> str:
    """The interpreter that runs the operator: this one, or the other checkout's."""
    root = operator_root()
    return sys.executable if root == ROOT else str(root / ".venv" / "bin" / "python")


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- figures --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcStats:
    cpu_seconds: float
    rss_mib: float
    peak_rss_mib: float


def proc_stats(pid: int) -> ProcStats:
    """CPU time (user + system), resident and peak resident memory of a live process."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return ProcStats(
        cpu_seconds=(int(stat[11]) + int(stat[12])) / CLOCK_TICKS,
        # A process that has exited but is not yet reaped (a zombie) has no memory left, nor these lines.
        rss_mib=int(fields.get("VmRSS", "0").split()[0]) / 1024,
        peak_rss_mib=int(fields.get("VmHWM", "0").split()[0]) / 1024,
    )


def cpu_seconds(pid: int) -> float:
    try:
        return proc_stats(pid).cpu_seconds
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def percentile(values: Iterable[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0 < q <= 100), None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def latency_summary(values: Iterable[float]) -> dict[str, float | int | None]:
    seen = list(values)

    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 3)

    return {
        "count": len(seen),
        "p50_s": r(percentile(seen, 50)),
        "p95_s": r(percentile(seen, 95)),
        "p99_s": r(percentile(seen, 99)),
        "max_s": r(max(seen) if seen else None),
    }


async def bounded(calls: Iterable[Callable[[], Awaitable[Any]]], limit: int = 50) -> list[Any]:
    """Await every call with at most ``limit`` in flight; results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))


# -- what the benchmarks submit --------------------------------------------------------------------


def app_manifest(
    name: str,
    namespace: str,
    *,
    run_seconds: float | None = 0,
    executors: int = 1,
    outcome: str = "Succeeded",
    restart_policy: Mapping[str, Any] | None = None,
    api_version: str = labels.API_VERSION,
) -> JSON:
    """A SparkApplication the Spark-driver simulator runs: ``run_seconds`` None runs until deleted;
    ``api_version`` kubeflow's for one of its group (the operator then runs with --kubeflow-api)."""
    annotations = {"sim.sparkop.io/outcome": outcome} if run_seconds is not None else {}
    if run_seconds is not None:
        annotations["sim.sparkop.io/run-seconds"] = f"{run_seconds:g}"
    spec: JSON = {
        "type": "Scala",
        "mode": "cluster",
        "sparkVersion": "3.5.9",
        "image": "apache/spark:3.5.9",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples_2.12-3.5.9.jar",
        "driver": {"cores": 1, "memory": "512m", "annotations": annotations},
        "executor": {"instances": executors, "cores": 1, "memory": "512m"},
    }
    if restart_policy is not None:
        spec["restartPolicy"] = dict(restart_policy)
    return {
        "apiVersion": api_version,
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


# -- the cluster ------------------------------------------------------------------------------------


@dataclass
class BenchCluster:
    """A devcluster of KWOK nodes with the simulator and sparkop's CRDs, torn down on exit."""

    cluster: Cluster

    @classmethod
    @contextmanager
    def up(
        cls,
        name: str,
        *,
        nodes: int = 4,
        namespaces: Iterable[str] = (),
        kubeflow: bool = False,
        scale: ScaleSettings = DEFAULT_SCALE,
    ) -> Iterator[BenchCluster]:
        """``kubeflow``: kubeflow's group's CRDs too (crds/kubeflow/), for an operator run with --kubeflow-api.
        ``scale``: Cluster.up's, for tens of thousands of apps."""
        cluster = Cluster.up(
            name,
            nodes=nodes,
            node_cpu="100000",
            node_memory="64Ti",
            scale=scale,
            die_with_parent=True,
        )
        try:
            bench = cls(cluster)
            bench.kubectl("apply", "--server-side", "-f", str(ROOT / "crds"))
            bench.wait_established(("sparkapplications", "sparkdrivers", "scheduledsparkapplications", "sparkconnects"))
            if kubeflow:
                bench.kubectl("apply", "--server-side", "-f", str(ROOT / "crds" / "kubeflow"))
                plurals = ("sparkapplications", "scheduledsparkapplications", "sparkconnects")
                bench.wait_established(plurals, group=labels.KUBEFLOW_GROUP)
            for namespace in namespaces:
                bench.kubectl("create", "namespace", namespace)
            yield bench
        finally:
            cluster.down()

    def wait_established(self, plurals: Iterable[str], timeout: float = 60, group: str = labels.GROUP) -> None:
        # Not `kubectl wait`: it fails outright on a CRD whose conditions are not written yet.
        query = '{.status.conditions[?(@.type=="Established")].status}'
        deadline = time.monotonic() + timeout
        for plural in plurals:
            while not self._established(f"{plural}.{group}", query):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CRD {plural}.{group} not established within {timeout:.0f}s")
                time.sleep(0.2)

    def _established(self, crd: str, query: str) -> bool:
        try:
            return self.kubectl("get", f"crd/{crd}", "-o", f"jsonpath={query}") == "True"
        except RuntimeError:  # the jsonpath filter fails while the CRD has no conditions yet
            return False

    def kubectl(self, *args: str) -> str:
        argv = [str(self.cluster.kubectl), f"--kubeconfig={self.cluster.kubeconfig}", *args]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    @asynccontextmanager
    async def client(self) -> AsyncIterator[k8s.Kube]:
        """The benchmark's own client (its own user agent; the client's pool of 100 connections)."""
        kube = await k8s.Kube.connect(str(self.cluster.kubeconfig))
        kube.api.user_agent = BENCH_USER_AGENT
        try:
            yield kube
        finally:
            await kube.close()

    def component_pids(self) -> dict[str, int]:
        return {name: record.pid for name, record in self.cluster.state.processes.items()}

    def component_cpu(self) -> dict[str, float]:
        """CPU seconds so far of each devcluster process (API server, etcd, KWOK, simulator, ...)."""
        return {name: cpu_seconds(pid) for name, pid in self.component_pids().items()}

    def writes_since(self, since: datetime, user_agent_prefix: str = "sparkop/") -> list[JSON]:
        """The writes (create, update, patch, delete) the API server's audit log holds from clients
        whose user agent starts with ``user_agent_prefix``, made at or after ``since``."""
        return list(audit_events(self.cluster.audit_log, since, user_agent_prefix, writes_only=True))


def audit_events(audit_log: Path, since: datetime, user_agent_prefix: str, *, writes_only: bool) -> Iterator[JSON]:
    # The API server rotates its audit log (50 MB, one backup): read the backup first.
    for path in sorted(audit_log.parent.glob(audit_log.stem + "*" + audit_log.suffix)):
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not str(event.get("userAgent", "")).startswith(user_agent_prefix):
                continue
            if writes_only and event.get("verb") not in ("create", "update", "patch", "delete"):
                continue
            stamp = datetime.fromisoformat(str(event.get("requestReceivedTimestamp")).replace("Z", "+00:00"))
            if stamp >= since:
                yield event


def now_utc() -> datetime:
    return datetime.now(UTC)


# -- the operator -----------------------------------------------------------------------------------


@dataclass
class Operator:
    """``sparkop run`` (both controllers) as a process of its own, with its metrics endpoint."""

    bench: BenchCluster
    namespaces: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    log_name: str = "operator.log"
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    port: int = field(default=0, init=False)
    started: float = field(default=0.0, init=False)

    @property
    def log_path(self) -> Path:
        # Outside the cluster's directory, which goes with the cluster: the log is read afterwards.
        return Path("/tmp") / f"{self.bench.cluster.name}-{self.log_name}"

    def interpreter_args(self) -> list[str]:
        """What the interpreter runs, before sparkop's own arguments (a variant runs it under a tool)."""
        return ["-m", "sparkop"]

    def environment(self) -> dict[str, str] | None:
        """The process's environment (None: this one's)."""
        return None

    def start(self) -> Operator:
        (self.port,) = free_ports(1)
        argv = [operator_python(), *self.interpreter_args(), "run", "--kubeconfig", str(self.bench.cluster.kubeconfig)]
        for namespace in self.namespaces:
            argv += ["-n", namespace]
        argv += ["--metrics-port", str(self.port), *self.args]
        with self.log_path.open("ab") as out:
            self.started = time.monotonic()
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, cwd=operator_root(), env=self.environment()
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None, "the operator was not started"
        return self.process.pid

    def stats(self) -> ProcStats:
        return proc_stats(self.pid)

    def metric_totals(self, name: str, by: str | None = None) -> dict[str, float]:
        """A counter's samples from /metrics, summed by the label ``by`` ("" when None); {} while the
        endpoint is not up."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return {}
        totals: dict[str, float] = {}
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            value = ""
            if by is not None and f'{by}="' in line:
                value = line.split(f'{by}="', 1)[1].split('"', 1)[0]
            totals[value] = totals.get(value, 0.0) + float(line.rsplit(" ", 1)[1])
        return totals

    def reconciles(self) -> dict[str, float]:
        return self.metric_totals("sparkop_reconcile_total", by="controller")

    def ready(self) -> bool:
        """Whether /readyz answers 200 now."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def wait_ready(self, timeout: float = 120) -> float:
        """Seconds from start until /readyz answers 200 (caches synced, queues running)."""
        deadline = self.started + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - self.started
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"the operator was not ready within {timeout:.0f}s")

    def wait_idle(
        self, *, quiet_seconds: float = AFTER_WORK_QUIET_SECONDS, timeout: float = 600, cpu_share: float = 0.02
    ) -> float:
        """Seconds from start until the operator's CPU use stayed under ``cpu_share`` of a core for
        ``quiet_seconds`` (measured at the end of that quiet spell, minus it); ``timeout`` counts from now."""
        deadline = time.monotonic() + timeout
        window: list[tuple[float, float]] = []
        while time.monotonic() < deadline:
            self._check_alive()
            now = time.monotonic()
            window.append((now, self.stats().cpu_seconds))
            while len(window) > 1 and now - window[1][0] >= quiet_seconds:
                window.pop(0)
            first_t, first_cpu = window[0]
            if now - first_t >= quiet_seconds and (window[-1][1] - first_cpu) <= cpu_share * (now - first_t):
                return first_t - self.started
            time.sleep(0.1)
        raise TimeoutError(f"the operator did not go idle within {timeout:.0f}s")

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"the operator exited with {self.process.returncode}; see {self.log_path}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def profiling(pid: int, out: Path | None, *, rate: int = 100) -> Iterator[None]:
    """Sample ``pid`` with py-spy (``pip install py-spy``) into ``out`` (collapsed stacks, for
    flamegraphs or ``bench/hotspots.py``) while the block runs; nothing when ``out`` is None."""
    if out is None:
        yield
        return
    spy = Path(sys.executable).parent / "py-spy"
    recorder = subprocess.Popen(
        [str(spy), "record", "-p", str(pid), "-f", "raw", "-o", str(out), "-r", str(rate), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        recorder.send_signal(2)
        recorder.wait(60)


# -- watching what appears ----------------------------------------------------------------------------


@dataclass
class Stamps:
    """First time (monotonic) each key met a condition, from a watch of one resource."""

    seen: dict[str, float] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def count(self) -> int:
        return len(self.seen)

    async def wait_for(self, count: int) -> None:
        """Until ``count`` keys are stamped (bound it with ``asyncio.timeout``)."""
        while len(self.seen) < count:
            self.changed.clear()
            await self.changed.wait()


@asynccontextmanager
async def stamping(
    kube: k8s.Kube,
    resource: k8s.Resource,
    key: Callable[[JSON], str | None],
    *,
    selector: str | None = None,
    namespace: str | None = None,
    into: Stamps | None = None,
    transform: Callable[[JSON], JSON] = drop_managed_fields,
) -> AsyncIterator[Stamps]:
    """Watch ``resource`` and stamp each object the first time ``key(obj)`` is not None, under that key
    (``into``: stamps another watch also stamps, e.g. of the same kind in another group; ``transform``:
    what the watch's cache keeps of each object, which ``key`` is then given)."""
    stamps = into if into is not None else Stamps()
    informer = Informer(kube, resource, namespace=namespace, label_selector=selector, transform=transform)

    def handler(_: EventType, obj: JSON, __: JSON | None) -> None:
        k = key(obj)
        if k is not None and k not in stamps.seen:
            stamps.seen[k] = time.monotonic()
            stamps.changed.set()

    informer.add_handler(handler)
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(60):
            await informer.wait_synced()
        yield stamps
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def app_state(obj: Mapping[str, Any]) -> str | None:
    return str(((obj.get("status") or {}).get("applicationState") or {}).get("state") or "") or None


def label(obj: Mapping[str, Any], key: str) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(key)


def write_result(path: Path, result: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")


def run_alone(
    name: str,
    namespace: str,
    measure: Callable[[BenchCluster, Operator, int], Mapping[str, Any]],
    count: int,
    out: Path,
) -> int:
    """A scenario on a devcluster of its own with one operator watching ``namespace``: its figures
    printed and written to ``out``."""
    with BenchCluster.up(f"bench-{name}-{os.getpid()}", namespaces=[namespace]) as bench:
        operator = Operator(bench, (namespace,)).start()
        try:
            operator.wait_ready()
            result = measure(bench, operator, count)
        finally:
            operator.stop()
    write_result(out, result)
    print(json.dumps(result, indent=2))
    return 0
