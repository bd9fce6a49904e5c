"""The real nodes' network plan and config files (devcluster/nodes.py), without running them."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

import pytest

from devcluster import nodes, realnodes
from devcluster.build import control_plane, node_binaries, read_versions, set_dir
from devcluster.nodes import HOST_IP, NODE_NETWORK, HostPorts, real_node

CLUSTER_DIR = Path("/cache/clusters/dev")
IMAGES = Path("/cache/nodes")
PORTS = HostPorts(
    coredns_health=1001, coredns_ready=1002, kube_proxy_healthz=1003, kube_proxy_metrics=1004, registry=1005
)


def test_every_node_has_its_own_subnet_bridge_cgroup_and_runtime_paths() -> None:
    all_nodes = [real_node(i, CLUSTER_DIR, IMAGES) for i in range(nodes.MAX_NODES)]
    for field in ("name", "bridge", "subnet", "ip", "cgroup_root", "runtime_dir", "state_dir", "image_store"):
        values = [getattr(node, field) for node in all_nodes]
        assert len(set(values)) == len(values), field
    for node in all_nodes:
        assert node.subnet.subnet_of(NODE_NETWORK)  # type: ignore[arg-type]
        assert ipaddress.ip_address(node.ip) in node.subnet and node.ip.endswith(".1")
        assert ipaddress.ip_address(HOST_IP) not in NODE_NETWORK
        # Linux interface names are at most 15 bytes; Unix socket paths at most 107.
        assert len(node.bridge) <= 15
        assert len(str(node.containerd_socket)) < 108
    with pytest.raises(ValueError, match="outside"):
        real_node(nodes.MAX_NODES, CLUSTER_DIR, IMAGES)


def test_containerd_config_is_toml_with_the_settings_this_machine_needs() -> None:
    node = real_node(1, CLUSTER_DIR, IMAGES)
    config = tomllib.loads(nodes.containerd_config(node, "sparkop.io/devcluster/pause:abc"))
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert config["version"] == 2
    assert config["root"] == str(node.image_store) and config["state"] == str(node.containerd_state)
    assert config["grpc"]["address"] == str(node.containerd_socket)
    assert cri["sandbox_image"] == "sparkop.io/devcluster/pause:abc"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["stream_server_port"] == "0"
    assert cri["cni"]["conf_dir"] == str(node.cni_conf_dir)
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    # Pulls go to devcluster/registry.py through the hosts.toml there (and only there: no mirrors table).
    assert cri["registry"] == {"config_path": str(node.registry_hosts_dir)}
    assert node.registry_hosts_dir.is_relative_to(node.config_dir)


def test_cni_config_gives_the_node_subnet_with_the_node_ip_as_gateway() -> None:
    node = real_node(2, CLUSTER_DIR, IMAGES)
    config = nodes.cni_config(node)
    bridge = config["plugins"][0]
    assert [p["type"] for p in config["plugins"]] == ["bridge", "portmap"]
    assert bridge["bridge"] == node.bridge and bridge["isGateway"] is True
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.245.2.0/24", "gateway": "10.245.2.1"}]]
    assert bridge["ipam"]["dataDir"] == str(node.ipam_dir)


def test_kubelet_serves_on_the_node_ip_with_cluster_dns_and_never_collects_images() -> None:
    node = real_node(0, CLUSTER_DIR, IMAGES)
    config = nodes.kubelet_config(node, Path("/pki/ca.crt"))
    assert config["address"] == node.ip == config["healthzBindAddress"]
    assert config["clusterDNS"] == [HOST_IP] and config["clusterDomain"] == "cluster.local"
    assert config["cgroupRoot"] == node.cgroup_root and config["cgroupDriver"] == "cgroupfs"
    # This machine's cgroup v1, which kubelets since 1.35 refuse by default.
    assert config["failCgroupV1"] is False
    assert config["containerRuntimeEndpoint"] == f"unix://{node.containerd_socket}"
    assert config["imageGCHighThresholdPercent"] == 100
    argv = nodes.kubelet_argv(Path("/bin"), node, Path("/kc"), Path("/kubelet.yaml"))
    assert f"--node-ip={node.ip}" in argv and f"--hostname-override={node.name}" in argv
    assert "--node-labels=type=real" in argv


def test_corefile_and_kube_proxy_use_the_host_address_and_given_ports() -> None:
    corefile = nodes.corefile(Path("/kc"), "devcluster-dev", PORTS)
    assert f"bind {HOST_IP}" in corefile and "kubeconfig /kc devcluster-dev" in corefile
    assert "ready 127.0.0.1:1002" in corefile and "kubernetes cluster.local" in corefile
    proxy = nodes.kube_proxy_config(Path("/kc"), real_node(0, CLUSTER_DIR, IMAGES), PORTS)
    assert proxy["mode"] == "iptables" and proxy["clusterCIDR"] == str(NODE_NETWORK)
    assert proxy["healthzBindAddress"] == "127.0.0.1:1003"
    assert proxy["iptables"]["localhostNodePorts"] is False


def test_iptables_clean_up_finds_rules_that_jump_into_our_chains() -> None:
    assert realnodes._jumps_to_ours(["-A", "INPUT", "-j", "KUBE-FIREWALL"])
    assert realnodes._jumps_to_ours(
        ["-A", "PREROUTING", "-m", "comment", "--comment", "x y", "-j", "CNI-HOSTPORT-DNAT"]
    )
    assert not realnodes._jumps_to_ours(["-A", "INPUT", "-j", "ACCEPT"])
    assert not realnodes._jumps_to_ours(["-A", "INPUT", "-s", "KUBE-looking-comment", "-j", "DROP"])


def test_node_binaries_are_a_set_of_their_own() -> None:
    versions = read_versions()
    plane, node = control_plane(versions), node_binaries(versions)
    assert set(node.binaries) == {"kubelet", "kube-proxy", "coredns", "pause"}
    assert not set(node.binaries) & set(plane.binaries)
    # Building real-node binaries never invalidates the control plane's cache, and vice versa.
    assert set_dir(plane) != set_dir(node)


def test_only_the_cluster_that_claimed_the_real_nodes_owns_them() -> None:
    owner = {"name": "a", "directory": "/cache/clusters/a"}
    assert realnodes.owns_real_nodes("/cache/clusters/a", owner)
    assert not realnodes.owns_real_nodes("/cache/clusters/b", owner)  # its `up` was refused: a runs them
    assert not realnodes.owns_real_nodes("/cache/clusters/a", None)  # torn down already
