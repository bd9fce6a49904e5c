"""``sparkop demo``: the local control plane, the operator and three apps, live.

One app succeeds, one fails and is retried by its restart policy, and one loses its driver pod
mid-run and recovers inside the same attempt. The table prints a line whenever an app changes,
like ``kubectl get -w``. With ``--real`` the pods run on real nodes (containerd + kubelet) and
the apps are real Spark 3.5 jobs, not the simulator's.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sparkop.core import kube as k8s
from sparkop.core.jsontypes import JSON
from sparkop.domain import kinds

DEMO_APPS = Path(__file__).resolve().parent.parent / "examples" / "demo"
REAL_DEMO_APPS = DEMO_APPS.parent / "demo-real"
NAMESPACE = "default"
FINAL_STATES = {"COMPLETED", "FAILED", "SUBMISSION_FAILED"}
VICTIM = "stream-recovers"  # the app whose driver pod the demo deletes
VICTIM_AFTER_SECONDS = 2.0
TIMEOUT_SECONDS = 180.0
REAL_TIMEOUT_SECONDS = 900.0  # nine JVMs on two cores; stream-recovers runs its job twice (517 s under load 15-27)
PI_APP = "pi-succeeds"
OPERATOR = "sparkop"  # the operator's name among the cluster's processes (its log: sparkop.log)


def say(message: str) -> None:
    print(message, flush=True)


@dataclass(frozen=True)
class Row:
    name: str
    state: str
    attempts: int
    driver_pod: str
    incarnations: int
    executors: str

    @classmethod
    def of(cls, app: JSON) -> Row:
        status = app.get("status") or {}
        counts = status.get("executors") or {}
        return cls(
            name=app["metadata"]["name"],
            state=(status.get("applicationState") or {}).get("state", "NEW"),
            attempts=int(status.get("executionAttempts") or 0),
            driver_pod=(status.get("driverInfo") or {}).get("podName") or "-",
            incarnations=int(status.get("driverIncarnations") or 0),
            executors=f"{counts.get('running', 0)}/{counts.get('pending', 0)}/{counts.get('succeeded', 0)}",
        )

    @property
    def running_executors(self) -> int:
        return int(self.executors.split("/", 1)[0])

    def line(self, elapsed: float) -> str:
        return (
            f"{elapsed:6.1f}s  {self.name:<16} {self.state:<18} {self.attempts:>8} {self.incarnations:>4}  "
            f"{self.executors:<9} {self.driver_pod}"
        )


HEADER = f"{'TIME':>7}  {'APP':<16} {'STATE':<18} {'ATTEMPTS':>8} {'INC':>4}  {'EXEC R/P/S':<9} DRIVER POD"


class DemoError(RuntimeError):
    """A step of the demo failed; the message says which and why."""


def kubectl(kubectl_path: Path, kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [str(kubectl_path), "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise DemoError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


CRDS = Path(__file__).resolve().parent.parent / "crds"


def install_crds(kubectl_path: Path, kubeconfig: Path) -> None:
    """Apply the committed CRDs (a test proves they match the models), or generate them when
    sparkop runs outside a checkout."""
    with tempfile.TemporaryDirectory() as tmp:
        source = CRDS
        if not any(CRDS.glob("*.yaml")):
            from sparkop.api.crds import write_crds

            write_crds(Path(tmp))
            source = Path(tmp)
        kubectl(kubectl_path, kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(source))


# What the chart (charts/sparkop) creates in each job namespace for a release named sparkop: the
# ServiceAccount Spark drivers run as, with a Role on what a driver creates for its executors. The
# demo cluster gets the same, so every file in examples/ (which names it) runs there as on a chart install.
DRIVER_ACCOUNT = "sparkop-spark"


def driver_account_manifests(namespace: str) -> list[JSON]:
    meta = {"name": DRIVER_ACCOUNT, "namespace": namespace}
    rules = [
        {
            "apiGroups": [""],
            "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"],
            "verbs": ["create", "get", "list", "watch", "update", "patch", "delete", "deletecollection"],
        }
    ]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": DRIVER_ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": DRIVER_ACCOUNT, "namespace": namespace}],
        },
    ]


def create_driver_account(kubectl_path: Path, kubeconfig: Path, namespace: str) -> None:
    listing = {"apiVersion": "v1", "kind": "List", "items": driver_account_manifests(namespace)}
    kubectl(kubectl_path, kubeconfig, "apply", "-f", "-", stdin=json.dumps(listing))


CRD_NAMES = (
    "sparkapplications.sparkop.io",
    "sparkdrivers.sparkop.io",
    "scheduledsparkapplications.sparkop.io",
    "sparkconnects.sparkop.io",
)


def wait_for_crds(kubectl_path: Path, kubeconfig: Path, timeout: float = 30.0) -> None:
    """Until every CRD is Established. (``kubectl wait`` and jsonpath filters fail at once while
    a new CRD has no conditions yet, so read the objects instead.)"""
    deadline = time.monotonic() + timeout
    while True:
        listed = json.loads(kubectl(kubectl_path, kubeconfig, "get", "-o", "json", *(f"crd/{n}" for n in CRD_NAMES)))
        established = {
            crd["metadata"]["name"]
            for crd in listed.get("items", [])
            for cond in (crd.get("status") or {}).get("conditions") or []
            if cond.get("type") == "Established" and cond.get("status") == "True"
        }
        if established >= set(CRD_NAMES):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRDs not Established after {timeout:.0f}s: {sorted(set(CRD_NAMES) - established)}")
        time.sleep(0.1)


async def watch(
    kube: k8s.Kube,
    started: float,
    namespace: str = NAMESPACE,
    out: Callable[[str], None] = say,
    *,
    real: bool = False,
) -> dict[str, Row]:
    """Print a line whenever an app changes; delete the victim's first driver pod once its job is
    really under way: the app RUNNING with an executor running (the simulator, like real Spark,
    starts executors a moment after the driver runs)."""
    rows: dict[str, Row] = {}
    victim_running_since: float | None = None
    victim_done = False
    timeout = REAL_TIMEOUT_SECONDS if real else TIMEOUT_SECONDS
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        apps = await kube.list(kinds.SPARK_APPLICATIONS, namespace)
        for app in sorted(apps, key=lambda a: a["metadata"]["name"]):
            row = Row.of(app)
            if rows.get(row.name) != row:
                rows[row.name] = row
                out(row.line(time.monotonic() - started))
            under_way = row.state == "RUNNING" and row.driver_pod != "-" and row.running_executors > 0
            if row.name == VICTIM and not victim_done and under_way:
                victim_running_since = victim_running_since or time.monotonic()
                if time.monotonic() - victim_running_since >= VICTIM_AFTER_SECONDS:
                    out(f"{time.monotonic() - started:6.1f}s  >> deleting driver pod {row.driver_pod} (a node drain)")
                    await kube.delete(k8s.PODS, namespace, row.driver_pod)
                    victim_done = True
        if len(rows) >= 3 and all(r.state in FINAL_STATES for r in rows.values()):
            return rows
        await asyncio.sleep(0.25)
    raise TimeoutError(f"apps not finished after {timeout:.0f}s")


def run_scenario(
    kubectl_path: Path,
    kubeconfig: Path,
    namespace: str,
    started: float,
    out: Callable[[str], None] = say,
    *,
    real: bool = False,
) -> dict[str, Row]:
    """Apply the three apps into ``namespace`` and watch them to the end (the demo's middle part;
    tests run it on their own cluster)."""
    out("==> applying three apps: pi-succeeds, etl-retries, stream-recovers")
    kubectl(kubectl_path, kubeconfig, "apply", "-n", namespace, "-f", str(REAL_DEMO_APPS if real else DEMO_APPS))
    out("")
    out(HEADER)

    async def run() -> dict[str, Row]:
        kube = await k8s.Kube.connect(str(kubeconfig))
        try:
            return await watch(kube, started, namespace, out, real=real)
        finally:
            await kube.close()

    return asyncio.run(run())


def pi_line(kubectl_path: Path, kubeconfig: Path, namespace: str, driver_pod: str) -> str:
    """The line real SparkPi printed in its driver's log."""
    log = kubectl(kubectl_path, kubeconfig, "logs", "-n", namespace, driver_pod)
    found = [line for line in log.splitlines() if line.startswith("Pi is roughly")]
    if not found:
        raise DemoError(f"driver pod {driver_pod} finished without a 'Pi is roughly' line")
    return found[-1]


