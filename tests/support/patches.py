"""Applying a plan's JSON patch to an object, as the API server would."""

from __future__ import annotations

from typing import Any

import jsonpatch

from sparkop.core.plan import Patch


def patched(obj: dict[str, Any], patch: Patch) -> dict[str, Any]:
    """``obj`` after the JSON patch ``patch``: its ``test`` operations raise JsonPatchTestFailed when
    the object no longer holds what the decision saw (the API server answers 422 then)."""
    assert patch.json_patch, f"{patch.reason} on {patch.name} is a merge patch"
    return dict(jsonpatch.apply_patch(obj, patch.body))
