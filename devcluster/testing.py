"""Test support for devcluster: the logic behind the `cluster` and `namespace` fixtures.

Kept here rather than in conftest.py so any test module, script or other fixture can reuse it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from devcluster.build import bin_dir, ensure_built
from devcluster.cluster import STATE_FILE, Cluster, ClusterState, Component, prune, stderr_log

EXTERNAL_KUBECONFIG_ENV = "SPARKOP_KUBECONFIG"
SESSION_PREFIX = "pytest-"

T = TypeVar("T")


class KubectlError(RuntimeError):
    def __init__(self, args: list[str], result: subprocess.CompletedProcess[str]):
        super().__init__(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
        self.result = result


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float = 30.0,
    interval: float = 0.1,
    message: str = "condition",
) -> T:
    """Poll `predicate` until it returns something truthy and return that; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {message}")
        time.sleep(interval)


@dataclass
class ClusterHandle:
    """What tests get from the `cluster` fixture.

    kubeconfig: path of an admin kubeconfig (for kubectl, kubernetes_asyncio, the operator).
    kubectl_binary: the kubectl built with the cluster (same version as the apiserver).
    cluster: the managed Cluster, or None for an external cluster we cannot restart.
    """

    kubeconfig: Path
    kubectl_binary: Path
    cluster: Cluster | None = None

    @property
    def name(self) -> str:
        return self.cluster.name if self.cluster else "external"

    @property
    def can_restart(self) -> bool:
        return self.cluster is not None

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; raise KubectlError (with stderr) on failure if `check`."""
        argv = [str(self.kubectl_binary), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise KubectlError(list(args), result)
        return result

    def kubectl_json(self, *args: str) -> Any:
        """`kubectl <args> -o json`, parsed."""
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def apply(self, manifest: dict[str, Any] | str, namespace: str | None = None) -> None:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        self.kubectl("apply", *(["-n", namespace] if namespace else []), "-f", "-", input=text)

    def _managed(self) -> Cluster:
        if self.cluster is None:
            raise RuntimeError("this cluster was not started by devcluster; it cannot be restarted")
        return self.cluster

    def restart(self, which: Component = "all") -> None:
        self._managed().restart(which)

    def restart_apiserver(self) -> None:
        self._managed().restart("apiserver")

    def restart_etcd(self) -> None:
        self._managed().restart("etcd")

    def stop(self, which: Component) -> None:
        """Stop a component (e.g. "sparksim") until `restart(which)`."""
        self._managed().stop(which)


def _attach_external(kubeconfig: Path) -> ClusterHandle:
    """Use an existing cluster; if it is a devcluster (state.json next to the kubeconfig),
    attach to it so restarts work too (without tying its processes to this one)."""
    state_file = kubeconfig.parent / STATE_FILE
    if state_file.is_file():
        cluster = Cluster(ClusterState.load(kubeconfig.parent))
        return ClusterHandle(kubeconfig, cluster.kubectl, cluster)
    kubectl = bin_dir() / "kubectl"
    if not kubectl.is_file():
        found = shutil.which("kubectl")
        kubectl = Path(found) if found else ensure_built(stderr_log) / "kubectl"
    return ClusterHandle(kubeconfig, kubectl)


@contextmanager
def session_cluster(**up_options: Any) -> Iterator[ClusterHandle]:
    """A cluster for one test session: `$SPARKOP_KUBECONFIG` if set, else a fresh devcluster
    named after this process that dies with it and is torn down on exit."""
    external = os.environ.get(EXTERNAL_KUBECONFIG_ENV)
    if external:
        yield _attach_external(Path(external).expanduser().resolve())
        return
    prune(SESSION_PREFIX)  # clusters of earlier sessions that were killed outright
    cluster = Cluster.up(f"{SESSION_PREFIX}{os.getpid()}", die_with_parent=True, **up_options)
    try:
        yield ClusterHandle(cluster.kubeconfig, cluster.kubectl, cluster)
    finally:
        cluster.down()


REAL_SESSION_PREFIX = f"{SESSION_PREFIX}real-"


class RealNodeClusters:
    """The session's cluster with real nodes, started on first use.

    Real nodes share this machine's network, so only one such cluster runs at a time: a test
    that needs its own (to take it down, say) calls `stop()` first and the next `get()` starts
    the shared one again.
    """

    def __init__(self, real_nodes: int = 2) -> None:
        self.real_nodes = real_nodes
        self._handle: ClusterHandle | None = None

    def get(self) -> ClusterHandle:
        if self._handle is None:
            prune(SESSION_PREFIX)
            # The simulator runs, as `python -m devcluster up --real-nodes N` runs it: with no kwok
            # node here, every driver is real Spark's, and the end-to-end tests check it stays so.
            cluster = Cluster.up(
                f"{REAL_SESSION_PREFIX}{os.getpid()}",
                nodes=0,
                simulator=True,
                real_nodes=self.real_nodes,
                # No batch scheduler: tests/e2e/test_batch_schedulers.py starts Volcano and Kueue on the
                # running cluster (Cluster.start_schedulers), so no other real-node test waits for their
                # build (which `make test` runs beside the suite).
                die_with_parent=True,
            )
            self._handle = ClusterHandle(cluster.kubeconfig, cluster.kubectl, cluster)
        return self._handle

    def stop(self) -> None:
        if self._handle is not None and self._handle.cluster is not None:
            self._handle.cluster.down()
        self._handle = None


FAKE_GO = """#!{python}
# A stand-in for `go` written by devcluster.testing.install_fake_go: `go env` answers like the
# real one; `go build ... -o OUT PACKAGES` takes its time, then puts each binary in place.
import os, shutil, sys, time
from pathlib import Path

