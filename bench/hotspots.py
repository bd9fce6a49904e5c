"""Where a py-spy profile's samples went: the functions with the most samples on the stack
(inclusive) and at its top (self), from the collapsed stacks ``py-spy record -f raw`` writes (what
``throughput.py --profile`` and ``harness.profiling`` produce).

    .venv/bin/python bench/hotspots.py /tmp/profile.txt [--top 30] [--under reconcile]

``--under NAME`` counts only the samples whose stack holds a function whose name contains NAME (the
share is still of all samples), to split one part of the work by what it calls.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

# py-spy's frame text: "function (path/to/file.py:123)"; the line number is dropped so that one
# function's samples add up.
_FRAME: Final = re.compile(r"^(?P<function>.*?) \((?P<file>[^():]*)(?::\d+)?\)$")
_SKIPPED_PREFIXES: Final = ("process ", "thread ")


@dataclass(frozen=True)
class Profile:
    samples: int
    inclusive: Counter[str]
    self_: Counter[str]


def frame_name(frame: str) -> str:
    """``function (file)`` with the file shortened to its last two path parts."""
    match = _FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    path = "/".join(match["file"].split("/")[-2:])
    return f"{match['function']} ({path})"


def stacks(lines: Iterable[str]) -> Iterator[tuple[list[str], int]]:
    """(frames from the outermost, samples) of each collapsed-stack line."""
    for line in lines:
        text, _, count = line.rstrip("\n").rpartition(" ")
        if not text or not count.isdigit():
            continue
        frames = [frame_name(f) for f in text.split(";") if f and not f.startswith(_SKIPPED_PREFIXES)]
        if frames:
            yield frames, int(count)


def summarize(lines: Iterable[str], under: str | None = None) -> Profile:
    inclusive: Counter[str] = Counter()
    self_: Counter[str] = Counter()
    total = 0
    for frames, count in stacks(lines):
        total += count
        if under is not None and not any(under in f.split(" (", 1)[0] for f in frames):
            continue
        for name in set(frames):
            inclusive[name] += count
        self_[frames[-1]] += count
    return Profile(total, inclusive, self_)


def table(profile: Profile, top: int) -> str:
    def rows(counter: Counter[str]) -> list[str]:
        return [f"{100 * n / max(profile.samples, 1):6.1f} %  {name}" for name, n in counter.most_common(top)]

    return "\n".join(
        [
            f"{profile.samples} samples",
            "",
            "inclusive (on the stack):",
            *rows(profile.inclusive),
            "",
            "self (at the top of the stack):",
            *rows(profile.self_),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--under", help="only samples with a function whose name contains this on the stack")
    args = parser.parse_args(argv)
    with args.profile.open() as lines:
        print(table(summarize(lines, args.under), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
