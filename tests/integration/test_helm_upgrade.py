"""An operator upgrade mid-run (issue 29): `helm upgrade` of a two-replica install (Lease HA) to a
changed image and changed values while 10 apps run on kwok nodes and one real SparkPi runs on the
real node, then `helm rollback` to revision 1 while another batch runs. Nothing is lost (every app
ends as its spec says, with the attempts it should have), nothing is duplicated (a watch sees one
SparkDriver per attempt and one driver pod per SparkDriver), and the real SparkPi prints its answer.

CRDs: Helm 3 installs a chart's crds/ on the first install only, so a `helm upgrade` to a chart whose
CRD has a new field leaves the served CRD as it was; `kubectl apply --server-side` of the newer CRDs
while apps run changes the schema under them, and every app still runs to its end.

The cluster is test_ha_failover's: kwok nodes for the simulated drivers, one real node for the
operator's pods and the real SparkPi (its own name: one cluster with real nodes runs at a time).
Each phase prints its timeline, in seconds from the command (pytest -s shows it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import images, nodes, realnodes
from devcluster.cluster import Cluster
from devcluster.testing import REAL_SESSION_PREFIX, ClusterHandle, RealNodeClusters, wait_for
from sparkop.domain import naming
from tests.support.cluster_apps import DriverWatch, app_manifest, assert_no_duplicates
from tests.support.helm import CHART, Release, install
from tests.support.spark_e2e import DRIVER_CONTAINER, OLDEST_VERSION, spark_pi
from tests.support.watches import CreationWatch, KubectlWatch

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

NAMESPACE = "apps"
RELEASE_NAMESPACE = "sparkop-system"
RELEASE_NAME = "sparkop"
DEPLOYMENT = f"deployment/{RELEASE_NAME}"
LEASE_NAME = "sparkop-leader"  # the chart's: <fullname>-leader
DRIVER_ACCOUNT = "sparkop-spark"  # the chart's drivers' ServiceAccount: <fullname>-spark
REPLICAS = 2
LEASE_DURATION_S = 15.0
RETRY_PERIOD_S = 2.0
WORKERS, NEW_WORKERS = 32, 16  # the chart's default, and the value the upgrade changes it to
ON_FAILURE = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
KWOK_ONLY: dict[str, Any] = {"nodeSelector": {"type": "kwok"}}
REAL_ONLY = dict([nodes.NODE_TYPE_LABEL])
# Long enough that a rollout (two pods started one after the other, each a Python start and a
# cache sync on a busy machine: 6-18 s measured) happens while they run; the retried ones run twice,
# their second run started by the new pods. The CRD apply takes about 3 s. A simulated run can last
# up to twice its run-seconds: kwok's run-seconds delay is relative, and kwok restarts it when it
# touches the pods of a node at that node's status heartbeat (about every 55 s).
RUN_SECONDS = 25
CRD_RUN_SECONDS = 15
PI_SLICES = 200
FINAL_STATES = ("COMPLETED", "FAILED")
# What the newer CRD adds to SparkApplication's spec.
NEW_FIELD = "upgradeNote"
# Generous bounds, not measurements: a rollout of two pods, and apps of RUN_SECONDS (twice for the
# retried ones) plus a real SparkPi after it.
ROLLOUT_BOUND_S = 180.0
APPS_BOUND_S = 300.0


@dataclass(frozen=True)
class Expected:
    outcome: str  # what the simulator makes of the driver
    policy: dict[str, Any] | None
    state: str
    attempts: int


def batch(prefix: str) -> dict[str, Expected]:
    """10 apps with simulated drivers: 6 succeed, 2 fail, 2 fail twice (one retry)."""
    return {
        **{f"{prefix}-ok-{i}": Expected("Succeeded", None, "COMPLETED", 1) for i in range(6)},
        **{f"{prefix}-fails-{i}": Expected("Failed", None, "FAILED", 1) for i in range(2)},
        **{f"{prefix}-retried-{i}": Expected("Failed", ON_FAILURE, "FAILED", 2) for i in range(2)},
    }


def apply_batch(cluster: ClusterHandle, apps: dict[str, Expected], run_seconds: float) -> None:
    for name, want in apps.items():
        manifest = app_manifest(name, want.policy, outcome=want.outcome, run_seconds=run_seconds, **KWOK_ONLY)
        cluster.apply(manifest, NAMESPACE)


def real_pi(name: str) -> dict[str, Any]:
    """A SparkPi on the real node, small enough to share its ~2 CPUs with the operator's pods."""
    small = {"coreRequest": "300m", "nodeSelector": REAL_ONLY}
    driver = {**small, "serviceAccount": DRIVER_ACCOUNT}
    return spark_pi(name, OLDEST_VERSION, slices=PI_SLICES, driver=driver, executor={"instances": 1, **small})


