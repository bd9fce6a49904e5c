"""Real nodes: pods run as real processes under containerd and the kubelet, with pod IPs,
cluster DNS, the kubernetes Service, volumes, logs and exit codes (devcluster/nodes.py)."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from devcluster import images, procs, realnodes
from devcluster.cluster import Cluster
from devcluster.nodes import HOST_INTERFACE, RUNTIME_ROOT, STATE_ROOT
from devcluster.testing import REAL_SESSION_PREFIX, ClusterHandle, RealNodeClusters, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

BASE_IMAGE = f"{images.BASE_REPO}:latest"
# A JVM and a pod sandbox start in seconds here; these bounds leave room for a loaded machine.
POD_DONE_S = 120.0


def pod(name: str, command: str, **spec: Any) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": spec.pop("image", BASE_IMAGE),
        "imagePullPolicy": "Never",
        "command": ["/bin/sh", "-c", command],
        **spec.pop("container", {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": spec.pop("labels", {"app": name})},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 2, "containers": [container], **spec},
    }


def phase_of(cluster: ClusterHandle, namespace: str, name: str) -> str:
    return str(cluster.kubectl_json("get", "pod", name, "-n", namespace).get("status", {}).get("phase", ""))


def run_to_end(cluster: ClusterHandle, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Create the pod and wait until it Succeeded or Failed; return it."""
    cluster.apply(manifest, namespace=namespace)
    name = manifest["metadata"]["name"]
    wait_for(
        lambda: phase_of(cluster, namespace, name) in ("Succeeded", "Failed"),
        timeout=POD_DONE_S,
        interval=0.5,
        message=f"pod {name} to finish",
    )
    result: dict[str, Any] = cluster.kubectl_json("get", "pod", name, "-n", namespace)
    return result


def logs(cluster: ClusterHandle, namespace: str, name: str) -> str:
    return cluster.kubectl("logs", name, "-n", namespace).stdout


def terminated(pod_json: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = pod_json["status"]["containerStatuses"][0]["state"]
    return dict(state["terminated"])


def test_a_pod_sees_its_configmap_secret_emptydir_and_downward_api_env(
    real_cluster: ClusterHandle, real_namespace: str
) -> None:
    ns = real_namespace
    real_cluster.kubectl("create", "configmap", "settings", "-n", ns, "--from-literal=greeting=hello-from-configmap")
    real_cluster.kubectl("create", "secret", "generic", "creds", "-n", ns, "--from-literal=token=s3cr3t-value")
    manifest = pod(
        "volumes",
        "cat /cm/greeting; echo; cat /secret/token; echo; echo scratch-ok > /scratch/f && cat /scratch/f; "
        'echo "pod=$POD_NAME ns=$POD_NAMESPACE ip=$POD_IP node=$NODE_NAME"',
        container={
            "volumeMounts": [
                {"name": "cm", "mountPath": "/cm"},
                {"name": "secret", "mountPath": "/secret"},
                {"name": "scratch", "mountPath": "/scratch"},
            ],
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            ],
        },
        volumes=[
            {"name": "cm", "configMap": {"name": "settings"}},
            {"name": "secret", "secret": {"secretName": "creds"}},
            {"name": "scratch", "emptyDir": {}},
        ],
    )
    finished = run_to_end(real_cluster, ns, manifest)
    assert finished["status"]["phase"] == "Succeeded", finished["status"]
    output = logs(real_cluster, ns, "volumes").splitlines()
    pod_ip, node = finished["status"]["podIP"], finished["spec"]["nodeName"]
    assert output == [
        "hello-from-configmap",
        "s3cr3t-value",
        "scratch-ok",
        f"pod=volumes ns={ns} ip={pod_ip} node={node}",
    ]
    assert node.startswith("real-node-") and pod_ip.startswith("10.245.")


