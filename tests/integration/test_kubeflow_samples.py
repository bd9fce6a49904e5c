"""kubeflow spark-operator's own example manifests (from its pinned Go module, not copied here),
applied to sparkop with only the apiVersion changed, and unchanged (kubeflow's own apiVersion, which
the operator serves with --kubeflow-api from the CRDs of crds/kubeflow/): each runs, or is refused for
a reason docs/api.md gives ("kubeflow's own samples"); `sparkop validate` says the same of each file
as it is.

The samples name `namespace: default` and kubeflow chart's driver ServiceAccount
`spark-operator-spark`: the test applies them in its own namespace (the namespace is where a
manifest goes, not what it says) and creates that ServiceAccount there, as kubeflow's chart does.
Drivers are simulated (kwok): a sample without sim annotations runs until it is deleted, so "runs"
means RUNNING with its driver pod running.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import scheduler_crds
from devcluster.build import read_versions
from devcluster.testing import ClusterHandle, wait_for
from tests.support.batch_schedulers import bind
from tests.support.operator import OperatorProcess

ROOT = Path(__file__).resolve().parents[2]
API_DOC = (ROOT / "docs" / "api.md").read_text()
KUBEFLOW_API = "sparkoperator.k8s.io/v1beta2"
SPARKOP_API = "sparkop.io/v1alpha1"
DRIVER_ACCOUNT = "spark-operator-spark"
# What each sample does under sparkop. "runs": RUNNING (its driver pod running); otherwise the
# reason it is refused, which docs/api.md must name next to the sample's file name.
RUNS = "runs"
EXPECTED: dict[str, str] = {
    "spark-pi.yaml": RUNS,
    "spark-pi-configmap.yaml": RUNS,
    "spark-pi-custom-resource.yaml": RUNS,
    "spark-pi-dynamic-allocation.yaml": RUNS,
    "spark-pi-emptydir.yaml": RUNS,
    "spark-pi-kube-scheduler.yaml": RUNS,
    "spark-pi-prometheus-servlet.yaml": RUNS,
    "spark-pi-python.yaml": RUNS,
    "spark-pi-scheduled.yaml": RUNS,
    "spark-pi-ttl.yaml": RUNS,
    "spark-pi-volcano.yaml": RUNS,
    "spark-pi-yunikorn.yaml": RUNS,
    "spark-pi-pod-template.yaml": "spec.driver.template.spec.securityContext: unknown field",
    "spark-pi-prometheus.yaml": "not valid YAML",
}
# Their own scheduler would bind these pods; the devcluster runs only kube-scheduler.
SCHEDULED_BY_OTHERS = {"spark-pi-volcano.yaml", "spark-pi-yunikorn.yaml"}


def samples_dir() -> Path:
    version = read_versions()["KUBEFLOW_SPARK_OPERATOR_VERSION"]
    return scheduler_crds.module_dir("github.com/kubeflow/spark-operator/v2", version) / "examples"


def as_sparkop(text: str) -> list[dict[str, Any]]:
    """The sample's documents with only the apiVersion of kubeflow's kinds changed (and no namespace)."""
    return as_applied(text.replace(KUBEFLOW_API, SPARKOP_API))


def as_applied(text: str) -> list[dict[str, Any]]:
    """The sample's documents as they are (but for the namespace)."""
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:
        doc["metadata"].pop("namespace", None)
    return docs


# Each sample is applied twice: with sparkop's apiVersion, and with its own (kubeflow's group, which the
# operator below serves too).
GROUPS = {"sparkop.io": as_sparkop, "sparkoperator.k8s.io": as_applied}


def resource(kind: str, group: str) -> str:
    """How kubectl names ``kind`` of ``group`` unambiguously (both groups serve the same plurals)."""
    return f"{kind.lower()}s.{group}"


@pytest.fixture
def samples_namespace(kubeflow_crds: ClusterHandle, namespace: str) -> str:
    scheduler_crds.install(kubeflow_crds.kubectl_binary, kubeflow_crds.kubeconfig)
    kubeflow_crds.kubectl("create", "serviceaccount", DRIVER_ACCOUNT, "-n", namespace)
    kubeflow_crds.kubectl("create", "rolebinding", "spark-driver", "-n", namespace, "--clusterrole=edit",
                          f"--serviceaccount={namespace}:{DRIVER_ACCOUNT}")  # fmt: skip
    return namespace


@pytest.fixture
def operator(samples_namespace: str, kubeflow_crds: ClusterHandle, tmp_path: Path) -> Iterator[OperatorProcess]:
    controllers = ("apps", "driver", "scheduled")
    with OperatorProcess(
        kubeflow_crds.kubeconfig,
        namespaces=[samples_namespace],
        log_dir=tmp_path,
        controllers=controllers,
        extra_args=["--kubeflow-api"],
    ) as op:
        yield op


