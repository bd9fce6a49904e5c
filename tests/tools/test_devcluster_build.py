from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
from pathlib import Path

import pytest

from devcluster import components
from devcluster.__main__ import _parser, _schedulers
from devcluster.__main__ import main as devcluster_main
from devcluster.build import (
    KUBERNETES_ENV,
    BuildError,
    GoBuild,
    cache_key,
    control_plane,
    kubernetes_ldflags,
    kubernetes_releases,
    node_binaries,
    read_versions,
    schedulers,
    select_release,
    set_dir,
)
from devcluster.paths import GOBUILD_DIR


def test_versions_file_pins_three_consecutive_minors_and_the_newest_is_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KUBERNETES_ENV, raising=False)
    releases = kubernetes_releases()
    minors = [tuple(map(int, release.minor.split("."))) for release in releases]
    assert len(minors) == 3 and minors == [(1, minors[0][1] + i) for i in range(3)], minors
    for release in releases:
        assert release.kubernetes.startswith(f"v{release.minor}.") and release.staging.startswith("v0.")
        assert release.etcd.startswith("v3.") and release.coredns.startswith("v1.")
    versions = read_versions()
    assert versions["KUBERNETES_VERSION"] == releases[-1].kubernetes
    assert versions["KUBERNETES_STAGING_VERSION"] == "v0." + releases[-1].kubernetes.split(".", 1)[1]
    assert {"ETCD_VERSION", "KWOK_VERSION", "COREDNS_VERSION", "KUBERNETES_MINOR"} <= versions.keys()
    # The per-release pins are resolved, not passed on under their suffixed names.
    assert not any(key.startswith("KUBERNETES_VERSION_") for key in versions)


def test_a_release_is_chosen_by_minor_or_version_from_the_argument_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    oldest, *_, newest = kubernetes_releases()
    monkeypatch.delenv(KUBERNETES_ENV, raising=False)
    assert select_release() == newest
    assert select_release(oldest.minor) == oldest == select_release(oldest.kubernetes)
    assert select_release(oldest.kubernetes.removeprefix("v")) == oldest
    assert select_release("oldest") == oldest and select_release("newest") == newest
    monkeypatch.setenv(KUBERNETES_ENV, oldest.minor)
    assert select_release() == oldest and read_versions()["KUBERNETES_VERSION"] == oldest.kubernetes
    assert select_release(newest.minor) == newest  # an explicit choice wins over the environment
    with pytest.raises(BuildError) as raised:
        select_release("1.30")
    choices = [f"{r.minor} ({r.kubernetes})" for r in kubernetes_releases()]
    assert str(raised.value).endswith("choose one of " + ", ".join([*choices, "oldest", "newest"])), raised.value
    assert "'1.30' is not pinned" in str(raised.value)


def test_every_pinned_module_version_is_the_one_its_build_module_requires() -> None:
    versions = read_versions()
    pinned = {
        "kwok": ("sigs.k8s.io/kwok", versions["KWOK_VERSION"]),
        "volcano": ("volcano.sh/volcano", versions["VOLCANO_VERSION"]),
    }
    for release in kubernetes_releases():
        pinned[f"{release.module_dir}/kubernetes"] = ("k8s.io/kubernetes", release.kubernetes)
        pinned[f"{release.module_dir}/etcd"] = ("go.etcd.io/etcd/server/v3", release.etcd)
        pinned[f"{release.module_dir}/coredns"] = ("github.com/coredns/coredns", release.coredns)
    for module_dir, (module, version) in pinned.items():
        go_mod = (GOBUILD_DIR / module_dir / "go.mod").read_text()
        assert f"{module} {version}\n" in go_mod, f"{module_dir}/go.mod does not require {module} {version}"
    # No build module is left over from a release no longer pinned.
    pinned_dirs = {release.module_dir for release in kubernetes_releases()}
    assert {path.name for path in GOBUILD_DIR.glob("k8s-*")} == pinned_dirs


