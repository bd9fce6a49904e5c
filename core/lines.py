"""The lines of a streamed response body (a watch), read in gathered pieces while a listing streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final

# While a watch streams its initial events, a read shorter than this is followed by a pause of this
# long, for the next read to bring more at once (see Lines). 64 KiB is aiohttp's read buffer. 20 ms of
# a listing is a few hundred objects here; the last one is told at most that much later.
GATHERED_BYTES: Final = 64 * 1024
GATHER_SECONDS: Final = 0.02


class Lines:
    """The non-empty newline-separated lines of a streamed response body (a watch), whatever their
    length (aiohttp's ``readline`` refuses lines longer than its buffer; objects can be larger).

    While :attr:`gathering` (a watch's initial events, thousands of objects at once), a short read
    is followed by a pause of the connection's reading for ``GATHER_SECONDS``. The API server streams
    a listing in pieces of a few KiB, each a pass of the event loop, TLS, aiohttp's parser and a
    wake-up of this reader; meanwhile the kernel gathers what the server sends, and the next read
    brings hundreds of objects at once. A start over 10,000 finished apps (bench/scale.py's cluster,
    16 starts without, 9 with) spent 0.90 CPU-s listing its two custom kinds without the pause and
    0.65 with it, and listed them in 2.25 s without and 1.38 s with it (medians): on two cores
    shared with the API server, what this process spends is taken from the API server's streaming."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.gathering = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        buffer = bytearray()
        # At most GATHERED_BYTES at a time: what a gathered read brings is taken in pieces of the size
        # aiohttp buffers, not joined into one allocation of hundreds of KiB. With such joins the
        # process stayed larger after a start over 10,000 apps (perf.py: 243.8 MiB, 236.8 with this
        # cap; one run each), likely glibc keeping those buffers' memory among the cached objects.
        async for chunk in self.response.content.iter_chunked(GATHERED_BYTES):
            buffer.extend(chunk)
            start = 0
            while (end := buffer.find(b"\n", start)) >= 0:
                if end > start:
                    yield bytes(buffer[start:end])
                start = end + 1
            del buffer[:start]
            if self.gathering and len(chunk) < GATHERED_BYTES:
                await self._gather()

    async def _gather(self) -> None:
        # aiohttp's protocol, whose flow control then knows of the pause; none once the response has
        # ended and its connection gone back to the pool (or for a test's stand-in).
        connection = getattr(self.response, "connection", None)
        if connection is None or connection.protocol is None:
            return
        protocol = connection.protocol
        protocol.pause_reading()
        try:
            await asyncio.sleep(GATHER_SECONDS)
        finally:
            protocol.resume_reading()


__all__ = ["GATHERED_BYTES", "GATHER_SECONDS", "Lines"]
