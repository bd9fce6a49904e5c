"""The one request path, as the informers and the leader election see it: ``core.kube.Kube.request``
sends a request on the client's one shared session (its connector, proxy and credentials) and hands
back the answer unread. Kept apart from ``core.kube`` so that the modules below it can name it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

import aiohttp

# As the generated client asks (no bound): a request is bounded by the server's own timeouts.
NO_TIMEOUT: Final = aiohttp.ClientTimeout()


class Response(Protocol):
    """What of an ``aiohttp.ClientResponse`` the readers use."""

    @property
    def status(self) -> int: ...

    @property
    def reason(self) -> str | None: ...

    @property
    def content(self) -> Any: ...

    async def read(self) -> bytes: ...

    def release(self) -> Any: ...

    def close(self) -> None: ...


class Requester(Protocol):
    async def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        *,
        body: Any = None,
        content_type: str = "application/json",
        client_timeout: aiohttp.ClientTimeout = NO_TIMEOUT,
        accept: str = "application/json",
    ) -> Response: ...
