"""Build the devcluster's binaries once into a cache keyed by the pinned versions.

Sets of binaries, each built only when something needs it: the control plane (etcd, the
Kubernetes servers, kubectl, kwok), which every cluster runs, the real-node binaries (kubelet,
kube-proxy, CoreDNS, the pod sandbox's pause), which only `up --real-nodes` runs, and the
tools (helm, the batch schedulers), which only the tests and users that need them run.

Kubernetes is built at one of the releases versions.env pins (KUBERNETES_VERSION_<major>_<minor>,
with the etcd and CoreDNS paired with it): the one `SPARKOP_KUBERNETES` names (`1.35`, `v1.35.8`),
else the newest. read_versions() gives the chosen release's pins under the plain names
(KUBERNETES_VERSION, ETCD_VERSION, COREDNS_VERSION, ...), so the rest of the code never asks which.

A set's cache directory is `<cache>/bin/<label>-<key>/`: the label names the set and its version
(`control-plane-v1.37.2`), the key hashes the pins the set is built from, the build modules'
go.mod/go.sum and the build flags. Changing any of them builds a fresh directory; pinning another
release, or a tool, rebuilds nothing else. An existing directory is always complete because it is
renamed into place at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from devcluster import background
from devcluster.locks import held
from devcluster.paths import GOBUILD_DIR, VERSIONS_FILE, cache_root

Log = Callable[[str], None]

PROGRESS_EVERY_S = 15.0
# What a cold build takes on 2 busy cores, module downloads included (measured: etcd 39 s, kwok
# 85 s, kubernetes 368 s; 2.4 GB of compiler memory at the peak, 5 GB of Go caches afterwards;
# the node set after the control plane: kubelet and kube-proxy reuse most of its compile work),
# so a newcomer watching the first run knows how long to wait. Kept apart from GoBuild: its
# repr is part of the cache key.
EXPECTED_BUILD_S = {
    "etcd": 60,
    "kwok": 90,
    "kubernetes": 420,
    "kubernetes-node": 240,
    "coredns": 120,
    "pause": 10,
    "helm": 120,
    "volcano": 180,
    "scheduler-plugins": 120,  # the scheduler (measured 117 s); the controller after it takes ~10 s
    "kueue": 300,
    "spark-operator": 210,  # kubeflow's, for bench/peer.py only (measured ~200 s)
    "traefik": 900,  # its downloads (~600 modules) and compile, on 2 cores shared with other builds
}
GO_DOWNLOAD_URL = "https://go.dev/dl/"
TOOL_BUILDS = frozenset({"helm", "volcano", "kueue", "scheduler-plugins", "traefik"})
# Which Kubernetes release to build and run: a minor ("1.35") or a version ("v1.35.8") that
# versions.env pins, or "oldest" or "newest"; unset, the newest. `python -m devcluster ... --kubernetes`
# sets it.
KUBERNETES_ENV = "SPARKOP_KUBERNETES"
# versions.env's pins of one release: KUBERNETES_VERSION_1_37=v1.37.2, ETCD_VERSION_1_37=..., and
# the same names without the suffix in what read_versions() gives for the chosen release.
RELEASE_PIN = re.compile(r"^(KUBERNETES_VERSION|ETCD_VERSION|COREDNS_VERSION)_(\d+)_(\d+)$")
RELEASE_PIN_NAMES = ("KUBERNETES_VERSION", "ETCD_VERSION", "COREDNS_VERSION")


class BuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class GoBuild:
    """One `go build` invocation in one build module (several packages share compile work).

    ``in_module`` (``path@version``): build in that module as the Go module proxy serves it, with its
    own go.mod and go.sum (its replace directives point into its own tree, which a module of ours
    could not name, and which ``go install`` refuses), instead of in ``gobuild/<module>``."""

    name: str
    module: str
    packages: tuple[str, ...]
    ldflags: str
    output: str  # "" = the directory itself (one binary per package, named after it)
    # Not in the repr (the cache key of the builds that do not set it stays what it was); cache_key adds it.
    in_module: str = field(default="", repr=False)

    def command(self, out_dir: Path) -> list[str]:
        target = f"{out_dir}/{self.output}" if self.output else f"{out_dir}/"
        readonly = ["-mod=readonly"] if self.in_module else []
        return ["go", "build", *readonly, "-trimpath", "-ldflags", self.ldflags, "-o", target, *self.packages]


def read_pins(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """The KEY=VALUE lines of versions.env as they are (comments and blank lines ignored)."""
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise BuildError(f"{path}: not KEY=VALUE: {raw!r}")
        pins[key.strip()] = value.strip()
    return pins


@dataclass(frozen=True)
class KubernetesRelease:
    """One Kubernetes minor release versions.env pins, with the etcd and CoreDNS paired with it."""

    minor: str  # "1.37"
    kubernetes: str  # "v1.37.2"
    etcd: str
    coredns: str

    @property
    def staging(self) -> str:
        """The staging modules' version (k8s.io/api, client-go, ...): v1.37.2 -> v0.37.2."""
        return "v0." + self.kubernetes.removeprefix("v").split(".", 1)[1]

    @property
    def module_dir(self) -> str:
        """Its build modules' directory under gobuild/ (kubernetes/, etcd/, coredns/)."""
        return f"k8s-{self.minor}"


