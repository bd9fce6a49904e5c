"""The apps controller's side of issues 15 and 26: an app labelled for Kueue runs as any other, each run
(SparkDriver) carrying its queue and priority-class labels, since the run is what queues (its
Workload: driver_controller.kueue); kubeflow's spec-level failureRetries and retryInterval mean
restartPolicy's onFailureRetries and onSubmissionFailureRetryInterval; driverIngressOptions'
Services and Ingresses exist while a run is active, are put back when edited or deleted, and go when
the run ends."""

from __future__ import annotations

from typing import Any

from sparkop.api.models import DriverPhase
from sparkop.apps_controller import status as apps_status
from sparkop.apps_controller import ui
from sparkop.apps_controller.builders import build_driver
from sparkop.apps_controller.observed import AppView
from sparkop.domain import labels
from tests.support.simulation import SimCluster
from tests.support.specs import PYTHON_PI_SPEC

SPEC: dict[str, Any] = PYTHON_PI_SPEC
KUEUE = {labels.KUEUE_QUEUE_NAME: "team-a", labels.KUEUE_PRIORITY_CLASS: "high", "team": "data"}


def app(labels_: dict[str, str] | None = None, **spec: Any) -> AppView:
    return AppView(namespace="ns", name="pi", uid="uid-1", generation=1, spec={**SPEC, **spec}, labels=labels_ or {})


# --- Kueue --------------------------------------------------------------------------------------------


def test_each_run_queues_where_the_app_says() -> None:
    run_labels = build_driver(app(KUEUE), 2)["metadata"]["labels"]
    assert run_labels[labels.KUEUE_QUEUE_NAME] == "team-a" and run_labels[labels.KUEUE_PRIORITY_CLASS] == "high"
    assert "team" not in run_labels  # the app's other labels stay the app's
    assert labels.KUEUE_QUEUE_NAME not in build_driver(app(), 1)["metadata"]["labels"]


def test_kueues_label_suspends_nothing_the_run_waits_for_admission() -> None:
    assert not app(KUEUE).suspend and app(KUEUE, suspend=True).suspend
    c = SimCluster(spec=dict(SPEC), name="pi", labels=dict(KUEUE))
    c.run_until_quiet()
    # planned and created; waiting for admission (no driver pod yet), so still NEW
    assert list(c.drivers) == ["pi-1"] and c.state == "NEW" and apps_status.run_planned(c.app_status)


# --- failureRetries and retryInterval -----------------------------------------------------------------


def test_spec_level_retries_are_the_restart_policys() -> None:
    policy = app(failureRetries=2, retryInterval=30, restartPolicy={"type": "OnFailure"}).policy
    assert policy.on_failure_retries == 2 and policy.on_submission_failure_retry_interval == 30
    assert policy.on_submission_failure_retries is None and policy.on_failure_retry_interval == 5


def test_failure_retries_retries_failed_runs() -> None:
    c = SimCluster(spec={**SPEC, "restartPolicy": {"type": "OnFailure"}, "failureRetries": 1}, name="pi")
    for run in ("pi-1", "pi-2"):
        c.run_until_quiet()
        c.set_phase(run, DriverPhase.FAILED, "Error", exit_code=1)
        c.run_until_quiet()
        c.advance(6)
    c.run_until_quiet()
    assert c.state == "FAILED" and sorted(c.drivers) == ["pi-1", "pi-2"]


# --- driverIngressOptions ---------------------------------------------------------------------------

OPTION: dict[str, Any] = {
    "servicePort": 8080,
    "servicePortName": "http",
    "serviceType": "NodePort",
    "serviceLabels": {"team": "data"},
    "serviceAnnotations": {"a": "b"},
    "ingressURLFormat": "{{$appName}}-{{$appId}}.{{$appNamespace}}.example.com/api",
    "ingressAnnotations": {"kubernetes.io/ingress.class": "nginx"},
    "ingressTLS": [{"hosts": ["x.example.com"], "secretName": "tls"}],
}


def test_driver_ingress_service_and_ingress_are_kubeflows() -> None:
    a = app(driverIngressOptions=[OPTION])
    [entry] = ui.DriverIngress.all_of(a)
    svc = ui.build_driver_ingress_service(a, "spark-1", entry)
    assert svc["metadata"]["name"] == "pi-driver-8080"
    assert svc["spec"] == {
        "type": "NodePort",
        "selector": {labels.SPARK_APP_SELECTOR: "spark-1", labels.SPARK_ROLE: labels.ROLE_DRIVER},
        "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}],
    }
    assert svc["metadata"]["labels"]["team"] == "data" and svc["metadata"]["annotations"] == {"a": "b"}
    assert svc["metadata"]["ownerReferences"][0]["kind"] == "SparkApplication"
    ingress = ui.build_driver_ingress(a, "spark-1", entry, "nginx")
    assert ingress["metadata"]["name"] == "pi-ing-8080"
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "pi-spark-1.ns.example.com"
    assert rule["http"]["paths"][0]["path"] == "/api(/|$)(.*)"
    assert rule["http"]["paths"][0]["backend"]["service"] == {"name": "pi-driver-8080", "port": {"number": 8080}}
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/rewrite-target"] == "/$2"
    assert ingress["spec"]["tls"] == OPTION["ingressTLS"] and ingress["spec"]["ingressClassName"] == "nginx"
    defaults = ui.DriverIngress.all_of(app(driverIngressOptions=[{"servicePort": 9000, "ingressURLFormat": "h"}]))
    assert defaults[0].port_name == "driver-ing-9000" and defaults[0].service_type == "ClusterIP"


