"""A TCP connection to a pod's port through the API server's pods/portforward subresource, in
Kubernetes' WebSocket framing (``core.kube.Kube.port_forward`` opens one)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Final

import aiohttp

# Kubernetes' WebSocket framing for pods/portforward (and exec): one binary message per write, its first
# byte the channel. For the one port asked, channel 0 carries the data and channel 1 the kubelet's error.
PORT_FORWARD_PROTOCOL: Final = "v4.channel.k8s.io"
_DATA_CHANNEL: Final = 0
_ERROR_CHANNEL: Final = 1


class PortForwardError(Exception):
    """A port-forward that failed: refused by the API server (``status``: its HTTP status), or ended
    by the kubelet with a message on the error channel (``status`` 0), e.g. nothing listens on the
    pod's port."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class PortForward:
    """One TCP connection to a pod's port, tunnelled through the API server's pods/portforward
    subresource (see ``core.kube.Kube.port_forward``): :meth:`read` what the pod sends, :meth:`write` what
    it should receive, :meth:`close` (or ``async with``) to end the connection."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, target: str) -> None:
        self._ws = ws
        self.target = target
        # The server opens each channel with the port number (2 bytes, little-endian), so that a client
        # that asked for several ports can tell them apart; it is no data of the connection.
        self._opened: set[int] = set()

    async def read(self) -> bytes:
        """The next bytes from the pod; b"" once the pod side has closed the connection.
        PortForwardError when the kubelet reports an error instead."""
        while True:
            message = await self._ws.receive()
            if message.type is aiohttp.WSMsgType.BINARY:
                frame: bytes = message.data
                if not frame:
                    continue
                channel, payload = frame[0], frame[1:]
                if channel not in self._opened:
                    self._opened.add(channel)
                    payload = payload[2:]
                if channel == _DATA_CHANNEL and payload:
                    return payload
                if channel == _ERROR_CHANNEL and payload:
                    # The kubelet writes its error once, as it gives up the connection.
                    text = payload.decode(errors="replace").strip()
                    raise PortForwardError(f"forwarding to {self.target}: {text}")
            elif message.type is aiohttp.WSMsgType.ERROR:
                raise PortForwardError(f"forwarding to {self.target}: {self._ws.exception() or 'connection lost'}")
            elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
                return b""

    async def write(self, data: bytes) -> None:
        if data:
            await self._ws.send_bytes(bytes((_DATA_CHANNEL,)) + data)

    async def close(self) -> None:
        await self._ws.close()

    @property
    def closed(self) -> bool:
        return self._ws.closed

    async def __aenter__(self) -> PortForward:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def port_forward_refusal(status: int, target: str, pod: str, namespace: str) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "refused"
    hint = {
        401: "the credentials were not accepted",
        403: "port-forwarding needs the get and create verbs on pods/portforward",
        404: f"no pod {pod!r} in namespace {namespace!r}",
    }.get(status)
    return f"the API server refused to forward {target}: {status} {phrase}" + (f" ({hint})" if hint else "")


__all__ = ["PORT_FORWARD_PROTOCOL", "PortForward", "PortForwardError", "port_forward_refusal"]
