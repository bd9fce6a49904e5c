"""The models a controller reads and writes (:class:`Model`: one that knows its JSON form), what its
``observe`` makes of an object's spec (the parsed spec, or a :class:`SpecError` saying why it cannot run
here; for a spec that only sets fields the models do not know yet, which ones: a newer CRD's, which a
newer operator can run, so the object waits for it rather than failing), and how a pass reads a status
it did not write itself (:func:`lenient`, which never stops a pass on what another version or a hand
edit left there)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sparkop.core.jsontypes import JSON

M = TypeVar("M", bound=BaseModel)


class Model(BaseModel):
    """A pydantic model that knows its JSON form: what a controller writes of a status (``to_json``)."""

    def to_json(self) -> JSON:
        """The manifest JSON of this object (camelCase, no unset optional fields)."""
        return self.model_dump(mode="json", exclude_none=True)


@dataclass(frozen=True)
class SpecError:
    """Why an object's spec, accepted by the API server, cannot run here. ``unknown`` lists the fields
    the models do not know when they are all that is wrong."""

    message: str
    unknown: tuple[str, ...] = ()


def unknown_fields(exc: ValidationError, prefix: str = "") -> tuple[str, ...]:
    """The fields ``exc`` names as unknown (as ``prefix.a.b``) when that is all it says: every error is
    an extra field, the fields of a newer CRD these models predate. Empty when anything else is wrong."""
    errors = exc.errors()
    if not errors or any(e["type"] != "extra_forbidden" for e in errors):
        return ()
    return tuple(".".join(str(part) for part in (prefix, *e["loc"]) if part != "") for e in errors)


def lenient(model: type[M], data: Any) -> M:
    """``data`` (a stored status) read as ``model``: a top-level field the schema rejects reads as
    absent, and anything unreadable as an empty model, so that a status written by another version (or
    edited by hand) never stops a pass, and what of it is readable is kept."""
    raw = dict(data) if isinstance(data, Mapping) else {}
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
    known = {k: v for k, v in raw.items() if k in model.model_fields and k not in bad}
    try:
        return model.model_validate(known)
    except ValidationError:
        return model()


__all__ = ["Model", "SpecError", "lenient", "unknown_fields"]
