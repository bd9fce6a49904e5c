"""Container images for the devcluster's real nodes, built on this machine (no registry is reachable).

Each image is a docker-archive tar (`manifest.json` + config JSON + uncompressed layer tars), the
format `ctr -n k8s.io images import` reads, cached as `<cache>/images/<name>-<key>.tar` where the
key hashes everything that goes into the image: an existing archive is complete (written to a
temporary name and renamed) and costs nothing to reuse.

- base: one layer from mmdebstrap (Debian bookworm with a JRE, Python 3 and a few tools), also the
  general image tests run commands in;
- spark-<version>: base + a layer with that version's pyspark distribution as SPARK_HOME=/opt/spark,
  a SparkPi examples jar compiled here, and an entrypoint that behaves like the official image's;
  tagged with the names users already write (`apache/spark:<version>`);
- pause: the pod sandbox image, one static binary built elsewhere;
- operator: sparkop itself (`sparkop.io/sparkop:<version>`), on a rootfs of its own with Python 3
  and CA certificates only (the base's JRE would treble its size for nothing), a layer of its
  pinned dependencies (deploy/requirements.lock, cp311 manylinux wheels) and a layer with the
  sparkop wheel, the operator's packages only (pyproject's packages.find: not devcluster, tests
  or bench, which are used from a checkout); the repository's Dockerfile builds the same image with a container engine
  (tests/unit/test_operator_image.py holds the two together).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from devcluster.build import read_versions
from devcluster.locks import held
from devcluster.paths import PACKAGE_DIR, cache_root

Log = Callable[[str], None]

# Bump when the archive writer or an image's layout changes in a way the recipes below do not show.
IMAGE_FORMAT = 1
SPARK_IMAGE_DIR = PACKAGE_DIR / "sparkimage"
# Every timestamp we write (tar mtimes, config `created`, jar entries), so rebuilding the same
# inputs gives the same bytes; mmdebstrap clamps its own with SOURCE_DATE_EPOCH.
SOURCE_DATE_EPOCH = 1700000000
CREATED = "2023-11-14T22:13:20Z"
BASE_REPO = "sparkop.io/devcluster/base"
PAUSE_REPO = "sparkop.io/devcluster/pause"
SPARK_UID = 185
SPARK_HOME = "/opt/spark"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
EXPECTED_BASE_BUILD_S = 60
# The operator image. Its Dockerfile twin is REPO_DIR/Dockerfile.
REPO_DIR = PACKAGE_DIR.parent
OPERATOR_REPO = "sparkop.io/sparkop"
PYTHON_BASE_REPO = "sparkop.io/devcluster/python-base"
REQUIREMENTS_LOCK = REPO_DIR / "deploy" / "requirements.lock"
DEV_CONSTRAINTS = REPO_DIR / "tests" / "constraints.txt"
OPERATOR_LAUNCHER = REPO_DIR / "deploy" / "image" / "sparkop"
# Debian bookworm's python3 is 3.11: the wheels, the bytecode and the install path follow it.
IMAGE_PYTHON = "3.11"
SITE_PACKAGES = f"/usr/local/lib/python{IMAGE_PYTHON}/dist-packages"
# The wheels pip would choose on bookworm itself: glibc 2.36, so every manylinux tag up to
# 2_36, under both its PEP 600 name and its legacy alias (pip does not expand --platform).
IMAGE_GLIBC_MINOR = 36
MANYLINUX_ALIASES = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
WHEEL_PLATFORM = (
    *(
        option
        for minor in range(IMAGE_GLIBC_MINOR, 4, -1)
        for tag in (f"manylinux_2_{minor}", MANYLINUX_ALIASES.get(minor))
        if tag
        for option in ("--platform", f"{tag}_x86_64")
    ),
    "--implementation",
    "cp",
    "--abi",
    "cp311",
)
WHEEL_PYTHON = ("--python-version", IMAGE_PYTHON)
# distroless's "nonroot": a uid no host account has, so a pod gains nothing by sharing it.
NONROOT_UID = 65532
NONROOT_PASSWD = f"nonroot:x:{NONROOT_UID}:{NONROOT_UID}:nonroot:/home/nonroot:/usr/sbin/nologin"
NONROOT_GROUP = f"nonroot:x:{NONROOT_UID}:"
OPERATOR_ARCHIVES_KEPT = 3


class ImageError(RuntimeError):
    pass


@dataclass(frozen=True)
class BuiltImage:
    name: str
    refs: tuple[str, ...]
    archive: Path
    key: str


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an image config a container runtime reads."""

    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = (f"PATH={DEFAULT_PATH}",)
    working_dir: str = "/"
    user: str = ""


@dataclass(frozen=True)
class BaseRecipe:
    suite: str = "bookworm"
    variant: str = "apt"
    packages: tuple[str, ...] = (
        "bash",
        "bind9-dnsutils",
        "ca-certificates",
        "coreutils",
        "curl",
        "libnss-wrapper",  # the Spark entrypoint's passwd entry for a uid the image does not know
        "openjdk-17-jre-headless",
        "procps",
        "python3",
        "tini",
    )
    # Documentation and translations are a fifth of the rootfs and no container reads them.
    dpkg_options: tuple[str, ...] = (
        "path-exclude=/usr/share/doc/*",
        "path-include=/usr/share/doc/*/copyright",
        "path-exclude=/usr/share/man/*",
        "path-exclude=/usr/share/info/*",
        "path-exclude=/usr/share/locale/*",
    )
    # openjdk's postinst links its man pages into man1 and fails when that directory is missing.
    essential_hooks: tuple[str, ...] = ('mkdir -p "$1/usr/share/man/man1"',)

    def mmdebstrap_command(self, sources: Path, target: Path) -> list[str]:
        return [
            "mmdebstrap",
            f"--variant={self.variant}",
            f"--include={','.join(self.packages)}",
            *(f"--dpkgopt={option}" for option in self.dpkg_options),
            *(f"--essential-hook={hook}" for hook in self.essential_hooks),
            "--format=tar",
            self.suite,
            str(target),
            str(sources),
        ]


