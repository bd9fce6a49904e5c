"""Application metrics (docs/metrics.md) read from a running operator's /metrics: exact values after
apps succeed, fail, are retried and lose their driver pod; and after an operator restart, nothing
that happened before it is counted again while the gauges still describe the cluster."""

from __future__ import annotations

from pathlib import Path

from devcluster.ports import free_ports
from devcluster.testing import ClusterHandle, wait_for
from tests.support.cluster_apps import app_manifest, get, wait_state
from tests.support.metrics_scrape import Samples, ready, scrape, value
from tests.support.operator import OperatorProcess

APP_COUNTERS = (
    "spark_application_count",
    "spark_application_submit_count",
    "spark_application_success_count",
    "spark_application_failure_count",
    "spark_application_failed_submission_count",
)


def delete_driver_pod_once_running(crds: ClusterHandle, namespace: str, app: str) -> str:
    def running_driver() -> str | None:
        pod = get(crds, namespace, "pod", f"{app}-driver")
        return pod["metadata"]["name"] if pod and pod.get("status", {}).get("phase") == "Running" else None

    name: str = wait_for(running_driver, timeout=60, interval=0.2, message=f"{app}'s driver pod running")
    crds.kubectl("delete", "pod", name, "-n", namespace, "--wait=false")
    return name


def test_counters_follow_transitions_once_and_survive_a_restart(
    crds: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    operator = OperatorProcess(
        crds.kubeconfig, namespaces=[namespace], log_dir=tmp_path, extra_args=["--metrics-port", str(port)]
    )
    with operator:
        wait_for(lambda: ready(port), timeout=60, message="the operator ready")
        on_failure = {"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}
        crds.apply(app_manifest("ok", run_seconds=1), namespace)
        crds.apply(app_manifest("bad", outcome="Failed", run_seconds=1), namespace)
        crds.apply(app_manifest("retried", on_failure, outcome="Failed", run_seconds=1), namespace)
        crds.apply(app_manifest("lost", run_seconds=6), namespace)
        delete_driver_pod_once_running(crds, namespace, "lost")
        for name, final in (("ok", "COMPLETED"), ("bad", "FAILED"), ("retried", "FAILED"), ("lost", "COMPLETED")):
            wait_state(crds, namespace, name, final, timeout=120)
        lost = wait_state(crds, namespace, "lost", "COMPLETED")
        assert lost["driverIncarnations"] == 2 and lost["executionAttempts"] == 1

        expected = {
            "spark_application_count": 4,  # each app left NEW once
            "spark_application_submit_count": 5,  # one run each, and the retry's second run
            "spark_application_success_count": 2,
            "spark_application_failure_count": 2,
            "spark_application_failed_submission_count": 0,
        }

        def counted() -> Samples | None:
            samples = scrape(port)
            return samples if samples and all(value(samples, n) == v for n, v in expected.items()) else None

        samples = wait_for(counted, timeout=30, message=f"counters {expected} (last: {scrape(port)})")
        assert value(samples, "sparkop_application_retries_total", namespace=namespace, after="Failed") == 1
        assert value(samples, "sparkop_driver_pods_replaced_total", namespace=namespace) == 1
        lost_by_reason = [v for (name, labels), v in samples.items() if name == "sparkop_driver_pods_lost_total" and v]
        assert lost_by_reason == [1]
        assert value(samples, "spark_application_success_execution_time_seconds_count") == 2
        assert value(samples, "spark_application_failure_execution_time_seconds_count") == 2
        assert value(samples, "spark_application_running_count") == 0

        # A restart forgets nothing that matters: every transition was counted once, by the process
        # that wrote it; the new process counts only what it writes itself.
        operator.restart()
        wait_for(lambda: ready(port), timeout=60, message="the restarted operator ready")
        crds.apply(app_manifest("after", run_seconds=1), namespace)
        crds.apply(app_manifest("running", run_seconds=600), namespace)
        wait_state(crds, namespace, "after", "COMPLETED", timeout=60)
        wait_state(crds, namespace, "running", "RUNNING", timeout=60)
        after = {
            "spark_application_count": 2,
            "spark_application_submit_count": 2,
            "spark_application_success_count": 1,
            "spark_application_failure_count": 0,
            "spark_application_running_count": 1,  # a gauge: the cluster as it is now
        }

        def recounted() -> Samples | None:
            samples = scrape(port)
            return samples if samples and all(value(samples, n) == v for n, v in after.items()) else None

        samples = wait_for(recounted, timeout=30, message=f"counters {after} (last: {scrape(port)})")
        assert value(samples, "sparkop_driver_pods_replaced_total", namespace=namespace) == 0
        assert all(value(samples, name) == after.get(name, 0) for name in APP_COUNTERS)
