"""``python -m tests.support.faults run ...``: ``sparkop run`` with a crash point, for the restart tests.

With ``SPARKOP_FAULT_EXIT_AFTER_TRANSITIONS=N`` the process exits (code 86) right after its N-th status
write that changes a SparkApplication's state, before that pass's events and after-status actions (the
worst moment). The hook wraps ``core.reconciler.Applier._write_status`` in this process only: nothing of
it ships in the packages.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from core import reconciler

FAULT_EXIT_ENV: Final = "SPARKOP_FAULT_EXIT_AFTER_TRANSITIONS"
FAULT_EXIT_CODE: Final = 86
MODULE: Final = "tests.support.faults"  # OperatorProcess(module=MODULE)


def _state(status: Mapping[str, Any]) -> object:
    return (status.get("applicationState") or {}).get("state")


def install(after: int) -> None:
    original = reconciler.Applier._write_status
    transitions = 0

    async def write_status(
        self: reconciler.Applier[Any], body: dict[str, Any], old: Mapping[str, Any], new: dict[str, Any]
    ) -> dict[str, Any] | None:
        nonlocal transitions
        written = await original(self, body, old, new)
        if written is not None and body.get("kind") == "SparkApplication" and _state(old) != _state(new):
            transitions += 1
            if transitions >= after:
                print(f"{FAULT_EXIT_ENV}={after}: exiting now", flush=True)
                os._exit(FAULT_EXIT_CODE)
        return written

    reconciler.Applier._write_status = write_status  # type: ignore[method-assign]


if __name__ == "__main__":
    if after := int(os.environ.get(FAULT_EXIT_ENV) or 0):
        install(after)
    from sparkop.cli import main

    raise SystemExit(main())
