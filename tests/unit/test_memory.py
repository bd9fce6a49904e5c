"""Freed memory goes back to the system after a cache's listing (core.memory)."""

from __future__ import annotations

import re
from pathlib import Path

from sparkop.core.memory import release_free_memory


def rss_mib() -> float:
    match = re.search(r"^VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    assert match
    return int(match.group(1)) / 1024


def test_the_free_pages_of_what_a_listing_decoded_and_dropped_go_back_to_the_system() -> None:
    release_free_memory()
    before = rss_mib()
    # What a listing leaves: many decoded pieces larger than pymalloc's objects, dropped but for one in
    # sixteen (what the caches keep), which pins the heap's pages between them.
    pieces = [bytes(4096) + str(i).encode() for i in range(50_000)]  # about 200 MiB
    kept = pieces[::16]
    del pieces
    after_drop = rss_mib()
    assert release_free_memory() is True  # glibc, as in the operator's image
    released = rss_mib()
    assert after_drop - before > 150 and after_drop - released > 100, (before, after_drop, released)
    assert kept
