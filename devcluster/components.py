"""Command lines and config files of the control-plane components (pure functions)."""

from __future__ import annotations

import base64
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devcluster.certs import CertPaths
from devcluster.paths import AUDIT_POLICY_FILE, STAGES_FILE
from devcluster.ports import LOCALHOST

SERVICE_CIDR = "10.0.0.0/16"  # a /24 runs out under a benchmark's thousand apps (each has a UI Service)
POD_CIDR = "10.244.0.1/16"  # kwok hands out pod IPs from here; kept apart from services
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
FAKE_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# The label every fake node has: what the simulator's executors select.
FAKE_NODE_LABEL = ("type", "kwok")

# Controllers this cluster needs: namespace deletion, garbage collection, service accounts
# and their tokens, plus the cheap workload controllers tests and demos may lean on.
# Deliberately absent: cloud, volume and certificate-signing controllers, and node-lifecycle unless
# real nodes run (NODE_LOSS_CONTROLLERS).
CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "pod-garbage-collector-controller",
    "ttl-after-finished-controller",
    "job-controller",
    "replicaset-controller",
    "deployment-controller",
    "endpoints-controller",
    "endpointslice-controller",
    # PodDisruptionBudgets' status: what the eviction API (kubectl drain) reads to refuse an eviction.
    "disruption-controller",
)
# With real nodes only: a node whose kubelet stops reporting turns NotReady and is tainted
# node.kubernetes.io/unreachable, and its pods are deleted once their toleration of that taint runs
# out, as in any cluster (kwok renews its nodes' leases, so fake nodes stay Ready beside them).
NODE_LOSS_CONTROLLERS = ("node-lifecycle-controller", "taint-eviction-controller")


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    @classmethod
    def from_list(cls, ports: list[int]) -> Ports:
        return cls(*ports)


def count_ports() -> int:
    return len(Ports.__dataclass_fields__)


def etcd_argv(bin_dir: Path, data_dir: Path, ports: Ports) -> list[str]:
    client = f"http://{LOCALHOST}:{ports.etcd_client}"
    peer = f"http://{LOCALHOST}:{ports.etcd_peer}"
    return [
        str(bin_dir / "etcd"),
        "--name=devcluster",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=devcluster={peer}",
        # A throwaway store: durability across power loss is worth nothing here, speed is.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_argv(
    bin_dir: Path, pki: CertPaths, ports: Ports, audit_log: Path | None = None, address: str | None = None
) -> list[str]:
    """`address`: serve there and publish it as the kubernetes Service's endpoint (real nodes'
    pods reach it); None: loopback only, and no endpoint (kwok pods never call it)."""
    audit = (
        [
            f"--audit-policy-file={AUDIT_POLICY_FILE}",
            f"--audit-log-path={audit_log}",
            "--audit-log-maxsize=50",
            "--audit-log-maxbackup=1",
        ]
        if audit_log
        else []
    )
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://{LOCALHOST}:{ports.etcd_client}",
        f"--bind-address={address or LOCALHOST}",
        f"--advertise-address={address or LOCALHOST}",
        f"--secure-port={ports.apiserver}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # Real nodes' names are not in any DNS this machine uses; their IPs are reachable.
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--allow-privileged=true",
        "--authorization-mode=RBAC",
        f"--service-account-issuer={SA_ISSUER}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        # Without real nodes nothing could reach 127.0.0.1 as the kubernetes Service's endpoint.
        f"--endpoint-reconciler-type={'lease' if address else 'none'}",
        # TaintNodesByCondition taints new nodes not-ready:NoSchedule and only the
        # node-lifecycle controller (not run: it fights kwok) would lift it.
        "--disable-admission-plugins=TaintNodesByCondition",
        "--profiling=false",
        *audit,
    ]