@dataclass
class Setup:
    cluster: ClusterHandle
    release: Release
    image: str  # revision 1's image
    next_image: str  # the same image under a second reference: the upgrade's


@pytest.fixture(scope="module")
def installed(real_node_clusters: RealNodeClusters) -> Iterator[Setup]:
    """The mixed cluster with revision 1 installed: two replicas, one of them leading."""
    real_node_clusters.stop()
    operator_image = images.ensure_operator_image(lambda line: None)
    image = f"{images.OPERATOR_REPO}:{operator_image.key}"
    next_image = f"{images.OPERATOR_REPO}:{operator_image.key}-next"
    cluster = Cluster.up(
        f"{REAL_SESSION_PREFIX}upgrade", nodes=2, node_cpu="64", simulator=True, real_nodes=1, die_with_parent=True
    )
    handle = ClusterHandle(cluster.kubeconfig, cluster.kubectl, cluster)
    release = Release(handle, RELEASE_NAME, RELEASE_NAMESPACE)
    try:
        cluster.import_images([operator_image])
        # A second reference to the same content: to the kubelet a new image (pullPolicy Never).
        for node in cluster.real_nodes:
            tagged = realnodes.ctr(node, "images", "tag", "--force", image, next_image)
            assert tagged.returncode == 0, tagged.stderr
        handle.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
        for namespace in (NAMESPACE, RELEASE_NAMESPACE):
            handle.kubectl("create", "namespace", namespace)
            wait_for(partial(has_default_sa, handle, namespace), timeout=60, message=f"namespace {namespace}")
        install(
            release,
            {
                "image": {"tag": operator_image.key, "pullPolicy": "Never"},
                "controller": {
                    "replicas": REPLICAS,
                    "nodeSelector": REAL_ONLY,
                    "logEncoder": "console",
                    "leaderElection": {"leaseDuration": LEASE_DURATION_S, "retryPeriod": RETRY_PERIOD_S},
                },
                # The watched namespace, with the drivers' ServiceAccount (sparkop-spark) and its Role.
                "spark": {"jobNamespaces": [NAMESPACE]},
            },
        )
        setup = Setup(handle, release, image, next_image)
        wait_rolled_out(setup, old=set(), image=image, workers=WORKERS)
        wait_for(lambda: lease_holder(handle), timeout=60, message="a leader")
        yield setup
    finally:
        release.helm_run("uninstall", release.name, "--wait", "--timeout", "2m", check=False)
        for node in cluster.real_nodes:
            realnodes.ctr(node, "images", "rm", next_image, timeout=60)
        cluster.down()


def has_default_sa(cluster: ClusterHandle, namespace: str) -> bool:
    return cluster.kubectl("get", "sa", "default", "-n", namespace, check=False).returncode == 0


# -- what the tests read -----------------------------------------------------------------------------


def lease_holder(cluster: ClusterHandle) -> str:
    found = cluster.kubectl("get", "lease", LEASE_NAME, "-n", RELEASE_NAMESPACE, "-o", "json", check=False)
    return "" if found.returncode else str((json.loads(found.stdout).get("spec") or {}).get("holderIdentity") or "")