BASE_RECIPE = BaseRecipe()
BASE_CONFIG = ImageConfig(entrypoint=(), cmd=("/bin/bash",))
PAUSE_CONFIG = ImageConfig(entrypoint=("/pause",), user="65535:65535")


@dataclass(frozen=True)
class SlimRecipe(BaseRecipe):
    """A rootfs set up like Debian's container images: /usr merged by mmdebstrap's hook (the
    usrmerge package would bring perl along) and Recommends left out."""

    hook_dirs: tuple[str, ...] = ("/usr/share/mmdebstrap/hooks/merged-usr",)
    apt_options: tuple[str, ...] = ("APT::Install-Recommends false",)

    def mmdebstrap_command(self, sources: Path, target: Path) -> list[str]:
        command = super().mmdebstrap_command(sources, target)
        extra = [*(f"--hook-dir={d}" for d in self.hook_dirs), *(f"--aptopt={o}" for o in self.apt_options)]
        return [command[0], *extra, *command[1:]]


# debian:bookworm-slim (minbase, no documentation) plus what `apt-get install
# --no-install-recommends python3 ca-certificates` adds: the Dockerfile's final stage.
PYTHON_BASE_RECIPE = SlimRecipe(variant="minbase", packages=("ca-certificates", "python3"), essential_hooks=())
PYTHON_BASE_CONFIG = ImageConfig(entrypoint=(), cmd=("/usr/bin/python3",))
# Nothing is written outside /tmp: the bytecode is compiled into the image (checked by hash, not
# by mtime, so it is used as it is) and Python is told not to try; logs are not held back.
OPERATOR_CONFIG = ImageConfig(
    entrypoint=("/usr/local/bin/sparkop",),
    cmd=("run",),
    env=(f"PATH={DEFAULT_PATH}", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"),
    user=f"{NONROOT_UID}:{NONROOT_UID}",
)


@dataclass(frozen=True)
class Layer:
    """An uncompressed layer tar, read from wherever it is stored."""

    diff_id: str  # "sha256:<hex>" of the tar's bytes
    size: int
    open: Callable[[], AbstractContextManager[IO[bytes]]] = field(compare=False)


# ---------------------------------------------------------------------------------------- names


def normalise_ref(ref: str) -> str:
    """Docker's normalisation of an image reference, as containerd's CRI applies it to a pod's
    image: `apache/spark:3.5.9` -> `docker.io/apache/spark:3.5.9`, `busybox` ->
    `docker.io/library/busybox:latest`."""
    if not ref or ref != ref.strip():
        raise ImageError(f"image reference {ref!r} is empty or has spaces")
    name, at, digest = ref.partition("@")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        domain, remainder = first, rest
    else:
        domain, remainder = "docker.io", name
    if domain == "index.docker.io":
        domain = "docker.io"
    if domain == "docker.io" and "/" not in remainder:
        remainder = f"library/{remainder}"
    last = remainder.rsplit("/", 1)[-1]
    if not at and ":" not in last:
        remainder = f"{remainder}:latest"
    return f"{domain}/{remainder}{at}{digest}"


def pinned_spark_versions() -> tuple[str, ...]:
    """The pinned Spark versions (`SPARK_IMAGE_VERSIONS` in versions.env)."""
    listed = read_versions().get("SPARK_IMAGE_VERSIONS", "")
    return tuple(v.strip() for v in listed.split(",") if v.strip())


def spark_refs(version: str, scala: str) -> tuple[str, ...]:
    """The names the official Spark images carry, so manifests run here without edits."""
    return (
        f"docker.io/apache/spark:{version}",
        f"docker.io/apache/spark:{version}-python3",
        f"docker.io/apache/spark:{version}-scala{scala}-java17-python3-ubuntu",
        f"docker.io/library/spark:{version}",
        f"docker.io/library/spark:{version}-python3",
    )


def examples_jar_name(version: str, scala: str) -> str:
    return f"spark-examples_{scala}-{version}.jar"


# The examples jar under a name without versions: kubeflow's examples (since they moved to the
# official Spark 3.5.3 image) and its end-to-end suite, which runs them on the official images, name
# SparkPi's jar so.
EXAMPLES_JAR_LINK = "spark-examples.jar"


# ----------------------------------------------------------------------------- docker-archive


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def file_layer(path: Path) -> Layer:
    return Layer(f"sha256:{file_sha256(path)}", path.stat().st_size, lambda: path.open("rb"))


def image_config_json(config: ImageConfig, layers: Sequence[Layer], history: Sequence[str]) -> bytes:
    runtime: dict[str, object] = {"Env": list(config.env), "WorkingDir": config.working_dir}
    if config.entrypoint:
        runtime["Entrypoint"] = list(config.entrypoint)
    if config.cmd:
        runtime["Cmd"] = list(config.cmd)
    if config.user:
        runtime["User"] = config.user
    document = {
        "architecture": "amd64",
        "os": "linux",
        "created": CREATED,
        "config": runtime,
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [{"created": CREATED, "created_by": line} for line in history],
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def write_docker_archive(
    target: Path, layers: Sequence[Layer], config: ImageConfig, refs: Sequence[str], history: Sequence[str]
) -> None:
    """Write `target` atomically: the image's layers, its config and a manifest naming `refs`."""
    config_bytes = image_config_json(config, layers, history)
    config_name = f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    layer_names = [f"{layer.diff_id.removeprefix('sha256:')}/layer.tar" for layer in layers]
    manifest = [{"Config": config_name, "RepoTags": list(refs), "Layers": layer_names}]
    manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    try:
        with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as archive:
            for layer, name in sorted(zip(layers, layer_names, strict=True), key=lambda pair: pair[1]):
                archive.addfile(_directory_info(name.split("/")[0]))
                with layer.open() as source:
                    archive.addfile(_file_info(name, layer.size), source)
            archive.addfile(_file_info(config_name, len(config_bytes)), io.BytesIO(config_bytes))
            archive.addfile(_file_info("manifest.json", len(manifest_bytes)), io.BytesIO(manifest_bytes))
        tmp.rename(target)
    finally:
        tmp.unlink(missing_ok=True)


def read_archive(archive: Path) -> tuple[dict[str, object], list[str], list[Layer]]:
    """The manifest entry, the config's diff_ids and the layers of a single-image docker-archive."""
    with tarfile.open(archive) as tar:
        manifest = json.loads(_member_bytes(tar, "manifest.json"))[0]
        config = json.loads(_member_bytes(tar, manifest["Config"]))
        diff_ids: list[str] = config["rootfs"]["diff_ids"]
        members = [tar.getmember(name) for name in manifest["Layers"]]
    layers = [
        Layer(diff_id, member.size, _member_opener(archive, member.name))
        for diff_id, member in zip(diff_ids, members, strict=True)
    ]
    return manifest, diff_ids, layers


def _member_bytes(tar: tarfile.TarFile, name: str) -> bytes:
    handle = tar.extractfile(name)
    if handle is None:
        raise ImageError(f"{name} is not a file in the image archive")
    return handle.read()


def _member_opener(archive: Path, name: str) -> Callable[[], AbstractContextManager[IO[bytes]]]:
    @contextmanager
    def open_member() -> Iterator[IO[bytes]]:
        with tarfile.open(archive) as tar:
            handle = tar.extractfile(name)
            if handle is None:
                raise ImageError(f"{archive}: {name} is not a file")
            yield handle

    return open_member


def _file_info(name: str, size: int, mode: int = 0o644, uid: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, mode, SOURCE_DATE_EPOCH
    info.uid = info.gid = uid
    return info


def _directory_info(name: str, mode: int = 0o755, uid: int = 0) -> tarfile.TarInfo:
    info = _file_info(name, 0, mode, uid)
    info.type = tarfile.DIRTYPE
    return info


# ------------------------------------------------------------------------------------- layers


@dataclass
class LayerBuilder:
    """Entries of a layer we write ourselves, written sorted with fixed owners and mtimes."""

    entries: dict[str, tuple[tarfile.TarInfo, Path | bytes | None]] = field(default_factory=dict)

    def directory(self, name: str, mode: int = 0o755, uid: int = 0) -> None:
        self._parents(name)
        self.entries[name] = (_directory_info(name, mode, uid), None)

    def file(self, name: str, content: Path | bytes, mode: int = 0o644) -> None:
        self._parents(name)
        size = len(content) if isinstance(content, bytes) else content.stat().st_size
        self.entries[name] = (_file_info(name, size, mode), content)

    def symlink(self, name: str, target: str) -> None:
        self._parents(name)
        info = _file_info(name, 0, 0o777)
        info.type, info.linkname = tarfile.SYMTYPE, target
        self.entries[name] = (info, None)

    def tree(self, prefix: str, source: Path, skip: Callable[[Path], bool]) -> None:
        """Copy `source` under `prefix`: regular files 0644, or 0755 when the owner may run them."""
        for path in sorted(source.rglob("*")):
            if skip(path):
                continue
            name = f"{prefix}/{path.relative_to(source).as_posix()}"
            if path.is_symlink():
                self.symlink(name, os.readlink(path))
            elif path.is_dir():
                self.directory(name)
            elif path.is_file():
                self.file(name, path, 0o755 if path.stat().st_mode & 0o100 else 0o644)

    def _parents(self, name: str) -> None:
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/".join(parts[:depth])
            if parent not in self.entries:
                self.entries[parent] = (_directory_info(parent), None)

    def write(self, target: Path) -> Layer:
        with tarfile.open(target, "w", format=tarfile.GNU_FORMAT) as tar:
            for name in sorted(self.entries):
                info, content = self.entries[name]
                if isinstance(content, Path):
                    with content.open("rb") as handle:
                        tar.addfile(info, handle)
                elif isinstance(content, bytes):
                    tar.addfile(info, io.BytesIO(content))
                else:
                    tar.addfile(info)
        return file_layer(target)


def normalise_rootfs_tar(source: Path, target: Path) -> Layer:
    """mmdebstrap's tar as a layer: names without the leading `./`, and no device nodes (the
    runtime mounts /dev; device nodes in a layer only fail to unpack without privileges)."""
    with tarfile.open(source) as src, tarfile.open(target, "w", format=tarfile.GNU_FORMAT) as dst:
        for member in src:
            name = member.name.removeprefix("./").rstrip("/")
            if name in ("", ".") or member.ischr() or member.isblk() or member.isfifo():
                continue
            member.name = name
            if member.islnk():
                member.linkname = member.linkname.removeprefix("./")
            if member.isfile():
                dst.addfile(member, src.extractfile(member))
            else:
                dst.addfile(member)
    return file_layer(target)


# ------------------------------------------------------------------------------------- caching


def images_dir() -> Path:
    return cache_root() / "images"


def content_key(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in (str(IMAGE_FORMAT), *parts):
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:16]


def base_key(sources: bytes, recipe: BaseRecipe = BASE_RECIPE) -> str:
    return content_key("base", repr(recipe), repr(BASE_CONFIG), sources)


def spark_key(base: str, version: str, record: bytes, image_files: Sequence[tuple[str, bytes]]) -> str:
    files = [part for name, data in sorted(image_files) for part in (name, data)]
    return content_key("spark", base, version, str(SPARK_UID), DEFAULT_PATH, EXAMPLES_JAR_LINK, record, *files)


def pause_key(binary_sha256: str) -> str:
    return content_key("pause", repr(PAUSE_CONFIG), binary_sha256)


def python_base_key(sources: bytes) -> str:
    return content_key("python-base", repr(PYTHON_BASE_RECIPE), repr(PYTHON_BASE_CONFIG), sources)


def dependencies_key(lock: bytes) -> str:
    """The dependency layer's key: the lock, where and for which Python it is installed."""
    return content_key("operator-deps", lock, SITE_PACKAGES, *WHEEL_PLATFORM, *WHEEL_PYTHON, _bytecode_tag())


def operator_key(python_base: str, dependencies: str, sources: Sequence[tuple[str, bytes]]) -> str:
    files = [part for name, data in sorted(sources) for part in (name, data)]
    return content_key(
        "operator", python_base, dependencies, repr(OPERATOR_CONFIG), NONROOT_PASSWD, _bytecode_tag(), *files
    )


def _bytecode_tag() -> str:
    # Bytecode compiled by another Python than the image's would be ignored there; see _compile.
    return sys.implementation.cache_tag or ""


def project_version(repo: Path = REPO_DIR) -> str:
    return str(tomllib.loads((repo / "pyproject.toml").read_text())["project"]["version"])


def operator_refs(version: str, key: str) -> tuple[str, ...]:
    """`:<version>` for the chart, `:latest` for people, `:<key>` for a test that wants exactly this build."""
    return (f"{OPERATOR_REPO}:{version}", f"{OPERATOR_REPO}:latest", f"{OPERATOR_REPO}:{key}")


def project_packages(repo: Path = REPO_DIR) -> list[str]:
    """The top-level packages the sparkop wheel holds (pyproject's packages.find include): sparkop
    alone, never devcluster (this module's own package, a development tool)."""
    patterns = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    names = {pattern.rstrip("*") for pattern in patterns["include"]}
    return sorted(name for name in names if (repo / name / "__init__.py").is_file())


def project_folders(repo: Path = REPO_DIR) -> list[str]:
    """The repository folders the wheel is built from: each package's own, and the layer folders its
    symlinks stand for (sparkop/core links to core/)."""
    folders = set(project_packages(repo))
    for package in project_packages(repo):
        for entry in (repo / package).iterdir():
            if entry.is_symlink() and entry.is_dir():
                folders.add(entry.resolve().relative_to(repo.resolve()).as_posix())
    return sorted(folders)


# How project_sources gives a symlink: this mark, then its target.
LINK_MARK: Final = b"symlink -> "


def project_sources(repo: Path = REPO_DIR) -> list[tuple[str, bytes]]:
    """Everything the sparkop wheel is built from, and the launcher: the operator layer's inputs (a
    file by its content, a symlink by LINK_MARK and its target; write_sources lays them out)."""
    found = [
        ("pyproject.toml", (repo / "pyproject.toml").read_bytes()),
        ("README.md", (repo / "README.md").read_bytes()),
    ]
    for folder in project_folders(repo):
        for path in sorted((repo / folder).rglob("*")):
            name = path.relative_to(repo).as_posix()
            if path.is_symlink():
                found.append((name, LINK_MARK + os.readlink(path).encode()))
            elif path.is_file() and "__pycache__" not in path.parts:
                found.append((name, path.read_bytes()))
    found.append(("launcher", OPERATOR_LAUNCHER.read_bytes()))
    return found


def write_sources(sources: Iterable[tuple[str, bytes]], into: Path) -> None:
    """Lay project_sources out as a source tree the wheel builds from (the launcher aside)."""
    for name, content in sources:
        if name == "launcher":
            continue
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if content.startswith(LINK_MARK):
            target.symlink_to(content[len(LINK_MARK) :].decode())
        else:
            target.write_bytes(content)


def spark_image_files() -> list[tuple[str, bytes]]:
    return [(path.name, path.read_bytes()) for path in sorted(SPARK_IMAGE_DIR.iterdir()) if path.is_file()]


def _exclusive(lock_path: Path, log: Log) -> AbstractContextManager[None]:
    return held(lock_path, lambda holder: log(f"[images] another process (pid {holder}) is building images; waiting"))


def _size(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.0f} MB"


def _run(command: Sequence[str], what: str, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise ImageError(f"{what} failed (exit {result.returncode}): {' '.join(command)}\n{tail}")


# -------------------------------------------------------------------------------------- images


def ensure_images(
    log: Log = print,
    *,
    pause_binary: Path | None = None,
    spark_versions: tuple[str, ...] | None = None,
) -> list[BuiltImage]:
    """The base image, a Spark image per version (default: the pinned ones), given its binary
    the pause image, and the operator's image, each built unless its archive is already cached."""
    versions = pinned_spark_versions() if spark_versions is None else spark_versions
    root = images_dir()
    root.mkdir(parents=True, exist_ok=True)
    with _exclusive(root / ".lock", log):
        for stale in root.glob("*.tmp-*"):
            stale.unlink(missing_ok=True) if stale.is_file() else shutil.rmtree(stale, ignore_errors=True)
        base = _ensure_base(root, log)
        images = [base]
        images.extend(_ensure_spark(root, base, version, log) for version in versions)
        if pause_binary is not None:
            images.append(_ensure_pause(root, pause_binary, log))
        images.append(_ensure_operator(root, log))
    return images


def ensure_operator_image(log: Log = print) -> BuiltImage:
    """The operator's image alone, built unless cached."""
    root = images_dir()
    root.mkdir(parents=True, exist_ok=True)
    with _exclusive(root / ".lock", log):
        return _ensure_operator(root, log)


def _cached(name: str, refs: tuple[str, ...], archive: Path, key: str, log: Log) -> BuiltImage | None:
    if not archive.is_file():
        return None
    log(f"[images] {name}: cached {archive} ({_size(archive)})")
    return BuiltImage(name, refs, archive, key)


def _debian_sources() -> bytes:
    if not DEBIAN_SOURCES.is_file():
        raise ImageError(
            f"{DEBIAN_SOURCES} is missing: the base images' packages come from this machine's Debian mirror"
        )
    return DEBIAN_SOURCES.read_bytes()


def _ensure_base(root: Path, log: Log) -> BuiltImage:
    key = base_key(_debian_sources())
    return _ensure_rootfs_image(root, "base", BASE_REPO, key, BASE_RECIPE, BASE_CONFIG, log)


def _ensure_python_base(root: Path, log: Log) -> BuiltImage:
    key = python_base_key(_debian_sources())
    return _ensure_rootfs_image(root, "python-base", PYTHON_BASE_REPO, key, PYTHON_BASE_RECIPE, PYTHON_BASE_CONFIG, log)


def _ensure_rootfs_image(
    root: Path, name: str, repo: str, key: str, recipe: BaseRecipe, config: ImageConfig, log: Log
) -> BuiltImage:
    """One mmdebstrap rootfs as a one-layer image."""
    refs = (f"{repo}:{key}", f"{repo}:latest")
    archive = root / f"{name}-{key}.tar"
    if cached := _cached(name, refs, archive, key, log):
        return cached
    if shutil.which("mmdebstrap") is None:
        raise ImageError("mmdebstrap is not installed: apt-get install mmdebstrap")
    started = time.monotonic()
    packages = len(recipe.packages)
    log(f"[images] {name}: mmdebstrap {recipe.suite} with {packages} packages (~{EXPECTED_BASE_BUILD_S}s)")
    with tempfile.TemporaryDirectory(dir=root, prefix=f"{name}.tmp-") as work:
        rootfs = Path(work) / "rootfs.tar"
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH)}
        _run(recipe.mmdebstrap_command(DEBIAN_SOURCES, rootfs), "mmdebstrap", env=env)
        layer = normalise_rootfs_tar(rootfs, Path(work) / "layer.tar")
        rootfs.unlink()
        history = [" ".join(recipe.mmdebstrap_command(DEBIAN_SOURCES, Path("rootfs.tar")))]
        write_docker_archive(archive, [layer], config, refs, history)
    log(f"[images] {name}: built {archive} ({_size(archive)}, {time.monotonic() - started:.0f}s)")
    return BuiltImage(name, refs, archive, key)


def pyspark_dir(version: str) -> Path:
    """Where pyspark <version> is installed (`pip install --target`), shared with the conformance tests."""
    return cache_root() / f"pyspark-{version}"


def ensure_pyspark(version: str, log: Log) -> Path:
    target = pyspark_dir(version)
    if not (target / "pyspark" / "bin" / "spark-submit").is_file():
        log(f"[images] installing pyspark=={version} into {target}")
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(target),
                f"pyspark=={version}",
            ],
            f"pip install pyspark=={version}",
        )
    return target


