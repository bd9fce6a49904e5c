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
- pause: the pod sandbox image, one static binary built elsewhere.
"""

from __future__ import annotations

import fcntl
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
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from devcluster.build import read_versions
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
    return content_key("spark", base, version, str(SPARK_UID), DEFAULT_PATH, record, *files)


def pause_key(binary_sha256: str) -> str:
    return content_key("pause", repr(PAUSE_CONFIG), binary_sha256)


def spark_image_files() -> list[tuple[str, bytes]]:
    return [(path.name, path.read_bytes()) for path in sorted(SPARK_IMAGE_DIR.iterdir()) if path.is_file()]


@contextmanager
def _exclusive(lock_path: Path, log: Log) -> Iterator[None]:
    with lock_path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            log(f"[images] another process (pid {handle.read().strip() or 'unknown'}) is building images; waiting")
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
    """The base image, a Spark image per version (default: the pinned ones) and, given its
    binary, the pause image, each built unless its archive is already cached."""
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
    return images


def _cached(name: str, refs: tuple[str, ...], archive: Path, key: str, log: Log) -> BuiltImage | None:
    if not archive.is_file():
        return None
    log(f"[images] {name}: cached {archive} ({_size(archive)})")
    return BuiltImage(name, refs, archive, key)


def _ensure_base(root: Path, log: Log) -> BuiltImage:
    if not DEBIAN_SOURCES.is_file():
        raise ImageError(
            f"{DEBIAN_SOURCES} is missing: the base image's packages come from this machine's Debian mirror"
        )
    sources = DEBIAN_SOURCES.read_bytes()
    key = base_key(sources)
    refs = (f"{BASE_REPO}:{key}", f"{BASE_REPO}:latest")
    archive = root / f"base-{key}.tar"
    if cached := _cached("base", refs, archive, key, log):
        return cached
    if shutil.which("mmdebstrap") is None:
        raise ImageError("mmdebstrap is not installed: apt-get install mmdebstrap")
    started = time.monotonic()
    packages = len(BASE_RECIPE.packages)
    log(f"[images] base: mmdebstrap {BASE_RECIPE.suite} with {packages} packages (~{EXPECTED_BASE_BUILD_S}s)")
    with tempfile.TemporaryDirectory(dir=root, prefix="base.tmp-") as work:
        rootfs = Path(work) / "rootfs.tar"
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH)}
        _run(BASE_RECIPE.mmdebstrap_command(DEBIAN_SOURCES, rootfs), "mmdebstrap", env=env)
        layer = normalise_rootfs_tar(rootfs, Path(work) / "layer.tar")
        rootfs.unlink()
        history = [" ".join(BASE_RECIPE.mmdebstrap_command(DEBIAN_SOURCES, Path("rootfs.tar")))]
        write_docker_archive(archive, [layer], BASE_CONFIG, refs, history)
    log(f"[images] base: built {archive} ({_size(archive)}, {time.monotonic() - started:.0f}s)")
    return BuiltImage("base", refs, archive, key)


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
    found: dict[str, bytes] = {}
    java_home = ""
    java = re.compile(r"(usr/lib/jvm/java-17-openjdk-[^/]+)/bin/java")
    with layer.open() as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            if member.name in ("etc/passwd", "etc/group") and member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    found[member.name] = handle.read()
            elif match := java.fullmatch(member.name):
                java_home = f"/{match.group(1)}"
    if set(found) != {"etc/passwd", "etc/group"} or not java_home:
        raise ImageError("the base layer lacks /etc/passwd, /etc/group or a Java 17 JRE under /usr/lib/jvm")
    return BaseFacts(found["etc/passwd"], found["etc/group"], java_home)


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
