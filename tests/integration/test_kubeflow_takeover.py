"""What kubeflow's operator left, taken over by sparkop (the live swap's adoption, issue 44), on the devcluster
with simulated drivers: cheap, so it runs in ``make test``; tests/integration/test_kubeflow_swap.py is the
same with kubeflow's own operator and real Spark on real nodes.

No kubeflow operator runs here: the test writes what it would have left, as it writes it. A SparkApplication
of kubeflow's group whose status kubeflow wrote (RUNNING: ``submissionID``, ``executionAttempts``,
``driverInfo.podName``), and its driver pod as kubeflow's ``spark-submit`` makes it: named ``<app>-driver``,
controlled by the app, labelled with kubeflow's labels and the run's submission id, its Spark properties
in a mounted ConfigMap that gives its executors kubeflow's labels too (the simulator makes them from it, as
Spark's driver would). Beside it, a COMPLETED app and a RUNNING app whose driver pod is gone. Then sparkop
starts with ``--kubeflow-api``, and:

- the running app's driver pod is adopted: the same pod (uid) is followed to its end, and the app is
  COMPLETED with its execution attempt counted once; no second driver pod is ever created;
- the executors kubeflow's driver made are counted as the run's;
- the finished app is not written (its resourceVersion stays);
- the app whose driver pod is gone is a lost run, FAILED under restartPolicy Never, nothing started.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from devcluster.testing import ClusterHandle, wait_for
from sparkop.domain import labels
from tests.support.cluster_apps import KUBEFLOW_APPS, app_manifest, get, status, wait_state
from tests.support.operator import OperatorProcess
from tests.support.watches import CreationWatch

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]
KUBEFLOW_API = "sparkoperator.k8s.io/v1beta2"
SUBMISSION_ID = "3f0c8a52-kubeflow-submission"
SPARK_APP_ID = "spark-5e1b2c0d9a8f4e7b"


def kubeflow_app(name: str, policy: Obj | None = None) -> Obj:
    app = app_manifest(name, policy)
    app["apiVersion"] = KUBEFLOW_API
    return app


def apply(cluster: ClusterHandle, namespace: str, manifest: Obj) -> Obj:
    out = cluster.kubectl("apply", "-n", namespace, "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout
    applied: Obj = json.loads(out)
    return applied


def write_kubeflow_status(cluster: ClusterHandle, namespace: str, name: str, app_status: Obj) -> Obj:
    """The status kubeflow's operator wrote (its status subresource, as it writes it)."""
    out = cluster.kubectl(
        "patch", KUBEFLOW_APPS, name, "-n", namespace, "--subresource=status", "--type=merge",
        "-o", "json", "-p", json.dumps({"status": app_status}),
    ).stdout  # fmt: skip
    patched: Obj = json.loads(out)
    return patched


def spark_properties(app: str) -> str:
    """What kubeflow's spark-submit hands the driver: its executors get kubeflow's labels."""
    executor_labels = {
        labels.KUBEFLOW_APP_NAME: app,
        labels.KUBEFLOW_LAUNCHED: "true",
        labels.KUBEFLOW_SUBMISSION_ID: SUBMISSION_ID,
    }
    lines = [f"spark.kubernetes.executor.label.{key}={value}" for key, value in executor_labels.items()]
    lines += ["spark.executor.instances=1", f"spark.app.id={SPARK_APP_ID}", f"spark.app.name={app}"]
    return "\n".join(lines) + "\n"


def kubeflow_driver_pod(app: Obj) -> Obj:
    """The driver pod kubeflow's spark-submit makes: kubeflow's name, labels and owner (the app)."""
    name = app["metadata"]["name"]
    owner = {
        "apiVersion": KUBEFLOW_API, "kind": "SparkApplication", "name": name,
        "uid": app["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
    }  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-driver",
            "labels": {
                labels.SPARK_ROLE: labels.ROLE_DRIVER,
                labels.SPARK_APP_SELECTOR: SPARK_APP_ID,
                labels.SPARK_APP_NAME: name,
                labels.KUBEFLOW_APP_NAME: name,
                labels.KUBEFLOW_LAUNCHED: "true",
                labels.KUBEFLOW_SUBMISSION_ID: SUBMISSION_ID,
            },
            # No outcome yet: the simulated driver runs until the test lets it end.
            "annotations": {"sim.sparkop.io/executor-delay-seconds": "0"},
            "ownerReferences": [owner],
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "spark-kubernetes-driver",
                    "image": "apache/spark:3.5.7",
                    "args": ["driver", "--class", "org.apache.spark.examples.SparkPi"],
                    "volumeMounts": [{"name": "spark-conf-volume-driver", "mountPath": "/opt/spark/conf"}],
                }
            ],
            "volumes": [{"name": "spark-conf-volume-driver", "configMap": {"name": f"{name}-driver-conf-map"}}],
        },
    }


