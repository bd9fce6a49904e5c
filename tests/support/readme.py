"""What the README promises, read from the README itself, so tests follow it as a reader would."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def section(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert match, f"README has no section {title!r}"
    return match.group(1)


def tour_steps() -> list[str]:
    """The commands of the README's tour, in order, without their trailing comments."""
    block = re.search(r"```sh\n(.*?)```", section("A five-minute tour"), flags=re.S)
    assert block, "the tour has no sh block"
    steps = []
    for line in block.group(1).splitlines():
        command = line.split("  #", 1)[0].strip()
        if command:
            steps.append(command)
    return steps
