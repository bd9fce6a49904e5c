"""The operator's defaults for its concurrency and its bound on requests to the API server
(core.kube.RateLimit), apart from everything else so that the command line can name them without
importing the client.

Above what one API server on this project's 2-core machine accepts at all (bench/throughput.py's
ceiling run: about 300 writes/s), so the bound never binds there. The API server's Priority and
Fairness shares its capacity between clients; on a shared cluster, set the operator's share.
"""

from __future__ import annotations

from typing import Final

DEFAULT_KUBE_API_QPS: Final = 300.0
DEFAULT_KUBE_API_BURST: Final = 600
# A pass mostly waits on the API server (a burst of 300 apps in bench/throughput.py: 8 workers per
# controller reached 36 % of the API server's ceiling, 32 reached 59 %); waiting passes cost no CPU.
DEFAULT_WORKERS: Final = 32
