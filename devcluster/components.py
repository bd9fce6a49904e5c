"""Command lines and config files of the control-plane components (pure functions)."""

from __future__ import annotations

import base64
import sys
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

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
# real nodes run or a cluster asks for it (NODE_LOSS_CONTROLLERS).
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
    # Binds PersistentVolumeClaims to the PersistentVolumes a cluster with real nodes has
    # (storage_manifests: a SparkHistoryServer's log directory); idle where there are none.
    "persistentvolume-binder-controller",
)
# With real nodes (or when asked): a node whose kubelet stops reporting turns NotReady and is tainted
# node.kubernetes.io/unreachable, its pods Ready=False, and they are deleted once their toleration of
# that taint runs out, as in any cluster. kwok renews its nodes' Leases as a kubelet does
# (KWOK_NODE_LEASE_SECONDS), so fake nodes stay Ready beside them.
NODE_LOSS_CONTROLLERS = ("node-lifecycle-controller", "taint-eviction-controller")
# The kubelet's default nodeLeaseDurationSeconds; kwok renews each Lease every quarter of it. Without
# Leases kwok's nodes report only the status heartbeat of its built-in stage (every 10 to 20 minutes),
# so the node-lifecycle controller turned them Unknown 50 s after start and marked their pods
# Ready=False, which no kwok stage turns back (a Spark Connect server on them stayed NotReady).
KWOK_NODE_LEASE_SECONDS = 40
# How long the node-lifecycle controller waits for a node's Lease or status before it turns the node
# Unknown (Kubernetes' default since 1.32, said here so tests can name it).
NODE_MONITOR_GRACE_SECONDS = 50


@dataclass(frozen=True)
class ScaleSettings:
    """What a cluster asked to hold tens of thousands of apps (bench/scale.py) sets apart from the
    defaults; every field unset is the cluster every other user gets."""

    # The controller manager's --terminated-pod-gc-threshold (None: Kubernetes' default, 12,500).
    terminated_pod_gc_threshold: int | None = None
    # etcd's --quota-backend-bytes (None: its default, 2 GiB).
    etcd_quota_bytes: int | None = None
    # The API server's GOMEMLIMIT, Go's soft memory limit (None: none, the heap grows to twice what
    # it keeps alive before each collection).
    apiserver_memory_limit: str | None = None

    def apiserver_env(self) -> dict[str, str]:
        return {"GOMEMLIMIT": self.apiserver_memory_limit} if self.apiserver_memory_limit else {}


# The settings of every cluster but a scale run's.
DEFAULT_SCALE: Final = ScaleSettings()


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


def etcd_argv(bin_dir: Path, data_dir: Path, ports: Ports, quota_bytes: int | None = None) -> list[str]:
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
        *([f"--quota-backend-bytes={quota_bytes}"] if quota_bytes is not None else []),
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
        # node-lifecycle controller (run only beside real nodes, or when asked) would lift it.
        "--disable-admission-plugins=TaintNodesByCondition",
        "--profiling=false",
        *audit,
    ]


def controller_manager_argv(
    bin_dir: Path,
    pki: CertPaths,
    kubeconfig: Path,
    ports: Ports,
    cert_dir: Path,
    *,
    node_lifecycle: bool = False,
    scale: ScaleSettings = DEFAULT_SCALE,
) -> list[str]:
    controllers = (*CONTROLLERS, *NODE_LOSS_CONTROLLERS) if node_lifecycle else CONTROLLERS
    lifecycle = [f"--node-monitor-grace-period={NODE_MONITOR_GRACE_SECONDS}s"] if node_lifecycle else []
    threshold = scale.terminated_pod_gc_threshold
    pod_gc = [] if threshold is None else [f"--terminated-pod-gc-threshold={threshold}"]
    return [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--controllers={','.join(controllers)}",
        *lifecycle,
        *pod_gc,
        "--leader-elect=false",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--bind-address={LOCALHOST}",
        f"--secure-port={ports.controller_manager}",
        f"--cert-dir={cert_dir}",
        "--profiling=false",
    ]


def without_controllers(argv: list[str], names: Collection[str]) -> list[str]:
    """The controller manager's ``argv`` with the controllers ``names`` left out of its --controllers;
    each must be one it runs (a misspelt name is refused, not ignored)."""
    prefix = "--controllers="
    (flag,) = (a for a in argv if a.startswith(prefix))
    running = flag.removeprefix(prefix).split(",")
    unknown = set(names) - set(running)
    if unknown:
        raise ValueError(f"the controller manager does not run {sorted(unknown)}; it runs {running}")
    kept = prefix + ",".join(c for c in running if c not in names)
    return [kept if a == flag else a for a in argv]


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
SCHEDULERS = ("volcano", "kueue", "coscheduling")
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