def kubeflow_pods(cluster: ClusterHandle, namespace: str, app: str, role: str) -> list[Obj]:
    selector = f"{labels.KUBEFLOW_APP_NAME}={app},{labels.SPARK_ROLE}={role}"
    return list(cluster.kubectl_json("get", "pods", "-n", namespace, "-l", selector)["items"])


def left_by_kubeflow(cluster: ClusterHandle, namespace: str, name: str) -> Obj:
    """A kubeflow-group app and the driver ConfigMap kubeflow's spark-submit made for it (its pod mounts it)."""
    app = apply(cluster, namespace, kubeflow_app(name))
    cluster.kubectl(
        "create", "configmap", f"{name}-driver-conf-map", "-n", namespace,
        f"--from-literal=spark.properties={spark_properties(name)}",
    )  # fmt: skip
    return app


def test_a_running_kubeflow_app_is_adopted_and_followed_to_its_end_with_the_same_driver_pod(
    kubeflow_crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    cluster, ns = kubeflow_crds, namespace
    # -- what kubeflow's operator left ------------------------------------------------------------------
    running = left_by_kubeflow(cluster, ns, "running")
    pod = apply(cluster, ns, kubeflow_driver_pod(running))
    submitted_at = "2026-12-06T10:00:00Z"
    write_kubeflow_status(cluster, ns, "running", {
        "applicationState": {"state": "RUNNING"},
        "submissionID": SUBMISSION_ID,
        "sparkApplicationId": SPARK_APP_ID,
        "executionAttempts": 1,
        "submissionAttempts": 1,
        "lastSubmissionAttemptTime": submitted_at,
        "driverInfo": {"podName": "running-driver"},
    })  # fmt: skip
    done = apply(cluster, ns, kubeflow_app("done"))
    done = write_kubeflow_status(cluster, ns, "done", {
        "applicationState": {"state": "COMPLETED"},
        "executionAttempts": 1,
        "submissionAttempts": 1,
        "terminationTime": "2026-12-06T09:00:00Z",
        "driverInfo": {"podName": "done-driver"},
    })  # fmt: skip
    apply(cluster, ns, kubeflow_app("lost"))
    write_kubeflow_status(cluster, ns, "lost", {
        "applicationState": {"state": "RUNNING"},
        "submissionID": "a-submission-whose-pod-is-gone",
        "executionAttempts": 1,
        "submissionAttempts": 1,
        "driverInfo": {"podName": "lost-driver"},
    })  # fmt: skip
    # The driver runs, and its executor (made from its properties, as Spark's driver makes it) too.
    wait_for(
        lambda: len([p for p in kubeflow_pods(cluster, ns, "running", "executor")
                     if (p.get("status") or {}).get("phase") == "Running"]) == 1,
        timeout=60, interval=0.5, message="kubeflow's driver pod and its executor running",
    )  # fmt: skip
    executor = kubeflow_pods(cluster, ns, "running", "executor")[0]
    assert labels.DRIVER not in executor["metadata"]["labels"], "the simulator made a pod labelled as sparkop's"

    # -- sparkop in ----------------------------------------------------------------------------------------
    driver_pods = CreationWatch(cluster, ns, "pods")
    try:
        with OperatorProcess(
            cluster.kubeconfig, namespaces=[ns], log_dir=tmp_path, extra_args=["--kubeflow-api"]
        ) as operator:

            def adopted() -> bool:
                claimed = get(cluster, ns, "pod", "running-driver") or {}
                meta = claimed.get("metadata") or {}
                drv = get(cluster, ns, "sparkdriver", "running-1-kf") or {}
                counts = (drv.get("status") or {}).get("executors") or {}
                return (
                    (meta.get("labels") or {}).get(labels.DRIVER) == "running-1-kf"
                    and labels.DRIVER_OUTCOME_FINALIZER in (meta.get("finalizers") or [])
                    and counts.get("running") == 1
                )

            wait_for(
                adopted, timeout=60, interval=0.5, message="kubeflow's driver pod and executor adopted by running-1-kf"
            )
            drv = get(cluster, ns, "sparkdriver", "running-1-kf")
            assert drv is not None
            assert drv["spec"]["adoptDriverPod"] == {"name": "running-driver", "uid": pod["metadata"]["uid"]}
            assert drv["status"]["driverPod"]["uid"] == pod["metadata"]["uid"], drv["status"]
            assert drv["status"]["sparkApplicationId"] == SPARK_APP_ID
            claimed = get(cluster, ns, "pod", "running-driver")
            assert claimed is not None
            refs = claimed["metadata"]["ownerReferences"]
            assert [r["uid"] for r in refs if r.get("controller")] == [running["metadata"]["uid"]], refs
            assert any(r["kind"] == "SparkDriver" and not r.get("controller") for r in refs), refs
            mid = status(cluster, ns, "running", KUBEFLOW_APPS)
            assert mid["applicationState"]["state"] == "RUNNING", mid
            assert mid["lastRun"] == 1 and mid["executionAttempts"] == 1, mid
            assert mid["submissionID"] == SUBMISSION_ID, mid

            # The driver ends by itself (what the real swap test's go-ahead does).
            cluster.kubectl("annotate", "pod", "running-driver", "-n", ns, "sim.sparkop.io/outcome=Succeeded")
            final = wait_state(cluster, ns, "running", "COMPLETED", "FAILED", resource=KUBEFLOW_APPS)
            lost = wait_state(cluster, ns, "lost", "COMPLETED", "FAILED", resource=KUBEFLOW_APPS)
            assert "Traceback" not in operator.logs()
    finally:
        driver_pods.stop()

    assert final["applicationState"]["state"] == "COMPLETED", final
    assert final["executionAttempts"] == 1 and final["driverIncarnations"] == 1, final
    drv = get(cluster, ns, "sparkdriver", "running-1-kf")
    assert drv is not None
    incarnations = drv["status"]["incarnations"]
    assert [(i["incarnation"], i["outcome"]) for i in incarnations] == [(1, "Succeeded")], incarnations
    # No second driver: the one pod spark-submit made, never deleted and made again.
    assert driver_pods.uids.get("running-driver") == {pod["metadata"]["uid"]}, driver_pods.uids
    created = {name for name in driver_pods.uids if name.endswith("-driver")}
    assert created == {"running-driver"}, driver_pods.uids
    # The finished app: not written.
    after = get(cluster, ns, KUBEFLOW_APPS, "done")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == done["metadata"]["resourceVersion"], after["status"]
    # The run whose driver pod is gone: lost, counted once, not retried under restartPolicy Never.
    assert lost["applicationState"]["state"] == "FAILED", lost
    assert lost["executionAttempts"] == 1 and lost["lastRun"] == 1, lost
    assert get(cluster, ns, "sparkdriver", "lost-2-kf") is None


HOLD = "test.sparkop.io/hold"


def test_a_pending_rerun_runs_on_from_kubeflows_count_once_kubeflows_last_driver_pod_is_gone(
    kubeflow_crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    cluster, ns = kubeflow_crds, namespace
    retry = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    app = apply(cluster, ns, kubeflow_app("rerun", retry))
    # kubeflow's first run failed; it deleted that run's driver pod, which is still on its way out.
    old = kubeflow_driver_pod(app)
    old["metadata"]["finalizers"] = [HOLD]
    old["metadata"]["annotations"] = {"sim.sparkop.io/outcome": "Failed", "sim.sparkop.io/executors": "0"}
    old["spec"].pop("volumes")
    old["spec"]["containers"][0].pop("volumeMounts")
    old = apply(cluster, ns, old)
    wait_for(
        lambda: ((get(cluster, ns, "pod", "rerun-driver") or {}).get("status") or {}).get("phase") == "Failed",
        timeout=60, interval=0.5, message="kubeflow's first driver pod failed",
    )  # fmt: skip
    cluster.kubectl("delete", "pod", "rerun-driver", "-n", ns, "--wait=false")
    write_kubeflow_status(cluster, ns, "rerun", {
        "applicationState": {"state": "PENDING_RERUN"},
        "submissionID": SUBMISSION_ID,
        "executionAttempts": 1,
        "submissionAttempts": 1,
        "terminationTime": "2026-12-06T10:00:00Z",
        "driverInfo": {"podName": "rerun-driver"},
    })  # fmt: skip
    driver_pods = CreationWatch(cluster, ns, "pods")
    try:
        with OperatorProcess(cluster.kubeconfig, namespaces=[ns], log_dir=tmp_path, extra_args=["--kubeflow-api"]):
            wait_for(
                lambda: get(cluster, ns, "sparkdriver", "rerun-2-kf"),
                timeout=60, interval=0.5, message="the rerun's SparkDriver, numbered on from kubeflow's run",
            )  # fmt: skip
            # Its pod waits for kubeflow's, which holds the name.
            held = get(cluster, ns, "pod", "rerun-driver")
            assert held is not None and held["metadata"]["uid"] == old["metadata"]["uid"]
            cluster.kubectl(
                "patch", "pod", "rerun-driver", "-n", ns, "--type=json",
                "-p", json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]),
            )  # fmt: skip
            final = wait_state(cluster, ns, "rerun", "COMPLETED", "FAILED", resource=KUBEFLOW_APPS)
    finally:
        driver_pods.stop()
    assert final["applicationState"]["state"] == "COMPLETED", final
    assert final["executionAttempts"] == 2 and final["lastRun"] == 2, final
    uids = driver_pods.uids.get("rerun-driver") or set()
    assert len(uids) == 2 and old["metadata"]["uid"] in uids, driver_pods.uids
    (ours,) = uids - {old["metadata"]["uid"]}
    # Never two at once: sparkop's pod was first seen after kubeflow's was deleted.
    assert driver_pods.first_seen[ours] >= driver_pods.deleted[old["metadata"]["uid"]], driver_pods.uids


