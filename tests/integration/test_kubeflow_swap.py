"""A live swap from kubeflow's spark-operator to sparkop, with nothing lost (issue 44, item 3).

On a devcluster with two real nodes, kubeflow's operator (tests/support/kubeflow_operator.py: its v2.5
build, real spark-submit) runs one app in each state kubeflow can be caught in:

=================  ========================================================================  ============
app                what kubeflow left at the swap                                            then
=================  ========================================================================  ============
done-ok            COMPLETED SparkPi                                                         untouched
done-failed        FAILED (the job exits 3, restartPolicy Never)                             untouched
running            RUNNING, its driver (made by spark-submit, owned by the app) alive and    COMPLETED
                   waiting for the test's go-ahead (a ConfigMap) before it runs its Spark
                   job
submitted          SUBMITTED: its driver pod made, unschedulable (a node label no node has)  COMPLETED
pending-rerun      PENDING_RERUN: failed once under OnFailure (1 retry), kubeflow deleted    FAILED after
                   its driver pod, which a finalizer of the test's holds                     its 2nd run
suspended          SUSPENDED (created with suspend: true)                                    COMPLETED
every-minute       a ScheduledSparkApplication ("* * * * *") between two runs                one run a
                                                                                             minute
=================  ========================================================================  ============

Then kubeflow's operator is stopped (its CRDs and objects stay, as ``helm uninstall`` leaves them), and
sparkop is started with ``--kubeflow-api``. The test lets each waiting app go on (the ConfigMap, the
node label, the finalizer removed, suspend: false) and holds sparkop to:

- **no app lost**: each ends as the table says, with its attempts counted on from kubeflow's;
- **no second driver**: ``running`` and ``submitted`` keep the one driver pod spark-submit made (one pod
  uid over the whole test, adopted: never deleted and made again); ``pending-rerun``'s second run's pod
  is made only after the first is gone; no two driver pods of an app are ever alive at once;
- **no write to a finished app**: ``done-ok`` and ``done-failed`` keep the resourceVersion they had
  at the swap (the audit policy logs sparkop.io's kinds only, so kubeflow's group is watched);
- **the schedule neither misses nor doubles a run**: exactly one run per minute from kubeflow's first
  to the last one the test waits for, at least one started by each operator.

The timeline (every state, every driver and executor pod, from watches) is printed, and written to
``$SPARKOP_SWAP_TIMELINE`` when that names a file. What a failure needs, which goes with the namespace,
is kept before it goes (:func:`keep_what_went_on`): every SparkDriver's incarnations (with the tail of
each ended driver's log), every pod's log, the namespace's Events and sparkop's log, into the directory
``$SPARKOP_SWAP_DIAGNOSIS`` names (else the test's tmp_path), the incarnations and the failed pods' logs
printed. ``$SPARKOP_SWAP_KEEP_NAMESPACE`` keeps the namespace (with ``$SPARKOP_KUBECONFIG``, on a
cluster that outlives the session).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, temporary_namespace, wait_for
from tests.support import kubeflow_operator
from tests.support.crds import install_crds
from tests.support.operator import OperatorProcess, release_driver_pods
from tests.support.spark_e2e import (
    OLDEST_VERSION,
    grant_spark_service_account,
    spark_application,
    spark_pi,
)
from tests.support.watches import CreationWatch

# kubeflow's operator is a Go build that `make test` runs beside the suite: this test runs last and waits for it.
pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.needs_build("kubeflow-operator")]

ROOT = Path(__file__).resolve().parents[2]
KUBEFLOW_CRDS = ROOT / "crds" / "kubeflow"
API = kubeflow_operator.KUBEFLOW_API_VERSION
APPS = "sparkapplications.sparkoperator.k8s.io"
SCHEDULED = "scheduledsparkapplications.sparkoperator.k8s.io"
VERSION = OLDEST_VERSION  # kubeflow's spark-submit is pyspark 3.5.9 (bench/peer.py)
HOLD_LABEL = "swap.sparkop.io/hold"  # no node has it until the test says so
HOLD_FINALIZER = "swap.sparkop.io/hold"
GO_AHEAD = "swap-go-ahead"  # the ConfigMap the running app's driver waits for
JOBS = "swap-jobs"
# A real Spark run is a JVM or three on two shared cores: a minute; kubeflow's six spark-submits at once
# took 4.5 minutes to create their pods at a load of 30 (2026-12-06), and SparkPi 4 more.
RUN_S = 600.0
FINISHED = ("COMPLETED", "FAILED")
TIMELINE_ENV = "SPARKOP_SWAP_TIMELINE"
DIAGNOSIS_ENV = "SPARKOP_SWAP_DIAGNOSIS"
KEEP_NAMESPACE_ENV = "SPARKOP_SWAP_KEEP_NAMESPACE"

# The running app's driver: alive, and waiting (it polls the API server as its ServiceAccount) for the
# test's go-ahead before its Spark job, so it is surely mid-run when the operators change.
WAITING_JOB = """\
import json, ssl, sys, time, urllib.request
from operator import add

