"""Real Spark under the operator on the devcluster's real nodes (tests/e2e): the Spark versions each
scenario runs on (SPARKOP_E2E=all for the full matrix), SparkApplications that fit two small nodes,
a watch of every pod seen, and a test's namespace with the operator watching it (SparkNamespace;
the fixtures that make one are in tests/e2e/conftest.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.structures import ParameterSet

from devcluster import images
from devcluster.testing import ClusterHandle, temporary_namespace, wait_for
from sparkop.domain import labels
from tests.support.crds import install_crds
from tests.support.operator import OperatorProcess

E2E_ENV = "SPARKOP_E2E"
FULL_MATRIX = os.environ.get(E2E_ENV, "") == "all"
SPARK_SERVICE_ACCOUNT = "spark"
DRIVER_CONTAINER = "spark-kubernetes-driver"  # named: a driver pod may have sidecars
BASE_IMAGE = f"{images.BASE_REPO}:latest"
JOBS_CONFIGMAP = "e2e-jobs"
JOBS_DIR = "/mnt/jobs"


# A PySpark job of `rounds` stages of `tasks` tasks (each busy `task_s`), pausing `pause_s` after
# each stage: long enough to lose a pod mid-run, or to let dynamic allocation scale up and down.
STAGES_JOB = """\
import sys
import time
from operator import add

from pyspark.sql import SparkSession

rounds, pause_s, tasks, task_s = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
spark = SparkSession.builder.appName("e2e-stages").getOrCreate()
sc = spark.sparkContext


def work(i):
    time.sleep(task_s)
    return i % 7


total = 0
for r in range(rounds):
    total += sc.parallelize(range(tasks), tasks).map(work).reduce(add)
    print(f"round {r + 1}/{rounds} done", flush=True)
    time.sleep(pause_s)
print(f"stages result {total}", flush=True)
spark.stop()
"""


def release_order(version: str) -> tuple[int, ...]:
    """A Spark release's place in time: 3.5.9 < 4.0.5 < 4.10.0 (not the strings' order)."""
    return tuple(int(number) for number in re.findall(r"\d+", version)[:3])


# One release per Spark line (devcluster/gobuild/versions.env).
PINNED_VERSIONS: tuple[str, ...] = images.pinned_spark_versions()
# The lines the full scenario matrix runs on: the oldest and the newest pinned release. The lines
# between them run the smoke tests only (a real JVM costs tens of seconds on 2 cores).
FULL_MATRIX_VERSIONS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [min(PINNED_VERSIONS, key=release_order), max(PINNED_VERSIONS, key=release_order)] if PINNED_VERSIONS else []
    )
)
OLDEST_VERSION = FULL_MATRIX_VERSIONS[0] if FULL_MATRIX_VERSIONS else ""


def spark_versions(ci: Sequence[str] = (), versions: Sequence[str] = FULL_MATRIX_VERSIONS) -> list[ParameterSet]:
    """`versions` (default: the full matrix's) as `version` parameters; those not in `ci` run only
    with SPARKOP_E2E=all (CI time matters)."""
    skip = pytest.mark.skipif(not FULL_MATRIX, reason=f"full e2e matrix only: set {E2E_ENV}=all")
    return [pytest.param(version, marks=[] if version in ci else [skip], id=version) for version in versions]


def smoke_versions() -> list[ParameterSet]:
    """Every pinned Spark version, each run in CI: the smoke tests prove each line's image and
    sparkop's rendering for that line run a real job to COMPLETED."""
    return spark_versions(ci=PINNED_VERSIONS, versions=PINNED_VERSIONS)


def scala_of(version: str) -> str:
    return "2.12" if version.startswith("3.") else "2.13"


def examples_jar(version: str) -> str:
    return f"local:///opt/spark/examples/jars/{images.examples_jar_name(version, scala_of(version))}"


def spark_application(name: str, version: str, **spec: Any) -> dict[str, Any]:
    """A SparkApplication that fits two real nodes of 2 CPUs each: small requests, 512m pods,
    executors with one core. `spec` entries replace (driver/executor: extend) the defaults."""
    driver = {
        "cores": 1,
        "coreRequest": "250m",
        "memory": "512m",
        "serviceAccount": SPARK_SERVICE_ACCOUNT,
        **spec.pop("driver", {}),
    }
    executor = {"instances": 2, "cores": 1, "coreRequest": "250m", "memory": "512m", **spec.pop("executor", {})}
    return {
        "apiVersion": labels.API_VERSION,
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "image": f"apache/spark:{version}",
            "imagePullPolicy": "IfNotPresent",
            "sparkVersion": version,
            "restartPolicy": {"type": "Never"},
            "driver": driver,
            "executor": executor,
            **spec,
        },
    }


