from __future__ import annotations

import socket

from devcluster.ports import free_ports, is_listening


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(6)
    assert len(set(ports)) == 6
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_is_listening() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert is_listening(server.getsockname()[1])
    (port,) = free_ports(1)
    assert not is_listening(port)
