"""/healthz and /readyz of `sparkop run --metrics-port` on a real API server, state by state:
before the CRDs are served, while a cache cannot list, as leader and as standby; and /metrics."""

from __future__ import annotations

import os
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from devcluster.testing import ClusterHandle, wait_for
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def get(port: int, path: str) -> tuple[int, str] | None:
    """(status, body), or None while nothing listens yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None


def answers(port: int, path: str, status: int, text: str) -> tuple[int, str] | None:
    got = get(port, path)
    return got if got is not None and got[0] == status and text in got[1] else None


def probed(kubeconfig: Path | str, identity: str, port: int, log_dir: Path, namespaces: list[str]) -> OperatorProcess:
    args = ["--leader-elect", "--leader-elect-namespace", "default", "--leader-elect-identity", identity]
    args += ["--metrics-port", str(port)]
    return OperatorProcess(kubeconfig, namespaces=namespaces, log_dir=log_dir, extra_args=args)


def test_probes_before_the_crds_as_leader_and_as_standby(tmp_path: Path) -> None:
    from devcluster.cluster import Cluster
    from sparkop import demo

    cluster = Cluster.up(f"probes-{os.getpid()}", nodes=1, die_with_parent=True)
    leader_port, standby_port = free_port(), free_port()
    leader = probed(cluster.kubeconfig, "probe-a", leader_port, tmp_path, [])
    standby = probed(cluster.kubeconfig, "probe-b", standby_port, tmp_path, [])
    try:
        leader.start()
        wait_for(lambda: "waiting for the API server to serve" in leader.logs(), timeout=60, message="the wait")
        # Named with their group: with --kubeflow-api, kubeflow's sparkapplications are waited for too.
        kinds = "sparkapplications.sparkop.io, sparkdrivers.sparkop.io"
        not_served = f"the API server does not serve {kinds} (install the CRDs)"
        wait_for(lambda: answers(leader_port, "/readyz", 503, not_served), timeout=10, message="not ready")
        assert answers(leader_port, "/healthz", 200, f"ok: waiting for {kinds}")

        demo.install_crds(cluster.kubectl, cluster.kubeconfig)
        demo.wait_for_crds(cluster.kubectl, cluster.kubeconfig)
        wait_for(lambda: answers(leader_port, "/readyz", 200, "ok: leader (probe-a)"), timeout=30, message="leader")
        assert answers(leader_port, "/healthz", 200, "informers running")

        standby.start()
        standby_ready = "ok: standby (probe-b; the leader is probe-a)"
        wait_for(lambda: answers(standby_port, "/readyz", 200, standby_ready), timeout=60, message="standby ready")
        assert answers(standby_port, "/healthz", 200, "informers running")

        metrics = get(leader_port, "/metrics")
        assert metrics is not None and metrics[0] == 200
        assert "sparkop_reconcile_total" in metrics[1] and "process_start_time_seconds" in metrics[1]
        assert (get(leader_port, "/nothing") or (0, ""))[0] == 404
    finally:
        leader.stop()
        standby.stop()
        cluster.down()


def test_not_ready_while_a_cache_cannot_list_and_ready_once_it_can(
    crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    """A ServiceAccount that may not list pods yet: the replica is alive (its informer retries) but
    not ready, naming the cache; granted the permission, it syncs and becomes ready."""
    cluster = crds
    rules = [
        {"apiGroups": ["sparkop.io"], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": ["", "networking.k8s.io"],
         "resources": ["configmaps", "services", "events", "ingresses", "networkpolicies"], "verbs": ["*"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
    ]  # fmt: skip
    manifests = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "op"}, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "op"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "op"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": namespace}],
        },
    ]
    for manifest in manifests:
        cluster.apply(manifest, namespace)
    namespaces_role = f"{namespace}-namespaces"
    cluster.kubectl("create", "clusterrole", namespaces_role, "--verb=get,list,watch", "--resource=namespaces")
    try:
        cluster.kubectl(
            "create", "clusterrolebinding", namespaces_role, f"--clusterrole={namespaces_role}",
            f"--serviceaccount={namespace}:op",
        )  # fmt: skip
        token = cluster.kubectl("create", "token", "op", "-n", namespace).stdout.strip()
        admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
        restricted = {
            **admin,
            "users": [{"name": "op", "user": {"token": token}}],
            "contexts": [{"name": "op", "context": {"cluster": admin["clusters"][0]["name"], "user": "op"}}],
            "current-context": "op",
        }
        kubeconfig = tmp_path / "op.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(restricted))

        port = free_port()
        args = ["--leader-elect", "--leader-elect-namespace", namespace, "--metrics-port", str(port)]
        with OperatorProcess(kubeconfig, namespaces=[namespace], log_dir=tmp_path, extra_args=args) as proc:
            syncing = f"caches not synced: Pod@{namespace}"
            wait_for(lambda: answers(port, "/readyz", 503, syncing), timeout=60, message="syncing, not ready")
            # The pods informer starts once the custom objects are listed, so /readyz names it before its
            # first request has been refused: wait for the refusal, then ask again while it retries.
            wait_for(lambda: "pods is forbidden" in proc.logs(), timeout=60, message="the refused list logged")
            assert answers(port, "/readyz", 503, syncing), "still not ready while the pods informer is refused"
            assert answers(port, "/healthz", 200, "informers running"), "an informer that retries is alive"

            pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}
            cluster.apply({**manifests[1], "rules": [*rules, pods]}, namespace)
            wait_for(lambda: answers(port, "/readyz", 200, "ok: leader"), timeout=90, message="ready once synced")
    finally:
        cluster.kubectl("delete", "clusterrolebinding,clusterrole", namespaces_role, check=False)
