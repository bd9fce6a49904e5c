"""Parse java.util.Properties text (the format of Spark's spark.properties).

driver_controller has its own writer and reader of this format; the simulator deliberately shares
no code with sparkop, so that it checks what sparkop writes instead of agreeing with it."""

from __future__ import annotations

import re

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_UNICODE = re.compile(r"u([0-9a-fA-F]{4})")


def _logical_lines(text: str) -> list[str]:
    """Join continuation lines (odd number of trailing backslashes) and drop comments/blanks."""
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        if pending is not None:
            line = pending + line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = line[:-1]
            continue
        pending = None
        lines.append(line)
    if pending is not None:
        lines.append(pending)
    return lines


def _split_key(line: str) -> tuple[str, str]:
    """Key ends at the first unescaped '=', ':' or whitespace; one separator char is eaten."""
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=:":
            return line[:i], line[i + 1 :].lstrip(" \t\f")
        if char in " \t\f":
            rest = line[i:].lstrip(" \t\f")
            if rest[:1] in ("=", ":"):  # "key = value": whitespace, then the real separator
                rest = rest[1:]
            return line[:i], rest.lstrip(" \t\f")
        i += 1
    return line, ""


def _unescape(value: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        char = value[i]
        if char != "\\" or i + 1 >= len(value):
            out.append(char)
            i += 1
            continue
        nxt = value[i + 1]
        match = _UNICODE.match(value, i + 1)
        if match:
            out.append(chr(int(match.group(1), 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key(line)
        props[_unescape(key)] = _unescape(value)
    return props
