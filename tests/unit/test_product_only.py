"""The operator ships only the operator (issue 27): the sparkop wheel holds the operator's packages
and requires nothing only the development tools use (devcluster/, tests/ and bench/ are used from a
checkout), and `sparkop demo`, which runs on the devcluster, says so in one line where it is missing.
The image is checked in tests/unit/test_operator_image.py."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from devcluster.images import project_folders, project_packages, project_sources, write_sources
from sparkop import cli, demo

DEVELOPMENT_ONLY = ("devcluster", "tests", "bench")


def test_the_wheel_holds_the_operator_packages_only_and_requires_no_cryptography(tmp_path: Path) -> None:
    source = tmp_path / "src"
    write_sources(project_sources(), source)  # what the image's wheel is built from
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(tmp_path / "wheels"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheels").glob("sparkop-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        requires = Parser().parsestr(archive.read(metadata).decode()).get_all("Requires-Dist") or []
    tops = {name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith(".dist-info")}
    assert tops == set(project_packages()) == {"sparkop"}, tops
    # Each layer folder the package links to is in it, as real files under sparkop/.
    for folder in set(project_folders()) - {"sparkop"}:
        assert f"sparkop/{folder}/__init__.py" in names, folder
    assert not [name for name in names if name.split("/", 1)[0] in DEVELOPMENT_ONLY]
    assert set(project_packages()).isdisjoint(DEVELOPMENT_ONLY)
    runtime = [requirement for requirement in requires if "extra ==" not in requirement]
    assert runtime and not [r for r in runtime if r.lower().startswith(("cryptography", "cffi", "pycparser"))], runtime
    assert any(r.startswith("cryptography") and 'extra == "test"' in r for r in requires), requires


def test_demo_without_the_devcluster_says_where_to_run_it_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "devcluster", None)  # `import devcluster` fails, as where it is not installed
    assert demo.main(name="no-devcluster", keep=False) == 1
    assert cli.main(["demo", "--name", "no-devcluster"]) == 1
    first, second = capsys.readouterr().err.splitlines(keepends=True)
    assert first == second == demo.NO_DEVCLUSTER + "\n"
    assert "devcluster" in first and "not shipped" in first and "`make demo`" in first
    assert "Traceback" not in first
