"""Freed memory handed back to the system after a burst of allocations: a cache's listing.

CPython frees an object to its allocator, not to the system. The decoded pages and lines of a listing
are larger than pymalloc's objects, so they live in glibc's heap, and glibc keeps most of a heap's free
pages for later: after an informer listed 20,000 finished apps the process stayed 505 MiB above where
it began, of which ``malloc_trim(0)`` gave 362 MiB back (bench/bench_cache_memory.py's objects, no
tracemalloc). What the caches hold is unchanged; only free pages go. Where the C library has no
``malloc_trim`` (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from typing import Final


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return trim


_TRIM: Final = _malloc_trim()


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the system; True if the C library can."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
