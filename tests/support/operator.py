"""Run the real operator (``sparkop run``) as a child process against a devcluster, for tests that
must survive kills and restarts the way a deployed operator does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from devcluster.testing import ClusterHandle
from sparkop.domain import labels


class OperatorProcess:
    def __init__(
        self,
        kubeconfig: str | os.PathLike[str],
        *,
        controllers: Sequence[str] = ("apps", "driver"),
        namespaces: Sequence[str] = (),
        log_dir: Path | None = None,
        extra_args: Sequence[str] = (),
        module: str = "sparkop",
    ) -> None:
        self.kubeconfig = str(kubeconfig)
        self.controllers = controllers
        self.namespaces = namespaces
        self.extra_args = list(extra_args)
        self.module = module  # the entry point: sparkop, or a tests/support wrapper of it
        self.log_dir = log_dir or Path(os.environ.get("TMPDIR", "/tmp"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"sparkop-operator-{os.getpid()}-{id(self):x}.log"

    def start(self) -> OperatorProcess:
        assert self.proc is None or self.proc.poll() is not None, "operator already running"
        args = [sys.executable, "-m", self.module, "run", "--kubeconfig", self.kubeconfig]
        args += ["--controllers", ",".join(self.controllers), *self.extra_args]
        for ns in self.namespaces:
            args += ["--namespace", ns]
        self.starts += 1
        log = self.log_path.open("ab")
        log.write(f"\n===== start #{self.starts} =====\n".encode())
        log.flush()
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def kill(self) -> None:
        """SIGKILL: the operator gets no chance to finish anything, like a node dying."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM and wait, as Kubernetes stops a pod."""
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def restart(self, *, hard: bool = True) -> None:
        if hard:
            self.kill()
        else:
            self.stop()
        self.start()

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` (e.g. SIGSTOP/SIGCONT to pause the operator as a frozen VM or a long GC would)."""
        assert self.proc is not None and self.proc.poll() is None, "operator not running"
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """Until the process exits by itself; its exit code."""
        assert self.proc is not None
        return self.proc.wait(timeout)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> OperatorProcess:
        return self.start()

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.stop()


def release_driver_pods(cluster: ClusterHandle, namespace: str) -> list[str]:
    """Remove the operator's finalizer from every pod of ``namespace`` that holds it (what the operator
    does for a namespace being deleted, for when it no longer runs); the names of those pods."""
    listed = cluster.kubectl("get", "pods", "-n", namespace, "-o", "json", check=False, timeout=30)
    if listed.returncode != 0:
        return []
    held = [
        pod["metadata"]["name"]
        for pod in json.loads(listed.stdout).get("items", [])
        if labels.DRIVER_OUTCOME_FINALIZER in (pod["metadata"].get("finalizers") or ())
    ]
    for name in held:
        patch = json.dumps({"metadata": {"finalizers": None}})
        cluster.kubectl("patch", "pod", name, "-n", namespace, "--type=merge", "-p", patch, check=False, timeout=30)
    return held
