"""The devcluster is a real control plane: real apiserver validation, scheduler, garbage
collector, service accounts; kwok plays the kubelet and sparksim plays the Spark driver."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from devcluster import build
from devcluster.cluster import Cluster
from devcluster.testing import ClusterHandle, KubectlError, install_fake_go, unique_name, wait_for
from tests.support.gap import wait_until_cluster_clients_recovered

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


def pod_manifest(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


def get(cluster: ClusterHandle, namespace: str, kind: str, name: str) -> Obj | None:
    result = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found")
    return json.loads(result.stdout) if result.stdout.strip() else None


def wait_pod(cluster: ClusterHandle, namespace: str, name: str, phase: str, timeout: float = 30.0) -> Obj:
    def current() -> Obj | None:
        pod = get(cluster, namespace, "pod", name)
        return pod if pod and pod.get("status", {}).get("phase") == phase else None

    return wait_for(current, timeout=timeout, message=f"pod {name} {phase}")


def wait_gone(cluster: ClusterHandle, namespace: str, kind: str, name: str, timeout: float = 30.0) -> None:
    wait_for(lambda: get(cluster, namespace, kind, name) is None, timeout=timeout, message=f"{kind} {name} gone")


def condition(obj: Obj, kind: str) -> Obj:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def test_kubectl_lists_the_fake_nodes(cluster: ClusterHandle) -> None:
    nodes = cluster.kubectl_json("get", "nodes", "-l", "type=kwok")["items"]
    assert len(nodes) >= 3
    for node in nodes:
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert condition(node, "Ready")["status"] == "True"
        assert not node["spec"].get("taints")
    table = cluster.kubectl("get", "nodes").stdout
    assert all(n["metadata"]["name"] in table for n in nodes)


def test_crd_schema_rejects_invalid_object_with_the_servers_error(cluster: ClusterHandle, namespace: str) -> None:
    group = f"{unique_name('g')}.devcluster.sparkop.io"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {"size": {"type": "integer", "minimum": 1}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    cluster.apply(crd)
    try:
        # Not `kubectl wait`: it fails at once while the new CRD has no conditions yet.
        wait_for(
            lambda: any(
                c["type"] == "Established" and c["status"] == "True"
                for c in cluster.kubectl_json("get", f"crd/widgets.{group}").get("status", {}).get("conditions") or []
            ),
            message="CRD Established",
        )
        valid = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "ok"}, "spec": {"size": 2}}
        cluster.apply(valid, namespace)
        invalid = {**valid, "metadata": {"name": "bad"}, "spec": {"size": 0}}
        with pytest.raises(KubectlError) as rejected:
            cluster.apply(invalid, namespace)
        stderr = rejected.value.result.stderr
        assert "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1" in stderr
    finally:
        cluster.kubectl("delete", "crd", f"widgets.{group}", "--wait=false")


def test_pod_is_scheduled_onto_a_kwok_node_and_runs(cluster: ClusterHandle, namespace: str) -> None:
    cluster.apply(pod_manifest("web"), namespace)
    pod = wait_pod(cluster, namespace, "web", "Running")
    assert pod["spec"]["nodeName"].startswith("kwok-node-")
    assert pod["status"]["podIP"]
    assert condition(pod, "Ready")["status"] == "True"
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] and "running" in status["state"]
    # Admission mounted a service-account token: the serviceaccount machinery is real.
    assert any(v["name"].startswith("kube-api-access-") for v in pod["spec"]["volumes"])


def test_a_running_pod_marked_not_ready_by_the_node_lifecycle_controller_is_ready_again(
    cluster: ClusterHandle, namespace: str
) -> None:
    """As a kubelet back after its node was Unknown: the node-lifecycle controller's Ready=False on a
    pod whose containers still run is turned back to True (else a Connect server stays NotReady)."""
    cluster.apply(pod_manifest("blip"), namespace)
    wait_pod(cluster, namespace, "blip", "Running")
    mark = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "NodeNotReady"}]}}
    marked = json.loads(
        cluster.kubectl(
            "patch", "pod", "blip", "-n", namespace, "--subresource=status", "-p", json.dumps(mark), "-o", "json"
        ).stdout
    )
    assert condition(marked, "Ready")["status"] == "False"

    def ready_again() -> Obj | None:
        pod = get(cluster, namespace, "pod", "blip") or {}
        ready = condition(pod, "Ready")
        return pod if ready["status"] == "True" and not ready.get("reason") else None

    pod = wait_for(ready_again, timeout=30, message="pod blip Ready again")
    assert int(pod["metadata"]["resourceVersion"]) > int(marked["metadata"]["resourceVersion"])
    assert pod["status"]["phase"] == "Running" and pod["status"]["containerStatuses"][0]["ready"]


def test_init_containers_complete(cluster: ClusterHandle, namespace: str) -> None:
    manifest = pod_manifest("with-init", initContainers=[{"name": "setup", "image": "busybox"}])
    cluster.apply(manifest, namespace)
    pod = wait_pod(cluster, namespace, "with-init", "Running")
    (init,) = pod["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["reason"] == "Completed"


def test_failed_pod_reports_exit_code(cluster: ClusterHandle, namespace: str) -> None:
    annotations = {
        "sim.sparkop.io/outcome": "Failed",
        "sim.sparkop.io/exit-code": "3",
        "sim.sparkop.io/message": "boom",
    }
    cluster.apply(pod_manifest("crash", annotations, restartPolicy="Never"), namespace)
    pod = wait_pod(cluster, namespace, "crash", "Failed")
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3
    assert terminated["reason"] == "Error"
    assert terminated["message"] == "boom"
    assert terminated["startedAt"] and terminated["finishedAt"]


def test_pod_succeeds_after_its_run_time(cluster: ClusterHandle, namespace: str) -> None:
    cluster.apply(pod_manifest("job", {"sim.sparkop.io/run-seconds": "2"}, restartPolicy="Never"), namespace)
    wait_pod(cluster, namespace, "job", "Running")
    started = time.monotonic()
    pod = wait_pod(cluster, namespace, "job", "Succeeded")
    assert time.monotonic() - started > 1.0
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")


def test_waiting_reason_keeps_pod_pending(cluster: ClusterHandle, namespace: str) -> None:
    cluster.apply(pod_manifest("stuck", {"sim.sparkop.io/waiting-reason": "ImagePullBackOff"}), namespace)

    def waiting() -> Obj | None:
        pod = get(cluster, namespace, "pod", "stuck")
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
        return statuses[0]["state"].get("waiting") if statuses else None

    state = wait_for(waiting, message="container waiting")
    assert state["reason"] == "ImagePullBackOff"
    time.sleep(1.0)
    assert get(cluster, namespace, "pod", "stuck")["status"]["phase"] == "Pending"  # type: ignore[index]


def test_too_big_pod_stays_pending_unschedulable(cluster: ClusterHandle, namespace: str) -> None:
    manifest = pod_manifest("huge")
    manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1000"}}
    cluster.apply(manifest, namespace)

    def unschedulable() -> Obj | None:
        pod = get(cluster, namespace, "pod", "huge")
        conditions = (pod or {}).get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), None)

    scheduled = wait_for(unschedulable, message="PodScheduled=False")
    assert scheduled["reason"] == "Unschedulable"
    assert "Insufficient cpu" in scheduled["message"]
    assert get(cluster, namespace, "pod", "huge")["status"]["phase"] == "Pending"  # type: ignore[index]


def test_foreign_finalizer_keeps_pod_terminating(cluster: ClusterHandle, namespace: str) -> None:
    manifest = pod_manifest("held")
    manifest["metadata"]["finalizers"] = ["test.sparkop.io/hold"]
    cluster.apply(manifest, namespace)
    wait_pod(cluster, namespace, "held", "Running")
    cluster.kubectl("delete", "pod", "held", "-n", namespace, "--wait=false")
    time.sleep(2.0)
    pod = get(cluster, namespace, "pod", "held")
    assert pod is not None and pod["metadata"]["deletionTimestamp"]
    assert pod["metadata"]["finalizers"] == ["test.sparkop.io/hold"]
    cluster.kubectl(
        "patch", "pod", "held", "-n", namespace, "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]'
    )
    wait_gone(cluster, namespace, "pod", "held")


def test_deletion_honours_termination_time_capped_by_grace(cluster: ClusterHandle, namespace: str) -> None:
    cluster.apply(pod_manifest("slow", {"sim.sparkop.io/termination-seconds": "2"}), namespace)
    capped = pod_manifest("capped", {"sim.sparkop.io/termination-seconds": "600"}, terminationGracePeriodSeconds=1)
    cluster.apply(capped, namespace)
    wait_pod(cluster, namespace, "slow", "Running")
    wait_pod(cluster, namespace, "capped", "Running")
    cluster.kubectl("delete", "pod", "slow", "capped", "-n", namespace, "--wait=false")
    time.sleep(0.5)
    assert get(cluster, namespace, "pod", "slow") is not None  # still Terminating
    wait_gone(cluster, namespace, "pod", "capped", timeout=5)
    wait_gone(cluster, namespace, "pod", "slow", timeout=5)


def _owner_with_dependents(cluster: ClusterHandle, namespace: str, owner: str) -> list[tuple[str, str]]:
    cluster.kubectl("create", "configmap", owner, "-n", namespace)
    uid = cluster.kubectl_json("get", "configmap", owner, "-n", namespace)["metadata"]["uid"]
    ref = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid, "blockOwnerDeletion": True}]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{owner}-cm", "ownerReferences": ref}}
    pod = pod_manifest(f"{owner}-pod")
    pod["metadata"]["ownerReferences"] = ref
    cluster.apply(cm, namespace)
    cluster.apply(pod, namespace)
    wait_pod(cluster, namespace, f"{owner}-pod", "Running")
    return [("configmap", f"{owner}-cm"), ("pod", f"{owner}-pod")]


@pytest.mark.parametrize("propagation", ["background", "foreground"])
def test_garbage_collector_deletes_dependents(cluster: ClusterHandle, namespace: str, propagation: str) -> None:
    dependents = _owner_with_dependents(cluster, namespace, f"owner-{propagation}")
    cluster.kubectl(
        "delete", "configmap", f"owner-{propagation}", "-n", namespace, f"--cascade={propagation}", "--wait=false"
    )
    if propagation == "foreground":
        # The owner waits, visibly, for the collector to delete its blocking dependents first.
        owner = get(cluster, namespace, "configmap", f"owner-{propagation}")
        if owner is not None:
            assert "foregroundDeletion" in owner["metadata"]["finalizers"]
    for kind, name in dependents:
        wait_gone(cluster, namespace, kind, name)
    wait_gone(cluster, namespace, "configmap", f"owner-{propagation}")


def _driver(name: str, app_id: str, conf_map: str, template_map: str | None) -> Obj:
    mounts = [{"name": "spark-conf-volume-driver", "mountPath": "/opt/spark/conf"}]
    volumes: list[Obj] = [
        {
            "name": "spark-conf-volume-driver",
            "configMap": {"name": conf_map, "items": [{"key": "spark.properties", "path": "spark.properties"}]},
        }
    ]
    if template_map:
        mounts.append({"name": "pod-template-volume", "mountPath": "/opt/spark/pod-template"})
        volumes.append({"name": "pod-template-volume", "configMap": {"name": template_map}})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"spark-role": "driver", "spark-app-selector": app_id}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "spark-kubernetes-driver", "image": "spark:test", "args": ["driver"], "volumeMounts": mounts}
            ],
            "volumes": volumes,
        },
    }


def _executors(cluster: ClusterHandle, namespace: str, app_id: str) -> list[Obj]:
    selector = f"spark-app-selector={app_id},spark-role=executor"
    items: list[Obj] = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", selector)["items"]
    return sorted(items, key=lambda p: p["metadata"]["name"])


def test_spark_driver_simulator_creates_and_cleans_up_executors(cluster: ClusterHandle, namespace: str) -> None:
    props = "\n".join(
        [
            "spark.app.id=spark-app-1",
            "spark.app.name=Pi Test",
            "spark.executor.instances=2",
            "spark.kubernetes.executor.podTemplateFile=/opt/spark/pod-template/executor.yaml",
        ]
    )
    cluster.kubectl("create", "configmap", "pi-conf", "-n", namespace, f"--from-literal=spark.properties={props}")
    keeper_uid = cluster.kubectl_json("get", "configmap", "pi-conf", "-n", namespace)["metadata"]["uid"]
    template = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {"from-template": "yes"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "pi-conf", "uid": keeper_uid}],
        },
        "spec": {"containers": [{"name": "executor", "image": "ignored"}]},
    }
    cluster.kubectl(
        "create", "configmap", "pi-template", "-n", namespace, f"--from-literal=executor.yaml={json.dumps(template)}"
    )
    cluster.apply(_driver("pi-driver", "spark-app-1", "pi-conf", "pi-template"), namespace)
    driver = wait_pod(cluster, namespace, "pi-driver", "Running")

    executors = wait_for(
        lambda: (e := _executors(cluster, namespace, "spark-app-1")) and len(e) == 2 and e, message="2 executors"
    )
    assert [e["metadata"]["name"] for e in executors] == ["pi-exec-1", "pi-exec-2"]
    for number, executor in enumerate(executors, start=1):
        meta = executor["metadata"]
        assert meta["labels"]["from-template"] == "yes"
        assert meta["labels"]["spark-exec-id"] == str(number)
        assert meta["labels"]["spark-app-name"] == "pi-test"
        owners = meta["ownerReferences"]
        assert owners[0]["uid"] == keeper_uid
        assert owners[1] == {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "pi-driver",
            "uid": driver["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        (container,) = executor["spec"]["containers"]
        assert (container["name"], container["image"], container["args"]) == ("executor", "spark:test", ["executor"])
    wait_pod(cluster, namespace, "pi-exec-1", "Running")

    # The driver finishes: its executors are deleted and not recreated.
    cluster.kubectl("annotate", "pod", "pi-driver", "-n", namespace, "sim.sparkop.io/outcome=Succeeded")
    wait_pod(cluster, namespace, "pi-driver", "Succeeded")
    wait_for(lambda: not _executors(cluster, namespace, "spark-app-1"), message="executors deleted")
    time.sleep(2.0)
    assert not _executors(cluster, namespace, "spark-app-1")


def test_deleting_a_driver_removes_its_executors(cluster: ClusterHandle, namespace: str) -> None:
    cluster.kubectl(
        "create", "configmap", "conf", "-n", namespace, "--from-literal=spark.properties=spark.executor.instances=1"
    )
    driver = _driver("solo-driver", "spark-app-2", "conf", None)
    driver["metadata"]["annotations"] = {"sim.sparkop.io/exec-waiting-reason": "ImagePullBackOff"}
    cluster.apply(driver, namespace)
    (executor,) = wait_for(lambda: _executors(cluster, namespace, "spark-app-2"), message="executor created")
    assert executor["metadata"]["name"] == "solo-exec-1"
    assert executor["metadata"]["annotations"]["sim.sparkop.io/waiting-reason"] == "ImagePullBackOff"
    cluster.kubectl("delete", "pod", "solo-driver", "-n", namespace, "--wait=false")
    wait_for(lambda: not _executors(cluster, namespace, "spark-app-2"), message="executor deleted")


def test_a_driver_asks_for_its_executors_a_moment_after_it_runs(cluster: ClusterHandle, namespace: str) -> None:
    """As a real driver does once its SparkContext is up: the delay of the driver pod's annotation (the
    simulator's --executor-delay otherwise), read here from the API server's own times (whole seconds)."""
    cluster.kubectl(
        "create", "configmap", "conf", "-n", namespace, "--from-literal=spark.properties=spark.executor.instances=1"
    )
    driver = _driver("later-driver", "spark-later", "conf", None)
    driver["metadata"]["annotations"] = {"sim.sparkop.io/executor-delay-seconds": "4"}
    cluster.apply(driver, namespace)
    running = wait_pod(cluster, namespace, "later-driver", "Running")
    (executor,) = wait_for(lambda: _executors(cluster, namespace, "spark-later"), message="its executor")
    started = running["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    gap = _seconds(executor["metadata"]["creationTimestamp"]) - _seconds(started)
    assert gap >= 3, (started, executor["metadata"]["creationTimestamp"])  # 4 s, each stamp cut to the second


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_restarting_apiserver_and_etcd_keeps_every_object(cluster: ClusterHandle, namespace: str) -> None:
    if not cluster.can_restart:
        pytest.skip("external cluster: not ours to restart")
    cluster.kubectl("create", "configmap", "survivor", "-n", namespace, "--from-literal=k=v")
    cluster.apply(pod_manifest("survivor-pod"), namespace)
    wait_pod(cluster, namespace, "survivor-pod", "Running")
    before = {
        kind: cluster.kubectl_json("get", kind, name, "-n", namespace)["metadata"]["uid"]
        for kind, name in (("configmap", "survivor"), ("pod", "survivor-pod"))
    }

    cluster.restart_etcd()  # the apiserver must reconnect on its own
    cluster.restart("all")  # both processes killed and started again on the same data

    for kind, uid in before.items():
        name = "survivor" if kind == "configmap" else "survivor-pod"
        assert cluster.kubectl_json("get", kind, name, "-n", namespace)["metadata"]["uid"] == uid
    # Scheduler, kwok and controllers reconnected: a new pod still goes all the way.
    cluster.apply(pod_manifest("after-restart"), namespace)
    wait_pod(cluster, namespace, "after-restart", "Running", timeout=60)
    # client-go's re-list backoff grows with each gap: leave the cluster whole for the tests after this.
    wait_until_cluster_clients_recovered(cluster)


def test_spark_driver_simulator_converges_after_its_restart(cluster: ClusterHandle, namespace: str) -> None:
    if not cluster.can_restart:
        pytest.skip("external cluster: not ours to restart")
    cluster.kubectl(
        "create", "configmap", "conf", "-n", namespace, "--from-literal=spark.properties=spark.executor.instances=2"
    )
    cluster.apply(_driver("keep-driver", "spark-keep", "conf", None), namespace)
    cluster.apply(_driver("done-driver", "spark-done", "conf", None), namespace)
    for app in ("spark-keep", "spark-done"):
        wait_for(lambda app=app: len(_executors(cluster, namespace, app)) == 2, message=f"{app} executors")

    cluster.stop("sparksim")
    # While the simulator is down: one executor disappears, one driver finishes, one is new.
    cluster.kubectl("delete", "pod", "keep-exec-2", "-n", namespace, "--wait=false")
    cluster.kubectl("annotate", "pod", "done-driver", "-n", namespace, "sim.sparkop.io/outcome=Succeeded")
    cluster.apply(_driver("new-driver", "spark-new", "conf", None), namespace)
    wait_pod(cluster, namespace, "done-driver", "Succeeded")
    wait_gone(cluster, namespace, "pod", "keep-exec-2")
    cluster.restart("sparksim")

    wait_for(lambda: len(_executors(cluster, namespace, "spark-keep")) == 2, message="missing executor recreated")
    wait_for(lambda: len(_executors(cluster, namespace, "spark-new")) == 2, message="new driver's executors")
    wait_for(lambda: not _executors(cluster, namespace, "spark-done"), message="finished driver's executors deleted")
    time.sleep(1.0)
    assert not _executors(cluster, namespace, "spark-done")


# A real `up` takes ~6 s here when warm; the budget leaves room for a loaded machine, and the
# fake first build outlasts it, as the real one (minutes) outlasts the default 90 s.
FIRST_RUN_TIMEOUT_S = 30.0


def test_up_from_an_empty_cache_survives_a_build_longer_than_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first `make demo` of issue 9: an empty binary cache, a build that outlasts the
    start-up budget, then a real control plane. Only `go` is fake: it takes its time and links
    the binaries this machine already built; the rest (lock, temp dir, progress, up) is real."""
    real_binaries = build.ensure_built()
    need, _ = build.required_go_version()
    fake_go = install_fake_go(
        tmp_path / "fake-go",
        build_seconds={"etcd": 1.0, "kwok": 1.0, "kubernetes": FIRST_RUN_TIMEOUT_S + 2.0},
        version="go" + ".".join(map(str, need)),
        binaries_from=real_binaries,
    )
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("SPARKOP_CACHE", str(cache))
    monkeypatch.setenv("PATH", f"{fake_go}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(build, "PROGRESS_EVERY_S", 10.0)
    lines: list[str] = []

    cluster = Cluster.up(
        f"pytest-first-run-{os.getpid()}", nodes=1, die_with_parent=True, timeout=FIRST_RUN_TIMEOUT_S, log=lines.append
    )
    try:
        log = "\n".join(lines)
        assert cluster.bin_dir.is_relative_to(cache) and build.is_built(cluster.bin_dir)
        assert re.search(r"\[build\] kubernetes: still building \(\d+s; ~\d+ min on 2 cores\)", log), log
        handle = ClusterHandle(cluster.kubeconfig, cluster.kubectl, cluster)
        (node,) = handle.kubectl_json("get", "nodes", "-l", "type=kwok")["items"]
        assert condition(node, "Ready")["status"] == "True"
        assert handle.kubectl("get", "--raw", "/readyz").stdout == "ok"
    finally:
        cluster.down()