def spark_pi(name: str, version: str, slices: int = 4, **spec: Any) -> dict[str, Any]:
    return spark_application(
        name,
        version,
        mainClass="org.apache.spark.examples.SparkPi",
        mainApplicationFile=examples_jar(version),
        arguments=[str(slices)],
        **spec,
    )


def jobs_volume(**spec: Any) -> dict[str, Any]:
    """Spec parts mounting the jobs ConfigMap at JOBS_DIR in the driver and the executors."""
    mount = {"name": "jobs", "mountPath": JOBS_DIR}
    driver, executor = spec.pop("driver", {}), spec.pop("executor", {})
    return {
        "volumes": [{"name": "jobs", "configMap": {"name": JOBS_CONFIGMAP}}, *spec.pop("volumes", [])],
        "driver": {**driver, "volumeMounts": [mount, *driver.get("volumeMounts", [])]},
        "executor": {**executor, "volumeMounts": [mount, *executor.get("volumeMounts", [])]},
        **spec,
    }


def python_application(name: str, version: str, script: str, **spec: Any) -> dict[str, Any]:
    return spark_application(name, version, type="Python", pythonVersion="3", mainApplicationFile=script, **spec)


# 6 stages with 4 s pauses: ~30 s after the executors register, time to lose a pod (or a node) mid-run.
LONG_JOB_ARGS = ["6", "4", "2", "0.5"]


def long_job(name: str, version: str, **spec: Any) -> dict[str, Any]:
    """STAGES_JOB (from the jobs ConfigMap) long enough to be hit while it runs."""
    script = f"local://{JOBS_DIR}/stages.py"
    return python_application(name, version, script, arguments=LONG_JOB_ARGS, **jobs_volume(**spec))


def owners_of(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(str(r["kind"]), str(r["name"])) for r in obj["metadata"].get("ownerReferences", [])}


def controller_of(obj: dict[str, Any]) -> tuple[str, str] | None:
    for ref in obj["metadata"].get("ownerReferences", []):
        if ref.get("controller"):
            return str(ref["kind"]), str(ref["name"])
    return None


@dataclass
class SeenPod:
    """What a watch saw of one pod: its last state, and when it was first and last seen alive."""

    pod: dict[str, Any]
    first_seen: float
    deleted_at: float | None = None
    owners_seen: set[tuple[str, str] | None] = field(default_factory=set)  # controllers, over time
    first_owners: list[dict[str, Any]] = field(default_factory=list)  # its ownerReferences when first seen

    @property
    def born_owned_by(self) -> set[tuple[str, str, bool]]:
        """(kind, name, controller) of every ownerReference the pod had when first seen."""
        return {(str(r["kind"]), str(r["name"]), bool(r.get("controller"))) for r in self.first_owners}

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])


