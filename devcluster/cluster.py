"""Bring a local control plane up and down: etcd, kube-apiserver, controller-manager,
scheduler, kwok with fake nodes, the Spark-driver simulator, and optionally real nodes
(containerd + kubelet each, with kube-proxy and CoreDNS; see devcluster/nodes.py).

Everything a cluster owns lives in `<cache>/clusters/<name>/`: PKI, kubeconfig, etcd data,
one log per process and `state.json` (pids, command lines, ports). `down` and a later
`up` of the same name use that file to stop exactly the processes that were started.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from devcluster import components, nodes, procs, realnodes, rest, scheduler_crds
from devcluster.build import (
    ensure_built,
    ensure_coscheduling,
    ensure_kueue,
    ensure_node_binaries,
    ensure_schedulers,
    ensure_traefik,
    read_versions,
)
from devcluster.certs import CertPaths, write_pki, write_serving_pair
from devcluster.images import BuiltImage, ensure_images
from devcluster.nodes import HOST_IP, MAX_NODES
from devcluster.paths import PACKAGE_DIR, cache_root, cluster_dir, clusters_root
from devcluster.ports import LOCALHOST, free_ports

Log = Callable[[str], None]
Component = Literal["apiserver", "etcd", "all", "sparksim", "controller-manager"]

DEFAULT_NAME = "dev"
STATE_FILE = "state.json"
# Start order; `down` stops in reverse so clients go before the servers they talk to.
ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "sparksim")
POLL_S = 0.1
RESTART_TARGETS: dict[str, tuple[str, ...]] = {
    "apiserver": ("kube-apiserver",),
    "etcd": ("etcd",),
    "all": ("etcd", "kube-apiserver"),
    "sparksim": ("sparksim",),
    # bench/scale.py seeds etcd with the controller manager stopped: started again, its controllers
    # list every object before their first pass, as after any restart of it.
    "controller-manager": ("kube-controller-manager",),
}
# A restart is a fault injection: a short SIGTERM window, then SIGKILL, like a crashed node.
RESTART_GRACE_S = 1.0


class ClusterError(RuntimeError):
    pass


def stderr_log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class ProcessRecord:
    pid: int
    argv: list[str]
    log: str
    env: dict[str, str] = field(default_factory=dict)  # set on top of the environment it started in

    @property
    def executable(self) -> str:
        return self.argv[0]


@dataclass
class ClusterState:
    name: str
    directory: str
    bin_dir: str
    kubeconfig: str
    server: str
    ports: dict[str, int]
    nodes: list[str] = field(default_factory=list)
    processes: dict[str, ProcessRecord] = field(default_factory=dict)
    real_nodes: int = 0
    # The controller manager's node-lifecycle and taint-eviction controllers run: with real nodes,
    # or when `up` asked for them on a cluster of fake nodes.
    node_lifecycle: bool = False
    node_bin_dir: str = ""
    kubernetes_version: str = ""  # the release its binaries are (build.read_versions at `up`)
    # Processes of the cluster's users that `start_client` started (an operator the demo runs), by
    # name in `processes`: stopped first.
    clients: list[str] = field(default_factory=list)
    # `up --gateway`: the Gateway its implementation serves (components.GatewayInfo's fields).
    gateway: dict[str, Any] = field(default_factory=dict)

    def save(self) -> None:
        path = Path(self.directory) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)  # atomic: a reader never sees half a file

    @classmethod
    def load(cls, directory: Path) -> ClusterState:
        raw = json.loads((directory / STATE_FILE).read_text())
        raw["processes"] = {k: ProcessRecord(**v) for k, v in raw.get("processes", {}).items()}
        return cls(**raw)


class Cluster:
    """A running devcluster. Create with `Cluster.up(...)`, attach with `Cluster.load(name)`.

    `die_with_parent=True` (test fixtures) makes every process this object starts, including
    ones restarted later, die with the current process.
    """

    def __init__(self, state: ClusterState, *, die_with_parent: bool = False, log: Log = stderr_log):
        self.state = state
        self.die_with_parent = die_with_parent
        self._log = log

    # -- paths and handles ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.state.name

    @property
    def directory(self) -> Path:
        return Path(self.state.directory)

    @property
    def kubeconfig(self) -> Path:
        return Path(self.state.kubeconfig)

    @property
    def audit_log(self) -> Path:
        """The API server's audit log: every list, watch and write of the kinds sparkop uses, as JSON lines."""
        return self.directory / "audit.log"

    @property
    def server(self) -> str:
        return self.state.server

    @property
    def bin_dir(self) -> Path:
        return Path(self.state.bin_dir)

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    @property
    def pki(self) -> CertPaths:
        return CertPaths.in_dir(self.directory / "pki")

    @property
    def ports(self) -> components.Ports:
        return components.Ports(**self.state.ports)

    # -- lifecycle ------------------------------------------------------------------------

    @classmethod
    def up(
        cls,
        name: str = DEFAULT_NAME,
        *,
        nodes: int = 3,
        node_cpu: str = "8",
        node_memory: str = "32Gi",
        simulator: bool = True,
        real_nodes: int = 0,
        node_lifecycle: bool = False,
        schedulers: tuple[str, ...] = (),
        gateway: str | None = None,
        scale: components.ScaleSettings = components.DEFAULT_SCALE,
        die_with_parent: bool = False,
        timeout: float = 90.0,
        log: Log = stderr_log,
    ) -> Cluster:
        """Build the binaries (and, with `real_nodes`, the node binaries and images, with
        `schedulers` the batch schedulers) if this machine lacks them (not counted in `timeout`),
        then start every component and wait up to `timeout` seconds for all of them to be ready.
        `node_lifecycle`: run the node-lifecycle and taint-eviction controllers without real nodes
        too (real nodes always have them), so that fake nodes are watched as real ones are."""
        unknown = set(schedulers) - set(components.SCHEDULERS)
        if unknown:
            raise ClusterError(f"unknown schedulers {sorted(unknown)}: choose from {list(components.SCHEDULERS)}")
        kubernetes_version = read_versions()["KUBERNETES_VERSION"]
        bin_dir = ensure_built(log)
        scheduler_dir = ensure_schedulers(log) if "volcano" in schedulers else None
        kueue_dir = ensure_kueue(log) if "kueue" in schedulers else None
        coscheduling_dir = ensure_coscheduling(log) if "coscheduling" in schedulers else None
        if gateway not in (None, *components.GATEWAYS):
            raise ClusterError(f"unknown gateway {gateway!r}: choose from {list(components.GATEWAYS)}")
        node_bin_dir: Path | None = None
        images: list[BuiltImage] = []
        if real_nodes:
            realnodes.check_machine()
            if real_nodes > MAX_NODES:
                raise ClusterError(f"--real-nodes {real_nodes}: at most {MAX_NODES}")
            node_bin_dir = ensure_node_binaries(log)
            images = ensure_images(log, pause_binary=node_bin_dir / "pause")
        # `timeout` is the start-up budget. It starts only now: a first build takes minutes and
        # would eat it whole (the binaries are ready here, so nothing slow and one-time is left).
        started = time.monotonic()
        remove_cluster(name)  # whatever a crashed run left under this name
        directory = cluster_dir(name)
        directory.mkdir(parents=True)
        ports = components.Ports.from_list(free_ports(components.count_ports()))
        # Pods reach the API server through the kubernetes Service, which needs an address
        # outside loopback: real-node clusters serve on the host interface instead.
        address = HOST_IP if real_nodes else LOCALHOST
        state = ClusterState(
            name=name,
            directory=str(directory),
            bin_dir=str(bin_dir),
            kubeconfig=str(directory / "kubeconfig"),
            server=f"https://{address}:{ports.apiserver}",
            ports=asdict(ports),
            real_nodes=real_nodes,
            node_lifecycle=node_lifecycle or real_nodes > 0,
            node_bin_dir=str(node_bin_dir or ""),
            kubernetes_version=kubernetes_version,
        )
        state.save()
        cluster = cls(state, die_with_parent=die_with_parent, log=log)
        try:
            if real_nodes:
                realnodes.claim(name, directory, _owner_alive, log)
                realnodes.record_owner_binaries(Path(state.node_bin_dir))
                realnodes.prepare_network(cluster.real_nodes)
            cluster._bring_up(
                nodes,
                node_cpu,
                node_memory,
                simulator,
                deadline=started + timeout,
                scale=scale,
            )
            if real_nodes:
                cluster._start_real_nodes(images, deadline=started + timeout)
                cluster._create_volumes()
            # The batch schedulers get a budget of their own: a first real-node start imports every
            # image into each node's store and may use most of the one above.
            schedulers_deadline = time.monotonic() + timeout
            if scheduler_dir is not None:
                cluster._start_schedulers(scheduler_dir, schedulers, deadline=schedulers_deadline)
            if kueue_dir is not None:
                cluster._start_kueue(kueue_dir, deadline=schedulers_deadline)
            if coscheduling_dir is not None:
                cluster._start_coscheduling(coscheduling_dir, deadline=schedulers_deadline)
            if gateway is not None:
                cluster.start_gateway(timeout=timeout)
        except BaseException:
            cluster.down()
            raise
        log(f"[up] cluster {name!r} (Kubernetes {kubernetes_version}) ready in {time.monotonic() - started:.1f}s")
        return cluster

    @classmethod
    def load(cls, name: str = DEFAULT_NAME, *, die_with_parent: bool = False, log: Log = stderr_log) -> Cluster:
        directory = cluster_dir(name)
        if not (directory / STATE_FILE).is_file():
            raise ClusterError(f"no cluster named {name!r} (looked in {directory})")
        return cls(ClusterState.load(directory), die_with_parent=die_with_parent, log=log)

    def start_client(self, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> int:
        """Start a process that works on this cluster (the operator `sparkop demo` runs): in a session
        of its own, logged to `<name>.log` in the cluster's directory, and recorded with the cluster's
        own processes, so that `down` (and a later `up` of the name, or `prune`) stops it first, by pid.
        It dies with this process only when the cluster's do (`die_with_parent`). Returns its pid."""
        if name in self.state.processes:
            raise ClusterError(f"cluster {self.name!r} already runs a process named {name!r}")
        self.state.clients.append(name)
        self._spawn(name, argv, env=env)
        return self.state.processes[name].pid

    def down(self) -> None:
        """Stop every process this cluster started (by pid), those `start_client` started first, and
        its real nodes' containers, mounts, cgroups and network devices, then delete its directory."""
        _stop_cluster(self.state, self._log)
        shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def real_nodes(self) -> list[nodes.RealNode]:
        return _real_nodes(self.state)

    def restart(self, which: Component = "all") -> None:
        """Restart kube-apiserver and/or etcd (or the simulator) in place, same ports and data.

        A fault injection: SIGTERM, then SIGKILL after RESTART_GRACE_S. Returns once the
        restarted processes and the apiserver are ready again. Clients (controllers, kwok,
        sparksim, the operator) must reconnect on their own.
        """
        deadline = time.monotonic() + 60.0
        names = self._targets(which)
        _stop_records({n: self.state.processes[n] for n in names}, grace=RESTART_GRACE_S)
        stopped = {n: self.state.processes.pop(n) for n in names}  # not "died": we stopped them
        for name in ORDER:  # dependencies first: etcd before the apiserver
            if name not in stopped:
                continue
            if name == "sparksim":
                self._sparksim_ready_file.unlink(missing_ok=True)
            self._respawn(name, stopped[name])
            self._wait({name: self._readiness_check(name)}, deadline, phase="restart", watch=names)
        # The apiserver's readyz includes its etcd check, so this also covers an etcd-only restart.
        self._wait({"kube-apiserver": self._apiserver_ready}, deadline, phase="restart", watch=names)

    def restart_controller_manager(self, without: Collection[str]) -> None:
        """Restart the controller manager without the controllers named, as it runs from then on: a
        scale run leaves out those whose full sync over what it seeded is quadratic (bench/scale.py)."""
        name = "kube-controller-manager"
        record = self.state.processes[name]
        self.state.processes[name] = replace(record, argv=components.without_controllers(record.argv, without))
        self.restart("controller-manager")

    def _targets(self, which: Component) -> tuple[str, ...]:
        names = RESTART_TARGETS[which]
        missing = [n for n in names if n not in self.state.processes]
        if missing:
            raise ClusterError(f"cluster {self.name!r} does not run {', '.join(missing)}")
        return names

    def stop(self, which: Component) -> None:
        """Stop processes without starting them again (fault tests); `restart(which)` revives them."""
        names = self._targets(which)
        _stop_records({n: self.state.processes[n] for n in names}, grace=RESTART_GRACE_S)

    def kill_node(self, name: str) -> None:
        """Lose a real node as a machine is lost: SIGKILL its kubelet, containerd, shims and every
        container at once, so nothing is reported to the API server (its Node turns NotReady only
        when the node-lifecycle controller misses its lease). `start_node` brings it back."""
        realnodes.kill_node_processes(self._real_node(name))

    def start_node(self, name: str, timeout: float = 120.0) -> None:
        """Bring back a real node `kill_node` took: containerd and the kubelet start again on the
        node's kept state (images, pod directories), as after a reboot; returns once it is Ready."""
        node = self._real_node(name)
        kubelet_name, containerd_name = f"kubelet-{node.name}", f"containerd-{node.name}"
        kubelet, containerd = self.state.processes[kubelet_name], self.state.processes[containerd_name]
        if procs.is_alive(kubelet.pid) or procs.is_alive(containerd.pid):
            raise ClusterError(f"{name} runs: kill_node({name!r}) first")
        deadline = time.monotonic() + timeout
        own_mounts = procs.NewMountNamespace(realnodes.NODE_PRIVATE_DIRS)
        self._spawn(containerd_name, containerd.argv, mount_namespace=own_mounts)
        self._wait({containerd_name: _containerd_ready(node)}, deadline, phase="start", watch=(containerd_name,))
        restarted = self.state.processes[containerd_name]
        self._spawn(kubelet_name, kubelet.argv, mount_namespace=procs.JoinMountNamespace(restarted.pid))
        self._wait({name: lambda: self._node_ready(name)}, deadline, phase="start", watch=(kubelet_name,))

    def _real_node(self, name: str) -> nodes.RealNode:
        found = next((node for node in self.real_nodes if node.name == name), None)
        if found is None:
            raise ClusterError(f"cluster {self.name!r} has no real node {name!r}: {[n.name for n in self.real_nodes]}")
        return found

    def restart_apiserver(self) -> None:
        self.restart("apiserver")

    def restart_etcd(self) -> None:
        self.restart("etcd")

    def restart_simulator(self) -> None:
        self.restart("sparksim")

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
            "kubernetes_version": self.state.kubernetes_version,
            "apiserver_ready": self._apiserver_ready(),
            "processes": {
                name: {"pid": rec.pid, "alive": _record_alive(rec), "log": rec.log}
                for name, rec in self.state.processes.items()
            },
            "ports": self.state.ports,
        }

    # -- API access -----------------------------------------------------------------------

    def api(self, method: str, path: str, body: Any = None) -> rest.Response:
        """One request to the apiserver as cluster admin."""
        context = rest.tls_context(self.pki.ca_cert, self.pki.admin_cert, self.pki.admin_key)
        return rest.request(self.server + path, method=method, body=body, context=context)

    # -- internals ------------------------------------------------------------------------

    def _bring_up(
        self,
        kwok_nodes: int,
        cpu: str,
        memory: str,
        simulator: bool,
        deadline: float,
        *,
        scale: components.ScaleSettings = components.DEFAULT_SCALE,
    ) -> None:
        directory = self.directory
        real = bool(self.state.real_nodes)
        pki = write_pki(directory / "pki", extra_ips=(HOST_IP,) if real else ())
        components.write_kubeconfig(self.kubeconfig, components.kubeconfig(self.name, self.server, pki))
        ports, bins = self.ports, self.bin_dir

        self._spawn(
            "etcd", components.etcd_argv(bins, directory / "etcd-data", ports, quota_bytes=scale.etcd_quota_bytes)
        )
        self._wait({"etcd": self._etcd_ready}, deadline)
        apiserver = components.apiserver_argv(
            bins, pki, ports, audit_log=self.audit_log, address=HOST_IP if real else None
        )
        self._spawn("kube-apiserver", apiserver, extra_env=scale.apiserver_env())
        self._wait({"kube-apiserver": self._apiserver_ready}, deadline)

        # Nodes exist before kwok starts, so it adopts them on its first list.
        self.state.nodes = self._create_nodes(kwok_nodes, cpu, memory)
        self.state.save()
        # These only need the apiserver, not each other: start them together.
        kubeconfig = self.kubeconfig
        self._spawn(
            "kube-controller-manager",
            components.controller_manager_argv(
                bins,
                pki,
                kubeconfig,
                ports,
                directory / "kcm-certs",
                node_lifecycle=self.state.node_lifecycle,
                scale=scale,
            ),
        )
        self._spawn("kube-scheduler", components.scheduler_argv(bins, kubeconfig, ports, directory / "scheduler-certs"))
        self._spawn("kwok", components.kwok_argv(bins, kubeconfig, ports))
        started = ["kube-controller-manager", "kube-scheduler", "kwok"]
        if simulator:
            self._spawn("sparksim", components.simulator_argv(kubeconfig, self._sparksim_ready_file), env=_python_env())
            started.append("sparksim")
        checks = {name: self._readiness_check(name) for name in started}
        checks["nodes"] = self._nodes_ready
        checks["default service account"] = self._default_service_account_exists
        self._wait(checks, deadline)

    def _start_real_nodes(self, images: list[BuiltImage], deadline: float) -> None:
        real = self.real_nodes
        pause = next(image for image in images if image.name == "pause")
        host_ports = nodes.HostPorts(*free_ports(len(nodes.HostPorts.__dataclass_fields__)))
        # Every pull (imagePullPolicy Always) is answered from the node's own store: no registry is reachable.
        self._spawn("registry", nodes.registry_argv(host_ports.registry, real), env=_python_env())
        for node in real:
            realnodes.prepare_node_dirs(node)
            realnodes.create_cgroup_root(node)
            hosts_file = node.registry_hosts_dir / nodes.REGISTRY_HOSTS_FILE
            hosts_file.parent.mkdir(parents=True, exist_ok=True)
            hosts_file.write_text(nodes.registry_hosts_toml(node, host_ports.registry))
            node.containerd_config.write_text(nodes.containerd_config(node, pause.refs[0]))
            (node.cni_conf_dir / "10-devcluster.conflist").write_text(json.dumps(nodes.cni_config(node), indent=2))
            # Everything a node mounts lives in this namespace and dies with its processes;
            # the kubelet joins it below so that it and containerd see the same volumes.
            self._spawn(
                f"containerd-{node.name}",
                nodes.containerd_argv(node.containerd_config),
                mount_namespace=procs.NewMountNamespace(realnodes.NODE_PRIVATE_DIRS),
            )
        started = {f"containerd-{n.name}": _containerd_ready(n) for n in real}
        started["registry"] = lambda: rest.probe(f"{nodes.registry_url(host_ports.registry, real[0])}/")
        self._wait(started, deadline)
        # A first import unpacks gigabytes; like a build, it happens once and is not start-up time.
        import_started = time.monotonic()
        self.import_images(images)
        deadline += time.monotonic() - import_started

        node_bins = Path(self.state.node_bin_dir)
        for node in real:
            config_file = node.config_dir / "kubelet.yaml"
            config_file.write_text(nodes.dump_yaml(nodes.kubelet_config(node, self.pki.ca_cert)))
            containerd = self.state.processes[f"containerd-{node.name}"]
            self._spawn(
                f"kubelet-{node.name}",
                nodes.kubelet_argv(node_bins, node, self.kubeconfig, config_file),
                mount_namespace=procs.JoinMountNamespace(containerd.pid),
            )
        proxy_config = self.directory / "kube-proxy.yaml"
        proxy_config.write_text(nodes.dump_yaml(nodes.kube_proxy_config(self.kubeconfig, real[0], host_ports)))
        self._spawn("kube-proxy", nodes.kube_proxy_argv(node_bins, proxy_config))
        corefile = self.directory / "Corefile"
        corefile.write_text(nodes.corefile(self.kubeconfig, f"devcluster-{self.name}", host_ports))
        self._spawn("coredns", nodes.coredns_argv(node_bins, corefile))
        checks: dict[str, Callable[[], bool]] = {
            "real nodes": self._real_nodes_ready,
            "coredns": lambda: rest.probe(f"http://{LOCALHOST}:{host_ports.coredns_ready}/ready"),
            "kube-proxy": lambda: rest.probe(f"http://{LOCALHOST}:{host_ports.kube_proxy_healthz}/healthz"),
        }
        self._wait(checks, deadline)

    def _start_schedulers(self, scheduler_dir: Path, schedulers: tuple[str, ...], deadline: float) -> None:
        """The batch schedulers, beside kube-scheduler: each schedules the pods that name it."""
        if "volcano" in schedulers:
            scheduler_crds.install(self.kubectl, self.kubeconfig, files=scheduler_crds.volcano_crd_files())
            # In a directory of its own: vc-scheduler watches its conf's directory and loads the conf
            # again on every event there; beside the cluster's logs it did so thousands of times a
            # second (a core, and gigabytes of log, for the life of the cluster).
            conf_dir = self.directory / "volcano"
            conf_dir.mkdir(exist_ok=True)
            conf = conf_dir / "scheduler.conf"
            conf.write_text(components.VOLCANO_SCHEDULER_CONF)
            self._spawn("vc-scheduler", components.volcano_scheduler_argv(scheduler_dir, self.kubeconfig, conf))
            manager = components.volcano_controller_manager_argv(scheduler_dir, self.kubeconfig)
            self._spawn("vc-controller-manager", manager)
            self._wait({"volcano's default queue": self._volcano_queue_open}, deadline)

    def _start_kueue(self, kueue_dir: Path, deadline: float) -> None:
        """Kueue's controller manager with its CRDs, and its webhooks for its own kinds registered with
        the API server (served on 127.0.0.1 with a certificate from the cluster's CA). The webhooks
        validate what a job controller writes (a Workload's podSets are immutable while it holds
        quota, an admission cannot change, only be unset) as in a real install; admission works
        without them, but a controller tested without them could rely on writes Kueue refuses."""
        scheduler_crds.install(self.kubectl, self.kubeconfig, files=scheduler_crds.kueue_crd_files())
        directory = self.directory / "kueue"
        cert_dir = directory / "certs"
        write_serving_pair(self.pki, cert_dir, "kueue-webhook")
        # Kueue reads a metrics pair at /etc/kueue/metrics/certs (see components.kueue_config): an
        # overlay shows it this directory's copy there, in Kueue's mount namespace only.
        etc_layer = directory / "etc-layer"
        write_serving_pair(self.pki, etc_layer / "kueue" / "metrics" / "certs", "kueue-metrics")
        ports = components.KueuePorts(*free_ports(len(components.KueuePorts.__dataclass_fields__)))
        config = directory / "config.yaml"
        config.write_text(yaml.safe_dump(components.kueue_config(ports, cert_dir), sort_keys=False))
        self._spawn(
            "kueue-manager",
            components.kueue_argv(kueue_dir, self.kubeconfig, config),
            mount_namespace=procs.OverlayMountNamespace(((etc_layer, Path("/etc")),)),
        )
        self._wait({"kueue-manager": lambda: rest.probe(f"http://{LOCALHOST}:{ports.health}/readyz")}, deadline)
        webhooks = components.kueue_webhook_configurations(
            scheduler_crds.kueue_webhook_manifests(), ports.webhook, self.pki.ca_cert.read_bytes()
        )
        for configuration in webhooks:
            path = f"/apis/admissionregistration.k8s.io/v1/{configuration['kind'].lower()}s"
            response = self.api("POST", path, configuration)
            if not response.ok:
                name = configuration["metadata"]["name"]
                raise ClusterError(f"registering {name}: {response.status} {response.body}")
        self._wait({"kueue's webhooks": self._kueue_webhooks_answer}, deadline)

    def _kueue_webhooks_answer(self) -> bool:
        """The API server reaches Kueue's webhooks: a dry-run ResourceFlavor comes back with the
        finalizer only Kueue's mutating webhook adds at creation."""
        flavor = {
            "apiVersion": f"{components.KUEUE_GROUP}/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "devcluster-webhook-probe"},
        }
        response = self.api("POST", f"/apis/{components.KUEUE_GROUP}/v1beta2/resourceflavors?dryRun=All", flavor)
        return response.ok and "kueue.x-k8s.io/resource-in-use" in response.body["metadata"].get("finalizers", [])

    def _start_coscheduling(self, scheduler_dir: Path, deadline: float) -> None:
        """scheduler-plugins' scheduler (schedulerName components.COSCHEDULING_SCHEDULER_NAME, the
        Coscheduling plugin) and its controller (the PodGroups' status.phase), after their CRDs."""
        scheduler_crds.install(self.kubectl, self.kubeconfig, files=scheduler_crds.coscheduling_crd_files())
        directory = self.directory / "scheduler-plugins"
        directory.mkdir()
        ports = components.CoschedulingPorts(*free_ports(len(components.CoschedulingPorts.__dataclass_fields__)))
        config = directory / "scheduler-config.yaml"
        config.write_text(yaml.safe_dump(components.coscheduling_scheduler_config(self.kubeconfig), sort_keys=False))
        scheduler = components.coscheduling_scheduler_argv(
            scheduler_dir, self.kubeconfig, config, ports, directory / "scheduler-certs"
        )
        self._spawn("scheduler-plugins-scheduler", scheduler)
        controller = components.coscheduling_controller_argv(scheduler_dir, self.kubeconfig, ports)
        self._spawn("scheduler-plugins-controller", controller)
        checks = {
            "scheduler-plugins-scheduler": self._https_ready(ports.scheduler, "/readyz"),
            "scheduler-plugins-controller": lambda: rest.probe(f"http://{LOCALHOST}:{ports.controller_health}/readyz"),
        }
        self._wait(checks, deadline)

    def _create_volumes(self) -> None:
        """Storage for the pods of real nodes: a default StorageClass and a few PersistentVolumes, each a
        directory of this cluster's that anyone may write (Spark runs as uid 185): a claim without a
        class is bound to one of them by the controller manager, and every real node (all on this
        machine) mounts the same directory, so it serves ReadWriteMany too."""
        for manifest in components.storage_manifests(self.directory / "volumes"):
            if manifest["kind"] == "PersistentVolume":
                directory = Path(manifest["spec"]["hostPath"]["path"])
                directory.mkdir(parents=True, exist_ok=True)
                directory.chmod(0o777)
            path = {
                "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
                "PersistentVolume": "/api/v1/persistentvolumes",
            }
            response = self.api("POST", path[manifest["kind"]], manifest)
            if not response.ok:
                raise ClusterError(f"creating {manifest['kind']} {manifest['metadata']['name']}: {response.status}")

    def start_gateway(self, timeout: float = 90.0) -> components.GatewayInfo:
        """The cluster's Gateway (``up --gateway traefik``), started now if it is not running (a test
        on the session's shared cluster asks for it): Traefik built on first use (not counted in
        ``timeout``)."""
        info, record = self.gateway, self.state.processes.get("traefik")
        if info is not None and record is not None and procs.is_alive(record.pid):
            return info
        traefik_dir = ensure_traefik(self._log)
        self._start_traefik(traefik_dir, deadline=time.monotonic() + timeout)
        started = self.gateway
        assert started is not None
        return started

    def start_schedulers(self, schedulers: tuple[str, ...], timeout: float = 90.0) -> None:
        """Batch schedulers on a running cluster, as ``up --schedulers`` starts them, those this cluster
        has not started yet (a test on the session's shared real-node cluster asks for them, so the
        tests before it need not wait for their build): each built on first use (not counted in
        ``timeout``)."""
        unknown = set(schedulers) - set(components.SCHEDULERS)
        if unknown:
            raise ClusterError(f"unknown schedulers {sorted(unknown)}: choose from {list(components.SCHEDULERS)}")
        started = set(self.state.processes)
        if "volcano" in schedulers and "vc-scheduler" not in started:
            volcano_dir = ensure_schedulers(self._log)
            self._start_schedulers(volcano_dir, ("volcano",), deadline=time.monotonic() + timeout)
        if "kueue" in schedulers and "kueue-manager" not in started:
            kueue_dir = ensure_kueue(self._log)
            self._start_kueue(kueue_dir, deadline=time.monotonic() + timeout)
        if "coscheduling" in schedulers and "scheduler-plugins-scheduler" not in started:
            coscheduling_dir = ensure_coscheduling(self._log)
            self._start_coscheduling(coscheduling_dir, deadline=time.monotonic() + timeout)

    def _start_traefik(self, traefik_dir: Path, deadline: float) -> None:
        """Traefik as the cluster's Gateway API implementation: Gateway API's CRDs, Traefik's
        kubernetesgateway provider (the cluster's kubeconfig), a GatewayClass ``traefik`` and a Gateway
        ``devcluster`` in ``default`` whose one HTTP listener (HTTPRoutes and GRPCRoutes of every
        namespace; gRPC as h2c) is Traefik's entry point on 127.0.0.1. Real nodes' pod addresses are
        routed from this machine, so Traefik reaches the Services' endpoints as a proxy in a cluster does."""
        scheduler_crds.install(self.kubectl, self.kubeconfig, files=scheduler_crds.gateway_api_crd_files())
        port, ping_port = free_ports(2)
        info = components.GatewayInfo(port, ping_port)
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        self._spawn("traefik", components.traefik_argv(traefik_dir, info), env=env)
        for manifest in components.gateway_manifests(info):
            kind = {"GatewayClass": "gatewayclasses", "Gateway": "gateways"}[manifest["kind"]]
            namespace = manifest["metadata"].get("namespace")
            where = f"/namespaces/{namespace}" if namespace else ""
            path = f"/apis/gateway.networking.k8s.io/v1{where}/{kind}"
            response = self.api("POST", path, manifest)
            if response.status == 409:  # started before, in this cluster: its listener moves to the new port
                response = self.api("PUT", f"{path}/{manifest['metadata']['name']}", self._replacing(path, manifest))
            if not response.ok:
                raise ClusterError(f"creating {manifest['kind']} {manifest['metadata']['name']}: {response.status}")
        self.state.gateway = asdict(info)
        self.state.save()
        checks = {
            "traefik": lambda: rest.probe(f"http://{LOCALHOST}:{info.ping_port}/ping"),
            "the devcluster Gateway": self._gateway_programmed,
        }
        self._wait(checks, deadline)

    def _replacing(self, path: str, manifest: dict[str, Any]) -> dict[str, Any]:
        current = self.api("GET", f"{path}/{manifest['metadata']['name']}").body
        version = (current.get("metadata") or {}).get("resourceVersion") if isinstance(current, dict) else None
        return {**manifest, "metadata": {**manifest["metadata"], "resourceVersion": version}}

    def _gateway_programmed(self) -> bool:
        path = f"/apis/gateway.networking.k8s.io/v1/namespaces/{components.GATEWAY_NAMESPACE}/gateways/"
        response = self.api("GET", path + components.GATEWAY_NAME)
        if not response.ok:
            return False
        generation = (response.body.get("metadata") or {}).get("generation")
        conditions = (response.body.get("status") or {}).get("conditions") or []
        return any(
            c.get("type") == "Programmed" and c.get("status") == "True" and c.get("observedGeneration") == generation
            for c in conditions
        )

    @property
    def gateway(self) -> components.GatewayInfo | None:
        """The Gateway ``up --gateway`` made (None: none)."""
        return components.GatewayInfo(**self.state.gateway) if self.state.gateway else None

    def _volcano_queue_open(self) -> bool:
        """Volcano's scheduler creates the default queue; its queue controller opens it."""
        response = self.api("GET", "/apis/scheduling.volcano.sh/v1beta1/queues/default")
        return response.ok and (response.body.get("status") or {}).get("state") == "Open"

    def import_images(self, images: list[BuiltImage]) -> None:
        """Put `images` into every real node's containerd (those it holds already cost nothing)."""
        archives = [(image.key, image.archive) for image in images]
        for node in self.real_nodes:
            realnodes.import_images(node, archives, self._log)

    def _real_nodes_ready(self) -> bool:
        key, value = nodes.NODE_TYPE_LABEL
        return self._ready_nodes(f"{key}%3D{value}") >= self.state.real_nodes

    def _spawn(
        self,
        name: str,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        mount_namespace: procs.MountNamespace | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        """``env``: the whole environment (None: this process's); ``extra_env``: set on top of it, and
        again whenever the process is started anew (restart)."""
        log_path = self.directory / f"{name}.log"
        if extra_env:
            env = {**(os.environ if env is None else env), **extra_env}
        pid = procs.spawn(
            argv,
            log_path,
            die_with_parent=self.die_with_parent,
            env=env,
            cwd=self.directory,
            mount_namespace=mount_namespace,
        )
        self.state.processes[name] = ProcessRecord(pid=pid, argv=argv, log=str(log_path), env=dict(extra_env or {}))
        self.state.save()  # recorded at once, so a crash right after still lets `down` find it

    def _respawn(self, name: str, record: ProcessRecord) -> None:
        env = _python_env() if name == "sparksim" else None
        self._spawn(name, record.argv, env=env, extra_env=record.env)

    def _wait(
        self,
        checks: dict[str, Callable[[], bool]],
        deadline: float,
        phase: str = "up",
        watch: tuple[str, ...] | None = None,
    ) -> None:
        """Poll until every check passes; fail fast if a watched process (default: all) exits."""
        pending = dict(checks)
        started = time.monotonic()
        while pending:
            for name, check in list(pending.items()):
                if check():
                    self._log(f"[{phase}] {name} ready (+{time.monotonic() - started:.1f}s)")
                    del pending[name]
            self._raise_if_any_died(watch)
            if not pending:
                break
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out waiting for {', '.join(pending)}{self._log_tails(pending)}")
            time.sleep(POLL_S)

    def _raise_if_any_died(self, watch: tuple[str, ...] | None) -> None:
        for name, record in self.state.processes.items():
            if (watch is None or name in watch) and not procs.is_alive(record.pid):
                raise ClusterError(
                    f"{name} exited during startup; log {record.log}:\n{procs.log_tail(Path(record.log))}"
                )

    def _log_tails(self, names: Mapping[str, object]) -> str:
        tails = [
            f"\n--- {name} ({rec.log}) ---\n{procs.log_tail(Path(rec.log), 1500)}"
            for name, rec in self.state.processes.items()
            if name in names
        ]
        return "".join(tails)

    @property
    def _sparksim_ready_file(self) -> Path:
        return self.directory / "sparksim.ready"

    def _readiness_check(self, name: str) -> Callable[[], bool]:
        ports = self.ports
        checks: dict[str, Callable[[], bool]] = {
            "etcd": self._etcd_ready,
            "kube-apiserver": self._apiserver_ready,
            "kube-controller-manager": self._https_ready(ports.controller_manager, "/healthz"),
            "kube-scheduler": self._https_ready(ports.scheduler, "/readyz"),
            "kwok": lambda: rest.probe(f"http://{LOCALHOST}:{ports.kwok}/healthz"),
            "sparksim": self._sparksim_ready_file.exists,
        }
        return checks[name]

    def _etcd_ready(self) -> bool:
        return rest.probe(f"http://{LOCALHOST}:{self.ports.etcd_client}/health")

    def _apiserver_ready(self) -> bool:
        try:
            return self.api("GET", "/readyz").ok
        except OSError:
            return False

    def _https_ready(self, port: int, path: str) -> Callable[[], bool]:
        context = rest.tls_context(None)  # components serve self-signed certs on these ports
        return lambda: rest.probe(f"https://{LOCALHOST}:{port}{path}", context=context)

    def _create_nodes(self, count: int, cpu: str, memory: str) -> list[str]:
        names = [f"kwok-node-{i}" for i in range(count)]
        for node_name in names:
            response = self.api("POST", "/api/v1/nodes", components.fake_node(node_name, cpu, memory))
            if not response.ok:
                raise ClusterError(f"creating node {node_name}: {response.status} {response.body}")
        return names

    def _nodes_ready(self) -> bool:
        return self._ready_nodes("type%3Dkwok") >= len(self.state.nodes)

    def _node_ready(self, name: str) -> bool:
        response = self.api("GET", f"/api/v1/nodes/{name}")
        return response.ok and _is_ready(response.body)

    def _ready_nodes(self, selector: str) -> int:
        response = self.api("GET", f"/api/v1/nodes?labelSelector={selector}")
        if not response.ok:
            return 0
        return sum(1 for node in response.body.get("items", []) if _is_ready(node))

    def _default_service_account_exists(self) -> bool:
        # The ServiceAccount admission plugin rejects pods until this exists.
        return self.api("GET", "/api/v1/namespaces/default/serviceaccounts/default").ok


def _is_ready(node: Mapping[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _python_env() -> dict[str, str]:
    """Let `python -m devcluster.sparksim` import this package even when it is not installed."""
    env = dict(os.environ)
    repo = str(PACKAGE_DIR.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _real_nodes(state: ClusterState) -> list[nodes.RealNode]:
    return [nodes.real_node(i, Path(state.directory), cache_root() / "nodes") for i in range(state.real_nodes)]


def _containerd_ready(node: nodes.RealNode) -> Callable[[], bool]:
    return lambda: realnodes.containerd_ready(node)


def _owner_alive(owner: Mapping[str, str]) -> bool:
    try:
        state = ClusterState.load(Path(owner["directory"]))
    except (KeyError, OSError, ValueError, TypeError):
        return False
    return any(_record_alive(record) for record in state.processes.values())


def real_node_cluster() -> Cluster | None:
    """The cluster running real nodes on this machine, if one does."""
    owner = realnodes.current_owner()
    if owner is None or not _owner_alive(owner):
        return None
    return Cluster(ClusterState.load(Path(owner["directory"])))


def _stop_cluster(state: ClusterState, log: Log) -> None:
    """The clients first, then real nodes (kubelets, then their containers, then containerd), then the rest."""
    records = dict(state.processes)
    _stop_records({name: records.pop(name) for name in state.clients if name in records})
    if state.real_nodes and realnodes.owns_real_nodes(state.directory, realnodes.current_owner()):
        node_bins = Path(state.node_bin_dir) if state.node_bin_dir else None
        for node in _real_nodes(state):
            kubelet = records.pop(f"kubelet-{node.name}", None)
            if kubelet:
                _stop_records({"kubelet": kubelet})
            realnodes.kill_node_processes(node, runtime=False)
            clean = realnodes.remove_containers(node)
            containerd = records.pop(f"containerd-{node.name}", None)
            if containerd:
                _stop_records({"containerd": containerd})
            realnodes.kill_node_processes(node)
            realnodes.remove_cgroup_root(node)
            realnodes.remove_node_state(node)
            if clean:
                realnodes.mark_clean(node)
        _stop_records({name: records.pop(name) for name in ("kube-proxy", "coredns") if name in records})
        realnodes.teardown_machine(node_bins, log)
    _stop_records(records)


def _record_alive(record: ProcessRecord) -> bool:
    return procs.is_alive(record.pid) and procs.runs_executable(record.pid, record.executable)


def _stop_records(records: Mapping[str, ProcessRecord], grace: float = procs.STOP_GRACE_S) -> None:
    ordered = sorted(records.items(), key=lambda item: -ORDER.index(item[0]) if item[0] in ORDER else 0)
    procs.stop_all(((rec.pid, rec.executable) for _, rec in ordered), grace=grace)


def remove_cluster(name: str) -> bool:
    """Stop whatever a cluster directory records and delete it. True if there was one."""
    directory = cluster_dir(name)
    if not directory.exists():
        return False
    try:
        state = ClusterState.load(directory)
    except (OSError, ValueError, TypeError):
        state = None  # half-written by a crashed run: nothing we can safely signal
    if state is not None:
        _stop_cluster(state, stderr_log)
    shutil.rmtree(directory, ignore_errors=True)
    return True


def list_clusters() -> list[str]:
    root = clusters_root()
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def prune(prefix: str = "", min_age_s: float = 600.0) -> list[str]:
    """Remove clusters (optionally only names with `prefix`) none of whose processes is alive.

    A cluster that has not started any process yet (or whose state is unreadable) is only
    removed once older than `min_age_s`: another process may be creating it right now.
    """
    removed = []
    for name in list_clusters():
        if not name.startswith(prefix):
            continue
        directory = cluster_dir(name)
        try:
            processes = ClusterState.load(directory).processes
        except (OSError, ValueError, TypeError):
            processes = {}
        if any(_record_alive(r) for r in processes.values()):
            continue
        if not processes and time.time() - directory.stat().st_mtime < min_age_s:
            continue
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(name)
    return removed
