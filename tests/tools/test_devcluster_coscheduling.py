"""`up --schedulers coscheduling`: scheduler-plugins' scheduler and controller, what they are built
from and how they run (tests/integration/test_coscheduling.py runs them)."""

from __future__ import annotations

import re
from pathlib import Path

from devcluster import components
from devcluster.__main__ import _parser
from devcluster.build import (
    TOOL_BUILDS,
    cache_key,
    control_plane,
    coscheduling_binaries,
    kubernetes_ldflags,
    kubernetes_releases,
    read_versions,
    schedulers,
)
from devcluster.paths import GOBUILD_DIR

GO_MOD = GOBUILD_DIR / "scheduler-plugins" / "go.mod"


def test_the_build_module_requires_the_pinned_scheduler_plugins() -> None:
    version = read_versions()["SCHEDULER_PLUGINS_VERSION"]
    assert f"require sigs.k8s.io/scheduler-plugins {version}\n" in GO_MOD.read_text()


def test_its_kubernetes_libraries_are_one_pinned_release() -> None:
    """scheduler-plugins' replace directives, repeated (Go ignores a dependency's), each at the one
    Kubernetes release versions.env pins for it: the module proxy serves v0.34.7 of only some of the
    staging modules that scheduler-plugins v0.34.7 pins, and one release for all keeps them
    consistent. Its code is written against 1.34's, so it is not the cluster's release."""
    versions = read_versions()
    pinned = versions["SCHEDULER_PLUGINS_KUBERNETES_VERSION"]
    replaced = dict(re.findall(r"^\t(k8s\.io/\S+) => \1 (\S+)$", GO_MOD.read_text(), re.MULTILINE))
    assert replaced.pop("k8s.io/kubernetes") == pinned
    assert replaced.pop("k8s.io/legacy-cloud-providers") == "v0.31.8"  # upstream's: it has no 0.34
    assert {"k8s.io/api", "k8s.io/client-go", "k8s.io/kube-scheduler", "k8s.io/cluster-bootstrap"} <= replaced.keys()
    assert set(replaced.values()) == {"v0." + pinned.split(".", 1)[1]}


def test_scheduler_and_controller_are_built_by_name_as_a_set_of_their_own(tmp_path: Path) -> None:
    versions = read_versions()
    built = coscheduling_binaries(versions)
    assert built.binaries == ("scheduler-plugins-scheduler", "scheduler-plugins-controller")
    for build, binary in zip(built.builds, built.binaries, strict=True):
        argv = build.command(tmp_path)
        assert argv[argv.index("-o") + 1] == f"{tmp_path}/{binary}" and build.module == "scheduler-plugins"
        # The Kubernetes release it is built against: as "v0.34.7" the scheduler would refuse to start.
        assert build.ldflags == kubernetes_ldflags(versions["SCHEDULER_PLUGINS_KUBERNETES_VERSION"])
    # A tool: pinning it rebuilds no cluster binary, nor Volcano; one build serves every release.
    assert {build.name for build in built.builds} <= TOOL_BUILDS
    assert cache_key(built) not in (cache_key(control_plane(versions)), cache_key(schedulers(versions)))
    each_release = {cache_key(coscheduling_binaries(read_versions(kubernetes=r.minor))) for r in kubernetes_releases()}
    assert each_release == {cache_key(built)}


def test_up_takes_coscheduling_alone_or_beside_volcano() -> None:
    parse = _parser().parse_args
    assert parse(["up", "--schedulers", "coscheduling"]).schedulers == ("coscheduling",)
    assert parse(["up", "--schedulers", "coscheduling,volcano"]).schedulers == ("volcano", "coscheduling")


def test_the_scheduler_is_a_second_one_with_coscheduling_as_its_queue_sort(tmp_path: Path) -> None:
    config = components.coscheduling_scheduler_config(tmp_path / "kubeconfig")
    assert config["clientConnection"] == {"kubeconfig": f"{tmp_path}/kubeconfig"}
    assert config["leaderElection"] == {"leaderElect": False}
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == components.COSCHEDULING_SCHEDULER_NAME != "default-scheduler"
    plugins = profile["plugins"]
    assert plugins["multiPoint"] == {"enabled": [{"name": "Coscheduling"}]}
    assert plugins["queueSort"] == {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}


def test_both_bind_localhost_on_the_ports_given(tmp_path: Path) -> None:
    ports = components.CoschedulingPorts(scheduler=20100, controller_health=20101)
    scheduler = components.coscheduling_scheduler_argv(tmp_path, tmp_path / "kc", tmp_path / "c.yaml", ports, tmp_path)
    assert scheduler[0] == f"{tmp_path}/scheduler-plugins-scheduler" and f"--config={tmp_path}/c.yaml" in scheduler
    assert "--bind-address=127.0.0.1" in scheduler and "--secure-port=20100" in scheduler
    controller = components.coscheduling_controller_argv(tmp_path, tmp_path / "kc", ports)
    assert controller[0] == f"{tmp_path}/scheduler-plugins-controller" and f"--kubeconfig={tmp_path}/kc" in controller
    assert "--probeAddr=127.0.0.1:20101" in controller and "--metricsAddr=0" in controller