def test_each_release_replaces_every_staging_module_with_its_own_version() -> None:
    """k8s.io/kubernetes requires its staging modules (k8s.io/api, client-go, ...) at v0.0.0: each
    needs a replace to the release's staging version, all at the same patch."""
    for release in kubernetes_releases():
        go_mod = (GOBUILD_DIR / release.module_dir / "kubernetes" / "go.mod").read_text()
        replaced = dict(re.findall(r"^\t(k8s\.io/\S+) => \1 (\S+)$", go_mod, re.MULTILINE))
        unpinned = set(re.findall(r"^\t(k8s\.io/\S+) v0\.0\.0 // indirect$", go_mod, re.MULTILINE))
        assert {"k8s.io/api", "k8s.io/client-go", "k8s.io/kubelet"} <= replaced.keys()
        assert unpinned <= replaced.keys(), f"{release.minor}: no replace for {sorted(unpinned - replaced.keys())}"
        assert set(replaced.values()) == {release.staging}, release


def test_ldflags_stamp_version() -> None:
    flags = kubernetes_ldflags("v1.34.12")
    assert flags.startswith("-s -w ")
    assert "-X k8s.io/component-base/version.gitVersion=v1.34.12" in flags
    assert "-X k8s.io/component-base/version.gitMinor=34" in flags


def test_one_go_build_for_all_kubernetes_commands(tmp_path: Path) -> None:
    versions = read_versions()
    kube = next(b for b in control_plane(versions).builds if b.name == "kubernetes")
    assert kube.module == f"k8s-{versions['KUBERNETES_MINOR']}/kubernetes"
    argv = kube.command(tmp_path)
    assert argv[argv.index("-o") + 1] == f"{tmp_path}/"
    assert sum(arg.startswith("k8s.io/kubernetes/cmd/") for arg in argv) == 4


def test_cache_key_follows_pins_flags_and_build_modules(tmp_path: Path) -> None:
    copy = tmp_path / "gobuild"
    shutil.copytree(GOBUILD_DIR, copy, ignore=shutil.ignore_patterns("*.go"))
    plane = control_plane(read_versions())
    key = cache_key(plane, copy)
    assert key == cache_key(plane, copy)
    builds = plane.builds
    other_flags = (*builds[:-1], GoBuild("kubernetes", builds[-1].module, builds[-1].packages, "-s", ""))
    assert cache_key(dataclasses.replace(plane, builds=other_flags), copy) != key
    other_pins = tuple((name, "v0" if name == "ETCD_VERSION" else value) for name, value in plane.pins)
    assert cache_key(dataclasses.replace(plane, pins=other_pins), copy) != key
    go_sum = copy / builds[0].module / "go.sum"
    go_sum.write_text(go_sum.read_text() + "\n")
    assert cache_key(plane, copy) != key


def test_each_release_builds_into_directories_of_its_own_named_after_its_version(tmp_path: Path) -> None:
    """Switching releases never rebuilds another's binaries, and pinning one release (its patch, its
    etcd) leaves the others' cache keys alone."""
    releases = kubernetes_releases()
    planes = [control_plane(read_versions(kubernetes=release.minor)) for release in releases]
    nodes = [node_binaries(read_versions(kubernetes=release.minor)) for release in releases]
    directories = [set_dir(binary_set) for binary_set in (*planes, *nodes)]
    assert len(set(directories)) == 2 * len(releases)
    for release, plane, node in zip(releases, planes, nodes, strict=True):
        assert set_dir(plane).name.startswith(f"control-plane-{release.kubernetes}-")
        assert set_dir(node).name.startswith(f"nodes-{release.kubernetes}-")
        assert ("ETCD_VERSION", release.etcd) in plane.pins and ("COREDNS_VERSION", release.coredns) in node.pins
    copy = tmp_path / "versions.env"
    oldest, newest = releases[0], releases[-1]
    text = (GOBUILD_DIR / "versions.env").read_text()
    suffix = oldest.minor.replace(".", "_")
    copy.write_text(text.replace(f"ETCD_VERSION_{suffix}={oldest.etcd}", f"ETCD_VERSION_{suffix}=v3.9.9"))
    assert cache_key(control_plane(read_versions(copy, kubernetes=newest.minor))) == cache_key(planes[-1])
    assert cache_key(control_plane(read_versions(copy, kubernetes=oldest.minor))) != cache_key(planes[0])


