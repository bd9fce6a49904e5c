"""The operator's defaults for its concurrency and its bound on requests to the API server
(core.kube.RateLimit), apart from everything else so that the command line can name them without
importing the client.

Above what one API server on this project's 2-core machine accepts at all, so the bound never binds
there. It was 300/s while the API server took about 300 writes/s; on the faster 2-core machine of
2026-12-05 it took about 480 (bench/throughput.py's ceiling: 58-61 apps/s of 8 writes), the bound
held sparkop to 70 % of that ceiling over 1,000 apps, and without it sparkop reached 81 %. The API
server's Priority and Fairness shares its capacity between clients; on a shared cluster, set the
operator's share.
"""

from __future__ import annotations

from typing import Final

DEFAULT_KUBE_API_QPS: Final = 1000.0
DEFAULT_KUBE_API_BURST: Final = 2000
# A pass mostly waits on the API server (a burst of 300 apps in bench/throughput.py: 8 workers per
# controller reached 36 % of the API server's ceiling, 32 reached 59 %); waiting passes cost no CPU.
DEFAULT_WORKERS: Final = 32
# How many of an owner's children a status may name one by one (a map that every status write of the
# owner carries): kubeflow's --max-tracked-executor-per-app default, and the most its CRD field takes.
MAX_TRACKED_CHILDREN: Final = 1000
# How many lines of an ended driver container's log its incarnation's record keeps (one read through the
# API server's pods/log, which asks the pod's kubelet). 0: none read, and no pods/log right needed.
DEFAULT_LOG_TAIL_LINES: Final = 50