from pyspark.sql import SparkSession

account = "/var/run/secrets/kubernetes.io/serviceaccount"
namespace = open(f"{account}/namespace").read().strip()
token = open(f"{account}/token").read().strip()
context = ssl.create_default_context(cafile=f"{account}/ca.crt")
url = f"https://kubernetes.default.svc/api/v1/namespaces/{namespace}/configmaps/%s" % sys.argv[1]
spark = SparkSession.builder.appName("swap-running").getOrCreate()
print("swap job: waiting for the go-ahead", flush=True)
while True:
    try:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        urllib.request.urlopen(request, context=context).read()
        break
    except urllib.error.HTTPError as error:
        if error.code not in (404, 429, 500, 502, 503, 504):
            raise
    except (urllib.error.URLError, OSError) as error:
        # The cluster's DNS failed to answer for a moment ("Temporary failure in name resolution", seen
        # right as sparkop started): ask again, as for an answer that the ConfigMap is not there yet.
        print(f"swap job: asking again after {error}", flush=True)
    time.sleep(1)
total = spark.sparkContext.parallelize(range(100), 2).map(lambda i: i % 7).reduce(add)
print(f"swap job: done, {total}", flush=True)
spark.stop()
"""
FAILING_JOB = """\
import sys

sys.stderr.write("swap job: failing on purpose\\n")
sys.exit(3)
"""


# -- the apps, as kubeflow's users write them ---------------------------------------------------------


def kubeflow(manifest: dict[str, Any]) -> dict[str, Any]:
    return {**manifest, "apiVersion": API}


def with_jobs(manifest: dict[str, Any]) -> dict[str, Any]:
    """The jobs ConfigMap in the driver through a pod template: kubeflow without its webhook (as here)
    mounts ConfigMaps only that way; sparkop reads the same template."""
    template = {
        "spec": {
            "volumes": [{"name": "jobs", "configMap": {"name": JOBS}}],
            "containers": [
                {"name": "spark-kubernetes-driver", "volumeMounts": [{"name": "jobs", "mountPath": "/mnt/jobs"}]}
            ],
        }
    }
    manifest["spec"]["driver"]["template"] = template
    return manifest


def python_app(name: str, script: str, *args: str, **spec: Any) -> dict[str, Any]:
    app = spark_application(
        name, VERSION, type="Python", pythonVersion="3", mainApplicationFile=f"local:///mnt/jobs/{script}", **spec
    )
    app["spec"]["arguments"] = list(args)
    return kubeflow(with_jobs(app))


def manifests() -> dict[str, dict[str, Any]]:
    one_retry = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    submitted = kubeflow(spark_pi("submitted", VERSION, nodeSelector={HOLD_LABEL: "yes"}))
    return {
        "done-ok": kubeflow(spark_pi("done-ok", VERSION)),
        "done-failed": python_app("done-failed", "fail.py"),
        "running": python_app("running", "wait.py", GO_AHEAD, executor={"instances": 1}),
        "submitted": submitted,
        "pending-rerun": python_app("pending-rerun", "fail.py", restartPolicy=one_retry),
        "suspended": kubeflow(spark_pi("suspended", VERSION, suspend=True)),
    }


def scheduled(name: str) -> dict[str, Any]:
    """A run a minute of an app that never runs (its driver unschedulable): the schedule is under test."""
    template = spark_pi(name, VERSION, nodeSelector={HOLD_LABEL: "never"})["spec"]
    return {
        "apiVersion": API,
        "kind": "ScheduledSparkApplication",
        "metadata": {"name": name},
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Allow", "template": template},
    }


# -- what the watches saw -----------------------------------------------------------------------------


@dataclass
class Seen:
    at: float
    kind: str
    event: str
    name: str
    uid: str
    version: str
    state: str
    labels: dict[str, str]
    deleting: bool


@dataclass
class Timeline:
    """Every event of the namespace's apps, scheduled apps and driver pods, and the test's own steps."""

    cluster: ClusterHandle
    namespace: str
    started: float = field(default_factory=time.monotonic)
    seen: list[Seen] = field(default_factory=list)
    steps: list[tuple[float, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _procs: list[subprocess.Popen[str]] = field(default_factory=list)
    _stopped: threading.Event = field(default_factory=threading.Event)

    def watch(self, resource: str, selector: str = "", kind: str = "") -> None:
        """Records ``resource``'s events under ``kind`` (else the resource's name)."""
        argv = [str(self.cluster.kubectl_binary), f"--kubeconfig={self.cluster.kubeconfig}", "get", resource]
        argv += ["-n", self.namespace, "--watch", "--output-watch-events", "-o", "json"]
        argv += ["-l", selector] if selector else []
        threading.Thread(target=self._follow, args=(argv, resource, kind), daemon=True).start()

    def _follow(self, argv: list[str], resource: str, kind: str) -> None:
        """Watches again whenever the stream ends: the API server ends every watch of a kind whose CRD
        changes, as the swap's replacement of kubeflow's CRDs by sparkop's does. The new watch lists
        what exists again (ADDED, the same uids and resourceVersions), then goes on."""
        while not self._stopped.is_set():
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            with self._lock:
                self._procs.append(proc)
            if self._stopped.is_set():  # stop() ran while this one started: it did not see it
                proc.terminate()
            self._read(proc, resource, kind or resource.split(".")[0])
            proc.wait()
            if not self._stopped.is_set():
                self.step(f"the watch of {resource} ended; watching again")
                # A watch refused at once (the kind not served for a moment) is not started again in a
                # tight loop; stop() ends the wait.
                self._stopped.wait(1.0)

    def _read(self, proc: subprocess.Popen[str], resource: str, kind: str) -> None:
        assert proc.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for line in proc.stdout:
            buffer += line
            while buffer.strip():
                try:
                    event, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break
                buffer = buffer.lstrip()[end:]
                self._record(resource, kind, event)

    def _record(self, resource: str, kind: str, event: dict[str, Any]) -> None:
        obj, meta = event["object"], event["object"]["metadata"]
        status = obj.get("status") or {}
        state = status.get("phase") if resource == "pods" else (status.get("applicationState") or {}).get("state")
        seen = Seen(
            at=time.monotonic() - self.started,
            kind=kind,
            event=str(event["type"]),
            name=str(meta["name"]),
            uid=str(meta["uid"]),
            version=str(meta.get("resourceVersion", "")),
            state=str(state or ""),
            labels=dict(meta.get("labels") or {}),
            deleting=bool(meta.get("deletionTimestamp")),
        )
        with self._lock:
            self.seen.append(seen)

    def step(self, text: str) -> None:
        with self._lock:
            self.steps.append((time.monotonic() - self.started, text))

    def events(self, kind: str, name: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.kind == kind and (name is None or s.name == name)]

    def driver_pods(self, app: str) -> dict[str, list[Seen]]:
        """The app's driver pods by uid (kubeflow's name is the same for each of an app's runs)."""
        pods: dict[str, list[Seen]] = {}
        for seen in self.events("pods"):
            if seen.labels.get("sparkoperator.k8s.io/app-name") == app:
                pods.setdefault(seen.uid, []).append(seen)
        return pods

    def most_drivers_alive(self, app: str) -> int:
        edges = []
        for history in self.driver_pods(app).values():
            edges.append((history[0].at, 1))
            gone = next((s.at for s in history if s.event == "DELETED"), None)
            if gone is not None:
                edges.append((gone, -1))
        most = alive = 0
        for _, change in sorted(edges):
            alive += change
            most = max(most, alive)
        return most

    def render(self) -> str:
        lines = [f"{at:7.1f}s  >> {text}" for at, text in self.steps]
        for s in self.seen:
            mark = " (deleting)" if s.deleting else ""
            lines.append(f"{s.at:7.1f}s  {s.kind:<26} {s.event:<8} {s.name:<34} {s.state}{mark} rv={s.version}")
        return "\n".join(sorted(lines, key=lambda line: float(line.split("s", 1)[0])))

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            proc.terminate()
            proc.wait(10)


