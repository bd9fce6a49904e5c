"""Reading a field of an object as the informer caches hold it, leniently: a value of the wrong type
reads as absent (or the default) rather than failing the pass. Objects sparkop did not write itself,
or wrote with an older version, may hold anything; what a view cannot read it does not act on."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar

E = TypeVar("E", bound=Enum)


def mapping(value: Any) -> Mapping[str, Any]:
    """An object, or an empty one."""
    return value if isinstance(value, Mapping) else {}


def str_map(value: Any) -> dict[str, str]:
    """An object's entries as strings (labels, annotations), leaving out null values."""
    return {str(k): str(v) for k, v in mapping(value).items() if v is not None}


def integer(value: Any, default: int = 0) -> int:
    """An integer, or one written as a string (a label's value); a boolean is not one."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return default


def opt_int(value: Any) -> int | None:
    """:func:`integer`, None when absent (0 when unreadable)."""
    return None if value is None else integer(value)


def opt_str(value: Any) -> str | None:
    """A string, None when absent or empty."""
    return value if isinstance(value, str) and value else None


def opt_enum(kind: type[E], value: Any) -> E | None:
    """A member of ``kind`` by its value, None when absent or not one."""
    try:
        return None if value is None else kind(value)
    except ValueError:
        return None


def enum_or(kind: type[E], value: Any, default: E) -> E:
    """A member of ``kind`` by its value, ``default`` when absent or not one."""
    found = opt_enum(kind, value)
    return default if found is None else found


__all__ = ["enum_or", "integer", "mapping", "opt_enum", "opt_int", "opt_str", "str_map"]