def scala_version(spark_home: Path, version: str) -> str:
    for jar in spark_home.glob(f"jars/spark-core_*-{version}.jar"):
        match = re.fullmatch(rf"spark-core_(\d+\.\d+)-{re.escape(version)}\.jar", jar.name)
        if match:
            return match.group(1)
    raise ImageError(
        f"{spark_home}/jars has no spark-core_<scala>-{version}.jar: is pyspark {version} installed whole?"
    )


def _ensure_spark(root: Path, base: BuiltImage, version: str, log: Log) -> BuiltImage:
    name = f"spark-{version}"
    installed = ensure_pyspark(version, log)
    spark_home = installed / "pyspark"
    record = (installed / f"pyspark-{version}.dist-info" / "RECORD").read_bytes()
    key = spark_key(base.key, version, record, spark_image_files())
    scala = scala_version(spark_home, version)
    refs = spark_refs(version, scala)
    archive = root / f"{name}-{key}.tar"
    if cached := _cached(name, refs, archive, key, log):
        return cached
    started = time.monotonic()
    log(f"[images] {name}: layering pyspark {version} (scala {scala}) onto base, compiling SparkPi")
    _, _, base_layers = read_archive(base.archive)
    facts = _base_facts(base_layers[-1])
    py4j = sorted((spark_home / "python" / "lib").glob("py4j-*-src.zip"))
    if not py4j or not (spark_home / "python" / "lib" / "pyspark.zip").is_file():
        raise ImageError(f"{spark_home}/python/lib lacks pyspark.zip or py4j-*-src.zip")
    if not (spark_home / "examples" / "src" / "main" / "python" / "pi.py").is_file():
        raise ImageError(f"{spark_home} lacks examples/src/main/python/pi.py")
    with tempfile.TemporaryDirectory(dir=root, prefix=f"{name}.tmp-") as work:
        jar = _compile_examples_jar(spark_home, Path(work))
        layer = LayerBuilder()
        layer.tree(SPARK_HOME.lstrip("/"), spark_home, skip=lambda path: "__pycache__" in path.parts)
        layer.file(f"opt/spark/examples/jars/{examples_jar_name(version, scala)}", jar)
        layer.symlink(f"opt/spark/examples/jars/{EXAMPLES_JAR_LINK}", examples_jar_name(version, scala))
        layer.directory("opt/spark/work-dir", 0o775, SPARK_UID)
        layer.file("opt/entrypoint.sh", (SPARK_IMAGE_DIR / "entrypoint.sh").read_bytes(), 0o755)
        layer.file("etc/passwd", _with_line(facts.passwd, f"spark:x:{SPARK_UID}:{SPARK_UID}::{SPARK_HOME}:/bin/false"))
        layer.file("etc/group", _with_line(facts.group, f"spark:x:{SPARK_UID}:"))
        spark_layer = layer.write(Path(work) / "layer.tar")
        python_path = ":".join(f"{SPARK_HOME}/python/lib/{zip_name}" for zip_name in ("pyspark.zip", py4j[-1].name))
        config = ImageConfig(
            entrypoint=("/opt/entrypoint.sh",),
            env=(
                f"JAVA_HOME={facts.java_home}",
                f"PATH={SPARK_HOME}/bin:{facts.java_home}/bin:{DEFAULT_PATH}",
                f"PYTHONPATH={python_path}",
                f"SPARK_HOME={SPARK_HOME}",
            ),
            working_dir=f"{SPARK_HOME}/work-dir",
            user=str(SPARK_UID),
        )
        history = [*_history(base.archive), f"pyspark {version} as {SPARK_HOME}, SparkPi, entrypoint.sh"]
        write_docker_archive(archive, [*base_layers, spark_layer], config, refs, history)
    log(f"[images] {name}: built {archive} ({_size(archive)}, {time.monotonic() - started:.0f}s)")
    return BuiltImage(name, refs, archive, key)