# -- the swap -----------------------------------------------------------------------------------------


@pytest.fixture
def swap_namespace(real_cluster: ClusterHandle) -> Iterator[str]:
    keep = bool(os.environ.get(KEEP_NAMESPACE_ENV))
    with temporary_namespace(real_cluster, prefix="swap", keep=keep) as ns:
        grant_spark_service_account(real_cluster, ns)
        yield ns
        if not keep:
            real_cluster.kubectl("label", "nodes", "--all", f"{HOLD_LABEL}-", check=False)
            release_driver_pods(real_cluster, ns)  # sparkop has stopped: its finalizers would hold the namespace


def state(cluster: ClusterHandle, ns: str, name: str, resource: str = APPS) -> dict[str, Any]:
    found = cluster.kubectl("get", resource, name, "-n", ns, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else {}


def app_state(cluster: ClusterHandle, ns: str, name: str) -> str:
    return str(((state(cluster, ns, name).get("status") or {}).get("applicationState") or {}).get("state", ""))


def wait_state(cluster: ClusterHandle, ns: str, name: str, wanted: tuple[str, ...], timeout: float = RUN_S) -> None:
    wait_for(
        lambda: app_state(cluster, ns, name) in wanted,
        timeout=timeout,
        interval=1.0,
        message=f"{name} to reach {'/'.join(wanted)} (it is {app_state(cluster, ns, name) or 'new'})",
    )


def runs_of(timeline: Timeline, name: str) -> list[Seen]:
    """The scheduled app's runs, first sighting of each."""
    first: dict[str, Seen] = {}
    for seen in timeline.events("sparkapplications"):
        if seen.labels.get("sparkoperator.k8s.io/scheduled-app-name") == name:
            first.setdefault(seen.uid, seen)
    return sorted(first.values(), key=lambda s: s.at)


def creation_minute(cluster: ClusterHandle, ns: str, run: str) -> datetime:
    created = state(cluster, ns, run)["metadata"]["creationTimestamp"]
    stamp = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return stamp.replace(second=0)


def test_kubeflow_operator_out_sparkop_in_nothing_lost(
    real_cluster: ClusterHandle, swap_namespace: str, tmp_path: Path
) -> None:
    cluster, ns = real_cluster, swap_namespace
    kubeflow_operator.install_crds(cluster)
    timeline = Timeline(cluster, ns)
    timeline.watch(APPS)
    timeline.watch(SCHEDULED)
    timeline.watch("pods", "spark-role=driver")
    timeline.watch("pods", "spark-role=executor", kind="executors")
    apps = manifests()
    try:
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": JOBS},
                "data": {"wait.py": WAITING_JOB, "fail.py": FAILING_JOB},
            },
            namespace=ns,
        )
        timeline.step("kubeflow's operator starts")
        kubeflow = kubeflow_operator.start(cluster, ns)
        try:
            _bring_kubeflow_apps_to_their_states(cluster, ns, apps, timeline)
            at_swap = {name: state(cluster, ns, name) for name in apps}
            timeline.step("kubeflow's operator stopped (its CRDs and objects stay)")
        finally:
            kubeflow.stop()
        finished_versions = {name: at_swap[name]["metadata"]["resourceVersion"] for name in ("done-ok", "done-failed")}
        kubeflow_runs = runs_of(timeline, "every-minute")
        # sparkop's own CRDs, and its CRDs of kubeflow's group over kubeflow's (docs/migrating-from-kubeflow.md).
        install_crds(cluster)
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(KUBEFLOW_CRDS))
        timeline.step("sparkop's CRDs installed, kubeflow's group's replaced")
        timeline.step("sparkop starts with --kubeflow-api")
        with OperatorProcess(
            cluster.kubeconfig,
            namespaces=[ns],
            log_dir=tmp_path,
            controllers=("apps", "driver", "connect", "scheduled"),
            extra_args=["--kubeflow-api"],
        ) as sparkop:
            _let_the_waiting_apps_go_on(cluster, ns, timeline)
            for name, final in {
                "running": "COMPLETED",
                "submitted": "COMPLETED",
                "pending-rerun": "FAILED",
                "suspended": "COMPLETED",
            }.items():
                wait_state(cluster, ns, name, (final,) if final == "FAILED" else FINISHED)
                assert app_state(cluster, ns, name) == final, (name, state(cluster, ns, name).get("status"))
            # Two more minutes of the schedule under sparkop.
            wait_for(
                lambda: len(runs_of(timeline, "every-minute")) >= len(kubeflow_runs) + 2,
                timeout=200,
                interval=2.0,
                message="two runs of every-minute under sparkop",
            )
            timeline.step("the apps ended; sparkop stops")
            operator_log = sparkop.logs()
    finally:
        timeline.stop()
        rendered = timeline.render()
        print(f"--- the swap's timeline ---\n{rendered}")
        if path := os.environ.get(TIMELINE_ENV):
            Path(path).write_text(rendered + "\n")
        keep_what_went_on(cluster, ns, Path(os.environ.get(DIAGNOSIS_ENV) or tmp_path / "diagnosis"), tmp_path)

    # No app lost: every app is there, ended as the table says, its attempts counted on.
    for name in apps:
        assert state(cluster, ns, name), f"{name} was lost"
    assert state(cluster, ns, "running")["status"]["executionAttempts"] == 1
    assert state(cluster, ns, "pending-rerun")["status"]["executionAttempts"] == 2
    # No second driver: the adopted pods are the ones spark-submit made; no two alive at once.
    for name in ("running", "submitted", "suspended", "done-ok", "done-failed"):
        pods = timeline.driver_pods(name)
        assert len(pods) == 1, (name, {uid: [(s.at, s.event, s.state) for s in h] for uid, h in pods.items()})
    assert len(timeline.driver_pods("pending-rerun")) == 2
    for name in apps:
        assert timeline.most_drivers_alive(name) <= 1, name
    # No write to a finished app.
    for name, version in finished_versions.items():
        after = [s for s in timeline.events("sparkapplications", name) if s.version != version and s.at > 0]
        assert state(cluster, ns, name)["metadata"]["resourceVersion"] == version, (name, after)
    # The schedule: one run a minute, none missed, none doubled, each operator started some.
    runs = runs_of(timeline, "every-minute")
    minutes = [creation_minute(cluster, ns, run.name) for run in runs]
    assert len(set(minutes)) == len(minutes), f"a minute ran twice: {minutes}"
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(minutes)]
    assert all(gap == 60 for gap in gaps), f"a minute was missed: {minutes}"
    assert kubeflow_runs and len(runs) >= len(kubeflow_runs) + 2, (kubeflow_runs, runs)
    # No run of the schedule failed: each waits for its unschedulable driver. A run kubeflow submitted in
    # its last seconds, before writing it, is adopted with its pod, never refused the pod's name (issue 44).
    failed = {
        seen.name: seen.state
        for run in runs
        for seen in timeline.events("sparkapplications", run.name)
        if seen.state in ("SUBMISSION_FAILED", "FAILING", "FAILED")
    }
    assert not failed, failed
    # One driver pod per run of the schedule, whichever operator submitted it.
    for run in runs:
        assert len(timeline.driver_pods(run.name)) <= 1, (run.name, timeline.driver_pods(run.name))
    assert "Traceback" not in operator_log, operator_log[-4000:]