def test_devcluster_cli_takes_the_release_and_refuses_one_not_pinned(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    oldest = kubernetes_releases()[0]
    parse = _parser().parse_args
    assert parse(["up", "--kubernetes", oldest.kubernetes]).kubernetes == oldest.minor
    assert parse(["build", "--kubernetes", oldest.minor]).kubernetes == oldest.minor
    assert parse(["prepare"]).kubernetes is None
    with pytest.raises(SystemExit):
        parse(["up", "--kubernetes", "1.20"])
    assert "Kubernetes '1.20' is not pinned" in capsys.readouterr().err
    # The choice reaches every build through the environment, as SPARKOP_KUBERNETES would.
    monkeypatch.setenv(KUBERNETES_ENV, "")  # unset, and restored after the test
    built: list[Path] = []
    monkeypatch.setattr("devcluster.__main__.ensure_built", lambda log: built.append(bin_dir_now()) or Path("/x"))
    assert devcluster_main(["build", "--kubernetes", oldest.minor]) == 0
    assert built == [set_dir(control_plane(read_versions(kubernetes=oldest.minor)))]
    assert os.environ[KUBERNETES_ENV] == oldest.minor


def bin_dir_now() -> Path:
    return set_dir(control_plane(read_versions()))


def test_component_argv_bind_localhost(tmp_path: Path) -> None:
    ports = components.Ports.from_list(list(range(20000, 20000 + components.count_ports())))
    pki = components.CertPaths.in_dir(tmp_path)
    etcd = components.etcd_argv(tmp_path, tmp_path / "data", ports)
    assert "--listen-client-urls=http://127.0.0.1:20000" in etcd and "--unsafe-no-fsync" in etcd
    apiserver = components.apiserver_argv(tmp_path, pki, ports)
    assert "--bind-address=127.0.0.1" in apiserver and "--secure-port=20002" in apiserver
    assert "--etcd-servers=http://127.0.0.1:20000" in apiserver
    kwok = components.kwok_argv(tmp_path, tmp_path / "kc", ports)
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in kwok
    # kwok renews its nodes' Leases as a kubelet does: the node-lifecycle controller keeps them Ready.
    assert f"--node-lease-duration-seconds={components.KWOK_NODE_LEASE_SECONDS}" in kwok


def test_the_node_lifecycle_controllers_run_only_when_asked(tmp_path: Path) -> None:
    ports = components.Ports.from_list(list(range(20000, 20000 + components.count_ports())))
    pki = components.CertPaths.in_dir(tmp_path)

    def controllers(argv: list[str]) -> list[str]:
        (flag,) = (a for a in argv if a.startswith("--controllers="))
        return flag.removeprefix("--controllers=").split(",")

    plain = components.controller_manager_argv(tmp_path, pki, tmp_path / "kc", ports, tmp_path / "certs")
    watched = components.controller_manager_argv(
        tmp_path, pki, tmp_path / "kc", ports, tmp_path / "certs", node_lifecycle=True
    )
    assert not set(components.NODE_LOSS_CONTROLLERS) & set(controllers(plain))
    assert set(components.NODE_LOSS_CONTROLLERS) <= set(controllers(watched))
    assert f"--node-monitor-grace-period={components.NODE_MONITOR_GRACE_SECONDS}s" in watched


def test_a_benchmark_may_keep_every_finished_pod_and_give_etcd_more_room(tmp_path: Path) -> None:
    ports = components.Ports.from_list(list(range(20000, 20000 + components.count_ports())))
    pki = components.CertPaths.in_dir(tmp_path)
    default = components.controller_manager_argv(tmp_path, pki, tmp_path / "kc", ports, tmp_path / "certs")
    scale = components.ScaleSettings(terminated_pod_gc_threshold=0)
    kept = components.controller_manager_argv(tmp_path, pki, tmp_path / "kc", ports, tmp_path / "certs", scale=scale)
    assert not any(a.startswith("--terminated-pod-gc-threshold") for a in default)  # Kubernetes' default
    assert "--terminated-pod-gc-threshold=0" in kept
    quadratic = ("endpoints-controller", "endpointslice-controller")
    lean = components.without_controllers(default, quadratic)
    (controllers,) = (a.removeprefix("--controllers=").split(",") for a in lean if a.startswith("--controllers="))
    assert controllers == [c for c in components.CONTROLLERS if c not in quadratic]
    assert [a for a in lean if not a.startswith("--controllers=")] == [
        a for a in default if not a.startswith("--controllers=")
    ]
    with pytest.raises(ValueError, match="endpoint-controller"):
        components.without_controllers(default, ("endpoint-controller",))  # a misspelt name is refused, not ignored
    assert components.ScaleSettings().apiserver_env() == {}
    assert components.ScaleSettings(apiserver_memory_limit="8GiB").apiserver_env() == {"GOMEMLIMIT": "8GiB"}
    assert not any(a.startswith("--quota-backend-bytes") for a in components.etcd_argv(tmp_path, tmp_path, ports))
    roomy = components.etcd_argv(tmp_path, tmp_path / "data", ports, quota_bytes=8 * 2**30)
    assert "--quota-backend-bytes=8589934592" in roomy


def test_fake_node_has_no_taints() -> None:
    node = components.fake_node("n0", "2", "4Gi")
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["labels"]["type"] == "kwok"
    assert "taints" not in node["spec"]
    assert node["status"]["allocatable"]["cpu"] == "2"


def test_the_batch_schedulers_are_built_from_their_own_module_each_binary_by_name(tmp_path: Path) -> None:
    built = schedulers(read_versions())
    assert built.binaries == ("vc-scheduler", "vc-controller-manager")
    for build in built.builds:
        argv = build.command(tmp_path)
        assert argv[argv.index("-o") + 1] == f"{tmp_path}/{build.output}" and build.module == "volcano"
    assert "-X volcano.sh/volcano/pkg/version.Version=v1.10.0" in built.builds[0].ldflags
    # A tool: pinning it rebuilds no cluster binary, and it is keyed apart from the control plane.
    assert cache_key(built) != cache_key(control_plane(read_versions()))


def test_up_schedulers_flag_takes_a_list_and_names_the_choices_when_wrong() -> None:
    parse = _parser().parse_args
    assert parse(["up", "--schedulers", "volcano"]).schedulers == ("volcano",)
    assert parse(["up"]).schedulers == ()
    with pytest.raises(argparse.ArgumentTypeError, match="unknown scheduler yunikorn: choose from volcano"):
        _schedulers("volcano,yunikorn")


def test_volcano_runs_without_leader_election_on_the_cluster_kubeconfig(tmp_path: Path) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    argv = components.volcano_scheduler_argv(tmp_path, tmp_path / "kubeconfig", conf)
    assert argv[0] == f"{tmp_path}/vc-scheduler" and "--leader-elect=false" in argv
    assert f"--scheduler-conf={conf}" in argv and "--scheduler-name=volcano" in argv
    manager = components.volcano_controller_manager_argv(tmp_path, tmp_path / "kubeconfig")
    assert "--controllers=queue-controller,pg-controller" in manager and "--leader-elect=false" in manager
    assert "name: gang" in components.VOLCANO_SCHEDULER_CONF and "enqueue" in components.VOLCANO_SCHEDULER_CONF
