"""Where devcluster keeps binaries and clusters: outside the repo, shared across clones."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
GOBUILD_DIR = PACKAGE_DIR / "gobuild"
VERSIONS_FILE = GOBUILD_DIR / "versions.env"
STAGES_FILE = PACKAGE_DIR / "stages.yaml"
AUDIT_POLICY_FILE = PACKAGE_DIR / "audit-policy.yaml"


def cache_root() -> Path:
    """`$SPARKOP_CACHE`, else `~/.cache/sparkop` (created on demand by the callers)."""
    override = os.environ.get("SPARKOP_CACHE")
    if override:
        return Path(override).expanduser().resolve()
    return Path.home() / ".cache" / "sparkop"


def clusters_root() -> Path:
    return cache_root() / "clusters"


def cluster_dir(name: str) -> Path:
    return clusters_root() / name