def test_pods_on_two_nodes_talk_over_pod_ips_and_a_headless_service_name(
    real_cluster: ClusterHandle, real_namespace: str
) -> None:
    ns, token = real_namespace, uuid.uuid4().hex
    server = pod(
        "server",
        f"mkdir /www && echo {token} > /www/index.html && exec python3 -m http.server 8080 --directory /www",
        nodeName="real-node-0",
        container={"ports": [{"containerPort": 8080}], "readinessProbe": {"tcpSocket": {"port": 8080}}},
    )
    real_cluster.apply(server, namespace=ns)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"clusterIP": "None", "selector": {"app": "server"}, "ports": [{"port": 8080}]},
    }
    real_cluster.apply(service, namespace=ns)
    wait_for(
        lambda: (
            phase_of(real_cluster, ns, "server") == "Running"
            and real_cluster.kubectl_json("get", "pod", "server", "-n", ns)["status"]["containerStatuses"][0]["ready"]
        ),
        timeout=POD_DONE_S,
        interval=0.5,
        message="the server pod to be ready",
    )
    server_ip = real_cluster.kubectl_json("get", "pod", "server", "-n", ns)["status"]["podIP"]
    client = pod(
        "client",
        f"curl -sf http://{server_ip}:8080/ && curl -sf http://web.{ns}.svc:8080/ "
        f"&& curl -sf http://web.{ns}.svc.cluster.local:8080/ && nslookup web.{ns}.svc | grep -c {server_ip}",
        nodeName="real-node-1",
    )
    finished = run_to_end(real_cluster, ns, client)
    output = logs(real_cluster, ns, "client")
    assert finished["status"]["phase"] == "Succeeded", output
    assert output.split() == [token, token, token, "1"]
    assert finished["status"]["podIP"] != server_ip


def test_a_pod_reads_the_api_server_with_its_service_account_token(
    real_cluster: ClusterHandle, real_namespace: str
) -> None:
    ns = real_namespace
    real_cluster.kubectl("create", "role", "pod-reader", "-n", ns, "--verb=get", "--resource=pods")
    real_cluster.kubectl(
        "create", "rolebinding", "pod-reader", "-n", ns, "--role=pod-reader", f"--serviceaccount={ns}:default"
    )
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    manifest = pod(
        "api-reader",
        f'curl -sf --cacert {sa}/ca.crt -H "Authorization: Bearer $(cat {sa}/token)" '
        f"https://kubernetes.default.svc/api/v1/namespaces/{ns}/pods/api-reader",
    )
    finished = run_to_end(real_cluster, ns, manifest)
    output = logs(real_cluster, ns, "api-reader")
    assert finished["status"]["phase"] == "Succeeded", output
    read_back = json.loads(output)
    assert read_back["metadata"]["name"] == "api-reader" and read_back["metadata"]["namespace"] == ns


def test_exit_codes_and_termination_messages_reach_container_statuses(
    real_cluster: ClusterHandle, real_namespace: str
) -> None:
    ns = real_namespace
    from_file = run_to_end(
        real_cluster, ns, pod("exits-3", "echo 'disk full at stage 2' > /dev/termination-log; exit 3")
    )
    assert from_file["status"]["phase"] == "Failed"
    assert terminated(from_file) | {"startedAt": None, "finishedAt": None, "containerID": None} == {
        "exitCode": 3,
        "reason": "Error",
        "message": "disk full at stage 2\n",
        "startedAt": None,
        "finishedAt": None,
        "containerID": None,
    }
    from_logs = run_to_end(
        real_cluster,
        ns,
        pod(
            "exits-1",
            "echo 'Exception in thread main: no such table'; exit 1",
            container={"terminationMessagePolicy": "FallbackToLogsOnError"},
        ),
    )
    assert terminated(from_logs)["exitCode"] == 1
    assert terminated(from_logs)["message"] == "Exception in thread main: no such table\n"
    succeeded = run_to_end(real_cluster, ns, pod("exits-0", "true"))
    assert terminated(succeeded)["exitCode"] == 0 and terminated(succeeded)["reason"] == "Completed"


