from __future__ import annotations

import pytest

from devcluster.javaprops import parse_properties


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", {"a": "1"}),
        ("a = spaced value  ", {"a": "spaced value  "}),
        ("a: colon", {"a": "colon"}),
        ("a whitespace", {"a": "whitespace"}),
        ("a==x", {"a": "=x"}),
        ("a : b", {"a": "b"}),
        ("empty", {"empty": ""}),
        ("# comment\n! also comment\n\n  b=2", {"b": "2"}),
        ("multi=one \\\n    two", {"multi": "one two"}),
        ("path=C:\\\\dir", {"path": "C:\\dir"}),
        ("k\\ with\\ spaces=v", {"k with spaces": "v"}),
        ("u=\\u0041\\tB", {"u": "A\tB"}),
        ("a=1\na=2", {"a": "2"}),
    ],
)
def test_parse(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_spark_generated_file() -> None:
    text = """#Java properties built from Kubernetes config map with name: spark-drv-conf-map
#Mon Jan 01 00:00:00 UTC 2024
spark.app.id=spark-0123456789abcdef
spark.executor.instances=3
spark.kubernetes.executor.podTemplateFile=/opt/spark/pod-template/pod-spec-template.yml
spark.driver.extraJavaOptions=-Dfoo\\=bar -Dx\\:y
"""
    props = parse_properties(text)
    assert props["spark.executor.instances"] == "3"
    assert props["spark.driver.extraJavaOptions"] == "-Dfoo=bar -Dx:y"
    assert len(props) == 4