def summary(rows: dict[str, Row], kubeconfig: Path, total: float) -> str:
    lines = ["", f"Summary ({total:.1f}s):"]
    for row in rows.values():
        lines.append(f"  {row.name:<16} {row.state:<10} attempts={row.attempts} driver incarnations={row.incarnations}")
    lines += [
        "",
        "Explore:",
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl get spark                       # apps and their drivers",
        "  kubectl describe sparkapp etl-retries   # events of every transition",
        "  kubectl get pods -L spark-role,sparkop.io/incarnation",
        f"  {Path(sys.executable).parent / 'sparkop'} status stream-recovers   # attempts, incarnations, executors",
    ]
    return "\n".join(lines)


NO_DEVCLUSTER = (
    "error: the demo runs on the devcluster, a development tool not shipped in the operator's package;"
    " run it from a checkout of the repository with `make demo`"
)


def main(*, name: str, keep: bool, real: bool = False) -> int:
    try:
        import devcluster  # noqa: F401  (only in a checkout: the wheel and the image leave it out)
    except ImportError:
        print(NO_DEVCLUSTER, file=sys.stderr, flush=True)
        return 1
    from devcluster import procs
    from devcluster.build import BuildError, ensure_built, ensure_node_binaries
    from devcluster.cluster import Cluster, ClusterError
    from devcluster.images import ImageError, ensure_images
    from devcluster.realnodes import RealNodeError, install_missing_packages

    def progress(message: str) -> None:
        say(f"    {message}")

    nodes = "two real nodes (containerd + kubelet), CoreDNS, kube-proxy" if real else "KWOK"
    say(f"==> starting the local control plane (etcd, kube-apiserver, controller-manager, scheduler, {nodes})")
    try:
        # Built first and on its own, so neither the start-up budget nor the table's clock
        # counts a first build (minutes, once per machine).
        ensure_built(progress)
        if real:
            install_missing_packages(progress)
            ensure_images(progress, pause_binary=ensure_node_binaries(progress) / "pause")
        started = time.monotonic()
        if real:
            cluster = Cluster.up(name, nodes=0, simulator=False, real_nodes=2, log=progress)
        else:
            cluster = Cluster.up(name, nodes=3, log=progress)
    except (BuildError, ClusterError, ImageError, RealNodeError) as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        say("\ninterrupted")
        return 130
    operator: int | None = None
    log_path = cluster.directory / f"{OPERATOR}.log"
    try:
        say("==> installing the CRDs and starting the operator")
        install_crds(cluster.kubectl, cluster.kubeconfig)
        # The operator waits itself until the CRDs are served, so it can import meanwhile. It is one of
        # the cluster's processes: `devcluster down` stops it with the rest (also after --keep).
        argv = [sys.executable, "-m", "sparkop", "run", "--kubeconfig", str(cluster.kubeconfig)]
        operator = cluster.start_client(OPERATOR, argv)
        wait_for_crds(cluster.kubectl, cluster.kubeconfig)
        say(f"    operator log: {log_path}")
        create_driver_account(cluster.kubectl, cluster.kubeconfig, NAMESPACE)
        rows = run_scenario(cluster.kubectl, cluster.kubeconfig, NAMESPACE, started, real=real)
        say(summary(rows, cluster.kubeconfig, time.monotonic() - started))
        if real:
            said = pi_line(cluster.kubectl, cluster.kubeconfig, NAMESPACE, rows[PI_APP].driver_pod)
            say(f"\n{PI_APP}'s driver said: {said}")
        if keep:
            say(f"\nThe cluster and operator are still up; stop them with: python -m devcluster down --name {name}")
        return 0
    except KeyboardInterrupt:
        say("\ninterrupted; cleaning up")
        return 130
    except (DemoError, ClusterError, TimeoutError) as err:
        why = " (the operator exited)" if operator is not None and not procs.is_alive(operator) else ""
        print(f"error: {err}{why}; operator log: {log_path}", file=sys.stderr, flush=True)
        return 1
    finally:
        if not keep:
            cluster.down()  # the operator first
            say(f"==> cluster {name!r} removed")
