"""A frozen dataclass with some fields changed, made without running ``__init__`` again: a pure
decision builds its plan and its facts from many such copies, and ``dataclasses.replace`` (which
validates and calls ``__init__``) costs five times as much."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def evolve(obj: T, /, **changes: Any) -> T:
    """``obj`` with ``changes`` (field names to values). Only for frozen dataclasses whose ``__init__``
    does nothing but set the fields (no ``__post_init__``, no slots): what ``dataclasses.replace``
    would make, field for field. A value a ``functools.cached_property`` kept is copied along: the
    caller drops those that the changed fields make stale."""
    copied = object.__new__(type(obj))
    copied.__dict__.update(obj.__dict__)
    copied.__dict__.update(changes)
    return copied


__all__ = ["evolve"]