def test_every_sample_is_accounted_for_and_every_refusal_is_documented() -> None:
    assert sorted(p.name for p in samples_dir().glob("*.yaml")) == sorted(EXPECTED)
    for name, outcome in EXPECTED.items():
        if outcome != RUNS:
            assert name in API_DOC, f"docs/api.md does not say why kubeflow's {name} is refused"


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_samples_that_sparkop_refuses_are_refused_with_the_documented_reason(
    kubeflow_crds: ClusterHandle, namespace: str, tmp_path: Path, group: str
) -> None:
    documents = GROUPS[group]
    prometheus = (samples_dir() / "spark-pi-prometheus.yaml").read_text()
    with pytest.raises(yaml.YAMLError):
        list(yaml.safe_load_all(prometheus))  # kubeflow ships it with an unfilled {IMAGE_REGISTRY} placeholder
    # With the placeholder filled in, it is a sparkop manifest like the others.
    filled = re.sub(r"\{IMAGE_REGISTRY\}/\{IMAGE_REPOSITORY\}/", "", prometheus)
    (app,) = documents(filled)
    kubeflow_crds.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", input=json.dumps(app))

    docs = documents((samples_dir() / "spark-pi-pod-template.yaml").read_text())
    app = next(d for d in docs if d["kind"] == "SparkApplication")
    refused = kubeflow_crds.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(app), check=False)
    assert refused.returncode != 0 and "securityContext" in refused.stderr, refused.stderr
    manifest = tmp_path / "spark-pi-pod-template.yaml"
    manifest.write_text(json.dumps(app))
    offline = subprocess.run(
        [sys.executable, "-m", "sparkop", "validate", str(manifest)], capture_output=True, text=True
    )
    assert offline.returncode != 0 and EXPECTED["spark-pi-pod-template.yaml"] in offline.stdout + offline.stderr


def test_sparkop_validate_takes_each_sample_file_as_kubeflow_ships_it() -> None:
    """Every sample file unchanged: valid, but for the two the API server refuses too (above)."""
    for sample, outcome in sorted(EXPECTED.items()):
        checked = subprocess.run(
            [sys.executable, "-m", "sparkop", "validate", str(samples_dir() / sample)],
            capture_output=True,
            text=True,
            check=False,
        )
        if outcome == RUNS:
            assert checked.returncode == 0, (sample, checked.stdout + checked.stderr)
        elif sample == "spark-pi-prometheus.yaml":
            assert checked.returncode == 2 and "YAML" in checked.stdout + checked.stderr, checked
        else:
            assert checked.returncode == 1 and outcome in checked.stdout, (sample, checked.stdout)


def scheduled_status(crds: ClusterHandle, namespace: str, name: str, group: str) -> dict[str, Any] | None:
    got = crds.kubectl_json("get", resource("ScheduledSparkApplication", group), name, "-n", namespace)
    status = got.get("status") or {}
    return status if status.get("nextRun") else None


def app_state(crds: ClusterHandle, namespace: str, name: str, group: str) -> str | None:
    app = crds.kubectl_json("get", resource("SparkApplication", group), name, "-n", namespace)
    return (app.get("status") or {}).get("applicationState", {}).get("state")


def driver_pod(crds: ClusterHandle, namespace: str, app: str) -> dict[str, Any] | None:
    pods = crds.kubectl_json("get", "pods", "-n", namespace, "-l", f"sparkop.io/app={app},spark-role=driver")
    return pods["items"][0] if pods["items"] else None


@pytest.mark.parametrize("group", sorted(GROUPS))
@pytest.mark.parametrize("sample", sorted(n for n, outcome in EXPECTED.items() if outcome == RUNS))
def test_a_kubeflow_sample_runs_as_it_is_or_with_only_its_api_version_changed(
    kubeflow_crds: ClusterHandle, samples_namespace: str, operator: OperatorProcess, sample: str, group: str
) -> None:
    crds, ns = kubeflow_crds, samples_namespace
    docs = GROUPS[group]((samples_dir() / sample).read_text())
    for doc in docs:
        crds.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(doc))
    (main,) = [d for d in docs if d["kind"] in ("SparkApplication", "ScheduledSparkApplication")]
    assert main["apiVersion"].startswith(f"{group}/")
    name = main["metadata"]["name"]
    if main["kind"] == "ScheduledSparkApplication":
        # "@every 3m": its first run is due 3 minutes after creation; the schedule is read and planned.
        status = wait_for(lambda: scheduled_status(crds, ns, name, group), timeout=30, message=f"{name} scheduled")
        scheduled = crds.kubectl_json("get", resource("ScheduledSparkApplication", group), name, "-n", ns)
        due = datetime.fromisoformat(status["nextRun"].replace("Z", "+00:00"))
        created = scheduled["metadata"]["creationTimestamp"]
        assert (due - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds() == 180
        assert status["scheduleState"] == "Scheduled"
        return
    if sample in SCHEDULED_BY_OTHERS:
        pod = wait_for(lambda: driver_pod(crds, ns, name), timeout=60, message=f"{name}'s driver pod")
        bind(crds, ns, pod["metadata"]["name"])
    wait_for(lambda: app_state(crds, ns, name, group) == "RUNNING", timeout=90, interval=0.5, message=f"{name} RUNNING")
    pod = driver_pod(crds, ns, name)
    assert pod is not None and pod["status"]["phase"] == "Running"
    owner = crds.kubectl_json("get", "sparkdrivers", "-n", ns)["items"][0]["metadata"]["ownerReferences"][0]
    assert owner["apiVersion"] == main["apiVersion"]  # the app of the group it was applied in runs it
