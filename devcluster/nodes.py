"""Real nodes: the network plan and every config file of containerd, the kubelet, CNI,
kube-proxy and CoreDNS (pure functions; devcluster/realnodes.py runs them).

All real nodes of a cluster share this machine's network namespace; each has its own Linux
bridge and pod subnet, and the bridge's own address is the node's IP (the kubelet refuses a
loopback node IP, and `kubectl logs` needs an address the API server can reach):

    spk-host (bridge) 10.246.0.1      the API server (real-node clusters bind here) and CoreDNS
    spk-node<i>       10.245.<i>.1    node i's IP; its pods get 10.245.<i>.2-254
    services          10.0.0.0/16     (components.SERVICE_CIDR), kube-proxy's iptables rules

Each node has its own containerd (two kubelets on one runtime would each kill the other's
pods as orphans), its own cgroup root for the same reason, and its own mount namespace so
that everything it mounts (volumes, container root filesystems, network namespace files)
disappears with its processes.
"""

from __future__ import annotations

import ipaddress
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HOST_INTERFACE = "spk-host"
HOST_IP = "10.246.0.1"
NODE_NETWORK = ipaddress.ip_network("10.245.0.0/16")
CLUSTER_DOMAIN = "cluster.local"
CNI_BIN_DIR = Path("/usr/lib/cni")
# The node's label, so tests and users can aim pods at real nodes when kwok nodes coexist.
NODE_TYPE_LABEL = ("type", "real")
MAX_NODES = 16
# containerd's host configuration for any registry host without a directory of its own.
REGISTRY_HOSTS_FILE = Path("_default") / "hosts.toml"
# Machine-wide: real nodes use this machine's network namespace, so one cluster at a time.
RUNTIME_ROOT = Path("/run/sparkop-devcluster")
STATE_ROOT = Path("/var/lib/sparkop-devcluster")


