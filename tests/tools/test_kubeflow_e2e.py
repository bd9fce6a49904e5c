"""bench/kubeflow_e2e.py: kubeflow's suite with only its install replaced, and its report read whole."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import kubeflow_e2e  # noqa: E402

from devcluster import scheduler_crds  # noqa: E402


@pytest.fixture(scope="module")
def suite_dir() -> Path:
    return scheduler_crds.module_dir(kubeflow_e2e.MODULE, kubeflow_e2e.SUITE_VERSION) / "test" / "e2e"


def test_only_the_install_changes_and_every_spec_file_is_kubeflows(suite_dir: Path) -> None:
    original = (suite_dir / "suite_test.go").read_text()
    patched = kubeflow_e2e.patched_suite(original)
    # What the suite calls is now sparkop_install_test.go's; kubeflow's own is kept, renamed.
    install = kubeflow_e2e.INSTALL_FILE.read_text()
    for name in ("installViaHelm", "uninstallViaHelm", "waitForMutatingWebhookReady", "waitForValidatingWebhookReady"):
        assert f"func {name}(" in install
        assert f"func {name}(" not in patched and f"func kubeflow{name[0].upper()}{name[1:]}(" in patched
    assert "sparkopKubeflowCRDs()" in patched and 'filepath.Join("..", "..", "config", "crd", "bases")' not in patched
    # Nothing else of the suite moved: BeforeSuite/AfterSuite still call the same names in the same order.
    calls = re.compile(r"(?<!func )\b(installViaHelm|uninstallViaHelm|waitFor\w+Ready)\(")
    assert calls.findall(original) == calls.findall(patched)
    # The specs themselves are copied untouched (ensure_suite changes suite_test.go only).
    specs = sorted(p.name for p in suite_dir.glob("*_test.go") if p.name != "suite_test.go")
    assert specs, "kubeflow's spec files"


def test_a_changed_suite_is_refused() -> None:
    with pytest.raises(RuntimeError, match="the suite changed"):
        kubeflow_e2e.patched_suite("package e2e_test\n")


def test_every_spec_of_the_report_is_listed_with_its_failure() -> None:
    report = [
        {
            "SpecReports": [
                {"LeafNodeType": "BeforeSuite", "State": "passed", "RunTime": 2_000_000_000},
                {
                    "ContainerHierarchyTexts": ["Example SparkApplication", "spark-pi"],
                    "LeafNodeText": "should complete successfully",
                    "LeafNodeType": "It",
                    "State": "failed",
                    "RunTime": 61_500_000_000,
                    "Failure": {
                        "Message": "Expected\n    <bool>: false\nto be true",
                        "Location": {"FileName": "/x/test/e2e/sparkapplication_test.go", "LineNumber": 80},
                    },
                },
                {"ContainerHierarchyTexts": ["A"], "LeafNodeText": "b", "LeafNodeType": "It", "State": "skipped"},
            ]
        }
    ]
    results = kubeflow_e2e.spec_results(report)
    assert [(r.name, r.kind, r.state) for r in results] == [
        ("BeforeSuite", "BeforeSuite", "passed"),
        ("Example SparkApplication / spark-pi / should complete successfully", "It", "failed"),
        ("A / b", "It", "skipped"),
    ]
    assert results[1].seconds == 61.5 and results[1].location == "sparkapplication_test.go:80"
    assert "to be true" in results[1].message


def test_kubeflows_ci_values_are_installed_whole(suite_dir: Path) -> None:
    """Every value of kubeflow's ci-values.yaml reaches sparkop's chart: the namespace-filtering specs need
    spark.jobNamespaceSelector (sparkop's --namespace-selector); only what sparkop needs here is added."""
    module = suite_dir.parents[1]
    image = kubeflow_e2e.images.BuiltImage(name="sparkop", refs=(), archive=Path("/dev/null"), key="k")
    values, changed = kubeflow_e2e.chart_values(module, image)
    assert values["spark"] == {"jobNamespaces": ["default"], "jobNamespaceSelector": "spark=enabled"}
    assert (values["controller"]["kubeAPIQPS"], values["controller"]["kubeAPIBurst"]) == (100, 100)
    assert not [what for what in changed if what.startswith("left out")]
