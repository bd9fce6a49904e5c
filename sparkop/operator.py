"""``sparkop run``: sparkop's controllers (all, or some, by name) under the manager
(``core.manager.run_operator``), in a process set for a long run.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Callable, Iterable
from typing import Any, Final

from sparkop.apps_controller.controller import register as register_apps
from sparkop.connect_controller.controller import register as register_connect
from sparkop.core.manager import LeadershipLost, Register, Serving, run_operator
from sparkop.driver_controller.controller import register as register_driver
from sparkop.history_controller.controller import register as register_history
from sparkop.schedule_controller.controller import register as register_scheduled

log = logging.getLogger(__name__)

DEFAULT_CONTROLLERS: Final = ("apps", "driver", "scheduled", "connect", "history")


def controller_registrations(names: Iterable[str]) -> list[Register]:
    known: dict[str, Register] = {
        "apps": register_apps,
        "driver": register_driver,
        "scheduled": register_scheduled,
        "connect": register_connect,
        "history": register_history,
    }
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"unknown controller(s) {unknown}; choose from {sorted(known)}")
    return [known[name] for name in names]


# CPython collects its young generation whenever container allocations outrun frees by 700. The
# operator decodes every watch event and API answer into dicts and lists by the dozen, nearly all
# freed by reference counting within the pass; at 1,000 apps at once (bench/throughput.py) that
# default made 1,400 young and 140 older collections, a tenth of the operator's CPU (1.8 of 18.9
# CPU-s). Ten times the allotment: 55 collections, 0.3 CPU-s. What it may leave uncollected a while
# longer is cyclic garbage of a few thousand objects.
YOUNG_COLLECTION_ALLOTMENT: Final = 7_000


def settle_collector() -> None:
    """Set Python's cyclic garbage collector for a long-running process: what is loaded by now
    (modules, classes, functions: about 90,000 objects that live as long as the process) is frozen,
    so no full collection traverses it again, and young collections run a tenth as often."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_ALLOTMENT, middle, old)


def run_blocking(controllers: Iterable[str] = DEFAULT_CONTROLLERS, **kwargs: Any) -> None:
    """Run the ``controllers`` named in this thread until SIGTERM or SIGINT: either cancels it, at any
    instant of its start or its work (the informers and queues hold nothing that a restart does not
    rebuild). ``kwargs``: ``core.manager.run_operator``'s."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        running = asyncio.current_task()
        assert running is not None

        def stop(signum: signal.Signals) -> None:
            log.info("%s received: stopping", signum.name)
            running.cancel()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop, sig)
        with contextlib.suppress(asyncio.CancelledError):
            await run_operator(controller_registrations(controllers), **kwargs)

    settle_collector()
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(main())


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's loop where it is installed: the event loop and its TLS transport in C (at 1,000 apps
    at once, 4 % less CPU per app and 20 MiB less memory than asyncio's own). It is an optional
    dependency (a platform where it does not build still gets the whole CLI), so without it the
    operator runs on asyncio's loop and says so once."""
    try:
        import uvloop
    except ImportError:
        log.info("uvloop is not installed: running on asyncio's event loop")
        return asyncio.new_event_loop
    return uvloop.new_event_loop


__all__ = ["DEFAULT_CONTROLLERS", "LeadershipLost", "Serving", "controller_registrations", "run_blocking"]