def _history(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        manifest = json.loads(_member_bytes(tar, "manifest.json"))[0]
        config = json.loads(_member_bytes(tar, manifest["Config"]))
    return [entry["created_by"] for entry in config["history"]]


@dataclass(frozen=True)
class BaseFacts:
    passwd: bytes
    group: bytes
    java_home: str


def _base_facts(layer: Layer) -> BaseFacts:
    """What the Spark layer builds on: the base's account files (the layer replaces them whole)
    and where its JRE lives."""
    java = re.compile(r"(usr/lib/jvm/java-17-openjdk-[^/]+)/bin/java")
    found, names = _layer_files(layer, ("etc/passwd", "etc/group"))
    java_home = next((f"/{match.group(1)}" for name in names if (match := java.fullmatch(name))), "")
    if set(found) != {"etc/passwd", "etc/group"} or not java_home:
        raise ImageError("the base layer lacks /etc/passwd, /etc/group or a Java 17 JRE under /usr/lib/jvm")
    return BaseFacts(found["etc/passwd"], found["etc/group"], java_home)


def _layer_files(layer: Layer, wanted: Sequence[str]) -> tuple[dict[str, bytes], list[str]]:
    """The contents of the `wanted` regular files of a layer, and the names of all its entries."""
    found: dict[str, bytes] = {}
    names: list[str] = []
    with layer.open() as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            names.append(member.name)
            if member.name in wanted and member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    found[member.name] = handle.read()
    return found, names


def _with_line(content: bytes, line: str) -> bytes:
    kept = [
        existing for existing in content.decode().splitlines() if existing.split(":", 1)[0] != line.split(":", 1)[0]
    ]
    return ("\n".join([*kept, line]) + "\n").encode()


def _compile_examples_jar(spark_home: Path, work: Path) -> bytes:
    javac = shutil.which("javac")
    if javac is None:
        raise ImageError(
            "javac is not on PATH: the SparkPi example is compiled here (apt-get install openjdk-17-jdk-headless)"
        )
    classes = work / "classes"
    _run(
        [
            javac,
            "--release",
            "17",
            "-cp",
            f"{spark_home}/jars/*",
            "-d",
            str(classes),
            str(SPARK_IMAGE_DIR / "SparkPi.java"),
        ],
        "javac SparkPi.java",
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as jar:
        entries = {"META-INF/MANIFEST.MF": b"Manifest-Version: 1.0\r\nCreated-By: sparkop devcluster\r\n\r\n"}
        for path in sorted(classes.rglob("*.class")):
            entries[path.relative_to(classes).as_posix()] = path.read_bytes()
        for entry_name in sorted(entries):
            jar.writestr(zipfile.ZipInfo(entry_name, date_time=(1980, 1, 1, 0, 0, 0)), entries[entry_name])
    return buffer.getvalue()


def _ensure_pause(root: Path, binary: Path, log: Log) -> BuiltImage:
    if not binary.is_file():
        raise ImageError(f"pause binary {binary} does not exist")
    key = pause_key(file_sha256(binary))
    refs = (f"{PAUSE_REPO}:{key}",)
    archive = root / f"pause-{key}.tar"
    if cached := _cached("pause", refs, archive, key, log):
        return cached
    with tempfile.TemporaryDirectory(dir=root, prefix="pause.tmp-") as work:
        layer = LayerBuilder()
        layer.file("pause", binary.read_bytes(), 0o755)
        write_docker_archive(
            archive, [layer.write(Path(work) / "layer.tar")], PAUSE_CONFIG, refs, [f"/pause from {binary.name}"]
        )
    log(f"[images] pause: built {archive} ({_size(archive)})")
    return BuiltImage("pause", refs, archive, key)


# ------------------------------------------------------------------------------------ operator


def _ensure_operator(root: Path, log: Log) -> BuiltImage:
    if not REQUIREMENTS_LOCK.is_file() or not OPERATOR_LAUNCHER.is_file():
        raise ImageError(
            f"{REQUIREMENTS_LOCK} or {OPERATOR_LAUNCHER} is missing: the operator image is built from a source checkout"
        )
    python_base = _ensure_python_base(root, log)
    lock = REQUIREMENTS_LOCK.read_bytes()
    deps_key = dependencies_key(lock)
    sources = project_sources()
    key = operator_key(python_base.key, deps_key, sources)
    version = project_version()
    refs = operator_refs(version, key)
    archive = root / f"operator-{key}.tar"
    if cached := _cached("operator", refs, archive, key, log):
        return cached
    started = time.monotonic()
    _, _, base_layers = read_archive(python_base.archive)
    deps_layer = _ensure_dependencies_layer(root, deps_key, log)
    log(f"[images] operator: the sparkop {version} wheel onto python-base and its dependencies")
    with tempfile.TemporaryDirectory(dir=root, prefix="operator.tmp-") as work:
        app_layer = _operator_layer(Path(work), base_layers[-1], log)
        history = [*_history(python_base.archive), f"pip install --require-hashes -r {REQUIREMENTS_LOCK.name}"]
        history.append(f"sparkop {version} wheel, /usr/local/bin/sparkop, user {NONROOT_UID}")
        write_docker_archive(archive, [*base_layers, deps_layer, app_layer], OPERATOR_CONFIG, refs, history)
    log(f"[images] operator: built {archive} ({_size(archive)}, {time.monotonic() - started:.0f}s)")
    _prune_operator_archives(root, keep=archive)
    return BuiltImage("operator", refs, archive, key)


def _prune_operator_archives(root: Path, keep: Path, kept: int = OPERATOR_ARCHIVES_KEPT) -> None:
    """Every source change makes a new operator archive of the whole image: keep the newest few
    (a test may still import the one before), not one per edit."""
    images = [path for path in root.glob("operator-*.tar") if re.fullmatch(r"operator-[0-9a-f]{16}\.tar", path.name)]
    archives = sorted(images, key=lambda path: path.stat().st_mtime, reverse=True)
    for stale in [path for path in archives if path != keep][kept - 1 :]:
        stale.unlink(missing_ok=True)


def _ensure_dependencies_layer(root: Path, key: str, log: Log) -> Layer:
    """The pinned dependencies under SITE_PACKAGES, a layer cached on its own: it changes only
    with the lock, the operator layer with every source change."""
    target = root / f"operator-deps-{key}.layer.tar"
    if target.is_file():
        return file_layer(target)
    log(f"[images] operator: installing the locked dependencies ({REQUIREMENTS_LOCK.name}, cp311 manylinux wheels)")
    with tempfile.TemporaryDirectory(dir=root, prefix="operator-deps.tmp-") as work:
        installed = Path(work) / "site"
        _pip_install(
            installed,
            ["--require-hashes", "--only-binary=:all:", *WHEEL_PLATFORM, *WHEEL_PYTHON],
            ["-r", str(REQUIREMENTS_LOCK)],
            "pip install the locked dependencies",
        )
        _compile(installed, log)
        layer = LayerBuilder()
        layer.tree(SITE_PACKAGES.lstrip("/"), installed, skip=lambda path: False)
        built = layer.write(Path(work) / "layer.tar")
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        shutil.move(Path(work) / "layer.tar", tmp)
        tmp.rename(target)
    return Layer(built.diff_id, built.size, lambda: target.open("rb"))


def _operator_layer(work: Path, base_layer: Layer, log: Log) -> Layer:
    """The sparkop wheel installed under SITE_PACKAGES, its launcher, and the nonroot account."""
    source = work / "src"
    write_sources(project_sources(), source)
    wheels = work / "wheels"
    # Built in isolation with pyproject's build-system (setuptools>=69), as in the Dockerfile.
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(wheels),
            str(source),
        ],
        "pip wheel sparkop",
    )
    installed = work / "site"
    _pip_install(installed, [], [str(wheel) for wheel in sorted(wheels.glob("sparkop-*.whl"))], "pip install sparkop")
    _compile(installed, log)
    account, _ = _layer_files(base_layer, ("etc/passwd", "etc/group"))
    if set(account) != {"etc/passwd", "etc/group"}:
        raise ImageError("the python-base layer lacks /etc/passwd or /etc/group")
    layer = LayerBuilder()
    layer.tree(SITE_PACKAGES.lstrip("/"), installed, skip=lambda path: False)
    layer.file("usr/local/bin/sparkop", OPERATOR_LAUNCHER.read_bytes(), 0o755)
    layer.file("etc/passwd", _with_line(account["etc/passwd"], NONROOT_PASSWD))
    layer.file("etc/group", _with_line(account["etc/group"], NONROOT_GROUP))
    layer.directory("home/nonroot", 0o755, NONROOT_UID)
    return layer.write(work / "layer.tar")