def controller_manager_argv(
    bin_dir: Path, pki: CertPaths, kubeconfig: Path, ports: Ports, cert_dir: Path, *, real_nodes: bool = False
) -> list[str]:
    controllers = (*CONTROLLERS, *NODE_LOSS_CONTROLLERS) if real_nodes else CONTROLLERS
    return [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--controllers={','.join(controllers)}",
        "--leader-elect=false",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--bind-address={LOCALHOST}",
        f"--secure-port={ports.controller_manager}",
        f"--cert-dir={cert_dir}",
        "--profiling=false",
    ]


def scheduler_argv(bin_dir: Path, kubeconfig: Path, ports: Ports, cert_dir: Path) -> list[str]:
    return [
        str(bin_dir / "kube-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        f"--bind-address={LOCALHOST}",
        f"--secure-port={ports.scheduler}",
        f"--cert-dir={cert_dir}",
        "--profiling=false",
    ]


# The batch schedulers `up --schedulers` can start (any subset, in this order).
SCHEDULERS = ("volcano",)
VOLCANO_SCHEDULER_NAME = "volcano"
# Volcano's scheduler as its installer configures it: gang scheduling (a PodGroup's minMember and
# minResources admitted whole or not at all, from a queue with room for them), priorities, and the
# node predicates; `enqueue` holds back a group whose minResources its queue cannot take.
VOLCANO_SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def volcano_scheduler_argv(scheduler_dir: Path, kubeconfig: Path, conf: Path) -> list[str]:
    return [
        str(scheduler_dir / "vc-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--scheduler-conf={conf}",
        f"--scheduler-name={VOLCANO_SCHEDULER_NAME}",
        "--leader-elect=false",
        "--schedule-period=1s",
        "--logtostderr",
        "-v=3",
    ]


def volcano_controller_manager_argv(scheduler_dir: Path, kubeconfig: Path) -> list[str]:
    # The queue controller keeps each Queue's state and counts; the PodGroup controller gives a
    # volcano pod without a group one of its own (sparkop's pods all name theirs).
    return [
        str(scheduler_dir / "vc-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        "--controllers=queue-controller,pg-controller",
        f"--scheduler-name={VOLCANO_SCHEDULER_NAME}",
        "--leader-elect=false",
        "--logtostderr",
        "-v=2",
    ]


def kwok_argv(bin_dir: Path, kubeconfig: Path, ports: Ports, stages: Path = STAGES_FILE) -> list[str]:
    key, value = FAKE_NODE_ANNOTATION
    return [
        str(bin_dir / "kwok"),
        f"--kubeconfig={kubeconfig}",
        f"--config={stages}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={key}={value}",
        f"--server-address={LOCALHOST}:{ports.kwok}",
        f"--cidr={POD_CIDR}",
    ]


def simulator_argv(kubeconfig: Path, ready_file: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "devcluster.sparksim",
        f"--kubeconfig={kubeconfig}",
        f"--ready-file={ready_file}",
    ]


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(cluster_name: str, server: str, pki: CertPaths) -> dict[str, Any]:
    """An admin kubeconfig with the credentials embedded, usable as is by kubectl and clients."""
    context = f"devcluster-{cluster_name}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": context,
                "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": f"{context}-admin",
                "user": {
                    "client-certificate-data": _b64(pki.admin_cert),
                    "client-key-data": _b64(pki.admin_key),
                },
            }
        ],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": f"{context}-admin", "namespace": "default"},
            }
        ],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(path: Path, config: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


def fake_node(name: str, cpu: str, memory: str, pods: str = "110") -> dict[str, Any]:
    """A Node object kwok will manage; no taints, so ordinary pods schedule onto it."""
    key, value = FAKE_NODE_ANNOTATION
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                FAKE_NODE_LABEL[0]: FAKE_NODE_LABEL[1],
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
                "node-role.kubernetes.io/agent": "",
            },
        },
        "spec": {},
        # Nodes may carry status on create; kwok's node stage keeps these values.
        "status": {"allocatable": resources, "capacity": dict(resources)},
    }