def test_driver_ingress_objects_live_with_the_run_and_are_restored() -> None:
    c = SimCluster(spec={**SPEC, "driverIngressOptions": [OPTION]}, name="pi")
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    # No Spark UI Service of its own: nothing asks for one (sparkUIOptions, an Ingress URL format).
    keys = {("Service", "pi-driver-8080"), ("Ingress", "pi-ing-8080")}
    assert set(c.ui_objects) == keys
    # edited: the port is put back; deleted: created again
    c.ui_objects[("Service", "pi-driver-8080")]["spec"]["ports"][0]["port"] = 1
    del c.ui_objects[("Ingress", "pi-ing-8080")]
    c.run_until_quiet()
    assert c.ui_objects[("Service", "pi-driver-8080")]["spec"]["ports"][0]["port"] == 8080
    assert ("Ingress", "pi-ing-8080") in c.ui_objects
    c.set_phase("pi-1", DriverPhase.SUCCEEDED, "Completed")
    c.run_until_quiet()
    assert c.state == "COMPLETED" and not c.ui_objects


def test_driver_ingress_objects_stay_without_an_operator_ui_service() -> None:
    from sparkop.apps_controller.observed import UIConfig

    c = SimCluster(spec={**SPEC, "driverIngressOptions": [OPTION]}, name="pi", ui=UIConfig(service=False))
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    assert set(c.ui_objects) == {("Service", "pi-driver-8080"), ("Ingress", "pi-ing-8080")}


def test_the_ui_selector_watches_both_components() -> None:
    assert ui.UI_SELECTOR == "app.kubernetes.io/managed-by=sparkop,sparkop.io/component in (ui,driver-ingress)"


# --- applicationState.errorMessage in kubeflow's words ---------------------------------------------

KUBEFLOW = f"{labels.KUBEFLOW_GROUP}/v1beta2"
RETRIED = {**SPEC, "restartPolicy": {"type": "Never"}}


def ended(api_version: str, phase: DriverPhase, reason: str, exit_code: int | None) -> SimCluster:
    c = SimCluster(spec=dict(RETRIED), name="pi", api_version=api_version)
    c.run_until_quiet()
    (run,) = c.drivers
    c.set_phase(run, phase, reason, exit_code=exit_code)
    c.run_until_quiet()
    return c


def test_a_kubeflow_apps_failed_driver_reads_as_kubeflows_with_sparkops_detail_after() -> None:
    c = ended(KUBEFLOW, DriverPhase.FAILED, "Error", 1)
    status = c.app_status
    assert c.state == "FAILED" and status.applicationState is not None
    message = status.applicationState.errorMessage or ""
    assert message.startswith("driver container failed with ExitCode: 1, Reason: Error; run 1 (pi-1-kf) failed")
    assert status.attempts[-1].exitCode == 1  # the fact the wording is made from is kept in status
    assert status.lastError is not None and status.lastError.message == message.partition("; ")[2]


def test_a_kubeflow_apps_refused_submission_reads_as_spark_submits_failure() -> None:
    c = ended(KUBEFLOW, DriverPhase.SUBMISSION_FAILED, "SubmissionFailed", None)
    assert c.app_status.applicationState is not None
    message = c.app_status.applicationState.errorMessage or ""
    assert message.startswith("failed to run spark-submit: run 1 (pi-1-kf) could not be submitted: SubmissionFailed")


def test_sparkops_group_keeps_its_own_wording() -> None:
    for phase, reason, code in ((DriverPhase.FAILED, "Error", 1), (DriverPhase.SUBMISSION_FAILED, "X", None)):
        c = ended(labels.API_VERSION, phase, reason, code)
        assert c.app_status.applicationState is not None
        assert (c.app_status.applicationState.errorMessage or "").startswith("run 1 (pi-1) ")


def test_a_kubeflow_driver_without_an_exit_code_keeps_sparkops_wording() -> None:
    c = ended(KUBEFLOW, DriverPhase.FAILED, "DriverPodLost", None)
    assert c.app_status.applicationState is not None
    assert (c.app_status.applicationState.errorMessage or "").startswith("run 1 (pi-1-kf) failed: DriverPodLost")
