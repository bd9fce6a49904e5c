"""``python -m tests.support.faults run ...``: ``sparkop run`` with a crash point, for the restart tests.

With ``SPARKOP_FAULT_EXIT_AFTER_TRANSITIONS=N`` the process exits (code 86) right after its N-th status
write that changes a SparkApplication's state or plans a run, before that pass's events and after-status actions (the
worst moment). With ``SPARKOP_FAULT_KINDS=SparkConnect,SparkDriver`` it counts the steps of those kinds
instead: each status write of theirs that changes what :data:`STEPS` reads (a SparkConnect's state, run
or server pod; a SparkDriver's phase, incarnation or driver pod).
The hook wraps ``core.applier.Applier._write_status`` in this process only: nothing of
it ships in the packages.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from sparkop.core import applier

FAULT_EXIT_ENV: Final = "SPARKOP_FAULT_EXIT_AFTER_TRANSITIONS"
FAULT_KINDS_ENV: Final = "SPARKOP_FAULT_KINDS"
FAULT_EXIT_CODE: Final = 86
MODULE: Final = "tests.support.faults"  # OperatorProcess(module=MODULE)


def _state(status: Mapping[str, Any]) -> object:
    # A run planned keeps the state (SUBMITTED waits for its driver pod): its write is a step of its own.
    return ((status.get("applicationState") or {}).get("state"), status.get("lastRun"))


def _connect_step(status: Mapping[str, Any]) -> object:
    return (status.get("state"), status.get("lastRun"), (status.get("server") or {}).get("podName"))


def _driver_step(status: Mapping[str, Any]) -> object:
    return (status.get("phase"), status.get("incarnation"), (status.get("driverPod") or {}).get("name"))


STEPS: Final = {"SparkApplication": _state, "SparkConnect": _connect_step, "SparkDriver": _driver_step}


def install(after: int, kinds: tuple[str, ...] = ("SparkApplication",)) -> None:
    original = applier.Applier._write_status
    transitions = 0

    async def write_status(
        self: applier.Applier[Any], target: Any, body: dict[str, Any], old: Mapping[str, Any], new: dict[str, Any]
    ) -> tuple[dict[str, Any], bool] | None:
        nonlocal transitions
        written = await original(self, target, body, old, new)
        kind = str(body.get("kind"))
        step = STEPS.get(kind) if kind in kinds else None
        if written is not None and step is not None and step(old) != step(new):
            transitions += 1
            if transitions >= after:
                print(f"{FAULT_EXIT_ENV}={after}: exiting now", flush=True)
                os._exit(FAULT_EXIT_CODE)
        return written

    applier.Applier._write_status = write_status  # type: ignore[method-assign]


if __name__ == "__main__":
    if after := int(os.environ.get(FAULT_EXIT_ENV) or 0):
        install(after, tuple((os.environ.get(FAULT_KINDS_ENV) or "SparkApplication").split(",")))
    from sparkop.cli import main

    raise SystemExit(main())
