"""charts/sparkop rendered by `helm template` with the helm built here, and the parts of what it
renders that the chart's tests look at (tests/unit/test_chart.py, test_chart_kubeflow.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.helm import CHART

RELEASE_NAMESPACE = "sparkop-system"

Manifest = dict[str, Any]


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, check=False)


def render(
    helm: Path, tmp_path: Path, values: dict[str, Any] | None = None, release: str = "sparkop"
) -> list[Manifest]:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values or {}))
    result = run_helm(helm, "template", release, str(CHART), "-n", RELEASE_NAMESPACE, "-f", str(values_file))
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def of_kind(objects: list[Manifest], kind: str) -> list[Manifest]:
    return [o for o in objects if o["kind"] == kind]


def deployment(objects: list[Manifest]) -> Manifest:
    (found,) = of_kind(objects, "Deployment")
    return found


def container(objects: list[Manifest]) -> Manifest:
    """The operator's container (a sidecar may follow it)."""
    found = deployment(objects)["spec"]["template"]["spec"]["containers"][0]
    assert found["name"] == "sparkop"
    return dict(found)


def resources_of(role: Manifest) -> set[str]:
    return {resource for rule in role["rules"] for resource in rule["resources"]}
