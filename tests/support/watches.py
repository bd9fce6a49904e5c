"""A record of every object of one kind ever created in a namespace, kept by a kubectl watch."""

from __future__ import annotations

import subprocess
import threading

from devcluster.testing import ClusterHandle


class CreationWatch:
    """Records every object of ``plural`` ever created in a namespace (name -> uids), so an object
    created twice is caught even if it was deleted again. The watch is started again when it ends
    (an API server restart): its first events list what exists, so only an object created and
    deleted while no watch ran could be missed."""

    def __init__(self, cluster: ClusterHandle, namespace: str, plural: str) -> None:
        jsonpath = '{.type} {.object.metadata.name} {.object.metadata.uid}{"\\n"}'
        self.argv = [str(cluster.kubectl_binary), "--kubeconfig", str(cluster.kubeconfig), "get", plural,
                     "-n", namespace, "--watch", "--output-watch-events", "-o", f"jsonpath={jsonpath}"]  # fmt: skip
        self.uids: dict[str, set[str]] = {}
        self.watches = 0
        self.stopped = threading.Event()
        self.proc: subprocess.Popen[str] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.watches += 1
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                parts = line.split()
                if len(parts) == 3 and parts[0] in ("ADDED", "MODIFIED"):
                    self.uids.setdefault(parts[1], set()).add(parts[2])
            self.proc.wait()
            self.stopped.wait(0.5)

    def stop(self) -> None:
        self.stopped.set()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(5)
        self.thread.join(5)

    def created(self, owner: str) -> dict[str, set[str]]:
        """The objects named ``<owner>-<suffix>`` (the runs of an app, of a schedule)."""
        return {n: u for n, u in self.uids.items() if n.rsplit("-", 1)[0] == owner}
