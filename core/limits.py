"""The operator's default bound on its own requests to the API server (core.kube.RateLimit), apart
from everything else so that the command line can name it without importing the client.

Above what one API server on this project's 2-core machine accepts at all (bench/throughput.py's
ceiling run: about 300 writes/s), so the bound never binds there. The API server's Priority and
Fairness shares its capacity between clients; on a shared cluster, set the operator's share.
"""

from __future__ import annotations

from typing import Final

DEFAULT_KUBE_API_QPS: Final = 300.0
DEFAULT_KUBE_API_BURST: Final = 600