def _pip_install(target: Path, options: Sequence[str], what: Sequence[str], description: str) -> None:
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-compile",
            "--target",
            str(target),
            *options,
            *what,
        ],
        description,
    )
    # Its bin/ holds console scripts whose #! names this machine's Python; the image has its own launcher.
    shutil.rmtree(target / "bin", ignore_errors=True)


def _compile(site: Path, log: Log) -> None:
    """Bytecode in the image, checked by hash: a read-only root filesystem cannot take the
    __pycache__ Python would write, and mtimes in layers say nothing about the sources."""
    if sys.implementation.cache_tag != f"cpython-{IMAGE_PYTHON.replace('.', '')}":
        log(f"[images] not compiling bytecode: this is {sys.implementation.cache_tag}, the image runs {IMAGE_PYTHON}")
        return
    import compileall
    import py_compile

    ok = compileall.compile_dir(
        site, quiet=2, ddir=SITE_PACKAGES, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    if not ok:
        raise ImageError(f"compiling the bytecode in {site} failed")


# ---------------------------------------------------------------------------------------- lock

LOCK_HEADER = """\
# The operator image's Python dependencies, exact versions and the sha256 of each cp311
# manylinux wheel (Debian bookworm's python3 on x86_64). Generated from the versions installed
# in .venv (the ones the tests run with), do not edit:
#   .venv/bin/python -m devcluster.images lock
# devcluster/images.py and the Dockerfile install exactly these (pip --require-hashes).
"""

DEV_CONSTRAINTS_HEADER = """\
# Every package of the dev venv (`pip install -e '.[test]'`), at the version the tests last ran
# with; the Makefile installs .venv held to these, so a release upstream cannot change what a
# fresh clone tests. The runtime packages match deploy/requirements.lock. Generated with it, do
# not edit; to move a package: .venv/bin/pip install --upgrade NAME, then
#   .venv/bin/python -m devcluster.images lock
"""


def runtime_requirements(repo: Path = REPO_DIR) -> list[str]:
    return [
        str(requirement)
        for requirement in tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"]
    ]


def _installed_versions() -> dict[str, str]:
    import importlib.metadata

    return {
        canonical_name(dist.metadata["Name"]): dist.version
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"] and canonical_name(dist.metadata["Name"]) != "sparkop"
    }


def _resolve(requirements: Sequence[str], platform: Sequence[str], log: Log) -> list[dict[str, Any]]:
    """What pip would install for `requirements` on `platform`, each package held to the version
    installed here (pip --dry-run --report)."""
    with tempfile.TemporaryDirectory(prefix="sparkop-lock-") as work:
        constraints = Path(work) / "constraints.txt"
        constraints.write_text(
            "".join(f"{name}=={version}\n" for name, version in sorted(_installed_versions().items()))
        )
        report = Path(work) / "report.json"
        log(f"[images] resolving {' '.join(requirements)} (pip --dry-run)")
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--dry-run",
                "--ignore-installed",
                *platform,
                "--target",
                str(Path(work) / "unused"),
                "--report",
                str(report),
                "-c",
                str(constraints),
                *requirements,
            ],
            "pip install --dry-run --report",
        )
        resolved: list[dict[str, Any]] = json.loads(report.read_text())["install"]
    return sorted(resolved, key=lambda item: str(item["metadata"]["name"]).lower())


