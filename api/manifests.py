"""Reading manifest files for ``sparkop validate`` and ``sparkop render``: bytes in, one
:class:`Document` per YAML document out, and a one-line reason instead of an exception for anything
that cannot be read.

What is refused, and why it is refused here rather than later:

- bytes that are not UTF-8 (the API server takes only UTF-8 JSON/YAML);
- YAML the parser rejects; the documents before the bad one are still returned, the rest of the
  stream cannot be trusted;
- a document whose aliases expand it to more than :data:`MAX_VALUES` values (a "billion laughs"
  alias bomb parses in microseconds, but walking it never ends) or that nests deeper than
  :data:`MAX_DEPTH` (nothing in a SparkApplication nests that deep; recursion limits would).

Documents are turned into what the API server sees after its YAML-to-JSON conversion: timestamps
stay strings, mapping keys become strings, ordered pairs become lists.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

MAX_VALUES: Final = 100_000
MAX_DEPTH: Final = 50
QUOTE_CHARS: Final = 80

# Everything str.splitlines() splits on: none of it may reach a one-line message unescaped.
_LINE_BREAKS: Final = {
    ord(c): c.encode("unicode_escape").decode("ascii") for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
}


def one_line(text: str) -> str:
    """``text`` with its line breaks escaped, so that it prints as exactly one line."""
    return text.translate(_LINE_BREAKS)


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return one_line(text)
    return one_line(text[:limit]) + f"… ({len(text.encode('utf-8', 'surrogatepass'))} bytes)"


def quote(value: Any) -> str:
    """A JSON rendering of ``value`` for a message: one line, at most :data:`QUOTE_CHARS` characters
    of it (a 1 MiB value is not echoed back whole)."""
    try:
        text = json.dumps(value, default=str)
    except (ValueError, TypeError, RecursionError):
        text = repr(value)
    if len(text) <= QUOTE_CHARS:
        return text
    size = len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else len(text)
    return f"{text[:QUOTE_CHARS]}… ({size} bytes)"


@dataclass(frozen=True)
class Document:
    """One YAML document of a file: its parsed ``body``, or why it could not be read."""

    source: str  # "file" for the first document, "file#2" for the second, ...
    body: Any = None
    problem: str | None = None


def source_of(name: str, index: int) -> str:
    """How messages name document ``index`` (1-based) of file ``name``."""
    return name if index == 1 else f"{name}#{index}"


class _Loader(yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML, with timestamps kept as the strings the API server keeps them as."""


def _timestamp_as_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


def _oversized(root: yaml.Node) -> str | None:
    """Why the document at ``root`` is too large or too deep to construct, or None.

    Walks the node graph the way constructing and then visiting the document would (an alias is
    walked again each time it is used), so the walk stops as soon as the limit is reached."""
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            return f"the document expands to more than {MAX_VALUES} values (YAML aliases used as an alias bomb?)"
        if depth > MAX_DEPTH:
            return f"the document nests deeper than {MAX_DEPTH} levels (or a YAML alias refers to itself)"
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
    return None


def _duplicate_key(root: yaml.Node) -> str | None:
    """The first key (in the file's order) given twice in one mapping of the document at ``root``,
    said as kubectl apply refuses it ("key already set in map"), or None. Walked after
    :func:`_oversized`, so bounded."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    visited: set[int] = set()
    found: list[tuple[int, str]] = []
    while stack:
        node, path = stack.pop()
        if id(node) in visited:
            continue  # an alias: its mappings were checked where the anchor is
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            first: dict[str, yaml.Node] = {}
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                    continue
                where = f"{path}.{key.value}" if path else key.value
                if key.value in first:
                    line, earlier = key.start_mark.line + 1, first[key.value].start_mark.line + 1
                    message = (
                        f"{where}: the key {key.value!r} is given twice in one mapping (line {earlier} and"
                        f" line {line}); kubectl apply refuses it: keep one"
                    )
                    found.append((line, one_line(message)))
                else:
                    first[key.value] = key
                    stack.append((value, where))
    return min(found)[1] if found else None


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bytes):
        return key.decode("utf-8", "replace")
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    return str(key)


def as_json(value: Any) -> Any:
    """``value`` as JSON data: string keys, lists for tuples (``!!omap``/``!!pairs``), text for bytes."""
    if isinstance(value, dict):
        return {_json_key(k): as_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _yaml_problem(exc: Exception) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f"{exc.context}: " if exc.context else ""
        return one_line(f"not valid YAML: {context}{exc.problem}{where}")
    if isinstance(exc, yaml.reader.ReaderError):
        return one_line(f"not valid YAML: {exc.reason} (the character at offset {exc.position})")
    if isinstance(exc, RecursionError):
        return f"not valid YAML: nested deeper than {MAX_DEPTH} levels"
    return one_line(f"not valid YAML: {exc}")


def _decode(data: bytes) -> str:
    """UTF-8 text (a byte-order mark is allowed); UnicodeDecodeError names where it is not."""
    return data.decode("utf-8-sig")


def _not_utf8(data: bytes, exc: UnicodeDecodeError) -> str:
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, column {column} (save the file as UTF-8)"


def parse(data: bytes, name: str) -> list[Document]:
    """The documents of a file's bytes. A problem that ends the stream is the last Document."""
    try:
        text = _decode(data)
    except UnicodeDecodeError as exc:
        return [Document(name, problem=_not_utf8(data, exc))]
    out: list[Document] = []
    loader = _Loader(text)
    try:
        while True:
            index = len(out) + 1
            try:
                if not loader.check_node():
                    break
                node = loader.get_node()
            except (yaml.YAMLError, RecursionError) as exc:
                out.append(Document(source_of(name, index), problem=_yaml_problem(exc)))
                break
            too_big = _oversized(node) if node is not None else None
            if too_big:
                out.append(Document(source_of(name, index), problem=too_big))
                continue
            duplicate = _duplicate_key(node) if node is not None else None
            if duplicate:
                out.append(Document(source_of(name, index), problem=duplicate))
                continue
            try:
                body = as_json(loader.construct_document(node)) if node is not None else None
            except (yaml.YAMLError, RecursionError) as exc:
                out.append(Document(source_of(name, index), problem=_yaml_problem(exc)))
                continue
            out.append(Document(source_of(name, index), body=body))
    finally:
        loader.dispose()
    return out


def read(path: str) -> tuple[str, list[Document]]:
    """(the name messages use, the documents) of file ``path`` (``-`` = stdin). OSError when the file
    cannot be read."""
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read() if stream is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
        return "<stdin>", parse(data, "<stdin>")
    return path, parse(Path(path).read_bytes(), path)
