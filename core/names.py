"""DNS names and label values: bounded, cleaned and made unique the one way, so that a name made
twice from the same input is the same name (a create retried after a crash hits 409 AlreadyExists
instead of making a duplicate). What sparkop names (``domain.naming``) is built on these.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Final

DNS_LABEL_MAX: Final = 63
HASH_LEN: Final = 8

_INVALID = re.compile(r"[^a-z0-9-]+")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# Every pass names an incarnation's objects again (a dozen names from the same few inputs): each
# name is worked out once per (input, limit) while it is in use.
NAMES_KEPT: Final = 4096


@lru_cache(maxsize=NAMES_KEPT)
def digest(text: str, length: int = HASH_LEN) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


@lru_cache(maxsize=NAMES_KEPT)
def bounded(name: str, limit: int) -> str:
    """``name`` as a DNS-1123 name of at most ``limit`` characters ([a-z0-9-], alphanumeric at both
    ends). A name that already is one comes back unchanged; any other is cleaned (lowercased, every
    other character run turned into ``-``), cut to fit, and suffixed with a hash of the original, so
    that two different names never give the same result (``dot.app`` and ``dot-app`` differ)."""
    return _derived(name, limit)


def _derived(name: str, limit: int, prefix: str = "") -> str:
    clean = prefix + (_INVALID.sub("-", name.lower()).strip("-") or "x")
    if clean == name and len(clean) <= limit:
        return clean
    head = clean[: limit - HASH_LEN - 1].rstrip("-")
    return f"{head}-{digest(name)}"


@lru_cache(maxsize=NAMES_KEPT)
def dns_label(name: str, limit: int = DNS_LABEL_MAX) -> str:
    """A DNS-1035 label (starts with a letter), as Service names require; as injective as
    :func:`bounded` (a name that does not start with a letter gets an ``s-`` prefix and a hash)."""
    label = bounded(name, limit)
    if label[0].isalpha():
        return label
    return _derived(name, limit, prefix="s-")


def label_value(name: str) -> str:
    """A label value for an object name (names may reach 253 characters, label values 63): the name
    itself when it fits (an object name of up to 63 characters is a valid label value, dots
    included), else :func:`bounded`."""
    return name if _LABEL_VALUE.fullmatch(name) else bounded(name, DNS_LABEL_MAX)


def event_name(object_name: str, nanos: int) -> str:
    """An Event's name, client-go's ``<object>.<hex time>`` (a DNS-1123 subdomain, unique per object
    and instant)."""
    name = f"{object_name}.{nanos:x}"
    return name if len(name) <= 253 else bounded(name, 253)
