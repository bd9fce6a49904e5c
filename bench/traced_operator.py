"""``sparkop`` under tracemalloc, for bench/scale.py's ``--memory-snapshot``: on SIGUSR2 the process
writes a snapshot of what it holds (every live allocation, by the line that made it) to the file named
by ``SPARKOP_MEMORY_SNAPSHOT``, then goes on.

    python -X tracemalloc=1 bench/traced_operator.py run --kubeconfig ... (sparkop's own arguments)
"""

from __future__ import annotations

import os
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType


def dump_snapshot(_signum: int, _frame: FrameType | None) -> None:
    out = Path(os.environ["SPARKOP_MEMORY_SNAPSHOT"])
    partial = out.with_suffix(".partial")
    tracemalloc.take_snapshot().dump(str(partial))
    # Renamed when whole: the bench waits for the name, and must not read a file still being written.
    partial.rename(out)


def main() -> int:
    if not tracemalloc.is_tracing():
        tracemalloc.start(1)
    signal.signal(signal.SIGUSR2, dump_snapshot)
    from sparkop.cli import main as sparkop_main

    return sparkop_main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
