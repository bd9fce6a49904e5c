"""The SparkDriver of one run of an app: a pure builder, shared by the state machine and the tests."""

from __future__ import annotations

from typing import Any, Final

from sparkop.api import history
from sparkop.api.models import AdoptedPod
from sparkop.apps_controller import ui
from sparkop.apps_controller.observed import AppView, HistoryServerView, UIConfig, run_spec
from sparkop.core.jsontypes import JSON
from sparkop.domain import labels, naming

EVENT_LOG_ENABLED: Final = "spark.eventLog.enabled"
EVENT_LOG_DIR: Final = "spark.eventLog.dir"

KUEUE_LABELS = frozenset({labels.KUEUE_QUEUE_NAME, labels.KUEUE_PRIORITY_CLASS})

DRIVER_KIND = "SparkDriver"


def build_driver(
    app: AppView,
    run: int,
    config: UIConfig | None = None,
    history_server: HistoryServerView | None = None,
    adopt: AdoptedPod | None = None,
) -> JSON:
    """SparkDriver ``<app>-<run>`` (``<app>-<run>-kf`` for an app of kubeflow's group), controller-owned by
    the app, with the app's run spec (plus the UI proxy properties a path-based Spark UI Ingress or
    HTTPRoute needs, and the event-log properties of its history server, unless the app sets them, and
    the driver pod's name, the app's for every run). ``adopt``: the driver pod another operator made for
    this run (a run taken over), which the SparkDriver goes on with instead of creating one."""
    spec = run_spec(app.spec)
    # Every run's driver pod gets the app's one name (kubeflow's): its clients look for it.
    spec["driver"] = {**(spec.get("driver") or {}), "podName": app.driver_pod_name}
    spec["appName"] = app.name
    spec["attempt"] = run
    spec["maxDriverPodReplacements"] = app.policy.max_driver_pod_replacements
    if adopt is not None:
        spec["adoptDriverPod"] = adopt.to_json()
    proxy = ui.driver_conf(ui.ui_url(app, config) or ui.route_url(app))
    if proxy:
        spec["sparkConf"] = {**proxy, **(spec.get("sparkConf") or {})}
    annotations = {labels.APP_GENERATION: str(app.generation), labels.SPEC_HASH: app.spec_hash}
    if history_server is not None and history_server.event_log is not None:
        log_to(spec, history_server.event_log)
        annotations[labels.HISTORY_URL] = history_server.url
    return {
        "apiVersion": labels.API_VERSION,
        "kind": DRIVER_KIND,
        "metadata": {
            "name": naming.driver_name(app.name, run, app.group),
            "namespace": app.namespace,
            "labels": {
                # Each run queues in Kueue as the app asks (driver_controller.kueue).
                **{k: v for k, v in app.labels.items() if k in KUEUE_LABELS},
                labels.MANAGED_BY: labels.MANAGER,
                labels.APP: naming.label_value(app.name),
                labels.RUN: str(run),
            },
            "annotations": annotations,
            "ownerReferences": [ui.owner_reference(app)],
        },
        "spec": spec,
    }


def log_to(spec: dict[str, Any], target: history.EventLog) -> None:
    """Spark's event-log properties on a run spec (the app's own win), and for a claim the volume its
    driver mounts: the log directory inside it, which the kubelet makes if missing
    (:func:`api.history.driver_mount`)."""
    wanted = {EVENT_LOG_ENABLED: "true", EVENT_LOG_DIR: target.directory}
    spec["sparkConf"] = {**wanted, **(spec.get("sparkConf") or {})}
    if target.claim is None:
        return
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != history.VOLUME_NAME]
    spec["volumes"] = [*volumes, {"name": history.VOLUME_NAME, "persistentVolumeClaim": {"claimName": target.claim}}]
    driver = dict(spec.get("driver") or {})
    mounts = [m for m in driver.get("volumeMounts") or [] if m.get("name") != history.VOLUME_NAME]
    driver["volumeMounts"] = [*mounts, history.driver_mount(target)]
    spec["driver"] = driver