def keep_what_went_on(cluster: ClusterHandle, ns: str, directory: Path, operator_logs: Path) -> None:
    """What the namespace's deletion would take: every SparkDriver's and app's status (an ended
    incarnation's log tail is in its SparkDriver's ``status.incarnations``), every pod (its log too), the
    Events, and sparkop's log; written to ``directory``, the incarnations and failed pods' logs printed."""
    directory.mkdir(parents=True, exist_ok=True)
    for resource in ("sparkdrivers.sparkop.io", APPS, SCHEDULED, "pods", "services", "configmaps"):
        found = cluster.kubectl("get", resource, "-n", ns, "-o", "yaml", check=False, timeout=30)
        (directory / f"{resource.split('.')[0]}.yaml").write_text(found.stdout or found.stderr)
    events = cluster.kubectl("get", "events", "-n", ns, "--sort-by=.lastTimestamp", check=False, timeout=30)
    (directory / "events.txt").write_text(events.stdout or events.stderr)
    for log in operator_logs.glob("sparkop-operator-*.log"):
        (directory / log.name).write_text(log.read_text(errors="replace"))
    printed: list[str] = []
    drivers = cluster.kubectl("get", "sparkdrivers.sparkop.io", "-n", ns, "-o", "json", check=False, timeout=30)
    for driver in json.loads(drivers.stdout).get("items", []) if drivers.returncode == 0 else []:
        status = driver.get("status") or {}
        printed.append(f"SparkDriver {driver['metadata']['name']}: {status.get('phase')} {status.get('termination')}")
        for incarnation in status.get("incarnations") or ():
            tail = incarnation.pop("logTail", "") or ""
            printed.append(f"  incarnation {json.dumps(incarnation)}")
            printed += [f"    | {line}" for line in tail.splitlines()[-40:]]
    pods = cluster.kubectl("get", "pods", "-n", ns, "-o", "json", check=False, timeout=30)
    for pod in json.loads(pods.stdout).get("items", []) if pods.returncode == 0 else []:
        name, phase = pod["metadata"]["name"], (pod.get("status") or {}).get("phase")
        log = cluster.kubectl("logs", name, "-n", ns, "--all-containers", check=False, timeout=30)
        (directory / f"pod-{name}.log").write_text(log.stdout + log.stderr)
        if phase == "Failed":
            printed.append(f"pod {name} ({phase}), its log's end:")
            printed += [f"    | {line}" for line in (log.stdout + log.stderr).splitlines()[-60:]]
    print(f"--- kept in {directory} ---\n" + "\n".join(printed))


