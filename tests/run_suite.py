"""`make test`'s runner: the whole suite as two pytest processes side by side, the tests that need
real nodes (marked `realnode`, tests/conftest.py) in one and every other test in the other. The
machine holds one cluster with real nodes at a time, so those run one after another; the rest (unit
tests, the control-plane integration tests on their own clusters, the spark-submit conformance)
runs beside them, and the suite takes about as long as its real-node part.

Each process writes its output to a file, shown whole when both have ended (the real-node part last,
the other's summary right above it), so the two never interleave. The exit status is the first
failing part's; a part that selected no test (pytest's 5, e.g. under `-k`) is no failure when the
other ran some. `python tests/run_suite.py --serial ARGS` (or an `-m` of the caller's) runs one
pytest process, as before.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARTS = (("everything else", "not realnode"), ("real nodes", "realnode"))
NO_TESTS_COLLECTED = 5
# Each part's summary lists its slowest tests: what a run that nears CI's budget should look at first.
SLOWEST = "--durations=25"


def main(argv: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest"]
    if "--serial" in argv or any(arg.startswith("-m") for arg in argv):
        return subprocess.call([*pytest, *(arg for arg in argv if arg != "--serial")])
    started = time.monotonic()
    # SIGTERM ends the runner by an exception, so that its `finally` stops both parts.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="sparkop-suite-") as tmp:
        logs = {name: Path(tmp) / f"{index}.log" for index, (name, _) in enumerate(PARTS)}
        runs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for name, selection in PARTS:
                with logs[name].open("wb") as out:
                    command = [*pytest, "-m", selection, SLOWEST, *argv]
                    runs[name] = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            print(f"running the suite in two parts side by side: {', '.join(runs)} (output when both end)", flush=True)
            codes = {name: run.wait() for name, run in runs.items()}
        finally:
            # Interrupted (Ctrl-C, CI's timeout): neither part outlives the runner.
            for run in runs.values():
                if run.poll() is None:
                    run.terminate()
                    run.wait()
        for name, _ in PARTS:
            print(f"\n{'=' * 30} {name}: exit {codes[name]} {'=' * 30}", flush=True)
            sys.stdout.buffer.write(logs[name].read_bytes())
            sys.stdout.flush()
    print(f"\nthe suite took {time.monotonic() - started:.0f} s; exit codes: {codes}", flush=True)
    failed = [code for code in codes.values() if code not in (0, NO_TESTS_COLLECTED)]
    if failed:
        return failed[0]
    return NO_TESTS_COLLECTED if all(code == NO_TESTS_COLLECTED for code in codes.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