def test_a_submitted_kubeflow_app_is_adopted_pending_and_claims_the_executors_its_driver_makes_later(
    kubeflow_crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    cluster, ns = kubeflow_crds, namespace
    app = left_by_kubeflow(cluster, ns, "later")
    # SUBMITTED: kubeflow's spark-submit made the pod, which is not scheduled yet (gated, so that it is
    # scheduled at once when the test lets it: an unschedulable pod waits out the scheduler's backoff).
    manifest = kubeflow_driver_pod(app)
    manifest["spec"]["schedulingGates"] = [{"name": HOLD}]
    pod = apply(cluster, ns, manifest)
    write_kubeflow_status(cluster, ns, "later", {
        "applicationState": {"state": "SUBMITTED"},
        "submissionID": SUBMISSION_ID,
        "executionAttempts": 1,
        "submissionAttempts": 1,
        "driverInfo": {"podName": "later-driver"},
    })  # fmt: skip
    driver_pods = CreationWatch(cluster, ns, "pods")
    try:
        with OperatorProcess(cluster.kubeconfig, namespaces=[ns], log_dir=tmp_path, extra_args=["--kubeflow-api"]):
            # Claimed (the SparkDriver's status may hold the pending pod's first sight a while:
            # domain/status_waits.py).
            wait_for(
                lambda: ((get(cluster, ns, "pod", "later-driver") or {}).get("metadata") or {})
                .get("labels", {}).get(labels.DRIVER) == "later-1-kf",
                timeout=60, interval=0.5, message="the pending pod claimed by later-1-kf",
            )  # fmt: skip
            assert status(cluster, ns, "later", KUBEFLOW_APPS)["applicationState"]["state"] == "SUBMITTED"
            cluster.kubectl(
                "patch", "pod", "later-driver", "-n", ns, "--type=json",
                "-p", json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}]),
            )  # fmt: skip
            # Its driver runs and makes its executor (kubeflow's labels) after the claim: claimed too, counted.
            wait_for(
                lambda: (((get(cluster, ns, "sparkdriver", "later-1-kf") or {}).get("status") or {})
                         .get("executors") or {}).get("running") == 1,
                timeout=60, interval=0.5, message="the executor made after the adoption counted",
            )  # fmt: skip
            [executor] = kubeflow_pods(cluster, ns, "later", "executor")
            assert executor["metadata"]["labels"].get(labels.DRIVER) == "later-1-kf", executor["metadata"]
            cluster.kubectl("annotate", "pod", "later-driver", "-n", ns, "sim.sparkop.io/outcome=Succeeded")
            final = wait_state(cluster, ns, "later", "COMPLETED", "FAILED", resource=KUBEFLOW_APPS)
    finally:
        driver_pods.stop()
    assert final["applicationState"]["state"] == "COMPLETED" and final["executionAttempts"] == 1, final
    assert driver_pods.uids.get("later-driver") == {pod["metadata"]["uid"]}, driver_pods.uids


