"""Run and tear down real nodes on this machine: the network, cgroups, containerd, kubelets,
kube-proxy and CoreDNS whose configs devcluster/nodes.py writes.

Real nodes use this machine's network namespace (bridges, iptables rules), so one cluster at a
time may run them: `claim` records the owner in RUNTIME_ROOT and clears what a dead owner left.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from devcluster import nodes, procs
from devcluster.nodes import HOST_INTERFACE, HOST_IP, RUNTIME_ROOT, STATE_ROOT, RealNode

Log = Callable[[str], None]

OWNER_FILE = RUNTIME_ROOT / "owner.json"
CGROUP_FS = Path("/sys/fs/cgroup")
NETNS_DIR = Path("/run/netns")
# The kubelet serves its device-plugin registration socket at this path whatever its --root-dir: two
# kubelets of one machine starting at once each clear the directory and bind kubelet.sock there, and
# the second fails ("bind: address already in use", a cold CI run). Each node gets it as a tmpfs of its
# own, like NETNS_DIR, in the mount namespace its containerd and kubelet share.
DEVICE_PLUGINS_DIR = Path("/var/lib/kubelet/device-plugins")
NODE_PRIVATE_DIRS = (NETNS_DIR, DEVICE_PLUGINS_DIR)
CTR = "/usr/bin/ctr"
CLEAN_MARK = "clean"  # next to a node's image store: its last `down` removed every container
IMPORTED_FILE = "imported.json"
# What real nodes and their images need from Debian, by a file each package installs.
REQUIRED_COMMANDS = {
    "/usr/bin/containerd": "containerd",
    "/usr/bin/ctr": "containerd",
    "/usr/sbin/runc": "runc",
    "/usr/sbin/iptables": "iptables",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "/sbin/ip": "iproute2",
    "/usr/bin/mmdebstrap": "mmdebstrap",
}
JDK_PACKAGE = "openjdk-17-jdk-headless"  # javac compiles the images' SparkPi


class RealNodeError(RuntimeError):
    pass


def missing_packages() -> list[str]:
    """Debian packages real nodes need that this machine lacks."""
    missing = {package for path, package in REQUIRED_COMMANDS.items() if not Path(path).exists()}
    if shutil.which("javac") is None:
        missing.add(JDK_PACKAGE)
    return sorted(missing)


def install_missing_packages(log: Log) -> None:
    """apt-get install what `missing_packages` lists (a fresh CI machine has none of it)."""
    missing = missing_packages()
    if not missing:
        return
    command = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RealNodeError(f"real nodes need Debian packages that are missing; run as root: {' '.join(command)}")
    log(f"[packages] {' '.join(command)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(command, env=env, capture_output=True, check=False).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RealNodeError(f"{' '.join(command)} failed:\n{result.stderr.strip()[-2000:]}")


def check_machine() -> None:
    if os.geteuid() != 0:
        raise RealNodeError("real nodes need root (containerd, the kubelet, bridges and iptables)")
    missing = missing_packages()
    if missing:
        raise RealNodeError(f"real nodes need Debian packages that are missing: apt-get install -y {' '.join(missing)}")


# -- ownership -------------------------------------------------------------------------------


def current_owner() -> dict[str, str] | None:
    try:
        owner = json.loads(OWNER_FILE.read_text())
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def claim(cluster_name: str, cluster_dir: Path, owner_alive: Callable[[dict[str, str]], bool], log: Log) -> None:
    """Make this cluster the machine's real-node owner, after clearing what a dead owner left."""
    owner = current_owner()
    if owner is not None and owner.get("directory") != str(cluster_dir) and owner_alive(owner):
        raise RealNodeError(
            f"cluster {owner.get('name')!r} runs real nodes on this machine (they share its network); "
            f"stop it first: python -m devcluster down --name {owner.get('name')}"
        )
    if owner is not None or _leftovers_exist():
        log("[real-nodes] clearing what an earlier cluster left behind")
        teardown_machine(Path(owner["bin_dir"]) if owner and owner.get("bin_dir") else None, log)
    RUNTIME_ROOT.mkdir(parents=True, exist_ok=True)
    OWNER_FILE.write_text(json.dumps({"name": cluster_name, "directory": str(cluster_dir)}))


def owns_real_nodes(cluster_dir: str, owner: dict[str, str] | None) -> bool:
    """Whether the cluster in `cluster_dir` runs the machine's real nodes. Their paths, cgroups and
    links are machine-wide, so only the owner may stop them: a cluster whose `up` failed to claim
    them (another one runs) has none of its own to stop."""
    return owner is not None and owner.get("directory") == cluster_dir


def record_owner_binaries(bin_dir: Path) -> None:
    owner = current_owner() or {}
    owner["bin_dir"] = str(bin_dir)
    OWNER_FILE.write_text(json.dumps(owner))