def _bring_kubeflow_apps_to_their_states(
    cluster: ClusterHandle, ns: str, apps: dict[str, dict[str, Any]], timeline: Timeline
) -> None:
    for name, manifest in apps.items():
        cluster.apply(manifest, namespace=ns)
        timeline.step(f"applied {name}")
    cluster.apply(scheduled("every-minute"), namespace=ns)
    timeline.step("applied every-minute")
    # pending-rerun's first driver is held (a finalizer of the test's) once kubeflow deletes it.
    pod = "pending-rerun-driver"
    wait_for(lambda: state(cluster, ns, pod, "pods"), timeout=RUN_S, interval=0.5, message=f"{pod} to exist")
    cluster.kubectl("patch", "pod", pod, "-n", ns, "--type=merge", "-p",
                    json.dumps({"metadata": {"finalizers": [HOLD_FINALIZER]}}))  # fmt: skip
    for name, wanted in {
        "done-ok": ("COMPLETED",),
        "done-failed": ("FAILED",),
        "running": ("RUNNING",),
        "submitted": ("SUBMITTED",),
        "pending-rerun": ("PENDING_RERUN",),
        "suspended": ("SUSPENDED",),
    }.items():
        wait_state(cluster, ns, name, wanted)
        timeline.step(f"kubeflow: {name} {wanted[0]}")
    wait_for(
        lambda: runs_of(timeline, "every-minute"), timeout=120, interval=1.0, message="kubeflow's first scheduled run"
    )
    # The running app's driver is alive and waiting for the go-ahead.
    assert state(cluster, ns, "running-driver", "pods")["status"]["phase"] == "Running"