def _host_pids_running(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline:
                found.append(int(entry.name))
    return found


def test_deleting_a_pod_kills_its_processes(real_cluster: ClusterHandle, real_namespace: str) -> None:
    ns = real_namespace
    seconds = str(1_000_000 + uuid.uuid4().int % 1_000_000)  # a command line no other process has
    real_cluster.apply(pod("sleeper", f"exec sleep {seconds}"), namespace=ns)
    pids = wait_for(
        lambda: _host_pids_running(f"sleep {seconds}"), timeout=POD_DONE_S, message="the pod's process on this machine"
    )
    assert len(pids) == 1
    real_cluster.kubectl("delete", "pod", "sleeper", "-n", ns, "--wait=true", timeout=120)
    wait_for(lambda: not _host_pids_running(f"sleep {seconds}"), timeout=60, message="the pod's process to be gone")


def test_a_second_cluster_with_real_nodes_is_refused_and_leaves_the_running_ones_alone(
    real_cluster: ClusterHandle, real_namespace: str
) -> None:
    """Real nodes' paths, cgroups and links are machine-wide: the refused cluster's clean-up once
    stopped the running cluster's containerd and kubelets, as if they were its own."""
    assert real_cluster.cluster is not None
    node_processes = {
        name: record.pid
        for name, record in real_cluster.cluster.state.processes.items()
        if name.startswith(("containerd-", "kubelet-"))
    }
    with pytest.raises(realnodes.RealNodeError, match="runs real nodes on this machine"):
        Cluster.up(
            f"{REAL_SESSION_PREFIX}refused-{uuid.uuid4().hex[:6]}",
            nodes=0,
            simulator=False,
            real_nodes=1,
            die_with_parent=True,
        )
    assert [name for name, pid in node_processes.items() if not procs.is_alive(pid)] == []
    finished = run_to_end(real_cluster, real_namespace, pod("after-refusal", "echo still-running"))
    assert terminated(finished)["exitCode"] == 0
    assert logs(real_cluster, real_namespace, "after-refusal") == "still-running\n"


@pytest.mark.parametrize("version", images.pinned_spark_versions())
def test_the_spark_image_runs_spark_submit(real_cluster: ClusterHandle, real_namespace: str, version: str) -> None:
    ns = real_namespace
    manifest = pod("spark-version", "", image=f"apache/spark:{version}")
    manifest["spec"]["containers"][0].pop("command")
    manifest["spec"]["containers"][0]["args"] = ["/opt/spark/bin/spark-submit", "--version"]
    finished = run_to_end(real_cluster, ns, manifest)
    output = logs(real_cluster, ns, "spark-version")
    assert finished["status"]["phase"] == "Succeeded", output
    assert f"version {version}" in output


def _leftovers() -> dict[str, list[str]]:
    links = realnodes._our_links()
    mounts = [
        line
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if any(marker in line for marker in (str(RUNTIME_ROOT), str(STATE_ROOT), "/run/netns/cni-"))
    ]
    processes = [str(pid) for pid in realnodes._node_processes(None)]
    cgroups = [str(p) for p in Path("/sys/fs/cgroup").glob("*/sparkop-devcluster-*")]
    netns = [str(p) for p in Path("/run/netns").glob("cni-*")] if Path("/run/netns").is_dir() else []
    return {"links": links, "mounts": mounts, "processes": processes, "cgroups": cgroups, "netns": netns}


def _veths() -> set[str]:
    listed = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True, check=True)
    return {line.split(":")[1].strip().split("@")[0] for line in listed.stdout.splitlines()}


def test_down_leaves_no_process_mount_cgroup_or_network_device(real_node_clusters: RealNodeClusters) -> None:
    real_node_clusters.stop()  # one real-node cluster per machine: this test needs its own
    veths_before = _veths()
    cluster = Cluster.up(f"{REAL_SESSION_PREFIX}down", nodes=0, simulator=False, real_nodes=1, die_with_parent=True)
    try:
        handle = ClusterHandle(cluster.kubeconfig, cluster.kubectl, cluster)
        handle.apply(pod("sleeper", "exec sleep 100000"), namespace="default")
        wait_for(lambda: phase_of(handle, "default", "sleeper") == "Running", timeout=POD_DONE_S, interval=0.5)
        during = _leftovers()
        assert during["links"] and during["processes"] and during["cgroups"], during
        assert _veths() - veths_before, "the running pod's veth is missing"
    finally:
        cluster.down()
    # The kernel frees a network namespace, and the veth in it, shortly after its last process.
    wait_for(lambda: _veths() == veths_before, timeout=30, message="the pods' veth devices to be gone")
    assert _leftovers() == {"links": [], "mounts": [], "processes": [], "cgroups": [], "netns": []}
    assert HOST_INTERFACE not in realnodes._our_links()
    assert not RUNTIME_ROOT.exists() and not STATE_ROOT.exists()