def _leftovers_exist() -> bool:
    return bool(_our_links()) or any(_node_processes(None))


# -- network ---------------------------------------------------------------------------------


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RealNodeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def prepare_network(real: Sequence[RealNode]) -> None:
    """The host address (API server, DNS) and one bridge per node holding the node's IP.

    Bridges exist before their first pod so the kubelet can bind its node IP at start; the CNI
    bridge plugin finds and reuses them.
    """
    # A bridge without ports: this kernel has no dummy interfaces, and any local address will do.
    _ip("link", "add", HOST_INTERFACE, "type", "bridge")
    _ip("addr", "add", f"{HOST_IP}/32", "dev", HOST_INTERFACE)
    _ip("link", "set", HOST_INTERFACE, "up")
    for node in real:
        _ip("link", "add", node.bridge, "type", "bridge")
        _ip("addr", "add", f"{node.ip}/{node.subnet.prefixlen}", "dev", node.bridge)
        _ip("link", "set", node.bridge, "up")
    # Pods on different nodes reach each other through this machine's routing.
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
    for directory in NODE_PRIVATE_DIRS:
        directory.mkdir(parents=True, exist_ok=True)


def _our_links() -> list[str]:
    result = _ip("-o", "link", "show", check=False)
    names = [line.split(":")[1].strip().split("@")[0] for line in result.stdout.splitlines() if ":" in line]
    return [name for name in names if name == HOST_INTERFACE or name.startswith("spk-node")]


def remove_network() -> None:
    for name in _our_links():
        _ip("link", "delete", name, check=False)


# -- cgroups ---------------------------------------------------------------------------------


def _hierarchies() -> list[Path]:
    return sorted(p for p in CGROUP_FS.iterdir() if p.is_dir() and not p.is_symlink())


def create_cgroup_root(node: RealNode) -> None:
    """The kubelet wants its --cgroup-root to exist in every hierarchy; cpuset needs its CPUs
    and memory nodes filled in before any process may join a child."""
    for hierarchy in _hierarchies():
        directory = hierarchy / node.cgroup_root.lstrip("/")
        directory.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            parent_value = hierarchy / name
            if parent_value.exists():
                (directory / name).write_text(parent_value.read_text())


def remove_cgroup_root(node: RealNode) -> None:
    for hierarchy in _hierarchies():
        root = hierarchy / node.cgroup_root.lstrip("/")
        if not root.exists():
            continue
        # A cgroup directory goes with rmdir only, children first.
        for directory in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            _rmdir_quietly(directory)
        _rmdir_quietly(root)