NEXT_SUBMISSION_ID = "9b2d7e41-kubeflow-next-submission"


@pytest.mark.parametrize("left_in", ["", "PENDING_RERUN"])
def test_a_run_kubeflow_submitted_but_never_recorded_goes_on_with_its_pod_and_is_not_run_again(
    kubeflow_crds: ClusterHandle, namespace: str, tmp_path: Path, left_in: str
) -> None:
    """kubeflow's spark-submit makes the run's driver pod (a fresh submission id in its label) before the
    operator writes the run: stopped in between, it leaves the state it submitted from (none for a new app,
    PENDING_RERUN for a rerun) and a running pod no status names. Seen in the live swap: sparkop's own driver
    for that run was refused the name, and the run kubeflow started was lost."""
    cluster, ns = kubeflow_crds, namespace
    retry = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
    app = apply(cluster, ns, kubeflow_app("unwritten", retry))
    cluster.kubectl(
        "create", "configmap", "unwritten-driver-conf-map", "-n", ns,
        f"--from-literal=spark.properties={spark_properties('unwritten')}",
    )  # fmt: skip
    manifest = kubeflow_driver_pod(app)
    manifest["metadata"]["labels"][labels.KUBEFLOW_SUBMISSION_ID] = NEXT_SUBMISSION_ID
    pod = apply(cluster, ns, manifest)
    run = 1
    if left_in:
        run = 2
        write_kubeflow_status(cluster, ns, "unwritten", {
            "applicationState": {"state": left_in},
            "submissionID": SUBMISSION_ID,  # the first run's: kubeflow had not written the second
            "executionAttempts": 1,
            "submissionAttempts": 1,
            "terminationTime": "2026-12-06T10:00:00Z",
        })  # fmt: skip
    driver = f"unwritten-{run}-kf"
    driver_pods = CreationWatch(cluster, ns, "pods")
    try:
        with OperatorProcess(cluster.kubeconfig, namespaces=[ns], log_dir=tmp_path, extra_args=["--kubeflow-api"]):
            wait_for(
                lambda: ((get(cluster, ns, "pod", "unwritten-driver") or {}).get("metadata") or {})
                .get("labels", {}).get(labels.DRIVER) == driver,
                timeout=60, interval=0.5, message=f"kubeflow's unrecorded run's pod claimed by {driver}",
            )  # fmt: skip
            mid = status(cluster, ns, "unwritten", KUBEFLOW_APPS)
            assert mid["lastRun"] == run and mid["submissionID"] == NEXT_SUBMISSION_ID, mid
            cluster.kubectl("annotate", "pod", "unwritten-driver", "-n", ns, "sim.sparkop.io/outcome=Succeeded")
            final = wait_state(cluster, ns, "unwritten", "COMPLETED", "FAILED", resource=KUBEFLOW_APPS)
    finally:
        driver_pods.stop()
    assert final["applicationState"]["state"] == "COMPLETED", final
    assert final["executionAttempts"] == run and final["lastRun"] == run, final
    # The pod kubeflow's spark-submit made is the run's one driver: never made again.
    assert driver_pods.uids.get("unwritten-driver") == {pod["metadata"]["uid"]}, driver_pods.uids