args = sys.argv[1:]
if args[:1] == ["env"]:
    known = {{"GOVERSION": {version!r}, "GOTOOLCHAIN": os.environ.get("GOTOOLCHAIN") or "local"}}
    print("\\n".join(known[name] for name in args[1:]))
    sys.exit(0)
if args[:1] != ["build"]:
    sys.exit(f"fake go: cannot {{args}}")
out = args.index("-o")
target, packages = args[out + 1], args[out + 2 :]
time.sleep({seconds!r}.get(Path.cwd().name, 0.0))
names = [package.rstrip("/").rsplit("/", 1)[-1] for package in packages] if target.endswith("/") else [""]
for name in names:
    dest = Path(target) / name if name else Path(target)
    dest.parent.mkdir(parents=True, exist_ok=True)
    source = {source!r}
    if source:
        binary = Path(source) / dest.name
        try:
            os.link(binary, dest)
        except OSError:
            shutil.copy2(binary, dest)
    else:
        dest.write_text({placeholder!r})
        dest.chmod(0o755)
"""
# A placeholder binary: runs until stopped, and keeps its own path as argv[0], so devcluster's
# guard against pid reuse (it only signals a pid whose argv[0] is the binary it started) holds.
PLACEHOLDER_BINARY = '#!/bin/bash\nexec -a "$0" sleep 3600\n'


def install_fake_go(
    directory: Path,
    *,
    build_seconds: dict[str, float],
    version: str,
    binaries_from: Path | None = None,
) -> Path:
    """Write a fake `go` into `directory` (put it first on PATH) for tests of a cold build.

    `build_seconds` maps a build module ("etcd", "kwok", "kubernetes") to how long its
    `go build` takes. The binaries it "builds" are hard links to (or copies of) the real ones in
    `binaries_from`, or placeholders that only sleep when that is None.
    """
    directory.mkdir(parents=True, exist_ok=True)
    go = directory / "go"
    source = str(binaries_from) if binaries_from else None
    go.write_text(
        FAKE_GO.format(
            python=sys.executable,
            version=version,
            seconds=build_seconds,
            source=source,
            placeholder=PLACEHOLDER_BINARY,
        )
    )
    go.chmod(0o755)
    return directory


def unique_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@contextmanager
def temporary_namespace(
    handle: ClusterHandle, prefix: str = "t", timeout: float = 30.0, *, keep: bool = False
) -> Iterator[str]:
    """Create a namespace, wait until pods can be created in it, delete it afterwards (unless ``keep``:
    to look at what a failed test left, on a cluster that outlives the session)."""
    name = unique_name(prefix)
    handle.kubectl("create", "namespace", name)
    try:
        # The ServiceAccount admission plugin rejects pods until `default` exists.
        wait_for(
            lambda: handle.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
            timeout=timeout,
            message=f"service account default in {name}",
        )
        yield name
    finally:
        if not keep:
            handle.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