def kubernetes_releases(pins: dict[str, str] | None = None) -> list[KubernetesRelease]:
    """The pinned releases, oldest first (the last is the default)."""
    pins = read_pins() if pins is None else pins
    found: dict[tuple[int, int], dict[str, str]] = {}
    for key, value in pins.items():
        match = RELEASE_PIN.match(key)
        if match:
            found.setdefault((int(match.group(2)), int(match.group(3))), {})[match.group(1)] = value
    releases = []
    for (major, minor), release_pins in sorted(found.items()):
        missing = [name for name in RELEASE_PIN_NAMES if name not in release_pins]
        if missing:
            names = ", ".join(f"{name}_{major}_{minor}" for name in missing)
            raise BuildError(f"{VERSIONS_FILE}: Kubernetes {major}.{minor} lacks {names}")
        kubernetes, etcd, coredns = (release_pins[name] for name in RELEASE_PIN_NAMES)
        if not kubernetes.startswith(f"v{major}.{minor}."):
            key = f"KUBERNETES_VERSION_{major}_{minor}"
            raise BuildError(f"{VERSIONS_FILE}: {key}={kubernetes} is not a {major}.{minor} release")
        releases.append(KubernetesRelease(f"{major}.{minor}", kubernetes, etcd, coredns))
    if not releases:
        raise BuildError(f"{VERSIONS_FILE} pins no Kubernetes release (KUBERNETES_VERSION_<major>_<minor>=...)")
    return releases


def select_release(wanted: str | None = None, pins: dict[str, str] | None = None) -> KubernetesRelease:
    """The release `wanted` names (a minor like "1.35", a pinned version like "v1.35.8", "oldest" or
    "newest"), else the one $SPARKOP_KUBERNETES names, else the newest pinned."""
    releases = kubernetes_releases(pins)
    wanted = wanted or os.environ.get(KUBERNETES_ENV) or ""
    text = wanted.strip().removeprefix("v")
    if text in ("", "newest"):
        return releases[-1]
    if text == "oldest":
        return releases[0]
    for release in releases:
        if text in (release.minor, release.kubernetes.removeprefix("v")):
            return release
    choices = ", ".join([*(f"{r.minor} ({r.kubernetes})" for r in releases), "oldest", "newest"])
    raise BuildError(f"Kubernetes {wanted!r} is not pinned in {VERSIONS_FILE}: choose one of {choices}")