class PodWatch:
    """`kubectl get pods --watch` (or another ``resource``) on a label selector (None: all of them) in a
    background thread: every object that existed, even for a moment, with each controller owner it was
    seen with, and every event in the order it came (``history``: when, by time.monotonic(), its type,
    the object)."""

    def __init__(self, cluster: ClusterHandle, namespace: str, selector: str | None, resource: str = "pods") -> None:
        argv = [str(cluster.kubectl_binary), f"--kubeconfig={cluster.kubeconfig}", "get", resource, "-n", namespace]
        argv += [*(["-l", selector] if selector is not None else []), "--watch", "--output-watch-events", "-o", "json"]
        self.started = time.monotonic()
        self.pods: dict[str, SeenPod] = {}
        self.history: list[tuple[float, str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for line in self._proc.stdout:
            buffer += line
            while buffer.strip():
                try:
                    event, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break
                buffer = buffer.lstrip()[end:]
                self._record(event)

    def _record(self, event: dict[str, Any]) -> None:
        pod, at = event["object"], time.monotonic()
        now = at - self.started
        name = pod["metadata"]["name"]
        with self._lock:
            self.history.append((at, event["type"], pod))
            seen = self.pods.setdefault(
                name, SeenPod(pod, now, first_owners=list(pod["metadata"].get("ownerReferences") or []))
            )
            seen.pod = pod
            seen.owners_seen.add(controller_of(pod))
            if event["type"] == "DELETED":
                seen.deleted_at = now

    def snapshot(self) -> dict[str, SeenPod]:
        with self._lock:
            return dict(self.pods)

    def events(self) -> list[tuple[float, str, dict[str, Any]]]:
        with self._lock:
            return list(self.history)

    def alive(self) -> list[SeenPod]:
        return [p for p in self.snapshot().values() if p.deleted_at is None]

    def running(self) -> list[SeenPod]:
        return [p for p in self.alive() if p.pod.get("status", {}).get("phase") == "Running"]

    def max_alive_at_once(self) -> int:
        """Most pods alive at the same time, from the ADDED/DELETED times seen."""
        edges = sorted(
            [(p.first_seen, 1) for p in self.snapshot().values()]
            + [(p.deleted_at, -1) for p in self.snapshot().values() if p.deleted_at is not None]
        )
        most = alive = 0
        for _, step in edges:
            alive += step
            most = max(most, alive)
        return most

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(10)


class SparkNamespace:
    """One test's namespace on the real-node cluster, the operator watching it, and helpers."""

    def __init__(self, cluster: ClusterHandle, namespace: str, operator: OperatorProcess) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.operator = operator
        self.watches: list[PodWatch] = []
        self.started = time.monotonic()
        self.last_driver_line = ""

    def jobs(self, files: dict[str, str]) -> None:
        """The ConfigMap jobs_volume() mounts, with these Python files."""
        self.configmap(JOBS_CONFIGMAP, files)

    def driver_log(self, app: str) -> str:
        """The log of the app's current driver pod; remembers its last meaningful line."""
        status = self.get("sparkapplication", app).get("status", {})
        log = self.logs(status["driverInfo"]["podName"], container=DRIVER_CONTAINER)
        self.last_driver_line = last_spark_line(log)
        return log

    def executors_of(self, watch: PodWatch, driver: str, count: int) -> list[SeenPod]:
        """Executors the watch sees Running owned by the SparkDriver (the executor template's reference;
        their controller is the driver pod that created them), once `count` do."""
        owned = [p for p in watch.running() if ("SparkDriver", driver) in owners_of(p.pod)]
        return owned if len(owned) >= count else []

    def kubectl(self, *args: str, check: bool = True) -> str:
        return self.cluster.kubectl(*args, "-n", self.ns, check=check).stdout

    def get(self, kind: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.cluster.kubectl_json("get", kind, name, "-n", self.ns)
        return result

    def find(self, kind: str, name: str) -> dict[str, Any] | None:
        done = self.cluster.kubectl("get", kind, name, "-n", self.ns, "-o", "json", check=False)
        return json.loads(done.stdout) if done.returncode == 0 else None

    def pods(self, selector: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.cluster.kubectl_json("get", "pods", "-n", self.ns, "-l", selector)["items"]
        return items

    def apply(self, manifest: dict[str, Any]) -> None:
        self.cluster.apply(manifest, namespace=self.ns)

    def configmap(self, name: str, files: dict[str, str]) -> None:
        self.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": files})

    def logs(self, pod: str, container: str | None = None, previous: bool = False) -> str:
        args = ["logs", pod, *(["-c", container] if container else []), *(["--previous"] if previous else [])]
        return self.kubectl(*args, check=False)

    def watch(self, selector: str | None, resource: str = "pods") -> PodWatch:
        watch = PodWatch(self.cluster, self.ns, selector, resource)
        self.watches.append(watch)
        return watch

    def app_state(self, name: str) -> str:
        app = self.find("sparkapplication", name) or {}
        return str(app.get("status", {}).get("applicationState", {}).get("state", ""))

    def wait_app(self, name: str, states: Sequence[str], timeout: float) -> dict[str, Any]:
        """Wait until the app's state is one of `states`; return the app. Fails early on a
        terminal state that was not asked for, with the driver's log tail."""
        terminal = {"COMPLETED", "FAILED", "SUBMISSION_FAILED"}

        def reached() -> dict[str, Any] | None:
            app = self.find("sparkapplication", name)
            state = (app or {}).get("status", {}).get("applicationState", {}).get("state", "")
            if state in states:
                return app
            if state in terminal:
                raise AssertionError(f"{name} ended {state}, not {states}: {app}\n{self.driver_log_tail(name)}")
            return None

        return wait_for(reached, timeout=timeout, interval=1.0, message=f"{name} to reach {'/'.join(states)}")

    def wait_pod(self, predicate: Callable[[], Any], timeout: float, message: str) -> Any:
        return wait_for(predicate, timeout=timeout, interval=0.5, message=message)

    def driver_pods(self, app: str) -> list[dict[str, Any]]:
        return self.pods(f"{labels.APP}={app},{labels.SPARK_ROLE}={labels.ROLE_DRIVER}")

    def driver_log_tail(self, app: str, lines: int = 120) -> str:
        tails = []
        for pod in self.driver_pods(app):
            text = self.logs(pod["metadata"]["name"], container=DRIVER_CONTAINER)
            tails.append(f"--- {pod['metadata']['name']} ---\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(tails)

    def close(self) -> None:
        for watch in self.watches:
            watch.stop()


def last_spark_line(log: str) -> str:
    """The driver's last meaningful line: the last one that is not a shutdown-hook or cleanup note."""
    noise = ("ShutdownHookManager", "Deleting directory", "Shutdown hook called", "SparkUI: Stopped")
    lines = [line.strip() for line in log.splitlines() if line.strip() and not any(n in line for n in noise)]
    return lines[-1] if lines else ""


# -- a test's namespace on the real-node cluster (the e2e and chaos fixtures) --------------------------

# Stopping a namespace's pods: Spark's executors get 30 s of grace unless the driver deleted them.
TEARDOWN_S = 90.0
# Each kubeconfig's cluster as it was when the CRDs were installed on it. Keyed by the started cluster,
# not the path: a test that stops the shared cluster leaves the next `get()` to start a fresh one with
# the same name and kubeconfig path, and no CRDs (CI's run at stop 53 failed every later test so).
_CRDS_INSTALLED: dict[Path, object] = {}


def with_crds(cluster: ClusterHandle) -> ClusterHandle:
    """``cluster`` with sparkop's CRDs (installed once per started cluster)."""
    started: object = cluster.cluster if cluster.cluster is not None else cluster.kubeconfig
    if _CRDS_INSTALLED.get(cluster.kubeconfig) is not started:
        install_crds(cluster)
        _CRDS_INSTALLED[cluster.kubeconfig] = started
    return cluster


def grant_spark_service_account(cluster: ClusterHandle, ns: str) -> None:
    """What Spark's driver needs (as the Spark on Kubernetes docs grant it): its executors,
    their ConfigMaps, Services and PVCs."""
    cluster.kubectl("create", "serviceaccount", SPARK_SERVICE_ACCOUNT, "-n", ns)
    cluster.kubectl(
        "create", "role", "spark", "-n", ns, "--verb=*",
        "--resource=pods,services,configmaps,persistentvolumeclaims",
    )  # fmt: skip
    cluster.kubectl(
        "create", "rolebinding", "spark", "-n", ns, "--role=spark", f"--serviceaccount={ns}:{SPARK_SERVICE_ACCOUNT}"
    )


def drain(cluster: ClusterHandle, ns: str) -> None:
    """Delete the apps while the operator still runs (it removes the driver pods' finalizer),
    then wait for the pods, so the next test has the nodes' CPUs to itself."""
    # Owners first: a SparkConnect whose server SparkDriver is deleted starts another one.
    kinds = "sparkconnects,scheduledsparkapplications,sparkapplications,sparkdrivers,sparkhistoryservers"
    cluster.kubectl("delete", kinds, "--all", "-n", ns, "--wait=false", check=False)
    cluster.kubectl("delete", "pods", "--all", "-n", ns, "--wait=false", "--grace-period=2", check=False)

    def no_pods() -> bool:
        done = cluster.kubectl("get", "pods", "-n", ns, "-o", "name", check=False)
        return done.returncode == 0 and not done.stdout.strip()

    try:
        wait_for(no_pods, timeout=TEARDOWN_S, interval=1.0, message=f"the pods of {ns} to be gone")
    except TimeoutError:
        left = cluster.kubectl("get", "pods", "-n", ns, "-o", "wide", check=False).stdout
        print(f"pods still in {ns} after {TEARDOWN_S:.0f}s:\n{left}")


@contextmanager
def spark_namespace(
    cluster: ClusterHandle,
    log_dir: Path,
    *,
    labels: dict[str, str] | None = None,
    operator_args: Sequence[str] = (),
) -> Iterator[SparkNamespace]:
    """A namespace (with ``labels``) holding the `spark` ServiceAccount, and the operator (apps, driver,
    connect and history controllers, plus ``operator_args``) watching it; on the way out, the operator's log
    tail is printed and the namespace drained while the operator still runs."""
    with temporary_namespace(cluster, prefix="e2e") as ns:
        if labels:
            cluster.kubectl("label", "namespace", ns, *(f"{k}={v}" for k, v in labels.items()), "--overwrite")
        grant_spark_service_account(cluster, ns)
        controllers = ("apps", "driver", "connect", "history")
        with OperatorProcess(
            cluster.kubeconfig, namespaces=[ns], log_dir=log_dir, controllers=controllers, extra_args=operator_args
        ) as operator:
            env = SparkNamespace(cluster, ns, operator)
            try:
                yield env
            finally:
                env.close()
                print("--- operator log tail ---\n" + "\n".join(operator.logs().splitlines()[-60:]))
                if not operator.alive():
                    operator.start()  # a test that killed it: the drain needs it to let the pods go
                drain(cluster, ns)


# Spark Connect needs Spark 4: the pinned releases that have its server.
CONNECT_VERSIONS: tuple[str, ...] = tuple(v for v in PINNED_VERSIONS if release_order(v) >= (4, 0))


def spark_connect(name: str, version: str) -> dict[str, Any]:
    small = {"cores": 1, "coreRequest": "250m", "memory": "768m"}
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkConnect",
        "metadata": {"name": name},
        "spec": {
            "sparkVersion": version,
            "image": f"apache/spark:{version}",
            "imagePullPolicy": "IfNotPresent",
            "server": {**small, "serviceAccount": SPARK_SERVICE_ACCOUNT},
            "executor": {**small, "instances": 1},
        },
    }
