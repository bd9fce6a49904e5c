"""The operator image: devcluster/images.py's build and the repository's Dockerfile are the same
image (base, Python, locked wheels, user, entrypoint, env), the lock is what the tests run
with, and the built image runs `sparkop` as its non-root user with nothing to write."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tomllib
from pathlib import Path

import pytest

from devcluster import images
from devcluster.images import (
    DEFAULT_PATH,
    DEV_CONSTRAINTS,
    NONROOT_GROUP,
    NONROOT_PASSWD,
    NONROOT_UID,
    OPERATOR_CONFIG,
    OPERATOR_LAUNCHER,
    PYTHON_BASE_RECIPE,
    REPO_DIR,
    REQUIREMENTS_LOCK,
    SITE_PACKAGES,
    canonical_name,
    dependencies_key,
    locked_versions,
    operator_key,
    project_folders,
    read_archive,
)

DOCKERFILE = REPO_DIR / "Dockerfile"


def _stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each a list of (INSTRUCTION, arguments), continuations joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    stages: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, arguments = line.strip().partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        stages[-1].append((instruction.upper(), arguments.strip()))
    return stages


def _all(stage: list[tuple[str, str]], instruction: str) -> list[str]:
    return [arguments for name, arguments in stage if name == instruction]


def _relative(path: Path) -> str:
    return path.relative_to(REPO_DIR).as_posix()


def test_both_builds_start_from_debian_bookworm_with_python3_and_ca_certificates_only() -> None:
    builder, final = _stages()
    assert _all(final, "FROM") == [f"docker.io/library/debian:{PYTHON_BASE_RECIPE.suite}-slim"]
    assert PYTHON_BASE_RECIPE.variant == "minbase"  # what the -slim images are
    (install,) = [run for run in _all(final, "RUN") if "apt-get install" in run]
    words = shlex.split(install.split("apt-get install", 1)[1].split("&&", 1)[0])
    assert "--no-install-recommends" in words and "APT::Install-Recommends false" in PYTHON_BASE_RECIPE.apt_options
    assert sorted(word for word in words if not word.startswith("-")) == sorted(PYTHON_BASE_RECIPE.packages)
    # The wheels are chosen for the final image's Python: the builder runs the same minor version.
    assert _all(builder, "FROM") == [
        f"docker.io/library/python:{images.IMAGE_PYTHON}-slim-{PYTHON_BASE_RECIPE.suite} AS install"
    ]
    assert f"/usr/local/lib/python{images.IMAGE_PYTHON}/dist-packages" == SITE_PACKAGES


def test_both_install_the_locked_wheels_and_the_sparkop_wheel_into_the_same_place() -> None:
    builder, final = _stages()
    deps, app = _all(builder, "RUN")
    lock = _relative(REQUIREMENTS_LOCK)
    assert f"-r {lock}" in deps and "--require-hashes" in deps and "--only-binary=:all:" in deps
    assert "--no-deps" in deps and "--no-deps" in app and app.split("&&")[0].rstrip().endswith(" .")
    assert f"{lock} {lock}" in _all(builder, "COPY")
    copied = {arguments.split()[0] for arguments in _all(builder, "COPY")}
    assert copied - {lock, "pyproject.toml"} == {*project_folders()}, "every wheel folder"
    assert _all(final, "COPY")[:2] == [f"--from=install /deps {SITE_PACKAGES}", f"--from=install /app {SITE_PACKAGES}"]
    assert f"{_relative(OPERATOR_LAUNCHER)} {OPERATOR_CONFIG.entrypoint[0]}" in _all(final, "COPY")
    (compile_run,) = [run for run in _all(final, "RUN") if "compileall" in run]
    assert f"--invalidation-mode unchecked-hash {SITE_PACKAGES}" in compile_run


def test_both_run_sparkop_as_the_same_non_root_user_with_the_same_env() -> None:
    _, final = _stages()
    assert _all(final, "USER") == [OPERATOR_CONFIG.user] == [f"{NONROOT_UID}:{NONROOT_UID}"]
    assert [json.loads(e) for e in _all(final, "ENTRYPOINT")] == [list(OPERATOR_CONFIG.entrypoint)]
    assert [json.loads(c) for c in _all(final, "CMD")] == [list(OPERATOR_CONFIG.cmd)] == [["run"]]
    (env,) = _all(final, "ENV")
    # PATH is Debian's image default in the Dockerfile; the archive writes it out.
    assert sorted(env.split()) == sorted(e for e in OPERATOR_CONFIG.env if not e.startswith("PATH="))
    assert f"PATH={DEFAULT_PATH}" in OPERATOR_CONFIG.env
    (accounts,) = [run for run in _all(final, "RUN") if "/etc/passwd" in run]
    assert f"echo '{NONROOT_PASSWD}' >> /etc/passwd" in accounts
    assert f"echo '{NONROOT_GROUP}' >> /etc/group" in accounts
    assert f"chown {NONROOT_UID}:{NONROOT_UID} /home/nonroot" in accounts
    assert OPERATOR_LAUNCHER.stat().st_mode & 0o111, "COPY keeps the launcher's mode: it must be executable"
    assert OPERATOR_LAUNCHER.read_text().startswith("#!/usr/bin/python3\n")


def _requirement_name(requirement: str) -> str:
    return canonical_name(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])


def test_the_lock_pins_every_runtime_dependency_at_the_version_the_tests_run_with() -> None:
    locked = locked_versions(REQUIREMENTS_LOCK.read_text())
    for requirement in images.runtime_requirements():
        name = _requirement_name(requirement)
        assert name in locked, f"{name} is not in {REQUIREMENTS_LOCK}: run python -m devcluster.images lock"
    pinned = locked_versions(DEV_CONSTRAINTS.read_text())
    for name, version in locked.items():
        assert pinned.get(name) == version, (
            f"{name} is {version} in {REQUIREMENTS_LOCK} but {pinned.get(name)} in {DEV_CONSTRAINTS}:"
            " run python -m devcluster.images lock, which writes both"
        )
    for line in REQUIREMENTS_LOCK.read_text().splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r"[a-z0-9-]+==\S+ --hash=sha256:[0-9a-f]{64}", line), line


def test_the_dev_venv_is_installed_at_the_pinned_versions() -> None:
    # A release upstream between two runs must not change what a fresh clone tests: the Makefile
    # installs .venv held to DEV_CONSTRAINTS, and this holds the venv the tests run in to it.
    pinned = locked_versions(DEV_CONSTRAINTS.read_text())
    extras = tomllib.loads((images.REPO_DIR / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for requirement in [*images.runtime_requirements(), *extras["test"]]:
        name = _requirement_name(requirement)
        assert name in pinned, f"{name} is not in {DEV_CONSTRAINTS}: run python -m devcluster.images lock"
    for name, version in pinned.items():
        installed = importlib.metadata.version(name)
        assert installed == version, (
            f"{name} is {installed} here but {version} in {DEV_CONSTRAINTS}: `make test` reinstalls .venv"
            f" held to it; to move {name}, .venv/bin/pip install --upgrade {name}, then"
            " python -m devcluster.images lock"
        )
    for line in DEV_CONSTRAINTS.read_text().splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r"[a-z0-9-]+==\S+", line), line


def test_the_lock_and_every_source_file_are_part_of_the_keys() -> None:
    lock = REQUIREMENTS_LOCK.read_bytes()
    assert dependencies_key(lock) != dependencies_key(lock + b"six==1.17.0\n")
    sources = [("sparkop/cli.py", b"print(1)\n"), ("launcher", b"#!/usr/bin/python3\n")]
    key = operator_key("base", "deps", sources)
    assert key == operator_key("base", "deps", list(reversed(sources)))
    assert key != operator_key("base", "deps", [("sparkop/cli.py", b"print(2)\n"), sources[1]])
    assert key != operator_key("base", "other-deps", sources)
    assert key != operator_key("other-base", "deps", sources)
    assert "launcher" in dict(images.project_sources())


@pytest.fixture(scope="module")
def operator_image() -> images.BuiltImage:
    if shutil.which("mmdebstrap") is None:
        pytest.skip("mmdebstrap is not installed (python -m devcluster prepare installs it)")
    return images.ensure_operator_image(lambda line: None)


def test_the_built_image_is_tagged_and_configured_like_the_dockerfile(operator_image: images.BuiltImage) -> None:
    version = images.project_version()
    assert operator_image.refs[:2] == (f"sparkop.io/sparkop:{version}", "sparkop.io/sparkop:latest")
    manifest, diff_ids, layers = read_archive(operator_image.archive)
    assert len(diff_ids) == 3, "python base, locked dependencies, sparkop"
    with tarfile.open(operator_image.archive) as tar:
        handle = tar.extractfile(str(manifest["Config"]))
        assert handle is not None
        config = json.load(handle)["config"]
    assert config == {
        "Entrypoint": list(OPERATOR_CONFIG.entrypoint),
        "Cmd": ["run"],
        "Env": list(OPERATOR_CONFIG.env),
        "WorkingDir": "/",
        "User": f"{NONROOT_UID}:{NONROOT_UID}",
    }
    with layers[1].open() as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
        dist_infos = {m.name.split("/")[-1] for m in tar if m.name.endswith(".dist-info") and m.isdir()}
    installed = {
        canonical_name(d.removesuffix(".dist-info").rsplit("-", 1)[0]): d.removesuffix(".dist-info").rsplit("-", 1)[1]
        for d in dist_infos
    }
    assert installed == locked_versions(REQUIREMENTS_LOCK.read_text())


def _unpack(archive: Path, root: Path) -> None:
    _, _, layers = read_archive(archive)
    for layer in layers:
        with layer.open() as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            tar.extractall(root, filter="tar")


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_the_image_runs_sparkop_as_nonroot_from_a_read_only_tree_with_its_bytecode(
    operator_image: images.BuiltImage, tmp_path: Path
) -> None:
    root = tmp_path / "rootfs"
    root.mkdir()
    _unpack(operator_image.archive, root)
    # What the pod's readOnlyRootFilesystem allows: nothing but /tmp is writable for uid 65532.
    writable = subprocess.run(
        ["find", str(root), "-path", f"{root}/tmp", "-prune", "-o", "-perm", "-o+w", "-type", "f", "-print"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert writable == []
    env = {"PATH": DEFAULT_PATH, **dict(e.split("=", 1) for e in OPERATOR_CONFIG.env)}
    check = (
        "import importlib.metadata, os, sys, sparkop.operator, sparkop.core.kube;"
        "print(os.getuid(), importlib.metadata.version('sparkop'), sys.version_info[:2],"
        " sparkop.operator.__cached__ is not None and os.path.exists(sparkop.operator.__cached__))"
    )
    ran = subprocess.run(
        ["chroot", f"--userspec={NONROOT_UID}:{NONROOT_UID}", str(root), "/usr/bin/python3", "-c", check],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split(None, 2)[:2] == [str(NONROOT_UID), images.project_version()]
    assert ran.stdout.strip().endswith(f"({images.IMAGE_PYTHON.replace('.', ', ')}) True")
    pyc = Path(str(root) + "/" + SITE_PACKAGES) / "sparkop" / "__pycache__" / "cli.cpython-311.pyc"
    assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b01, "hash-based bytecode, not checked against mtimes"
    helped = subprocess.run(
        ["chroot", f"--userspec={NONROOT_UID}:{NONROOT_UID}", str(root), *OPERATOR_CONFIG.entrypoint, "run", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert helped.returncode == 0 and "--metrics-port" in helped.stdout, helped.stderr


def test_only_the_newest_operator_archives_are_kept(tmp_path: Path) -> None:
    names = [f"operator-{index:016x}.tar" for index in range(5)]
    for age, name in enumerate(reversed(names)):
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (1000 + age, 1000 + age))  # names[4] oldest ... names[0] newest
    (tmp_path / "operator-deps-0123456789abcdef.layer.tar").write_bytes(b"")
    (tmp_path / "python-base-0123456789abcdef.tar").write_bytes(b"")
    images._prune_operator_archives(tmp_path, keep=tmp_path / names[3], kept=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [names[0], names[1], names[3], "operator-deps-0123456789abcdef.layer.tar", "python-base-0123456789abcdef.tar"]
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_the_image_holds_the_operator_only_not_the_devcluster_nor_its_dependencies(
    operator_image: images.BuiltImage, tmp_path: Path
) -> None:
    root = tmp_path / "rootfs"
    root.mkdir()
    _unpack(operator_image.archive, root)
    env = {"PATH": DEFAULT_PATH, **dict(e.split("=", 1) for e in OPERATOR_CONFIG.env)}

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["chroot", f"--userspec={NONROOT_UID}:{NONROOT_UID}", str(root), *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    for development_only in ("devcluster", "cryptography", "tests", "bench"):
        imported = run("/usr/bin/python3", "-c", f"import {development_only}")
        assert imported.returncode == 1 and "ModuleNotFoundError" in imported.stderr, (development_only, imported)
    site = Path(str(root) + SITE_PACKAGES)
    assert not list(site.glob("devcluster*")) and not list(site.glob("cryptography*")), sorted(site.iterdir())
    helped = run(*OPERATOR_CONFIG.entrypoint, "run", "--help")
    assert helped.returncode == 0 and "--controllers" in helped.stdout, helped.stderr
