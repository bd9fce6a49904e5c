"""The one name for a Kubernetes object or any JSON object as the API server sends it."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]