def _rmdir_quietly(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()


# -- processes -------------------------------------------------------------------------------


def _node_processes(node: RealNode | None, *, runtime: bool = True) -> Iterable[int]:
    """Pids of `node`'s containers (by cgroup) and, with `runtime`, of its containerd, shims and
    kubelet (by the node's directories on their command line); of every real node when `node`
    is None."""
    prefix = node.cgroup_root if node else "/sparkop-devcluster-real-node-"
    markers = (f"{node.runtime_dir}/", f"{node.state_dir}/") if node else (f"{RUNTIME_ROOT}/", f"{STATE_ROOT}/")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        in_cgroup = any(line.split(":", 2)[-1].startswith(prefix) for line in cgroups.splitlines())
        if in_cgroup or (runtime and any(marker in cmdline for marker in markers)):
            yield int(entry.name)


def kill_node_processes(node: RealNode | None, *, runtime: bool = True, timeout: float = 20.0) -> None:
    """SIGKILL the node's containers (and, with `runtime`, its containerd, shims and kubelet);
    return once they are gone."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [pid for pid in _node_processes(node, runtime=runtime) if pid != os.getpid()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            procs.is_alive(pid)  # reaps it if it was our child
        if time.monotonic() > deadline:
            raise RealNodeError(f"processes of {node.name if node else 'real nodes'} survive SIGKILL: {pids}")
        time.sleep(0.1)


# -- containerd ------------------------------------------------------------------------------


def ctr(node: RealNode, *args: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTR, "--address", str(node.containerd_socket), "--namespace", "k8s.io", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def containerd_ready(node: RealNode) -> bool:
    return node.containerd_socket.exists() and ctr(node, "version", timeout=5).returncode == 0


def prepare_node_dirs(node: RealNode) -> None:
    """Fresh per-cluster state; the image store is kept unless its last user did not clean up."""
    shutil.rmtree(node.state_dir, ignore_errors=True)
    shutil.rmtree(node.runtime_dir, ignore_errors=True)
    for directory in (node.state_dir, node.runtime_dir, node.config_dir, node.cni_conf_dir, node.pod_logs):
        directory.mkdir(parents=True, exist_ok=True)
    mark = node.image_store.parent / CLEAN_MARK
    if node.image_store.exists() and not mark.exists():
        # Containers of a crashed run are in its metadata; their processes are long gone.
        shutil.rmtree(node.image_store.parent, ignore_errors=True)
    node.image_store.parent.mkdir(parents=True, exist_ok=True)
    mark.unlink(missing_ok=True)


def import_images(node: RealNode, archives: Sequence[tuple[str, Path]], log: Log) -> None:
    """Import each (content key, docker-archive) the node's store does not hold yet."""
    record_path = node.image_store.parent / IMPORTED_FILE
    try:
        imported: dict[str, str] = json.loads(record_path.read_text())
    except (OSError, ValueError):
        imported = {}
    for key, archive in archives:
        if imported.get(key) == str(archive):
            continue
        started = time.monotonic()
        result = ctr(node, "images", "import", str(archive))
        if result.returncode != 0:
            raise RealNodeError(f"importing {archive} into {node.name}: {result.stderr.strip()}")
        imported[key] = str(archive)
        record_path.write_text(json.dumps(imported, indent=1))
        log(f"[real-nodes] {node.name}: imported {archive.name} ({time.monotonic() - started:.0f}s, once per image)")


def remove_containers(node: RealNode) -> bool:
    """Delete every task and container from the node's containerd (it still runs): the image
    store is kept for the next cluster and must hold no container of this one."""
    if not containerd_ready(node):
        return False
    listed = ctr(node, "containers", "list", "--quiet", timeout=30)
    if listed.returncode != 0:
        return False
    ok = True
    for container in listed.stdout.split():
        ctr(node, "tasks", "delete", "--force", container, timeout=30)
        ok = ctr(node, "containers", "delete", container, timeout=30).returncode == 0 and ok
    return ok


def mark_clean(node: RealNode) -> None:
    (node.image_store.parent / CLEAN_MARK).write_text("")


def remove_node_state(node: RealNode) -> None:
    shutil.rmtree(node.state_dir, ignore_errors=True)
    shutil.rmtree(node.runtime_dir, ignore_errors=True)


def teardown_machine(node_bin_dir: Path | None, log: Log) -> None:
    """Leave no real-node process, cgroup, link or iptables rule behind (any owner's)."""
    kill_node_processes(None)
    for hierarchy in _hierarchies():
        for root in hierarchy.glob("sparkop-devcluster-real-node-*"):
            index = root.name.rsplit("-", 1)[-1]
            if index.isdigit():
                remove_cgroup_root(nodes.real_node(int(index), Path("/nonexistent"), Path("/nonexistent")))
    cleanup_iptables(node_bin_dir, log)
    remove_network()
    if STATE_ROOT.exists():
        shutil.rmtree(STATE_ROOT, ignore_errors=True)
    if RUNTIME_ROOT.exists():
        shutil.rmtree(RUNTIME_ROOT, ignore_errors=True)


def cleanup_iptables(node_bin_dir: Path | None, log: Log) -> None:
    """kube-proxy's own clean-up, then whatever KUBE-/CNI- chains are left (the kubelet's
    KUBE-FIREWALL, portmap's CNI-HOSTPORT-*)."""
    if node_bin_dir is not None and (node_bin_dir / "kube-proxy").exists():
        result = subprocess.run(
            nodes.kube_proxy_cleanup_argv(node_bin_dir), capture_output=True, text=True, timeout=60, check=False
        )
        if result.returncode != 0:
            log(f"[real-nodes] kube-proxy --cleanup: {result.stderr.strip()[-500:]}")
    for command in ("iptables", "ip6tables"):
        if shutil.which(command):
            _remove_chains(command)


OUR_CHAIN_PREFIXES = ("KUBE-", "CNI-")


def _remove_chains(command: str) -> None:
    for table in ("filter", "nat", "mangle"):
        saved = subprocess.run([f"{command}-save", "-t", table], capture_output=True, text=True, check=False).stdout
        chains = [line[1:].split()[0] for line in saved.splitlines() if line.startswith(":")]
        ours = [chain for chain in chains if chain.startswith(OUR_CHAIN_PREFIXES)]
        for line in saved.splitlines():
            words = shlex.split(line)
            # A rule in a built-in chain that jumps into one of ours: delete it by its spec.
            if words[:1] == ["-A"] and not words[1].startswith(OUR_CHAIN_PREFIXES) and _jumps_to_ours(words):
                subprocess.run([command, "-t", table, "-D", *words[1:]], capture_output=True, check=False)
        for chain in ours:
            subprocess.run([command, "-t", table, "-F", chain], capture_output=True, check=False)
        for chain in ours:
            subprocess.run([command, "-t", table, "-X", chain], capture_output=True, check=False)


def _jumps_to_ours(words: list[str]) -> bool:
    return any(
        flag in ("-j", "-g") and target.startswith(OUR_CHAIN_PREFIXES) for flag, target in itertools.pairwise(words)
    )
