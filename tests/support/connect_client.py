"""A Spark Connect client outside the cluster, for the real-Spark tests: the cached pyspark of a line
(devcluster.images.pyspark_dir) plus what its Connect client needs (pandas, pyarrow, grpcio, ...),
installed once from PyPI into the cache, run as its own process with a deadline (a Connect client
retries an unreachable server for minutes)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Final

from devcluster import images, paths
from devcluster.locks import held

# pyspark's "connect" extra (4.0-4.3), bounded to what those lines were released against, and py4j,
# which pyspark imports even as a client.
PACKAGES: Final = (
    "pandas>=2.2,<3",
    "pyarrow>=18,<23",
    "numpy>=1.26,<3",
    "grpcio>=1.67,<2",
    "grpcio-status>=1.67,<2",
    "googleapis-common-protos>=1.65",
    "zstandard>=0.23",
)
PY4J: Final = "py4j==0.10.9.9"

QUERY: Final = """\
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
print("RESULT", spark.range(10**6).selectExpr("sum(id)").collect()[0][0], flush=True)
spark.stop()
"""
EXPECTED: Final = 499999500000


def client_site() -> Path:
    """The client packages' directory (installed on first use, under the caches' lock)."""
    key = hashlib.sha256("\n".join((*PACKAGES, PY4J)).encode()).hexdigest()[:12]
    site = paths.cache_root() / f"connect-client-{key}"
    if (site / ".complete").is_file():
        return site
    site.parent.mkdir(parents=True, exist_ok=True)
    with held(paths.cache_root() / ".connect-client.lock", lambda pid: print(f"waiting for pid {pid}")):
        if not (site / ".complete").is_file():
            pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target"]
            subprocess.run([*pip, str(site), *PACKAGES], check=True, timeout=1200)
            subprocess.run([*pip, str(site), "--no-deps", PY4J], check=True, timeout=300)
            (site / ".complete").write_text("ok\n")
    return site


def run_query(version: str, url: str, timeout: float = 300) -> int:
    """sum(id) of spark.range(10**6) computed by the Connect server at ``url`` (sc://host:port), with
    pyspark ``version``'s client."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join((str(images.pyspark_dir(version)), str(client_site()))),
        "PYTHONNOUSERSITE": "1",
    }
    result = subprocess.run(
        [sys.executable, "-c", QUERY, url], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        raise AssertionError(f"client exit {result.returncode}: {result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    return int(lines[-1].split()[1])
