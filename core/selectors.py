"""Label selectors in Kubernetes' text form (``env in (prod,staging),!legacy,tier=web``), parsed and
matched here: the operator's ``--namespace-selector`` (kubeflow's ``--namespace-selector``, chart value
``spark.jobNamespaceSelector``) is matched against each namespace's labels from the Namespace cache,
and must be refused at start when the API server would refuse it as a ``labelSelector``.

The grammar is apimachinery's ``labels.Parse``: requirements separated by commas; each is ``key``,
``!key``, ``key=value``, ``key==value``, ``key!=value``, ``key in (v1,v2)`` or ``key notin (v1,v2)``.
A key is a qualified name (an optional DNS-subdomain prefix and ``/``), a value a label value (may be
empty). The numeric ``gt``/``lt`` forms of node selectors are not label-selector syntax and are refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

Operator = Literal["exists", "!exists", "=", "!=", "in", "notin"]

_NAME: Final = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
KEY: Final = re.compile(rf"({_PREFIX}/)?{_NAME}")
VALUE: Final = re.compile(rf"({_NAME})?")
# One token: a set in parentheses, an operator, or a word (a key or a value; "in"/"notin" are words).
_TOKEN: Final = re.compile(r"\s*(?:(?P<set>\()|(?P<op>==|!=|=|!)|(?P<word>[^\s,()=!]+))")
_SET_OPERATORS: Final = ("in", "notin")
MAX_PREFIX: Final = 253


class InvalidSelector(ValueError):
    """A selector the API server would refuse; the message says where and why."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator in ("=", "in"):
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values  # != and notin


@dataclass(frozen=True)
class LabelSelector:
    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with ``labels`` is selected (every requirement holds; none: everything)."""
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return self.text


def _key(word: str, text: str) -> str:
    prefix, _, _ = word.rpartition("/")
    if not KEY.fullmatch(word) or len(prefix) > MAX_PREFIX:
        raise InvalidSelector(
            f"{text!r}: {word!r} is not a label key (a name of at most 63 letters, digits, '-', '_' or '.', "
            "beginning and ending with a letter or digit, with an optional DNS prefix and '/')"
        )
    return word


def _value(word: str, text: str) -> str:
    if not VALUE.fullmatch(word):
        raise InvalidSelector(
            f"{text!r}: {word!r} is not a label value (at most 63 letters, digits, '-', '_' or '.', beginning "
            "and ending with a letter or digit)"
        )
    return word


def _set_values(text: str, at: int) -> tuple[tuple[str, ...], int]:
    """The values of ``(v1,v2)`` whose ``(`` ends at ``at``, and where the set ends."""
    close = text.find(")", at)
    if close < 0:
        raise InvalidSelector(f"{text!r}: the set of values opened at {at} is not closed with ')'")
    inside = text[at:close]
    if "(" in inside:
        raise InvalidSelector(f"{text!r}: a set of values cannot hold '('")
    if not inside.strip():
        raise InvalidSelector(f"{text!r}: a set of values needs at least one value")
    words = [w.strip() for w in inside.split(",")]
    for word in words:
        if " " in word or "\t" in word:
            raise InvalidSelector(f"{text!r}: the values of a set are separated by commas, not spaces ({word!r})")
    return tuple(sorted({_value(w, text) for w in words})), close + 1


def _requirement(text: str, at: int) -> tuple[Requirement, int]:
    """The requirement starting at ``at``, and where it ends."""
    token = _TOKEN.match(text, at)
    if token is None or token.group("set"):
        raise InvalidSelector(f"{text!r}: a label key is missing at {at}")
    if token.group("op") == "!":
        named = _TOKEN.match(text, token.end())
        if named is None or not named.group("word"):
            raise InvalidSelector(f"{text!r}: '!' must be followed by a label key")
        return Requirement(_key(named.group("word"), text), "!exists"), named.end()
    if token.group("op"):
        raise InvalidSelector(f"{text!r}: a label key is missing before {token.group('op')!r}")
    key = _key(token.group("word"), text)
    after = _TOKEN.match(text, token.end())
    if after is None or text[token.end() :].lstrip().startswith(","):
        return Requirement(key, "exists"), token.end()
    op, word = after.group("op"), after.group("word")
    if op in ("=", "==", "!="):
        value = re.compile(r"\s*([^\s,()]*)").match(text, after.end())
        assert value is not None  # matches the empty string at least
        operator: Operator = "!=" if op == "!=" else "="
        return Requirement(key, operator, (_value(value.group(1), text),)), value.end()
    if word in _SET_OPERATORS:
        opening = _TOKEN.match(text, after.end())
        if opening is None or not opening.group("set"):
            raise InvalidSelector(f"{text!r}: {word!r} must be followed by a set of values in parentheses")
        values, end = _set_values(text, opening.end())
        return Requirement(key, "in" if word == "in" else "notin", values), end
    found = op or word or text[after.end() :]
    raise InvalidSelector(f"{text!r}: expected '=', '==', '!=', 'in' or 'notin' after {key!r}, found {found!r}")


def parse(text: str) -> LabelSelector:
    """``text`` as a label selector; :class:`InvalidSelector` naming what is wrong where the API server
    would refuse it. An empty text selects everything."""
    requirements = []
    at = 0
    if text.strip():
        while True:
            requirement, at = _requirement(text, at)
            requirements.append(requirement)
            rest = text[at:].lstrip()
            if not rest:
                break
            if not rest.startswith(","):
                raise InvalidSelector(f"{text!r}: expected ',' or the end after a requirement, found {rest!r}")
            at = len(text) - len(rest) + 1
    return LabelSelector(text, tuple(requirements))


__all__ = ["InvalidSelector", "LabelSelector", "Requirement", "parse"]
