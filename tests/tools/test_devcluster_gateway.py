"""devcluster's Gateway API support and real-node storage, without a cluster: Traefik's build in its
own module as the proxy serves it, its command line, the GatewayClass and Gateway `up` creates, and the
StorageClass and volumes of a real-node cluster."""

from __future__ import annotations

from pathlib import Path

from devcluster import components
from devcluster.build import TOOL_BUILDS, cache_key, control_plane, read_versions, traefik_binaries


def test_traefik_is_built_in_its_own_module_at_its_pin_apart_from_the_cluster(tmp_path: Path) -> None:
    versions = read_versions()
    built = traefik_binaries(versions)
    (build,) = built.builds
    assert built.binaries == ("traefik",)
    assert build.in_module == f"github.com/traefik/traefik/v3@{versions['TRAEFIK_VERSION']}"
    argv = build.command(tmp_path)
    # Its own go.mod and go.sum, as downloaded: nothing may be added to them.
    assert argv[:3] == ["go", "build", "-mod=readonly"] and argv[-1] == "./cmd/traefik"
    assert f"version.Version={versions['TRAEFIK_VERSION']}" in build.ldflags
    # Keyed by its own pin: a new Traefik rebuilds Traefik only, a new Kubernetes never rebuilds it.
    assert built.pins == (("TRAEFIK_VERSION", versions["TRAEFIK_VERSION"]),)
    assert build.name in TOOL_BUILDS and cache_key(built) != cache_key(control_plane(versions))
    assert "GATEWAY_API_VERSION" in versions


def test_the_gateway_listener_is_traefiks_entry_point_and_takes_both_routes(tmp_path: Path) -> None:
    info = components.GatewayInfo(port=20080, ping_port=20081)
    argv = components.traefik_argv(tmp_path, info)
    assert f"--entryPoints.{info.listener}.address=127.0.0.1:20080" in argv
    assert "--providers.kubernetesgateway=true" in argv and "--ping=true" in argv
    gateway_class, gateway = components.gateway_manifests(info)
    assert gateway_class["spec"]["controllerName"] == components.TRAEFIK_CONTROLLER
    (listener,) = gateway["spec"]["listeners"]
    assert (listener["name"], listener["protocol"], listener["port"]) == (info.listener, "HTTP", 20080)
    assert listener["allowedRoutes"]["kinds"] == [{"kind": "HTTPRoute"}, {"kind": "GRPCRoute"}]
    assert info.url == "http://127.0.0.1:20080"


def test_real_node_storage_is_a_default_class_of_shared_writable_volumes(tmp_path: Path) -> None:
    storage_class, *volumes = components.storage_manifests(tmp_path, count=2)
    assert storage_class["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert [v["spec"]["hostPath"]["path"] for v in volumes] == [str(tmp_path / "pv-1"), str(tmp_path / "pv-2")]
    assert all("ReadWriteMany" in v["spec"]["accessModes"] for v in volumes)
    assert "persistentvolume-binder-controller" in components.CONTROLLERS
