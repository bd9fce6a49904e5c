"""Spark's own value syntax (byte strings, booleans, the spark.properties file format), and what Spark
derives from its properties for the driver pod (its memory and overhead, its ports).

Pure functions, no I/O. They reproduce what Spark's JVM code does with the same strings
(``JavaUtils.byteStringAs``, ``java.util.Properties``, ``BasicDriverFeatureStep``) so that the renderer
reaches the same numbers spark-submit would.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

_BYTE_UNITS: Final = {
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "p": 1024**5,
    "pb": 1024**5,
}
_BYTE_STRING: Final = re.compile(r"^\s*([0-9]+)\s*([a-z]+)?\s*$")


def byte_string_as_mib(value: str, default_unit: str = "m") -> int:
    """``Utils.byteStringAsMb``: an integer with an optional unit (no unit = ``default_unit``),
    converted to whole MiB, truncating like Java's ``TimeUnit`` conversions."""
    match = _BYTE_STRING.match(value.lower())
    if not match:
        raise ValueError(f"invalid Spark byte string {value!r} (expected e.g. 512m, 2g, 1024)")
    number, unit = int(match.group(1)), match.group(2) or default_unit
    if unit not in _BYTE_UNITS:
        raise ValueError(f"invalid unit {unit!r} in Spark byte string {value!r}")
    return number * _BYTE_UNITS[unit] // 1024**2


def java_double(value: float) -> str:
    """``Double.toString`` for the plain decimals Spark prints (0.1 -> "0.1", 1 -> "1.0")."""
    return repr(float(value))


def parse_bool(value: str | None, default: bool = False) -> bool:
    if value is None:
        return default
    return value.strip().lower() == "true"


# --- java.util.Properties -------------------------------------------------------------------------


_NEEDS_ESCAPE: Final = re.compile(r"[ \t\n\r\f\\=:#!\x00-\x1f\x7f-\x9f]")
_ESCAPE_TABLE: Final = {
    **{c: f"\\u{c:04X}" for c in [*range(0x20), *range(0x7F, 0xA0)]},
    ord("\\"): "\\\\",
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\f"): "\\f",
    **{ord(c): "\\" + c for c in "=:#!"},
}


def _escape(text: str, *, key: bool) -> str:
    """``Properties.store`` escaping (non-ASCII stays raw UTF-8, which Spark reads back)."""
    if not _NEEDS_ESCAPE.search(text):
        return text
    out = text.translate(_ESCAPE_TABLE)
    if key:
        return out.replace(" ", "\\ ")
    return "\\ " + out[1:] if out.startswith(" ") else out


def format_properties(props: Mapping[str, str], header: str | None = None) -> str:
    """A properties file that ``java.util.Properties.load`` reads back as ``props``.

    Keys are sorted so that the same properties always give the same bytes (the ConfigMap is
    immutable and compared on retries)."""
    lines = [f"#{header}"] if header else []
    lines.extend(f"{_escape(k, key=True)}={_escape(v, key=False)}" for k, v in sorted(props.items()))
    return "\n".join(lines) + "\n"


def _logical_lines(text: str) -> Iterable[str]:
    pending = ""
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        # A line continues when it ends with an odd number of backslashes.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    text = "".join(out)
    # Java escapes characters outside the BMP as UTF-16 surrogate pairs.
    return (
        text.encode("utf-16", "surrogatepass").decode("utf-16")
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text)
        else text
    )


def parse_properties(text: str) -> dict[str, str]:
    """``java.util.Properties.load`` for the files Spark writes, read as UTF-8 like Spark reads
    them (used by tests and conformance)."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        i = 0
        while i < len(line):
            char = line[i]
            if char == "\\":
                i += 2
                continue
            if char in "=: \t\f":
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        result[_unescape(key)] = _unescape(rest)
    return result


# --- what Spark derives from the properties -----------------------------------------------------

DEFAULT_DRIVER_PORT: Final = 7078
DEFAULT_BLOCKMANAGER_PORT: Final = 7079
DEFAULT_UI_PORT: Final = 4040
DEFAULT_CONNECT_PORT: Final = 15002  # spark.connect.grpc.binding.port
MEMORY_OVERHEAD_MIN_MIB: Final = 384
NON_JVM_OVERHEAD_FACTOR: Final = 0.4
DEFAULT_OVERHEAD_FACTOR: Final = 0.1


def memory_overhead_factor(conf: Mapping[str, str], resource_type: str) -> tuple[float, float]:
    """(the default factor Spark writes back as spark.kubernetes.memoryOverheadFactor, the
    driver's factor)."""
    general = conf.get("spark.kubernetes.memoryOverheadFactor")
    if general is not None:
        default = float(general)
    else:
        default = NON_JVM_OVERHEAD_FACTOR if resource_type != "java" else DEFAULT_OVERHEAD_FACTOR
    driver = conf.get("spark.driver.memoryOverheadFactor")
    return default, float(driver) if driver is not None else default


def driver_memory_mib(conf: Mapping[str, str], resource_type: str, min_overhead_conf: bool) -> tuple[int, int]:
    """(heap MiB, overhead MiB) exactly as ``BasicDriverFeatureStep`` computes them;
    ``min_overhead_conf``: the line reads spark.driver.minMemoryOverhead."""
    heap = byte_string_as_mib(conf.get("spark.driver.memory", "1g"))
    explicit = conf.get("spark.driver.memoryOverhead")
    if explicit is not None:
        return heap, byte_string_as_mib(explicit)
    _, factor = memory_overhead_factor(conf, resource_type)
    minimum = MEMORY_OVERHEAD_MIN_MIB
    if min_overhead_conf and "spark.driver.minMemoryOverhead" in conf:
        minimum = byte_string_as_mib(conf["spark.driver.minMemoryOverhead"])
    return heap, max(int(factor * heap), minimum)


def _int_conf(conf: Mapping[str, str], key: str, default: int) -> int:
    value = conf.get(key)
    return int(value) if value is not None else default


def driver_ports(conf: Mapping[str, str]) -> tuple[int, int, int]:
    rpc = _int_conf(conf, "spark.driver.port", DEFAULT_DRIVER_PORT)
    block = _int_conf(
        conf, "spark.driver.blockManager.port", _int_conf(conf, "spark.blockManager.port", DEFAULT_BLOCKMANAGER_PORT)
    )
    ui = _int_conf(conf, "spark.ui.port", DEFAULT_UI_PORT)
    return rpc, block, ui


def connect_port(conf: Mapping[str, str]) -> int:
    return _int_conf(conf, "spark.connect.grpc.binding.port", DEFAULT_CONNECT_PORT)