def read_versions(path: Path = VERSIONS_FILE, kubernetes: str | None = None) -> dict[str, str]:
    """versions.env's pins for one Kubernetes release (`kubernetes`, else select_release's choice):
    every pin that is not a release's, and the release's under plain names: KUBERNETES_VERSION,
    KUBERNETES_STAGING_VERSION, KUBERNETES_MINOR, ETCD_VERSION, COREDNS_VERSION."""
    pins = read_pins(path)
    release = select_release(kubernetes, pins)
    versions = {key: value for key, value in pins.items() if not RELEASE_PIN.match(key)}
    versions.update(
        KUBERNETES_MINOR=release.minor,
        KUBERNETES_VERSION=release.kubernetes,
        KUBERNETES_STAGING_VERSION=release.staging,
        ETCD_VERSION=release.etcd,
        COREDNS_VERSION=release.coredns,
    )
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


@dataclass(frozen=True)
class BinarySet:
    """Binaries built together into one cache directory."""

    description: str  # "the control plane": for progress lines
    builds: tuple[GoBuild, ...]
    binaries: tuple[str, ...]
    # Names the cache directory, with the version: "control-plane-v1.37.2".
    label: str = ""
    # The versions.env pins the binaries are built from: part of the cache key.
    pins: tuple[tuple[str, str], ...] = ()


def _pins(versions: dict[str, str], *names: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, versions[name]) for name in names)


def release_module(versions: dict[str, str], name: str) -> str:
    """The chosen release's build module `name` (kubernetes, etcd, coredns), relative to gobuild/."""
    return f"k8s-{versions['KUBERNETES_MINOR']}/{name}"


def _kubernetes_commands(name: str, commands: tuple[str, ...], versions: dict[str, str]) -> GoBuild:
    packages = tuple(f"k8s.io/kubernetes/cmd/{cmd}" for cmd in commands)
    ldflags = kubernetes_ldflags(versions["KUBERNETES_VERSION"])
    return GoBuild(name, release_module(versions, "kubernetes"), packages, ldflags, "")


def control_plane(versions: dict[str, str]) -> BinarySet:
    commands = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    return BinarySet(
        f"the control plane (Kubernetes {versions['KUBERNETES_VERSION']})",
        # Small ones first: a broken toolchain fails in seconds, not after the long kubernetes build.
        (
            GoBuild("etcd", release_module(versions, "etcd"), ("go.etcd.io/etcd/server/v3",), "-s -w", "etcd"),
            GoBuild("kwok", "kwok", ("sigs.k8s.io/kwok/cmd/kwok",), "-s -w", "kwok"),
            _kubernetes_commands("kubernetes", commands, versions),
        ),
        ("etcd", *commands, "kwok"),
        f"control-plane-{versions['KUBERNETES_VERSION']}",
        _pins(versions, "KUBERNETES_VERSION", "ETCD_VERSION", "KWOK_VERSION"),
    )


def node_binaries(versions: dict[str, str]) -> BinarySet:
    commands = ("kubelet", "kube-proxy")
    return BinarySet(
        f"the real-node binaries (Kubernetes {versions['KUBERNETES_VERSION']})",
        (
            GoBuild("pause", "pause", (".",), "-s -w", "pause"),
            GoBuild("coredns", release_module(versions, "coredns"), (".",), "-s -w", "coredns"),
            _kubernetes_commands("kubernetes-node", commands, versions),
        ),
        ("pause", "coredns", *commands),
        f"nodes-{versions['KUBERNETES_VERSION']}",
        _pins(versions, "KUBERNETES_VERSION", "COREDNS_VERSION"),
    )


def helm_ldflags(version: str, kubernetes_version: str) -> str:
    """Stamp helm like its release build does: `helm version`, and the Kubernetes version that
    `helm template` and `helm lint` assume without a cluster (the devcluster's, not helm's 1.20)."""
    major, minor = kubernetes_version.lstrip("v").split(".")[:2]
    stamps = {
        "helm.sh/helm/v3/internal/version.version": version,
        "helm.sh/helm/v3/internal/version.gitTreeState": "clean",
    }
    for package in ("helm.sh/helm/v3/pkg/chartutil", "helm.sh/helm/v3/pkg/lint/rules"):
        stamps[f"{package}.k8sVersionMajor"] = major
        stamps[f"{package}.k8sVersionMinor"] = minor
    return " ".join(["-s -w", *(f"-X {k}={v}" for k, v in stamps.items())])


