"""Build the control-plane binaries once into a cache keyed by the pinned versions.

The cache directory is `<cache>/bin/<key>/` where the key hashes versions.env, the build
modules' go.mod/go.sum and the build flags: changing any of them builds a fresh directory,
and an existing directory is always complete because it is renamed into place at the end.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devcluster.paths import GOBUILD_DIR, VERSIONS_FILE, cache_root

Log = Callable[[str], None]

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")
PROGRESS_EVERY_S = 15.0


class BuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class GoBuild:
    """One `go build` invocation in one build module (several packages share compile work)."""

    name: str
    module: str
    packages: tuple[str, ...]
    ldflags: str
    output: str  # "" = the directory itself (one binary per package, named after it)

    def command(self, out_dir: Path) -> list[str]:
        target = f"{out_dir}/{self.output}" if self.output else f"{out_dir}/"
        return ["go", "build", "-trimpath", "-ldflags", self.ldflags, "-o", target, *self.packages]


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Parse the KEY=VALUE lines of versions.env (comments and blank lines ignored)."""
    versions: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise BuildError(f"{path}: not KEY=VALUE: {raw!r}")
        versions[key.strip()] = value.strip()
    return versions


def kubernetes_ldflags(version: str) -> str:
    """Stamp the version like the upstream release build does, so `kubectl version` is right."""
    major, minor = version.lstrip("v").split(".")[:2]
    stamps = {
        "k8s.io/component-base/version.gitVersion": version,
        "k8s.io/component-base/version.gitMajor": major,
        "k8s.io/component-base/version.gitMinor": minor,
        "k8s.io/component-base/version.gitTreeState": "clean",
        "k8s.io/client-go/pkg/version.gitVersion": version,
        "k8s.io/client-go/pkg/version.gitMajor": major,
        "k8s.io/client-go/pkg/version.gitMinor": minor,
    }
    return " ".join(["-s -w", *(f"-X {k}={v}" for k, v in stamps.items())])


def go_builds(versions: dict[str, str]) -> list[GoBuild]:
    # Small ones first: a broken toolchain fails in seconds, not after the long kubernetes build.
    return [
        GoBuild("etcd", "etcd", ("go.etcd.io/etcd/server/v3",), "-s -w", "etcd"),
        GoBuild("kwok", "kwok", ("sigs.k8s.io/kwok/cmd/kwok",), "-s -w", "kwok"),
        GoBuild(
            "kubernetes",
            "kubernetes",
            tuple(
                f"k8s.io/kubernetes/cmd/{cmd}"
                for cmd in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
            ),
            kubernetes_ldflags(versions["KUBERNETES_VERSION"]),
            "",
        ),
    ]


def cache_key(builds: list[GoBuild], gobuild_dir: Path = GOBUILD_DIR) -> str:
    digest = hashlib.sha256()
    digest.update((gobuild_dir / "versions.env").read_bytes())
    for build in builds:
        digest.update(repr(build).encode())
        for name in ("go.mod", "go.sum"):
            digest.update((gobuild_dir / build.module / name).read_bytes())
    return digest.hexdigest()[:16]


def bin_dir() -> Path:
    """The binaries directory for the pinned versions (it may not be built yet)."""
    return cache_root() / "bin" / cache_key(go_builds(read_versions()))


def is_built(directory: Path) -> bool:
    return all((directory / name).is_file() for name in BINARIES)


def ensure_built(log: Log = print) -> Path:
    """Return the binaries directory, building it first if needed (a no-op when warm)."""
    target = bin_dir()
    if is_built(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(target.parent / ".build.lock"):
        if is_built(target):  # another process built it while we waited for the lock
            return target
        _remove_stale_tmp_dirs(target.parent)
        tmp = target.parent / f"{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        started = time.monotonic()
        for build in go_builds(read_versions()):
            _run_go_build(build, tmp, log)
        if not is_built(tmp):
            raise BuildError(f"build finished but {tmp} lacks some of {BINARIES}")
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        log(f"[build] all binaries ready in {target} ({time.monotonic() - started:.0f}s)")
    return target


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_stale_tmp_dirs(parent: Path) -> None:
    # We hold the build lock, so every temp dir left here belongs to a dead build.
    for stale in parent.glob("*.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)


def _run_go_build(build: GoBuild, out_dir: Path, log: Log) -> None:
    if shutil.which("go") is None:
        raise BuildError("`go` is not on PATH; it is needed once to build the control plane")
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
    log_file = out_dir / f"build-{build.name}.log"
    names = build.output or ", ".join(p.rsplit("/", 1)[-1] for p in build.packages)
    log(f"[build] {build.name}: go build {names}")
    started = time.monotonic()
    with log_file.open("wb") as sink:
        proc = subprocess.Popen(
            build.command(out_dir),
            cwd=GOBUILD_DIR / build.module,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        next_report = started + PROGRESS_EVERY_S
        while proc.poll() is None:
            time.sleep(0.5)
            if time.monotonic() >= next_report:
                log(f"[build] {build.name}: still building ({time.monotonic() - started:.0f}s)")
                next_report += PROGRESS_EVERY_S
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        tail = log_file.read_text(errors="replace")[-4000:]
        raise BuildError(f"go build of {build.name} failed (exit {proc.returncode}):\n{tail}")
    log_file.unlink()
    log(f"[build] {build.name}: done in {elapsed:.0f}s")