# Kueue (`up --schedulers kueue`): sparkop's kinds as Kueue's config names an external job framework,
# Kind.version.group (schema.ParseKindArg), for the version sparkop serves (domain/labels.py; a unit
# test checks). In Kueue v0.17.0 the list only makes Kueue treat objects they own as part of a job
# it does not run itself (its pod and batch/Job integrations leave their children alone): admitting
# a Workload needs no entry, nor the kind's CRD at start.
# sparkop's Workloads are owned by SparkDrivers (a run each); the apps own those.
KUEUE_EXTERNAL_FRAMEWORKS = ("SparkApplication.v1alpha1.sparkop.io", "SparkDriver.v1alpha1.sparkop.io")
KUEUE_GROUP = "kueue.x-k8s.io"
# The names Kueue's release gives them, so that `kubectl get` finds what a real install has.
KUEUE_WEBHOOK_CONFIGURATIONS = {
    "MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration",
}


@dataclass(frozen=True)
class KueuePorts:
    health: int  # /healthz and /readyz (ready once the webhook server serves)
    webhook: int  # the API server calls the webhooks here, https with the cluster's CA


def kueue_config(ports: KueuePorts, cert_dir: Path) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2): its release's defaults, but bound to
    127.0.0.1 on free ports, no leader election, and certificates that devcluster makes instead of
    Kueue's internal cert management (whose certificates name a Service, not 127.0.0.1)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"{LOCALHOST}:{ports.health}"},
        # "0": no metrics server (nothing here scrapes it). Kueue still loads a certificate pair from
        # /etc/kueue/metrics/certs whenever internal cert management is off (cmd/kueue/main.go, no
        # flag or field moves it): the cluster's process sees one there through an overlay.
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": LOCALHOST, "port": ports.webhook, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        # Only Workloads of a labelled LocalQueue are Kueue's: an unlabelled Job runs as without it.
        "manageJobsWithoutQueueName": False,
        "integrations": {
            # An empty list means batch/job to Kueue anyway; said here so that nobody wonders.
            "frameworks": ["batch/job"],
            "externalFrameworks": list(KUEUE_EXTERNAL_FRAMEWORKS),
        },
        # The visibility API server reads its own certificate from a hard-coded /visibility and
        # needs an APIService to be reachable; the pending-workloads view it serves is not needed here.
        "featureGates": {"VisibilityOnDemand": False},
    }


def kueue_argv(kueue_dir: Path, kubeconfig: Path, config: Path) -> list[str]:
    return [
        str(kueue_dir / "kueue-manager"),
        f"--config={config}",
        f"--kubeconfig={kubeconfig}",
        # Level 2 logs each reconcile and admission attempt: what a failing test needs to see.
        "--zap-log-level=2",
    ]