def tools(versions: dict[str, str]) -> BinarySet:
    ldflags = helm_ldflags(versions["HELM_VERSION"], versions["KUBERNETES_VERSION"])
    return BinarySet(
        "the tools",
        (GoBuild("helm", "helm", ("helm.sh/helm/v3/cmd/helm",), ldflags, "helm"),),
        ("helm",),
        f"helm-{versions['HELM_VERSION']}-k8s-{versions['KUBERNETES_MINOR']}",
        _pins(versions, "HELM_VERSION", "KUBERNETES_VERSION"),
    )


def volcano_ldflags(version: str) -> str:
    """Stamp Volcano like its Makefile does (``vc-scheduler --version``)."""
    return f"-s -w -X volcano.sh/volcano/pkg/version.Version={version}"


def schedulers(versions: dict[str, str]) -> BinarySet:
    """The batch schedulers ``up --schedulers`` runs, each from its own build module: Volcano pins its
    Kubernetes libraries (1.30) apart from the cluster's."""
    ldflags = volcano_ldflags(versions["VOLCANO_VERSION"])
    packages = ("volcano.sh/volcano/cmd/scheduler", "volcano.sh/volcano/cmd/controller-manager")
    return BinarySet(
        "the batch schedulers",
        tuple(
            GoBuild("volcano", "volcano", (package,), ldflags, f"vc-{package.rsplit('/', 1)[-1]}")
            for package in packages
        ),
        ("vc-scheduler", "vc-controller-manager"),
        f"volcano-{versions['VOLCANO_VERSION']}",
        _pins(versions, "VOLCANO_VERSION"),
    )


def kueue_ldflags(version: str) -> str:
    """Stamp Kueue like its Makefile does (the ``gitVersion`` it logs at start)."""
    return f"-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion={version}"


def kueue_binaries(versions: dict[str, str]) -> BinarySet:
    """Kueue's controller manager (``up --schedulers kueue``), from its own build module: a set of
    its own, so that a cluster with only Volcano never builds it, and the other way round."""
    ldflags = kueue_ldflags(versions["KUEUE_VERSION"])
    return BinarySet(
        "Kueue",
        (GoBuild("kueue", "kueue", ("sigs.k8s.io/kueue/cmd/kueue",), ldflags, "kueue-manager"),),
        ("kueue-manager",),
        f"kueue-{versions['KUEUE_VERSION']}",
        _pins(versions, "KUEUE_VERSION"),
    )


def coscheduling_binaries(versions: dict[str, str]) -> BinarySet:
    """scheduler-plugins' scheduler (kube-scheduler with the Coscheduling plugin) and controller (the
    PodGroups' status) for ``up --schedulers coscheduling``, from their own build module, a set of
    their own: a cluster without them never builds them. Built against the Kubernetes libraries
    SCHEDULER_PLUGINS_KUBERNETES_VERSION pins (scheduler-plugins' code follows one Kubernetes minor),
    whatever release the cluster runs, and stamped with that version, not scheduler-plugins' own as
    its Makefile does: the scheduler takes the stamp for its Kubernetes version, and refuses to start
    as a "0.34" (its emulation version must be 1.31 or later)."""
    ldflags = kubernetes_ldflags(versions["SCHEDULER_PLUGINS_KUBERNETES_VERSION"])
    commands = ("scheduler", "controller")
    package, name = "sigs.k8s.io/scheduler-plugins/cmd/{}", "scheduler-plugins-{}"
    return BinarySet(
        "scheduler-plugins' Coscheduling",
        tuple(
            GoBuild("scheduler-plugins", "scheduler-plugins", (package.format(cmd),), ldflags, name.format(cmd))
            for cmd in commands
        ),
        tuple(name.format(cmd) for cmd in commands),
        f"scheduler-plugins-{versions['SCHEDULER_PLUGINS_VERSION']}",
        _pins(versions, "SCHEDULER_PLUGINS_VERSION", "SCHEDULER_PLUGINS_KUBERNETES_VERSION"),
    )


