"""``python -m tests.support.shifted_clock run ...``: ``sparkop run`` whose schedule controller tells
the time as the real clock shifted by the seconds in the file ``$SPARKOP_TEST_CLOCK_OFFSET_FILE``
(read on every pass), so a test moves the operator's time by rewriting the file instead of sleeping
until the next scheduled minute. The clock is replaced in this process only: nothing of it ships.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

from sparkop.core.times import utc_now

CLOCK_OFFSET_ENV: Final = "SPARKOP_TEST_CLOCK_OFFSET_FILE"
MODULE: Final = "tests.support.shifted_clock"  # OperatorProcess(module=MODULE)

log = logging.getLogger(__name__)


def shifted(path: Path) -> datetime:
    now = utc_now()
    try:
        return now + timedelta(seconds=float(path.read_text().strip() or 0))
    except (OSError, ValueError) as exc:
        log.warning("%s=%s unreadable (%s): using the real clock", CLOCK_OFFSET_ENV, path, exc)
        return now


if __name__ == "__main__":
    from sparkop.schedule_controller import controller as declaration

    offset_file = Path(os.environ[CLOCK_OFFSET_ENV])
    declaration.CLOCK = lambda: shifted(offset_file)
    from sparkop.cli import main

    raise SystemExit(main())
