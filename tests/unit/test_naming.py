"""domain.naming: every derived name is a valid Kubernetes name, and different inputs never share one
(``dot.app`` and ``dot-app`` once both wanted SparkDriver ``dot-app-1``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkop.core import names
from sparkop.domain import naming

DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def is_object_name(name: str) -> bool:
    """A valid name for a SparkApplication or SparkDriver: a DNS-1123 subdomain."""
    return len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name) is not None


def is_label(name: str, pattern: re.Pattern[str] = DNS_1123_LABEL) -> bool:
    return len(name) <= naming.DNS_LABEL_MAX and pattern.fullmatch(name) is not None


# Small alphabets make near-misses ("a.b" / "a-b", "1a" / "s-1a", a cut long name / its neighbour) likely.
short_names = st.text(alphabet="ab1-.s", min_size=1, max_size=10).filter(is_object_name)
long_names = st.builds(
    lambda head, tail: (head + tail)[:253].strip("-."),
    st.text(alphabet="ab-.", min_size=40, max_size=253),
    st.text(alphabet="ab1.", min_size=0, max_size=8),
).filter(is_object_name)
object_names = st.one_of(short_names, long_names)


def with_neighbours(names: list[str]) -> list[str]:
    """The names plus the ones a lossy cleaning would confuse them with: ``.`` and ``-`` swapped, the
    last character changed (a cut long name), an ``s-`` prefix (a label must start with a letter)."""
    out = dict.fromkeys(names)
    for name in names:
        for other in (name.replace(".", "-"), name.replace("-", "."), name[:-1] + "b", f"s-{name}"):
            if is_object_name(other):
                out[other] = None
    return list(out)


name_sets = st.lists(object_names, min_size=1, max_size=20).map(with_neighbours).filter(lambda n: len(n) >= 2)

# (derived-name function, what the result must be)
DERIVED: dict[str, tuple[Callable[[str], str], Callable[[str], bool]]] = {
    "bounded(63)": (lambda n: naming.bounded(n, 63), is_label),
    "bounded(253)": (lambda n: naming.bounded(n, 253), is_object_name),
    "bounded(20)": (lambda n: naming.bounded(n, 20), lambda r: len(r) <= 20 and is_label(r)),
    "dns_label": (naming.dns_label, lambda r: is_label(r, DNS_1035_LABEL)),
    "label_value": (naming.label_value, lambda r: is_label(r, LABEL_VALUE)),
    "driver_name": (lambda n: naming.driver_name(n, 1), is_object_name),
    "ui_service_name": (naming.ui_service_name, lambda r: is_label(r, DNS_1035_LABEL)),
    "ui_ingress_name": (naming.ui_ingress_name, lambda r: is_label(r, DNS_1035_LABEL)),
    "pod_prefix": (
        lambda n: naming.pod_prefix(n, 2),
        lambda r: len(r) <= naming.POD_PREFIX_MAX and is_label(r, DNS_1035_LABEL),
    ),
    # kubeflow's <app>-driver, for every run and incarnation: a pod name (a DNS-1123 subdomain).
    "driver_pod_name": (naming.driver_pod_name, is_object_name),
    "driver_service_name": (lambda n: naming.driver_service_name(n, 1), lambda r: is_label(r, DNS_1035_LABEL)),
    "driver_configmap_name": (lambda n: naming.driver_configmap_name(n, 1), is_label),
    "executor_template_configmap_name": (lambda n: naming.executor_template_configmap_name(n, 1), is_label),
    "metrics_configmap_name": (lambda n: naming.metrics_configmap_name(n, 1), is_label),
    "event_name": (lambda n: naming.event_name(n, 0x187A3B5C2D1E0F00), is_object_name),
}


@settings(max_examples=300, deadline=None)
@given(names=name_sets)
def test_distinct_names_never_share_a_derived_name(names: list[str]) -> None:
    for what, (derive, valid) in DERIVED.items():
        derived = {name: derive(name) for name in names}
        for name, result in derived.items():
            assert valid(result), f"{what}({name!r}) = {result!r} is not a valid name"
        clashes = len(names) - len(set(derived.values()))
        assert clashes == 0, f"{what} maps different names to one: {derived}"


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(object_names, st.integers(1, 12)), min_size=2, max_size=30, unique=True))
def test_runs_and_incarnations_never_share_a_name(pairs: list[tuple[str, int]]) -> None:
    """An app's runs and a driver's incarnations get their own names too (``a-1`` run 1 is not ``a`` run 11)."""
    assert len({naming.driver_name(name, n) for name, n in pairs}) == len(pairs)
    assert len({naming.pod_prefix(name, n) for name, n in pairs}) == len(pairs)


def test_a_dot_no_longer_collides() -> None:
    assert naming.driver_name("dot.app", 1) != naming.driver_name("dot-app", 1)
    assert naming.ui_service_name("dot.app") != naming.ui_service_name("dot-app")
    assert naming.label_value("dot.app") == "dot.app"


def test_names_that_need_no_change_keep_their_name() -> None:
    """Objects created before the hash existed keep their names."""
    assert naming.driver_name("spark-pi", 3) == "spark-pi-3"
    assert naming.ui_service_name("spark-pi") == "spark-pi-ui-svc"
    assert naming.driver_pod_name("spark-pi") == "spark-pi-driver"  # kubeflow's name for every run
    assert naming.driver_pod_name("spark-pi", "etl-main") == "etl-main"  # spec.driver.podName
    assert naming.label_value("spark-pi") == "spark-pi"
    assert naming.bounded("a" * 70, 63) == "a" * 54 + "-" + names.digest("a" * 70)
    assert naming.dns_label("1app") != naming.dns_label("s-1app") == "s-1app"