def traefik_binaries(versions: dict[str, str]) -> BinarySet:
    """Traefik (``up --gateway traefik``): a Gateway API implementation in pure Go, built in its own
    module as the proxy serves it (its go.mod replaces one of its packages by a directory of its tree).
    v3.6: the newest line whose whole dependency tree the module proxy serves here (v3.7's ACME DNS
    providers pull SDK versions it refuses)."""
    version = versions["TRAEFIK_VERSION"]
    ldflags = f"-s -w -X github.com/traefik/traefik/v3/pkg/version.Version={version}"
    module = f"github.com/traefik/traefik/v3@{version}"
    build = GoBuild("traefik", "traefik", ("./cmd/traefik",), ldflags, "traefik", in_module=module)
    return BinarySet("Traefik", (build,), ("traefik",), f"traefik-{version}", _pins(versions, "TRAEFIK_VERSION"))


def cache_key(binary_set: BinarySet, gobuild_dir: Path = GOBUILD_DIR) -> str:
    """A hash of what the set's binaries are built from: its pins, its go build commands (flags
    included) and its build modules' go.mod, go.sum and main.go."""
    digest = hashlib.sha256()
    for name, version in binary_set.pins:
        digest.update(f"{name}={version}\n".encode())
    for build in binary_set.builds:
        digest.update(repr(build).encode())
        if build.in_module:
            digest.update(f"in_module={build.in_module}\n".encode())
        for name in ("go.mod", "go.sum", "main.go"):
            source = gobuild_dir / build.module / name
            if source.exists():
                digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def set_dir(binary_set: BinarySet) -> Path:
    """Where `binary_set` lives for the pinned versions (it may not be built yet)."""
    key = cache_key(binary_set)
    return cache_root() / "bin" / (f"{binary_set.label}-{key}" if binary_set.label else key)


def bin_dir() -> Path:
    """The control plane's binaries directory for the pinned versions (it may not be built yet)."""
    return set_dir(control_plane(read_versions()))


def is_built(directory: Path, binaries: tuple[str, ...] | None = None) -> bool:
    wanted = control_plane(read_versions()).binaries if binaries is None else binaries
    return all((directory / name).is_file() for name in wanted)


def ensure_built(log: Log = print) -> Path:
    """Return the control plane's binaries directory, building it first if needed (a no-op when warm)."""
    return ensure_set_built(control_plane(read_versions()), log)


def ensure_node_binaries(log: Log = print) -> Path:
    """Return the real-node binaries directory, building it first if needed (a no-op when warm)."""
    return ensure_set_built(node_binaries(read_versions()), log)


def ensure_tools(log: Log = print) -> Path:
    """Return the tools' directory (helm), building it first if needed (a no-op when warm)."""
    return ensure_set_built(tools(read_versions()), log)


def ensure_schedulers(log: Log = print) -> Path:
    """Return the batch schedulers' directory, building them first if needed (a no-op when warm)."""
    return ensure_set_built(schedulers(read_versions()), log)


def ensure_kueue(log: Log = print) -> Path:
    """Return Kueue's directory (``kueue-manager``), building it first if needed (a no-op when warm)."""
    return ensure_set_built(kueue_binaries(read_versions()), log)


def ensure_coscheduling(log: Log = print) -> Path:
    """Return scheduler-plugins' directory (scheduler and controller), building it first if needed."""
    return ensure_set_built(coscheduling_binaries(read_versions()), log)


def ensure_traefik(log: Log = print) -> Path:
    """Return Traefik's directory, building it first if needed (a no-op when warm)."""
    return ensure_set_built(traefik_binaries(read_versions()), log)


# What only some tests (and users) need, in the order `make test` builds it beside the suite: helm
# first (small, and the chart tests that need it run mid-suite, unmoved), then the order the suite's
# last tests use the rest in (tests/support/background_builds.py, tests/conftest.py).
LATER_BUILDS: dict[str, Callable[[dict[str, str]], BinarySet]] = {
    "helm": tools,
    "volcano": schedulers,
    "kueue": kueue_binaries,
    "coscheduling": coscheduling_binaries,
    "traefik": traefik_binaries,
}