@dataclass(frozen=True)
class RealNode:
    """Where node `index` keeps what, and its addresses."""

    index: int
    cluster_dir: Path  # config files and logs (removed with the cluster)
    image_store: Path  # containerd's root: imported images survive `down` and are reused

    @property
    def name(self) -> str:
        return f"real-node-{self.index}"

    @property
    def bridge(self) -> str:
        return f"spk-node{self.index}"

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"{NODE_NETWORK.network_address + self.index * 256}/24")

    @property
    def ip(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def cgroup_root(self) -> str:
        return f"/sparkop-devcluster-{self.name}"

    # Runtime state sits in short machine-wide paths: Unix socket paths may not pass 107 bytes.
    @property
    def runtime_dir(self) -> Path:
        return RUNTIME_ROOT / self.name

    @property
    def containerd_state(self) -> Path:
        return self.runtime_dir / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.runtime_dir / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        # Here, not with the cluster's files: the path on containerd's command line is how a
        # later `up` finds a containerd whose cluster is gone.
        return self.runtime_dir / "containerd.toml"

    @property
    def state_dir(self) -> Path:
        return STATE_ROOT / self.name

    @property
    def kubelet_root(self) -> Path:
        return self.state_dir / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.state_dir / "pod-logs"

    @property
    def ipam_dir(self) -> Path:
        return self.state_dir / "ipam"

    @property
    def config_dir(self) -> Path:
        return self.cluster_dir / "nodes" / self.name

    @property
    def cni_conf_dir(self) -> Path:
        return self.config_dir / "cni"

    @property
    def registry_hosts_dir(self) -> Path:
        """containerd's `config_path`: the hosts.toml that sends its pulls to devcluster/registry.py."""
        return self.config_dir / "registry-hosts"


def real_node(index: int, cluster_dir: Path, images_root: Path) -> RealNode:
    if not 0 <= index < MAX_NODES:
        raise ValueError(f"real node index {index} is outside 0..{MAX_NODES - 1}")
    return RealNode(index, cluster_dir, images_root / f"real-node-{index}" / "containerd")


def containerd_config(node: RealNode, sandbox_image: str) -> str:
    """containerd 1.6's config (version 2) for one node, as TOML."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    lines = [
        "version = 2",
        f"root = {_toml(node.image_store)}",
        f"state = {_toml(node.containerd_state)}",
        # Snapshotters this machine cannot use only add failures to the log.
        'disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",'
        ' "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]',
        "",
        "[grpc]",
        f"  address = {_toml(node.containerd_socket)}",
        "",
        "[metrics]",
        '  address = ""',
        "",
        f"[{cri}]",
        f"  sandbox_image = {_toml(sandbox_image)}",
        # This machine may not lower a process's oom_score_adj; runc fails the sandbox if asked to.
        "  restrict_oom_score_adj = true",
        # The default streaming port (10010) would collide between nodes; 0 picks a free one.
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        "  enable_selinux = false",
        "",
        f"[{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        "",
        f"[{cri}.containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        "",
        f"[{cri}.containerd.runtimes.runc.options]",
        "  SystemdCgroup = false",
        "",
        f"[{cri}.cni]",
        f"  bin_dir = {_toml(CNI_BIN_DIR)}",
        f"  conf_dir = {_toml(node.cni_conf_dir)}",
        "  max_conf_num = 1",
        "",
        # No registry is reachable: every pull (imagePullPolicy Always) goes to devcluster/registry.py.
        f"[{cri}.registry]",
        f"  config_path = {_toml(node.registry_hosts_dir)}",
        "",
    ]
    return "\n".join(lines)


def _toml(value: object) -> str:
    return json.dumps(str(value))  # a JSON string is a valid TOML basic string


def registry_url(port: int, node: RealNode) -> str:
    """The API root of devcluster/registry.py's view of `node`'s store."""
    return f"http://127.0.0.1:{port}/{node.name}/v2"


def registry_hosts_toml(node: RealNode, port: int) -> str:
    """`REGISTRY_HOSTS_FILE` under the node's `config_path`: every registry host's images come from
    devcluster/registry.py's view of the node's own store, trusted to resolve tags. containerd 1.6.20
    ignores a hosts.toml without a `host` table ("invalid `host` tree") and would go to the image's own
    registry, so the view is a host entry; it is the `server` too, so that a miss ends there ("not
    found") instead of at a registry that cannot be reached."""
    url = registry_url(port, node)
    return "\n".join(
        [
            "# devcluster/registry.py: the node's own store, served read-only; no registry outside is reachable.",
            f"server = {_toml(url)}",
            "",
            f"[host.{_toml(url)}]",
            '  capabilities = ["pull", "resolve"]',
            "",
        ]
    )


def registry_argv(port: int, real: list[RealNode]) -> list[str]:
    """devcluster/registry.py for the cluster, serving each of `real`'s containerd stores."""
    stores = [arg for node in real for arg in ("--node", node.name, str(node.containerd_socket), str(node.image_store))]
    return [sys.executable, "-m", "devcluster.registry", "--port", str(port), *stores]


def cni_config(node: RealNode) -> dict[str, Any]:
    """bridge + host-local (+ portmap for hostPort); containerd adds loopback itself."""
    return {
        "cniVersion": "1.0.0",
        "name": node.bridge,
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": True,
                # Pods only talk to each other and to this machine: no NAT to the outside.
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(node.subnet), "gateway": node.ip}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(node.ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(node: RealNode, ca_file: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.ip,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": node.ip,
        "healthzPort": 10248,
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup_root,
        # These machines mount cgroup v1 (v2 only beside it, at /sys/fs/cgroup/unified), which
        # kubelets since 1.35 refuse unless told not to (KEP-5573; a no-op on a cgroup v2 host).
        "failCgroupV1": False,
        "cgroupsPerQOS": True,
        "failSwapOn": False,
        # Logs and `exec` are served to the API server only, on this machine's own addresses.
        "authentication": {
            "anonymous": {"enabled": True},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDNS": [HOST_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        # Pods see cluster DNS only: this machine's resolver knows nothing a pod could need.
        "resolvConf": "",
        "podLogsDir": str(node.pod_logs),
        "staticPodPath": "",
        "serializeImagePulls": False,
        # Images are built here and cannot be pulled back: never garbage-collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # No pull here needs credentials (the registry serves each node's own store). The default,
        # NeverVerifyPreloadedImages, refuses a pod with `imagePullPolicy: Never` once the kubelet has
        # pulled its image under another name: its pull records key the repository as the pod wrote it,
        # so a pull of docker.io/apache/spark:4.0.4 leaves apache/spark:4.0.5 (the same image) refused
        # with ErrImageNeverPull for the rest of the node's life.
        "imagePullCredentialsVerificationPolicy": "NeverVerify",
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1Gi",
            "imagefs.available": "1Gi",
        },
        "makeIPTablesUtilChains": False,
        "registerNode": True,
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
    }


def kubelet_argv(bin_dir: Path, node: RealNode, kubeconfig: Path, config_file: Path) -> list[str]:
    label_key, label_value = NODE_TYPE_LABEL
    return [
        str(bin_dir / "kubelet"),
        f"--kubeconfig={kubeconfig}",
        f"--config={config_file}",
        f"--root-dir={node.kubelet_root}",
        f"--cert-dir={node.state_dir / 'pki'}",
        f"--hostname-override={node.name}",
        f"--node-ip={node.ip}",
        f"--node-labels={label_key}={label_value}",
        "--v=1",
    ]


def containerd_argv(config_file: Path) -> list[str]:
    return ["/usr/bin/containerd", f"--config={config_file}"]


@dataclass(frozen=True)
class HostPorts:
    """Ports of the per-cluster host processes (on loopback)."""

    coredns_health: int
    coredns_ready: int
    kube_proxy_healthz: int
    kube_proxy_metrics: int
    registry: int


def kube_proxy_config(kubeconfig: Path, first_node: RealNode, ports: HostPorts) -> dict[str, Any]:
    # One kube-proxy serves every real node: they share this network namespace and its rules.
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": str(NODE_NETWORK),
        "hostnameOverride": first_node.name,
        "bindAddress": "127.0.0.1",
        "healthzBindAddress": f"127.0.0.1:{ports.kube_proxy_healthz}",
        "metricsBindAddress": f"127.0.0.1:{ports.kube_proxy_metrics}",
        # 0 = leave this machine's conntrack settings as they are.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        # localhostNodePorts would flip route_localnet on every interface of the machine.
        "iptables": {"localhostNodePorts": False, "minSyncPeriod": "0s", "syncPeriod": "30s"},
        "nodePortAddresses": [f"{NODE_NETWORK}", f"{HOST_IP}/32"],
    }


def kube_proxy_argv(bin_dir: Path, config_file: Path) -> list[str]:
    return [str(bin_dir / "kube-proxy"), f"--config={config_file}", "--v=1"]


def kube_proxy_cleanup_argv(bin_dir: Path) -> list[str]:
    return [str(bin_dir / "kube-proxy"), "--cleanup"]


def corefile(kubeconfig: Path, context: str, ports: HostPorts) -> str:
    """Cluster DNS on HOST_IP:53: Service and pod names only (no upstream: pods have no internet)."""
    return "\n".join(
        [
            ".:53 {",
            f"    bind {HOST_IP}",
            "    errors",
            f"    health 127.0.0.1:{ports.coredns_health}",
            f"    ready 127.0.0.1:{ports.coredns_ready}",
            f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{",
            f"        kubeconfig {kubeconfig} {context}",
            "        pods insecure",
            "        fallthrough in-addr.arpa ip6.arpa",
            "        ttl 5",
            "    }",
            "    cache 5",
            "    loadbalance",
            "}",
            "",
        ]
    )


def coredns_argv(bin_dir: Path, corefile_path: Path) -> list[str]:
    return [str(bin_dir / "coredns"), "-conf", str(corefile_path)]


def dump_yaml(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False)
