"""`sparkop run --namespace-selector` (kubeflow's jobNamespaceSelector), on the devcluster with the real
operator and simulated drivers: apps are run in the namespaces the selector selects by their labels and
in those --namespace lists; elsewhere nothing of them is written; an app that was there before its
namespace was selected waits for its next change (kubeflow's "should NOT automatically process existing
apps when namespace label is added"), and a new app in the namespace runs at once."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from devcluster.testing import ClusterHandle, temporary_namespace
from tests.support.cluster_apps import KUBEFLOW_APPS, app_manifest, get, wait_state
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

SELECTOR = "spark=enabled,env notin (frozen)"


@pytest.fixture
def namespaces(kubeflow_crds: ClusterHandle) -> Iterator[dict[str, str]]:
    """Four namespaces: labelled, unlabelled, listed by --namespace (unlabelled), labelled but excluded."""
    with ExitStack() as stack:
        made = {role: stack.enter_context(temporary_namespace(kubeflow_crds, prefix=role)) for role in
                ("labelled", "unlabelled", "listed", "excluded")}  # fmt: skip
        kubeflow_crds.kubectl("label", "namespace", made["labelled"], "spark=enabled")
        kubeflow_crds.kubectl("label", "namespace", made["excluded"], "spark=enabled", "env=frozen")
        yield made


@pytest.fixture
def operator(kubeflow_crds: ClusterHandle, namespaces: dict[str, str], tmp_path: Path) -> Iterator[OperatorProcess]:
    args = ["--kubeflow-api", "--namespace-selector", SELECTOR]
    with OperatorProcess(
        kubeflow_crds.kubeconfig, namespaces=[namespaces["listed"]], log_dir=tmp_path, extra_args=args
    ) as proc:
        yield proc


def apply(cluster: ClusterHandle, namespace: str, name: str, *, kubeflow: bool = False) -> None:
    manifest = app_manifest(name, run_seconds=0.5)
    if kubeflow:
        manifest["apiVersion"] = "sparkoperator.k8s.io/v1beta2"
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def untouched(cluster: ClusterHandle, namespace: str, name: str, resource: str = "sparkapplication") -> bool:
    app = get(cluster, namespace, resource, name)
    assert app is not None
    return "status" not in app and not cluster.kubectl_json("get", "sparkdrivers", "-n", namespace)["items"]


def test_apps_run_only_in_the_selected_and_listed_namespaces(
    kubeflow_crds: ClusterHandle, namespaces: dict[str, str], operator: OperatorProcess
) -> None:
    cluster = kubeflow_crds
    # Those that must not run first: the operator's passes over them come before the others' end.
    apply(cluster, namespaces["unlabelled"], "pi", kubeflow=True)
    apply(cluster, namespaces["excluded"], "pi")
    apply(cluster, namespaces["labelled"], "pi", kubeflow=True)
    apply(cluster, namespaces["listed"], "pi")
    wait_state(cluster, namespaces["labelled"], "pi", "COMPLETED", resource=KUBEFLOW_APPS)
    wait_state(cluster, namespaces["listed"], "pi", "COMPLETED")
    assert untouched(cluster, namespaces["unlabelled"], "pi", KUBEFLOW_APPS)
    assert untouched(cluster, namespaces["excluded"], "pi")

    # Labelled now: the app already there waits for its next change; a new app runs at once.
    cluster.kubectl("label", "namespace", namespaces["unlabelled"], "spark=enabled")
    apply(cluster, namespaces["unlabelled"], "pi-after", kubeflow=True)
    wait_state(cluster, namespaces["unlabelled"], "pi-after", "COMPLETED", resource=KUBEFLOW_APPS)
    before = get(cluster, namespaces["unlabelled"], KUBEFLOW_APPS, "pi")
    assert before is not None and "status" not in before
    cluster.kubectl("annotate", KUBEFLOW_APPS, "pi", "-n", namespaces["unlabelled"], "touched=1")
    wait_state(cluster, namespaces["unlabelled"], "pi", "COMPLETED", resource=KUBEFLOW_APPS)

    # Unlabelled again: a new app there is left alone.
    cluster.kubectl("label", "namespace", namespaces["unlabelled"], "spark-")
    apply(cluster, namespaces["unlabelled"], "pi-unlabelled-again", kubeflow=True)
    apply(cluster, namespaces["labelled"], "pi-2", kubeflow=True)
    wait_state(cluster, namespaces["labelled"], "pi-2", "COMPLETED", resource=KUBEFLOW_APPS)
    again = get(cluster, namespaces["unlabelled"], KUBEFLOW_APPS, "pi-unlabelled-again")
    assert again is not None and "status" not in again


def test_a_selector_the_api_server_would_refuse_stops_the_operator_before_it_starts(
    kubeflow_crds: ClusterHandle, tmp_path: Path
) -> None:
    for bad in ("=value", "env in (prod,staging", "env in prod,staging)", "key!value", "env in (prod staging)"):
        run = subprocess.run(
            [sys.executable, "-m", "sparkop", "run", "--kubeconfig", str(kubeflow_crds.kubeconfig),
             "--namespace-selector", bad],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert run.returncode == 2 and "--namespace-selector: not a label selector" in run.stderr, bad
