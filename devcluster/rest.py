"""A tiny synchronous client for the handful of API calls `up` makes.

Cluster bring-up must not depend on an event loop (it runs from the CLI and from sync
pytest fixtures) and importing a full client costs more than these few requests.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Response:
    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def tls_context(ca_file: Path | None, cert_file: Path | None = None, key_file: Path | None = None) -> ssl.SSLContext:
    """Verify against `ca_file`, or not at all when it is None (self-signed component ports)."""
    if ca_file is None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cafile=str(ca_file))
    if cert_file is not None:
        context.load_cert_chain(str(cert_file), str(key_file) if key_file else None)
    return context


def request(
    url: str,
    *,
    method: str = "GET",
    body: Any = None,
    context: ssl.SSLContext | None = None,
    timeout: float = 5.0,
) -> Response:
    """One HTTP(S) request; HTTP errors come back as a Response, connection errors raise OSError."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    req.add_header("Accept", "application/json")
    try:
        with urllib.request.urlopen(req, context=context, timeout=timeout) as resp:
            return Response(resp.status, _decode(resp.read()))
    except urllib.error.HTTPError as err:
        return Response(err.code, _decode(err.read()))


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def probe(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    """True when `url` answers 2xx; any connection problem just means "not yet"."""
    try:
        return request(url, context=context, timeout=timeout).ok
    except (OSError, http.client.HTTPException):
        return False
