"""Watches a test keeps beside what it does: a ``kubectl get --watch`` in a thread, started again when
it ends (an API server restart), so that what the API server announced is on record even for objects
created and deleted at once."""

from __future__ import annotations

import subprocess
import threading
import time
from collections import deque

from devcluster.testing import ClusterHandle


class KubectlWatch:
    """``kubectl get <what> --watch --output-watch-events -o jsonpath=<template>`` in a thread; each
    line, split on whitespace, goes to :meth:`on_line`. Started again when it ends: the first events of
    a new watch list what exists, so only an object created and deleted while no watch ran is missed."""

    def __init__(self, cluster: ClusterHandle, namespace: str, what: list[str], template: str) -> None:
        self.argv = [str(cluster.kubectl_binary), "--kubeconfig", str(cluster.kubeconfig), "get", *what,
                     "-n", namespace, "--watch", "--output-watch-events", "-o", f"jsonpath={template}"]  # fmt: skip
        self.watches = 0
        # The last lines kubectl wrote to stderr, over every watch: why a watch recorded nothing.
        self.stderr: deque[str] = deque(maxlen=20)
        self.stopped = threading.Event()
        self.proc: subprocess.Popen[str] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def on_line(self, parts: list[str]) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.watches += 1
            assert self.proc.stdout is not None and self.proc.stderr is not None
            errors = threading.Thread(target=self.stderr.extend, args=(self.proc.stderr,), daemon=True)
            errors.start()
            for line in self.proc.stdout:
                self.on_line(line.split())
            self.proc.wait()
            errors.join(5)
            self.stopped.wait(0.2)

    def story(self) -> str:
        """For an assertion's message: how many watches ran and what kubectl last said on stderr."""
        return f"{self.watches} watches of {self.argv[3:]}; kubectl's stderr: {list(self.stderr)}"

    def stop(self) -> None:
        self.stopped.set()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(5)
        self.thread.join(5)


class CreationWatch(KubectlWatch):
    """Records every object of ``plural`` ever created in a namespace (name -> uids), so an object
    created twice is caught even if it was deleted again."""

    def __init__(self, cluster: ClusterHandle, namespace: str, plural: str) -> None:
        self.uids: dict[str, set[str]] = {}
        # uid -> when (time.monotonic) it was first seen, and seen deleted: one name's objects in turn.
        self.first_seen: dict[str, float] = {}
        self.deleted: dict[str, float] = {}
        super().__init__(cluster, namespace, [plural], '{.type} {.object.metadata.name} {.object.metadata.uid}{"\\n"}')

    def on_line(self, parts: list[str]) -> None:
        if len(parts) == 3 and parts[0] in ("ADDED", "MODIFIED"):
            self.uids.setdefault(parts[1], set()).add(parts[2])
            self.first_seen.setdefault(parts[2], time.monotonic())
        elif len(parts) == 3 and parts[0] == "DELETED":
            self.deleted.setdefault(parts[2], time.monotonic())

    def created(self, owner: str) -> dict[str, set[str]]:
        """The objects named ``<owner>-<suffix>`` (the runs of an app, of a schedule)."""
        return {n: u for n, u in self.uids.items() if n.rsplit("-", 1)[0] == owner}