def _let_the_waiting_apps_go_on(cluster: ClusterHandle, ns: str, timeline: Timeline) -> None:
    cluster.kubectl("create", "configmap", GO_AHEAD, "-n", ns)
    timeline.step("go-ahead for running's driver")
    nodes = cluster.kubectl_json("get", "nodes")["items"]
    cluster.kubectl("label", "node", nodes[0]["metadata"]["name"], f"{HOLD_LABEL}=yes", "--overwrite")
    timeline.step(f"label {HOLD_LABEL}=yes on a node: submitted's driver can be scheduled")
    cluster.kubectl("patch", "pod", "pending-rerun-driver", "-n", ns, "--type=json",
                    "-p", json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]))  # fmt: skip
    timeline.step("pending-rerun's first driver let go")
    cluster.kubectl("patch", APPS, "suspended", "-n", ns, "--type=merge", "-p", '{"spec":{"suspend":false}}')
    timeline.step("suspended resumed")


# -- the way back -------------------------------------------------------------------------------------


def test_sparkop_out_kubeflow_back_in_finished_apps_stay_and_suspended_ones_run_under_kubeflow(
    real_cluster: ClusterHandle, swap_namespace: str, tmp_path: Path
) -> None:
    """docs/migrating-from-kubeflow.md, "The way back": apps of kubeflow's group that sparkop ran, the runs
    let end first, then sparkop out (its finalizers removed from the driver pods it leaves), kubeflow's
    CRDs put back over sparkop's definitions of them, kubeflow's operator in. kubeflow reads the statuses
    sparkop wrote (its own fields, with its meanings): finished apps stay finished and are never run again;
    a suspended app and a suspended schedule go on under kubeflow when resumed."""
    cluster, ns = real_cluster, swap_namespace
    install_crds(cluster)
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(KUBEFLOW_CRDS))
    cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": JOBS}, "data": {"fail.py": FAILING_JOB}},
        namespace=ns,
    )
    schedule = scheduled("every-minute")
    schedule["spec"]["suspend"] = True
    finished = {"done-ok": "COMPLETED", "done-failed": "FAILED"}
    driver_pods = CreationWatch(cluster, ns, "pods")
    runs = CreationWatch(cluster, ns, APPS)
    try:
        with OperatorProcess(
            cluster.kubeconfig,
            namespaces=[ns],
            log_dir=tmp_path,
            controllers=("apps", "driver", "scheduled"),
            extra_args=["--kubeflow-api"],
        ) as sparkop:
            cluster.apply(kubeflow(spark_pi("done-ok", VERSION)), namespace=ns)
            cluster.apply(python_app("done-failed", "fail.py"), namespace=ns)
            cluster.apply(kubeflow(spark_pi("suspended", VERSION, suspend=True)), namespace=ns)
            cluster.apply(schedule, namespace=ns)
            for name, final in {**finished, "suspended": "SUSPENDED"}.items():
                wait_state(cluster, ns, name, (final,) if final == "SUSPENDED" else FINISHED)
                assert app_state(cluster, ns, name) == final, (name, state(cluster, ns, name).get("status"))
            assert "Traceback" not in sparkop.logs()
        # sparkop out, and the guide's step 2: nothing is left to release, since the runs were let end first
        # (the outcome finalizer stays on a driver pod only until its outcome is recorded).
        assert release_driver_pods(cluster, ns) == []
        at_swap = {name: state(cluster, ns, name)["status"] for name in finished}
        kubeflow_operator.install_crds(cluster)  # kubeflow's CRDs back, over sparkop's definitions of them
        kubeflows = kubeflow_operator.start(cluster, ns)
        try:
            cluster.kubectl("patch", APPS, "suspended", "-n", ns, "--type=merge", "-p", '{"spec":{"suspend":false}}')
            cluster.kubectl(
                "patch", SCHEDULED, "every-minute", "-n", ns, "--type=merge", "-p", '{"spec":{"suspend":false}}'
            )
            wait_state(cluster, ns, "suspended", FINISHED)
            wait_for(
                lambda: runs.created("every-minute"),
                timeout=150,
                interval=1.0,
                message="a run of every-minute started by kubeflow's operator once resumed",
            )
            after = {name: state(cluster, ns, name)["status"] for name in finished}
        finally:
            kubeflows.stop()
    finally:
        driver_pods.stop()
        runs.stop()
    resumed = state(cluster, ns, "suspended")["status"]
    assert resumed["applicationState"]["state"] == "COMPLETED", resumed
    assert resumed["executionAttempts"] == 1, resumed
    assert len(driver_pods.uids.get("suspended-driver") or ()) == 1, driver_pods.uids
    # The finished apps: still finished, their runs counted as sparkop counted them, never run again.
    for name, final in finished.items():
        assert after[name]["applicationState"]["state"] == final, (name, after[name])
        assert after[name]["executionAttempts"] == at_swap[name]["executionAttempts"] == 1, (name, after[name])
        assert len(driver_pods.uids.get(f"{name}-driver") or ()) == 1, (name, driver_pods.uids)