def later_steps() -> list[background.Step]:
    """LATER_BUILDS as the background builder's steps, each keyed by its cache directory."""
    versions = read_versions()
    steps = []
    for name, make in LATER_BUILDS.items():
        binary_set = make(versions)
        run = partial(ensure_set_built, binary_set)
        what = f"{binary_set.description} ({binary_set.label})"
        steps.append(background.Step(name, str(set_dir(binary_set)), what, run))
    return steps


def module_dir(module: str) -> Path:
    """Where the Go module cache holds ``path@version`` (downloaded from the proxy first if needed)."""
    result = subprocess.run(
        ["go", "mod", "download", "-json", module],
        env=_go_env(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        cwd="/",
    )
    try:
        found = json.loads(result.stdout)
    except ValueError:
        found = {}
    if result.returncode != 0 or not found.get("Dir"):
        raise BuildError(f"go mod download {module} failed: {found.get('Error') or result.stderr.strip()}")
    return Path(found["Dir"])


def helm_binary(log: Log = print) -> Path:
    return ensure_tools(log) / "helm"


def build_lock(target: Path) -> Path:
    """The lock a build of the set in ``target`` holds: one per set, so a test building helm does not
    wait behind the background builder's Kueue (`devcluster.background`)."""
    return target.parent / f".{target.name}.build.lock"


def ensure_set_built(binary_set: BinarySet, log: Log = print) -> Path:
    target = set_dir(binary_set)
    if is_built(target, binary_set.binaries):
        return target
    # Under `make test` the background builder may be making it: wait for that, not build it twice.
    background.wait_for(str(target), log)
    if is_built(target, binary_set.binaries):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(build_lock(target), binary_set.description, log):
        if is_built(target, binary_set.binaries):  # another process built it while we waited for the lock
            return target
        builds = binary_set.builds
        # A module built as the proxy serves it (in_module) has no go.mod here: the newest of ours stands in.
        check_go_toolchain(log, {build.module for build in builds if not build.in_module} or None)
        log(
            f"[build] building {binary_set.description} from source into {target}: first run only, "
            f"~{_minutes(sum(EXPECTED_BUILD_S.get(b.name, 0) for b in builds))} on 2 cores and ~5 GB of Go caches; "
            "later runs start in seconds"
        )
        _remove_stale_tmp_dirs(target)
        tmp = target.parent / f"{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        started = time.monotonic()
        for build in builds:
            _run_go_build(build, tmp, log)
        if not is_built(tmp, binary_set.binaries):
            raise BuildError(f"build finished but {tmp} lacks some of {binary_set.binaries}")
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        log(f"[build] all binaries ready in {target} ({time.monotonic() - started:.0f}s)")
    return target


def _minutes(seconds: float) -> str:
    return f"{max(1, round(seconds / 60))} min"


def required_go_version(
    modules: Iterable[str] | None = None, gobuild_dir: Path = GOBUILD_DIR
) -> tuple[tuple[int, ...], Path]:
    """The newest `go` directive among the build modules (`modules`, relative to gobuild/; else all),
    and the go.mod that asks for it."""
    found: list[tuple[tuple[int, ...], Path]] = []
    go_mods = gobuild_dir.glob("**/go.mod") if modules is None else (gobuild_dir / m / "go.mod" for m in modules)
    for go_mod in sorted(go_mods):
        match = re.search(r"^go\s+(\d+(?:\.\d+)*)\s*$", go_mod.read_text(), re.MULTILINE)
        if match:
            found.append((_version_tuple(match.group(1)), go_mod))
    if not found:
        raise BuildError(f"no `go` directive in {gobuild_dir}/*/go.mod")
    return max(found)


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def check_go_toolchain(log: Log, modules: Iterable[str] | None = None) -> None:
    """Fail in a second, with the fix, when `go` cannot build the pinned modules (`modules`, else
    all): not after a long wait with a compiler error."""
    need, go_mod = required_go_version(modules)
    wanted = f"Go {_dotted(need)} or newer ({GO_DOWNLOAD_URL})"
    go = shutil.which("go")
    if go is None:
        raise BuildError(f"`go` is not on PATH: the control plane is built from source once, which needs {wanted}")
    try:
        result = subprocess.run(
            [go, "env", "GOVERSION", "GOTOOLCHAIN"],
            env=_go_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BuildError(f"`{go} env` did not run ({err}); the build needs {wanted}") from None
    lines = result.stdout.split()
    if result.returncode != 0 or len(lines) != 2:
        raise BuildError(f"`{go} env GOVERSION GOTOOLCHAIN` failed: {result.stderr.strip() or result.stdout.strip()}")
    go_version, toolchain = lines
    match = re.fullmatch(r"go(\d+(?:\.\d+)*)", go_version)
    if match is None:  # a development toolchain: let it try
        return
    have = _version_tuple(match.group(1))
    if have >= need:
        return
    if toolchain == "local":
        raise BuildError(
            f"{go} is {go_version}, older than the go {_dotted(need)} that {go_mod} needs, and "
            f"GOTOOLCHAIN=local forbids fetching a newer one: install {wanted}, or set GOTOOLCHAIN=auto"
        )
    log(f"[build] {go} is {go_version}; go fetches toolchain go{_dotted(need)} itself (GOTOOLCHAIN={toolchain})")


def _go_env() -> dict[str, str]:
    # The user's GOFLAGS (e.g. -mod=vendor) must not change what the pinned modules build, and
    # the binaries run on this machine whatever GOOS/GOARCH the shell sets for cross-compiling.
    env = {k: v for k, v in os.environ.items() if k not in ("GOOS", "GOARCH")}
    env.update({"CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"})
    return env


def _exclusive(lock_path: Path, description: str, log: Log) -> AbstractContextManager[None]:
    def waiting(holder: str) -> None:
        log(
            f"[build] another process (pid {holder}) is building {description}; waiting for it "
            f"(a first build of everything takes ~{_minutes(sum(EXPECTED_BUILD_S.values()))} on 2 cores; "
            f"lock {lock_path})"
        )

    return held(lock_path, waiting)


def _remove_stale_tmp_dirs(target: Path) -> None:
    # We hold the set's build lock, so every temp dir of the set left here belongs to a dead build.
    for stale in target.parent.glob(f"{target.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)


def _run_go_build(build: GoBuild, out_dir: Path, log: Log) -> None:
    if shutil.which("go") is None:
        raise BuildError("`go` is not on PATH; it is needed once to build the control plane")
    env = _go_env()
    log_file = out_dir / f"build-{build.name}.log"
    names = build.output or ", ".join(p.rsplit("/", 1)[-1] for p in build.packages)
    expected = EXPECTED_BUILD_S.get(build.name)
    estimate = f"; ~{_minutes(expected)} on 2 cores" if expected else ""
    log(f"[build] {build.name}: go build {names} (first run only{estimate})")
    started = time.monotonic()
    with log_file.open("wb") as sink:
        proc = subprocess.Popen(
            build.command(out_dir),
            cwd=module_dir(build.in_module) if build.in_module else GOBUILD_DIR / build.module,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        next_report = started + PROGRESS_EVERY_S
        while proc.poll() is None:
            time.sleep(0.5)
            if time.monotonic() >= next_report:
                log(f"[build] {build.name}: still building ({time.monotonic() - started:.0f}s{estimate})")
                next_report += PROGRESS_EVERY_S
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        tail = log_file.read_text(errors="replace")[-4000:]
        hint = ""
        if "dial tcp" in tail or "proxy.golang.org" in tail:
            hint = "\n(the first build downloads Go modules: check the network and GOPROXY)"
        elif proc.returncode < 0 or "signal: killed" in tail:
            hint = "\n(the compiler was killed, most likely out of memory: the kubernetes build needs about 3 GB)"
        raise BuildError(f"go build of {build.name} failed (exit {proc.returncode}), log {log_file}:\n{tail}{hint}")
    log_file.unlink()
    log(f"[build] {build.name}: done in {elapsed:.0f}s")