def kueue_webhook_configurations(manifests: list[dict[str, Any]], port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """Kueue's webhook configurations reduced to the webhooks of its own kinds (Workload, ClusterQueue,
    ResourceFlavor, Cohort), each calling https://127.0.0.1:<port><its path> with the cluster's CA.
    The webhooks for Jobs, Pods, Deployments and the other integrations are left out: with them every
    pod creation in the cluster would wait on Kueue (failurePolicy Fail)."""
    configurations = []
    for manifest in manifests:
        webhooks = [
            {
                **hook,
                "clientConfig": {
                    "url": f"https://{LOCALHOST}:{port}{hook['clientConfig']['service']['path']}",
                    "caBundle": base64.b64encode(ca_bundle).decode(),
                },
            }
            for hook in manifest["webhooks"]
            if all(rule.get("apiGroups") == [KUEUE_GROUP] for rule in hook["rules"])
        ]
        kind = manifest["kind"]
        configurations.append(
            {
                "apiVersion": manifest["apiVersion"],
                "kind": kind,
                "metadata": {"name": KUEUE_WEBHOOK_CONFIGURATIONS[kind]},
                "webhooks": webhooks,
            }
        )
    return configurations


# scheduler-plugins' Coscheduling (`up --schedulers coscheduling`): a second kube-scheduler, built with
# the plugin, schedules the pods that name this scheduler (driver/executor.schedulerName), the name
# scheduler-plugins' own "as a second scheduler" chart gives it. Not a profile of the cluster's
# kube-scheduler: every profile of one scheduler shares a queue sort, and Coscheduling needs its own.
COSCHEDULING_SCHEDULER_NAME = "scheduler-plugins-scheduler"


@dataclass(frozen=True)
class CoschedulingPorts:
    scheduler: int  # the scheduler's secure port (/readyz), like kube-scheduler's
    controller_health: int  # the controller's /readyz


def coscheduling_scheduler_config(kubeconfig: Path) -> dict[str, Any]:
    """The KubeSchedulerConfiguration of scheduler-plugins' manifests/coscheduling/scheduler-config.yaml
    (v0.34.7), under this scheduler's own name: Coscheduling at every extension point it implements
    (multiPoint: queueSort, preFilter, postFilter, permit, reserve) and as the only queue sort, with
    the permit timeout of its example (10 s, not the default 60: how long a gang's first members wait
    for the rest). No leader election: one replica."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "enableProfiling": False,
        "profiles": [
            {
                "schedulerName": COSCHEDULING_SCHEDULER_NAME,
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                    "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                },
                "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}],
            }
        ],
    }


def coscheduling_scheduler_argv(
    scheduler_dir: Path, kubeconfig: Path, config: Path, ports: CoschedulingPorts, cert_dir: Path
) -> list[str]:
    return [
        str(scheduler_dir / "scheduler-plugins-scheduler"),
        f"--config={config}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={LOCALHOST}",
        f"--secure-port={ports.scheduler}",
        f"--cert-dir={cert_dir}",
        # Coscheduling asks to retry a pod it rejected only when a pod is added or a PodGroup changes. A
        # gang refused for want of room is woken by the running gang's PodGroup turning Finished, which
        # can come before that gang's executor pods are gone (they go as its driver ends): the refused
        # driver is then retried only when the scheduler retries every unschedulable pod, by default
        # 5 min later. The flag (deprecated, still served) makes that wait 30 s here, as docs/api.md
        # suggests to a platform running Coscheduling.
        "--pod-max-in-unschedulable-pods-duration=30s",
        # Level 3 logs each Coscheduling decision (a group rejected, a pod permitted): what a failing
        # test needs to see.
        "-v=3",
    ]


def coscheduling_controller_argv(scheduler_dir: Path, kubeconfig: Path, ports: CoschedulingPorts) -> list[str]:
    # The PodGroup controller writes each group's status.phase (Pending, Scheduling, Running,
    # Finished, Failed) from its pods; the scheduler itself writes none. Its ElasticQuota controller
    # runs too (no flag turns it off): harmless, with no ElasticQuota.
    return [
        str(scheduler_dir / "scheduler-plugins-controller"),
        f"--kubeconfig={kubeconfig}",
        "--metricsAddr=0",  # no metrics server (nothing scrapes it; its default is :8080, every address)
        f"--probeAddr={LOCALHOST}:{ports.controller_health}",
        "--enableLeaderElection=false",
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
        f"--node-lease-duration-seconds={KWOK_NODE_LEASE_SECONDS}",
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


# -- Gateway API (`up --gateway`) ------------------------------------------------------------------

GATEWAYS = ("traefik",)
GATEWAY_CLASS = "traefik"
TRAEFIK_CONTROLLER = "traefik.io/gateway-controller"
GATEWAY_NAMESPACE = "default"
GATEWAY_NAME = "devcluster"
GATEWAY_LISTENER = "web"


@dataclass(frozen=True)
class GatewayInfo:
    """Where the devcluster's Gateway serves: its listener is Traefik's entry point ``port`` on
    ``address`` (Traefik matches a Gateway's listeners to its entry points by port)."""

    port: int
    ping_port: int
    address: str = LOCALHOST
    namespace: str = GATEWAY_NAMESPACE
    name: str = GATEWAY_NAME
    listener: str = GATEWAY_LISTENER

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"


def traefik_argv(traefik_dir: Path, info: GatewayInfo) -> list[str]:
    return [
        str(traefik_dir / "traefik"),
        f"--entryPoints.{GATEWAY_LISTENER}.address={info.address}:{info.port}",
        f"--entryPoints.traefik.address={LOCALHOST}:{info.ping_port}",
        "--ping=true",
        "--ping.entryPoint=traefik",
        "--providers.kubernetesgateway=true",
        f"--providers.kubernetesgateway.statusAddress.ip={info.address}",
        "--global.checkNewVersion=false",
        "--global.sendAnonymousUsage=false",
        "--log.level=INFO",
    ]


def gateway_manifests(info: GatewayInfo) -> list[dict[str, Any]]:
    """The GatewayClass Traefik serves and the Gateway routes attach to: one HTTP listener on
    Traefik's entry point, taking HTTPRoutes and GRPCRoutes from every namespace."""
    return [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": GATEWAY_CLASS},
            "spec": {"controllerName": TRAEFIK_CONTROLLER},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": info.name, "namespace": info.namespace},
            "spec": {
                "gatewayClassName": GATEWAY_CLASS,
                "listeners": [
                    {
                        "name": info.listener,
                        "protocol": "HTTP",
                        "port": info.port,
                        "allowedRoutes": {
                            "namespaces": {"from": "All"},
                            "kinds": [{"kind": "HTTPRoute"}, {"kind": "GRPCRoute"}],
                        },
                    }
                ],
            },
        },
    ]


# -- storage for real nodes ------------------------------------------------------------------------

STORAGE_CLASS = "devcluster"
VOLUMES = 8
VOLUME_SIZE = "10Gi"


def storage_manifests(root: Path, count: int = VOLUMES) -> list[dict[str, Any]]:
    """The default StorageClass (no provisioner: its volumes are made here) and ``count`` hostPath
    PersistentVolumes under ``root``, kept (Retain) when their claim goes: a cluster's volumes go with it."""
    volumes = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"devcluster-pv-{i}"},
            "spec": {
                "capacity": {"storage": VOLUME_SIZE},
                "accessModes": ["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": STORAGE_CLASS,
                "hostPath": {"path": str(root / f"pv-{i}"), "type": "Directory"},
            },
        }
        for i in range(1, count + 1)
    ]
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner",
        "reclaimPolicy": "Retain",
        "volumeBindingMode": "Immediate",
    }
    return [storage_class, *volumes]
