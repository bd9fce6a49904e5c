"""The SparkDriver of one run of an app: a pure builder, shared by the state machine and the tests."""

from __future__ import annotations

from apps_controller.model import JSON, AppView, run_spec
from apps_controller.ui import owner_reference
from sparkop import labels, naming

DRIVER_KIND = "SparkDriver"


def build_driver(app: AppView, run: int) -> JSON:
    """SparkDriver ``<app>-<run>``, controller-owned by the app, with the app's run spec."""
    spec = run_spec(app.spec)
    spec["appName"] = app.name
    spec["attempt"] = run
    spec["maxDriverPodReplacements"] = app.policy.max_driver_pod_replacements
    return {
        "apiVersion": labels.API_VERSION,
        "kind": DRIVER_KIND,
        "metadata": {
            "name": naming.driver_name(app.name, run),
            "namespace": app.namespace,
            "labels": {
                labels.MANAGED_BY: labels.MANAGER,
                labels.APP: naming.label_value(app.name),
                labels.RUN: str(run),
            },
            "annotations": {
                labels.APP_GENERATION: str(app.generation),
                labels.SPEC_HASH: app.spec_hash,
            },
            "ownerReferences": [owner_reference(app)],
        },
        "spec": spec,
    }
