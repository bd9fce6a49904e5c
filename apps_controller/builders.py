"""The SparkDriver of one run of an app: a pure builder, shared by the state machine and the tests."""

from __future__ import annotations

from sparkop.apps_controller import ui
from sparkop.apps_controller.observed import AppView, UIConfig, run_spec
from sparkop.core.jsontypes import JSON
from sparkop.domain import labels, naming

KUEUE_LABELS = frozenset({labels.KUEUE_QUEUE_NAME, labels.KUEUE_PRIORITY_CLASS})

DRIVER_KIND = "SparkDriver"


def build_driver(app: AppView, run: int, config: UIConfig | None = None) -> JSON:
    """SparkDriver ``<app>-<run>``, controller-owned by the app, with the app's run spec (plus the
    UI proxy properties a path-based Spark UI Ingress needs, unless the app sets them)."""
    spec = run_spec(app.spec)
    spec["appName"] = app.name
    spec["attempt"] = run
    spec["maxDriverPodReplacements"] = app.policy.max_driver_pod_replacements
    proxy = ui.driver_conf(ui.ui_url(app, config))
    if proxy:
        spec["sparkConf"] = {**proxy, **(spec.get("sparkConf") or {})}
    return {
        "apiVersion": labels.API_VERSION,
        "kind": DRIVER_KIND,
        "metadata": {
            "name": naming.driver_name(app.name, run),
            "namespace": app.namespace,
            "labels": {
                # Each run queues in Kueue as the app asks (driver_controller.kueue).
                **{k: v for k, v in app.labels.items() if k in KUEUE_LABELS},
                labels.MANAGED_BY: labels.MANAGER,
                labels.APP: naming.label_value(app.name),
                labels.RUN: str(run),
            },
            "annotations": {
                labels.APP_GENERATION: str(app.generation),
                labels.SPEC_HASH: app.spec_hash,
            },
            "ownerReferences": [ui.owner_reference(app)],
        },
        "spec": spec,
    }
