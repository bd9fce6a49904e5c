from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from devcluster import components
from devcluster.__main__ import _parser, _schedulers
from devcluster.build import GoBuild, cache_key, go_builds, kubernetes_ldflags, read_versions, schedulers
from devcluster.paths import GOBUILD_DIR


def test_versions_file_is_pinned() -> None:
    versions = read_versions()
    assert versions["KUBERNETES_VERSION"].startswith("v1.")
    assert {"ETCD_VERSION", "KWOK_VERSION"} <= versions.keys()


def test_every_pinned_module_version_is_the_one_its_build_module_requires() -> None:
    versions = read_versions()
    pinned = {
        "kubernetes": ("k8s.io/kubernetes", versions["KUBERNETES_VERSION"]),
        "etcd": ("go.etcd.io/etcd/server/v3", versions["ETCD_VERSION"]),
        "kwok": ("sigs.k8s.io/kwok", versions["KWOK_VERSION"]),
        "coredns": ("github.com/coredns/coredns", versions["COREDNS_VERSION"]),
        "volcano": ("volcano.sh/volcano", versions["VOLCANO_VERSION"]),
    }
    for module_dir, (module, version) in pinned.items():
        go_mod = (GOBUILD_DIR / module_dir / "go.mod").read_text()
        assert f"{module} {version}\n" in go_mod, f"{module_dir}/go.mod does not require {module} {version}"


def test_ldflags_stamp_version() -> None:
    flags = kubernetes_ldflags("v1.34.12")
    assert flags.startswith("-s -w ")
    assert "-X k8s.io/component-base/version.gitVersion=v1.34.12" in flags
    assert "-X k8s.io/component-base/version.gitMinor=34" in flags


def test_one_go_build_for_all_kubernetes_commands(tmp_path: Path) -> None:
    kube = next(b for b in go_builds(read_versions()) if b.name == "kubernetes")
    argv = kube.command(tmp_path)
    assert argv[argv.index("-o") + 1] == f"{tmp_path}/"
    assert sum(arg.startswith("k8s.io/kubernetes/cmd/") for arg in argv) == 4


def test_cache_key_follows_versions_and_flags(tmp_path: Path) -> None:
    copy = tmp_path / "gobuild"
    shutil.copytree(GOBUILD_DIR, copy, ignore=shutil.ignore_patterns("*.go"))
    builds = go_builds(read_versions())
    key = cache_key(builds, copy)
    assert key == cache_key(builds, copy)
    other = [*builds[:-1], GoBuild("kubernetes", "kubernetes", builds[-1].packages, "-s", "")]
    assert cache_key(other, copy) != key
    (copy / "versions.env").write_text((copy / "versions.env").read_text() + "\nEXTRA=1\n")
    assert cache_key(builds, copy) != key


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
    assert cache_key(built.builds) != cache_key(go_builds(read_versions()))


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
