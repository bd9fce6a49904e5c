"""One file lock for the caches' builders (binaries, images): who holds it, and waiting for it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def held(lock_path: Path, waiting: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path``, which records the holder's pid. When another process
    holds it, ``waiting(its pid)`` is called once (to say why nothing happens), then this waits."""
    # "a+": opening must not truncate the pid a running holder wrote.
    with lock_path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            waiting(handle.read().strip() or "unknown")
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