def lock_requirements(log: Log = print) -> str:
    """pyproject's runtime dependencies resolved by pip for the image's platform, each held to
    the version installed here, with the hash of the wheel the image gets."""
    platform = ["--only-binary=:all:", *WHEEL_PLATFORM, *WHEEL_PYTHON]
    lines = []
    for item in _resolve(runtime_requirements(), platform, log):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        digest = item["download_info"]["archive_info"]["hashes"]["sha256"]
        lines.append(f"{canonical_name(name)}=={version} --hash=sha256:{digest}\n")
    return LOCK_HEADER + "".join(lines)


def lock_dev_constraints(log: Log = print) -> str:
    """The dev venv's packages (the checkout with its test extra) for this machine, each held to
    the version installed here."""
    lines = []
    for item in _resolve([f"{REPO_DIR}[test]"], [], log):
        name = canonical_name(str(item["metadata"]["name"]))
        if name != "sparkop":
            lines.append(f"{name}=={item['metadata']['version']}\n")
    return DEV_CONSTRAINTS_HEADER + "".join(lines)


def canonical_name(name: str) -> str:
    """PEP 503's form of a distribution name: `Typing_Extensions` -> `typing-extensions`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(lock: str) -> dict[str, str]:
    """name -> version of each line of a requirements lock."""
    found = {}
    for raw in lock.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            requirement = line.split()[0]
            name, _, version = requirement.partition("==")
            found[name] = version
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["lock"]:
        print(
            f"usage: python -m devcluster.images lock   (rewrites {REQUIREMENTS_LOCK} and {DEV_CONSTRAINTS})",
            file=sys.stderr,
        )
        return 2
    try:
        lock = lock_requirements(lambda line: print(line, file=sys.stderr))
        dev = lock_dev_constraints(lambda line: print(line, file=sys.stderr))
    except ImageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    REQUIREMENTS_LOCK.write_text(lock)
    DEV_CONSTRAINTS.write_text(dev)
    print(REQUIREMENTS_LOCK)
    print(DEV_CONSTRAINTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
