"""``--namespace-selector``'s parser: the selectors kubeflow's e2e spec ("Selector validation") says
apimachinery's labels.Parse refuses and takes, and what each takes matches."""

from __future__ import annotations

import pytest

from sparkop.core import selectors

INVALID = ("=value", "env in (prod,staging", "env in prod,staging)", "key!value", "env in (prod staging)")
VALID = (
    "spark=enabled",
    "spark",
    "!legacy",
    "env in (prod,staging)",
    "env notin (dev,test)",
    "spark=enabled,env=prod",
    "spark,env=prod",
    "env!=dev",
    "key=",
    "key==value",
)


@pytest.mark.parametrize("text", INVALID)
def test_refuses_what_the_api_server_refuses(text: str) -> None:
    with pytest.raises(selectors.InvalidSelector, match=r"^'"):
        selectors.parse(text)


@pytest.mark.parametrize("text", VALID)
def test_takes_what_the_api_server_takes(text: str) -> None:
    assert selectors.parse(text).requirements


@pytest.mark.parametrize(
    ("text", "labels", "selected"),
    [
        ("spark=enabled", {"spark": "enabled"}, True),
        ("spark=enabled", {"spark": "off"}, False),
        ("spark=enabled", {}, False),
        ("spark", {"spark": ""}, True),
        ("!legacy", {"legacy": "x"}, False),
        ("!legacy", {}, True),
        ("env in (prod,staging)", {"env": "staging"}, True),
        ("env in (prod,staging)", {"env": "dev"}, False),
        ("env notin (dev,test)", {}, True),
        ("env notin (dev,test)", {"env": "dev"}, False),
        ("spark=enabled, env!=dev", {"spark": "enabled", "env": "prod"}, True),
        ("spark=enabled,env!=dev", {"spark": "enabled", "env": "dev"}, False),
        ("key=", {"key": ""}, True),
        ("key==value", {"key": "value"}, True),
        ("example.com/team in (a, b)", {"example.com/team": "b"}, True),
        ("", {}, True),
    ],
)
def test_matches_as_kubernetes_does(text: str, labels: dict[str, str], selected: bool) -> None:
    assert selectors.parse(text).matches(labels) is selected


@pytest.mark.parametrize("text", ["a b", "a,", ",a", "a in ()", "a in ()x", "-a=b", "a=b c", "a>1", "a in (b),(c)"])
def test_refuses_other_malformed_selectors(text: str) -> None:
    with pytest.raises(selectors.InvalidSelector):
        selectors.parse(text)
