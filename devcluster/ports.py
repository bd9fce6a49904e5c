"""Free TCP ports on 127.0.0.1 for one cluster's components."""

from __future__ import annotations

import socket
from contextlib import ExitStack

LOCALHOST = "127.0.0.1"


def free_ports(count: int, host: str = LOCALHOST) -> list[int]:
    """Return `count` distinct ports the kernel considers free right now.

    All sockets stay open until every port is chosen, so the kernel cannot hand out the
    same port twice within one call. Another process may still grab one before our
    component binds it; the window is milliseconds and startup reports such a failure.
    """
    with ExitStack() as stack:
        ports: list[int] = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(sock.getsockname()[1])
        return ports


def is_listening(port: int, host: str = LOCALHOST, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