class LeaseWatch(KubectlWatch):
    """Every change of the Lease's holder, with its time (monotonic)."""

    def __init__(self, cluster: ClusterHandle) -> None:
        self.changes: list[tuple[float, str]] = []
        super().__init__(
            cluster, RELEASE_NAMESPACE, ["lease", LEASE_NAME], '{.type} {.object.spec.holderIdentity}{"\\n"}'
        )

    def on_line(self, parts: list[str]) -> None:
        if parts and parts[0] in ("ADDED", "MODIFIED"):
            holder = parts[1] if len(parts) > 1 else ""
            if not self.changes or self.changes[-1][1] != holder:
                self.changes.append((time.monotonic(), holder))


class OperatorLogs:
    """The log of every operator pod that runs while it is open (``kubectl logs -f`` each, from the
    moment its container has started), so the timeline can show what each replica said about the
    Lease, and why, even of a pod that is gone."""

    SAID = ("leader election:", "sparkop stopped", "LeadershipLost")

    def __init__(self, setup: Setup, directory: Path) -> None:
        self.setup, self.directory = setup, directory
        directory.mkdir(parents=True, exist_ok=True)
        self.followed: dict[str, subprocess.Popen[bytes]] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        cluster = self.setup.cluster
        while not self.stopped.wait(0.5):
            for pod in operator_pods(self.setup):
                name = pod["metadata"]["name"]
                started = any("running" in s.get("state", {}) or "terminated" in s.get("state", {})
                              for s in pod.get("status", {}).get("containerStatuses") or [])  # fmt: skip
                if name in self.followed or not started:
                    continue
                argv = [str(cluster.kubectl_binary), f"--kubeconfig={cluster.kubeconfig}", "logs", "-f",
                        "--timestamps", "-n", RELEASE_NAMESPACE, name]  # fmt: skip
                with (self.directory / f"{name}.log").open("wb") as out:
                    self.followed[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(10)
        for proc in self.followed.values():
            proc.terminate()
            proc.wait(5)

    def log_of(self, pod: str) -> str:
        path = self.directory / f"{pod}.log"
        return path.read_text(errors="replace") if pod in self.followed else ""

    def said(self, wall0: float) -> list[tuple[float, str]]:
        """What the replicas said about the Lease and their stop: (seconds from ``wall0``, pod: line)."""
        found = []
        for name in self.followed:
            for line in (self.directory / f"{name}.log").read_text(errors="replace").splitlines():
                stamp, _, text = line.partition(" ")
                if any(mark in text for mark in self.SAID):
                    found.append((seconds_from(stamp, wall0), f"{name}: {text.split(': ', 1)[-1][:140]}"))
        return found


def operator_pods(setup: Setup) -> list[dict[str, Any]]:
    return setup.release.pods()


def container(pod: dict[str, Any]) -> dict[str, Any]:
    return dict(next(c for c in pod["spec"]["containers"] if c["name"] == "sparkop"))


def rolled_out(setup: Setup, old: set[str], image: str, workers: int, marks: dict[str, float] | None = None) -> bool:
    """The Deployment's rollout is complete (every replica updated, ready and available) and the old
    pods are gone; the new ones run `image` with `--workers=<workers>`. `marks` gets the time
    (monotonic) each of the two first held."""
    deployment = setup.cluster.kubectl_json("get", DEPLOYMENT, "-n", RELEASE_NAMESPACE)
    status = deployment.get("status") or {}
    complete = status.get("observedGeneration", 0) >= deployment["metadata"]["generation"] and all(
        status.get(field) == REPLICAS for field in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    )
    if not complete:
        return False
    if marks is not None:
        marks.setdefault("rollout complete", time.monotonic())
    pods = operator_pods(setup)
    if len(pods) != REPLICAS or any(
        p["metadata"]["name"] in old or p["metadata"].get("deletionTimestamp") for p in pods
    ):
        return False
    if marks is not None:
        marks.setdefault("old pods gone", time.monotonic())
    for pod in pods:
        spec = container(pod)
        assert spec["image"] == image, (pod["metadata"]["name"], spec["image"], image)
        assert f"--workers={workers}" in spec["args"], spec["args"]
    return True


def wait_rolled_out(
    setup: Setup, old: set[str], image: str, workers: int, marks: dict[str, float] | None = None
) -> list[dict[str, Any]]:
    try:
        wait_for(
            lambda: rolled_out(setup, old, image, workers, marks),
            timeout=ROLLOUT_BOUND_S,
            interval=0.5,
            message=f"the rollout to {image}",
        )
    except TimeoutError as err:
        raise AssertionError(f"{err}\n{setup.release.diagnostics()}") from None
    return operator_pods(setup)


def app_states(cluster: ClusterHandle) -> dict[str, dict[str, Any]]:
    items = cluster.kubectl_json("get", "sparkapplications", "-n", NAMESPACE)["items"]
    return {a["metadata"]["name"]: a.get("status") or {} for a in items}


def state_of(status: dict[str, Any]) -> str:
    return str((status.get("applicationState") or {}).get("state") or "")


def wait_running(cluster: ClusterHandle, names: list[str], at_least: int) -> int:
    """Until at least `at_least` of `names` are RUNNING; how many are."""

    def running() -> int:
        states = app_states(cluster)
        return sum(state_of(states.get(n, {})) == "RUNNING" for n in names)

    try:
        return wait_for(lambda: n if (n := running()) >= at_least else 0, timeout=180, interval=1.0)
    except TimeoutError as err:
        listing = cluster.kubectl("get", "sparkapplications,pods", "-n", NAMESPACE, "-o", "wide").stdout
        raise AssertionError(f"{err}: {at_least} of {names} RUNNING\n{listing}") from None


def wait_ended(cluster: ClusterHandle, names: list[str]) -> dict[str, dict[str, Any]]:
    """Until every one of `names` is COMPLETED or FAILED; their statuses."""

    def ended() -> dict[str, dict[str, Any]] | None:
        states = app_states(cluster)
        return states if all(state_of(states.get(n, {})) in FINAL_STATES for n in names) else None

    try:
        return wait_for(ended, timeout=APPS_BOUND_S, interval=1.0, message="every app to end")
    except TimeoutError as err:
        listing = cluster.kubectl("get", "sparkapplications,sparkdrivers,pods", "-n", NAMESPACE, "-o", "wide").stdout
        raise AssertionError(f"{err}\n{listing}") from None


def driver_pods_of(pods: CreationWatch, app: str) -> dict[str, set[str]]:
    """The app's driver pods (kubeflow's naming: one name, ``<app>-driver``, a pod of it per run)."""
    return {name: uids for name, uids in pods.uids.items() if name == naming.driver_pod_name(app)}


def assert_ran_as_specified(
    apps: dict[str, Expected], statuses: dict[str, dict[str, Any]], drivers: DriverWatch, pods: CreationWatch
) -> None:
    """Each app in its final state with its attempts, one SparkDriver per attempt and one driver pod
    (one incarnation) per SparkDriver, each created once: as many pods of the app's driver pod name."""
    for name, want in apps.items():
        status = statuses[name]
        assert state_of(status) == want.state, (name, status)
        assert status.get("executionAttempts") == want.attempts, (name, status)
        assert status.get("driverIncarnations") == 1, (name, status)
        assert_no_duplicates(drivers, name, want.attempts)
        seen = driver_pods_of(pods, name)
        assert list(seen) == [naming.driver_pod_name(name)], (name, seen)
        assert all(len(uids) == want.attempts for uids in seen.values()), (name, seen)


def seconds_from(stamp: object, wall0: float) -> float:
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp() - wall0


def print_runs(statuses: dict[str, dict[str, Any]], wall0: float) -> None:
    """Each app's runs: SparkDriver created .. ended (seconds from `wall0`, whole seconds)."""
    for name, status in sorted(statuses.items()):
        runs = [
            f"run {a['run']} {seconds_from(a['startTime'], wall0):.0f}..{seconds_from(a['finishTime'], wall0):.0f}s"
            for a in status.get("attempts") or []
            if a.get("startTime") and a.get("finishTime")
        ]
        print(f"    {name:18} {state_of(status):10} {', '.join(runs)}")


def ends(statuses: dict[str, dict[str, Any]], wall0: float, real: str | None) -> list[tuple[float, str]]:
    """When (status.terminationTime, whole seconds, from `wall0`) the first and the last simulated app
    ended, and the real one."""

    def at(name: str) -> float:
        return seconds_from(statuses[name]["terminationTime"], wall0)

    simulated = sorted((at(n), n) for n in statuses if n != real)
    found = [(simulated[0][0], f"first simulated app ended ({simulated[0][1]})")]
    found.append((simulated[-1][0], f"last simulated app ended ({simulated[-1][1]})"))
    if real:
        found.append((at(real), f"{real} {state_of(statuses[real])} (terminationTime)"))
    return found


def print_timeline(title: str, marks: list[tuple[float, str]]) -> None:
    print(f"\n{title}")
    for at, what in sorted(marks):
        print(f"  {at:7.1f}s  {what}")


# -- the phases --------------------------------------------------------------------------------------


def run_through(
    setup: Setup, prefix: str, command: Callable[[], object], image: str, workers: int, title: str, logs_dir: Path
) -> dict[str, float]:
    """10 simulated apps and a real SparkPi running, `command` (a helm upgrade or rollback) rolls the
    operator's pods to `image`: the rollout completes, the Lease moves to a new pod, every app ends
    as specified, nothing twice. Returns the timeline (seconds from the command)."""
    cluster = setup.cluster
    apps = batch(prefix)
    pi = f"{prefix}-pi"
    old = {p["metadata"]["name"] for p in operator_pods(setup)}
    old_holder = lease_holder(cluster)
    drivers = DriverWatch(cluster, NAMESPACE)
    pods = CreationWatch(cluster, NAMESPACE, "pods")
    holders = LeaseWatch(cluster)
    said = OperatorLogs(setup, logs_dir / prefix)
    try:
        # The real driver first (its JVM takes a while to start), then the simulated ones.
        cluster.apply(real_pi(pi), NAMESPACE)
        wait_running(cluster, [pi], 1)
        apply_batch(cluster, apps, RUN_SECONDS)
        running = wait_running(cluster, [pi, *apps], len(apps) - 1)

        started, started_wall = time.monotonic(), time.time()
        command()
        marks: dict[str, float] = {"helm returned": time.monotonic()}
        new_pods = wait_rolled_out(setup, old, image, workers, marks)
        new_names = [p["metadata"]["name"] for p in new_pods]
        statuses = wait_ended(cluster, [pi, *apps])
        marks["all apps ended"] = time.monotonic()
        # The leader's own pod: the holder identity is the pod name plus a suffix.
        wait_for(
            lambda: any(lease_holder(cluster).startswith(n) for n in new_names),
            timeout=60,
            message=f"a new pod ({new_names}) holding the lease",
        )
    finally:
        said.stop()
        holders.stop()
        pods.stop()
        drivers.stop()

    timeline = [(at - started, what) for what, at in marks.items()]
    moves = [(at, holder) for at, holder in holders.changes if at >= started]
    for at, holder in moves:
        whose = "a new pod" if any(holder.startswith(n) for n in new_names) else "an old pod"
        timeline.append((at - started, f"lease taken by {holder} ({whose})" if holder else "lease released"))
    mine = {n: statuses[n] for n in [pi, *apps]}
    timeline += ends(mine, started_wall, pi)
    timeline += [(at, f"log of {what}") for at, what in said.said(started_wall) if at >= -1.0]
    print_timeline(f"{title}, {running} of {len(apps) + 1} apps RUNNING at 0.0s (lease holder: {old_holder})", timeline)
    print_runs(mine, started_wall)
    for pod in new_pods:
        (st,) = pod["status"]["containerStatuses"]
        print(
            f"  new pod {pod['metadata']['name']}: spec image {container(pod)['image']}; runtime reports {st['image']}"
        )

    taken = [at for at, holder in moves if any(holder.startswith(n) for n in new_names)]
    assert taken, f"the lease never went to a new pod {new_names}: {holders.changes}"
    # A clean stop releases the Lease (docs/operations.md): every leader the rollout stopped said so,
    # and its successor did not wait for the lease to expire.
    leaders = [old_holder, *(holder for _, holder in moves if holder)]
    for holder in leaders[:-1]:
        pod = holder.split("_", 1)[0]
        assert f"{holder} released lease" in said.log_of(pod), (holder, said.log_of(pod)[-3000:])
    expected = {**apps, pi: Expected("Succeeded", None, "COMPLETED", 1)}
    assert_ran_as_specified(expected, statuses, drivers, pods)
    log = cluster.kubectl(
        "logs", statuses[pi]["driverInfo"]["podName"], "-c", DRIVER_CONTAINER, "-n", NAMESPACE, check=False
    ).stdout
    assert "Pi is roughly 3.1" in log, log[-3000:]
    print(f"  {pi}: {next(line for line in log.splitlines() if 'Pi is roughly' in line).strip()}")
    return {
        "rollout": marks["old pods gone"] - started,
        "lease to a new pod": taken[0] - started,
        "apps ended": marks["all apps ended"] - started,
    }


def test_helm_upgrade_and_rollback_mid_run_lose_and_duplicate_nothing(installed: Setup, tmp_path: Path) -> None:
    release = installed.release
    next_tag = installed.next_image.rsplit(":", 1)[1]
    upgrade = run_through(
        installed,
        "up",
        lambda: release.helm_run(
            "upgrade",
            release.name,
            str(CHART),
            "--reuse-values",
            "--set",
            f"image.tag={next_tag}",
            "--set",
            f"controller.workers={NEW_WORKERS}",
        ),
        installed.next_image,
        NEW_WORKERS,
        "helm upgrade to a new image and --workers",
        tmp_path,
    )
    rollback = run_through(
        installed,
        "rb",
        lambda: release.helm_run("rollback", release.name, "1"),
        installed.image,
        WORKERS,
        "helm rollback to revision 1",
        tmp_path,
    )
    history = json.loads(release.helm_run("history", release.name, "-o", "json").stdout)
    assert [h["revision"] for h in history][-3:] == [1, 2, 3], history
    assert history[-1]["status"] == "deployed" and history[-1]["description"] == "Rollback to 1", history[-1]
    print(f"\nupgrade {upgrade}\nrollback {rollback}")
    for phase in (upgrade, rollback):
        assert phase["rollout"] <= ROLLOUT_BOUND_S and phase["apps ended"] <= APPS_BOUND_S, phase


# -- CRDs --------------------------------------------------------------------------------------------

APPS_CRD = "sparkapplications.sparkop.io"


def newer_chart(tmp_path: Path) -> Path:
    """A copy of the chart whose SparkApplication CRD has one more optional field in its spec."""
    chart = tmp_path / "sparkop"
    shutil.copytree(CHART, chart)
    path = chart / "crds" / "sparkop.io_sparkapplications.yaml"
    crd = yaml.safe_load(path.read_text())
    for version in crd["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        spec["properties"][NEW_FIELD] = {"type": "string", "maxLength": 253, "description": "A newer release's field."}
    path.write_text(yaml.safe_dump(crd, sort_keys=False))
    return chart


def served_spec_fields(cluster: ClusterHandle) -> tuple[int, set[str]]:
    crd = cluster.kubectl_json("get", "crd", APPS_CRD)
    (version,) = crd["spec"]["versions"]
    return int(crd["metadata"]["generation"]), set(
        version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    )


def established(cluster: ClusterHandle) -> bool:
    conditions = cluster.kubectl_json("get", "crd", APPS_CRD).get("status", {}).get("conditions", [])
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def restart_counts(setup: Setup) -> dict[str, int]:
    return {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"] for p in operator_pods(setup)}


NEWER = "crd-new-field"  # an app that sets the newer CRD's field


def waiting_for_known_spec(cluster: ClusterHandle) -> dict[str, Any] | None:
    """NEWER's status once it waits, in state NEW, for an operator that knows its field."""
    status = app_states(cluster).get(NEWER) or {}
    error = status.get("lastError") or {}
    waits = state_of(status) == "NEW" and error.get("reason") == "UnknownSpecFields"
    return status if waits and f"spec.{NEW_FIELD}" in error.get("message", "") else None


def with_new_field(name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {**KWOK_ONLY, NEW_FIELD: "set by a newer client"}
    return app_manifest(name, run_seconds=1, **spec)


def test_helm_leaves_crds_and_a_server_side_apply_keeps_apps_running(installed: Setup, tmp_path: Path) -> None:
    cluster, release = installed.cluster, installed.release
    chart = newer_chart(tmp_path)

    # helm upgrade to the chart with the newer CRD: the served CRD does not change.
    generation, fields = served_spec_fields(cluster)
    assert NEW_FIELD not in fields
    release.helm_run("upgrade", release.name, str(chart), "--reuse-values")
    wait_rolled_out(installed, old=set(), image=installed.image, workers=WORKERS)
    assert served_spec_fields(cluster) == (generation, fields)
    refused = cluster.kubectl(
        "apply", "--dry-run=server", "-n", NAMESPACE, "-f", "-", input=json.dumps(with_new_field("probe")), check=False
    )
    assert refused.returncode != 0 and f'unknown field "spec.{NEW_FIELD}"' in refused.stderr, refused
    revision = json.loads(release.helm_run("history", release.name, "-o", "json").stdout)[-1]["revision"]
    print(
        f"\nhelm upgrade to the chart with the newer CRD (revision {revision}): the served CRD kept generation "
        f"{generation} and its {len(fields)} spec fields; spec.{NEW_FIELD} refused: {refused.stderr.strip()[-120:]}"
    )

    # The newer CRDs applied server-side while 10 apps run.
    apps = batch("crd")
    holder = lease_holder(cluster)
    restarts = restart_counts(installed)
    drivers = DriverWatch(cluster, NAMESPACE)
    pods = CreationWatch(cluster, NAMESPACE, "pods")
    try:
        apply_batch(cluster, apps, CRD_RUN_SECONDS)
        running = wait_running(cluster, list(apps), len(apps) - 1)
        started, started_wall = time.monotonic(), time.time()
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(chart / "crds"))
        applied = time.monotonic()
        wait_for(
            lambda: NEW_FIELD in served_spec_fields(cluster)[1] and established(cluster),
            timeout=60,
            interval=0.5,
            message="the newer CRD served",
        )
        served = time.monotonic()
        # An object that sets the new field keeps it. This operator's models predate the field: the
        # app waits for an operator that knows it (no driver, no failure), and runs once it is dropped.
        cluster.apply(with_new_field(NEWER), NAMESPACE)
        kept = cluster.kubectl_json("get", "sparkapplication", NEWER, "-n", NAMESPACE)
        assert kept["spec"][NEW_FIELD] == "set by a newer client", kept["spec"]
        statuses = wait_ended(cluster, list(apps))
        ended = time.monotonic()
        waiting = wait_for(partial(waiting_for_known_spec, cluster), timeout=60, message=f"{NEWER} waiting")
        assert drivers.created(NEWER) == {}, drivers.created(NEWER)
        cluster.kubectl(
            "patch", "sparkapplication", NEWER, "-n", NAMESPACE, "--type=json",
            "-p", json.dumps([{"op": "remove", "path": f"/spec/{NEW_FIELD}"}]),
        )  # fmt: skip
        verdict = wait_ended(cluster, [NEWER])[NEWER]
    finally:
        pods.stop()
        drivers.stop()
    print_timeline(
        f"kubectl apply --server-side of the newer CRDs, {running} of {len(apps)} apps RUNNING at 0.0s",
        [(applied - started, "kubectl apply returned"), (served - started, f"spec.{NEW_FIELD} served, Established"),
         (ended - started, "all apps ended"), *ends({n: statuses[n] for n in apps}, started_wall, None)],
    )  # fmt: skip
    print_runs({n: statuses[n] for n in apps}, started_wall)
    assert_ran_as_specified(apps, statuses, drivers, pods)
    print(f"  {NEWER} with spec.{NEW_FIELD}: {waiting['applicationState']}; without it: {state_of(verdict)}")
    assert state_of(verdict) == "COMPLETED" and verdict.get("executionAttempts") == 1, verdict
    assert_no_duplicates(drivers, NEWER, 1)
    # The schema changed under the operator's watches: it went on, as the same leader, not restarted.
    assert lease_holder(cluster) == holder
    assert restart_counts(installed) == restarts, restarts
    assert ended - started <= APPS_BOUND_S
