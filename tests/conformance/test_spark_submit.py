"""Real spark-submit (every Spark line in versions.env) against the devcluster, compared field by field with
what our renderer creates for the equivalent SparkDriver.

Every difference must be listed in ``DELIBERATE`` (and in docs/spark-conformance.md) with its
reason. Results are written to ``$SPARKOP_CONFORMANCE_OUT`` (default
``~/.cache/sparkop/conformance``) as one JSON file per (configuration, version);
``python -m tests.conformance.report`` turns them into the table in docs/spark-conformance.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devcluster import images
from devcluster.testing import ClusterHandle, temporary_namespace
from sparkop.domain import labels
from sparkop.driver_controller.podbuild import POD_TEMPLATE_VOLUME, SPARK_CONF_VOLUME
from sparkop.driver_controller.render import DriverObjects, parse, render
from sparkop.driver_controller.submission import DRIVER_CONTAINER, submission
from tests.conformance.configs import CONFIGS
from tests.support import conformance as harness

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.cluster,
    pytest.mark.skipif(
        shutil.which("java") is None or shutil.which("javac") is None, reason="spark-submit needs Java 17 (a JDK)"
    ),
]

VERSIONS = [
    v for v in os.environ.get("SPARKOP_CONFORMANCE_VERSIONS", ",".join(images.pinned_spark_versions())).split(",") if v
]
OUT = Path(os.environ.get("SPARKOP_CONFORMANCE_OUT", harness.CACHE / "conformance"))

# spark-submit refuses the Connect server in cluster mode ("Cluster deploy mode is not applicable to Spark
# Connect server", a check of the main class's name), while sparkop runs it as a cluster-mode driver whose
# pod is every other cluster-mode driver's: the capture submits a stand-in name, put back before comparing.
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"
CONNECT_STAND_IN = f"{CONNECT_SERVER}StandIn"

# (object, path regex) -> why the difference is deliberate. Mirrored in docs/spark-conformance.md.
DELIBERATE: list[tuple[str, str, str]] = [
    (
        "*",
        r"^metadata\.labels\.(app\.kubernetes\.io/managed-by|sparkop\.io/.*)$",
        "sparkop's labels (docs/design.md): how the controller finds what a SparkDriver owns",
    ),
    (
        "pod",
        r"^metadata\.labels\.sparkoperator\.k8s\.io/(launched-by-spark-operator|submission-id|app-name)$",
        "kubeflow's labels on the driver pod (docs/migrating-from-kubeflow.md): its clients select by them",
    ),
    (
        "*",
        r"^metadata\.ownerReferences",
        "owned by the SparkDriver (controller), not by the driver pod: the ConfigMaps and Service outlive "
        "a lost driver pod until the next incarnation replaces them, and the GC removes everything with the "
        "SparkDriver",
    ),
    (
        "pod",
        r"^metadata\.finalizers",
        "sparkop.io/driver-outcome: the controller reads the driver's outcome before the pod can vanish",
    ),
    (
        "config_map",
        r"^data\.spark\.properties\.spark\.kubernetes\.driver\.podTemplate(File|ContainerName)$",
        "sparkop applies the driver template itself while building the pod; the property would name a "
        "file on the submitting machine, which the driver never reads",
    ),
    (
        "config_map",
        r"^data\.spark\.properties\.spark\.kubernetes\.driver\.service\.deleteOnTermination$",
        "the driver Service is the SparkDriver's, removed with its incarnation: a driver deleting it at stop "
        "raced the controller, which saw it missing while the pod still ran and created it again",
    ),
    (
        "pod",
        r"^spec\.containers\[[^]]*\]\.terminationMessagePolicy$",
        "FallbackToLogsOnError on the driver container: Spark writes no termination message, so the end of "
        "the driver's log (its exception) becomes the failure message in the SparkDriver's status",
    ),
    (
        "service",
        r"^spec\.publishNotReadyAddresses$",
        "spark.kubernetes.driver.service.publishNotReadyAddresses is honoured before Spark 4.3 too (Spark "
        "ignores it there): a Connect server's driver has a readiness probe, and its executors must reach it "
        "before it is Ready",
    ),
    (
        "config_map",
        r"^data\.spark\.properties\.spark\.master$",
        "spark-submit records the API server URL it was given (the test's 127.0.0.1 URL); a driver pod "
        "reaches the API server in-cluster",
    ),
]


def _deliberate(kind: str, path: str) -> str | None:
    for obj, pattern, reason in DELIBERATE:
        if obj in ("*", kind) and re.match(pattern, path):
            return reason
    return None


def _driver_manifest(name: str, namespace: str, spec: dict[str, Any], version: str) -> dict[str, Any]:
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {**spec, "sparkVersion": version},
    }


def _trivial_template(template: dict[str, Any]) -> bool:
    spec = template.get("spec") or {}
    return (
        not template.get("metadata")
        and set(spec) <= {"containers"}
        and spec.get("containers")
        in (
            None,
            [],
            [{"name": DRIVER_CONTAINER}],
        )
    )


def _dry_run(cluster: ClusterHandle, obj: dict[str, Any]) -> dict[str, Any]:
    result = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(obj))
    return dict(json.loads(result.stdout))


def _dry_run_renamed(cluster: ClusterHandle, obj: dict[str, Any]) -> dict[str, Any]:
    name = obj["metadata"]["name"]
    created = _dry_run(cluster, {**obj, "metadata": {**obj["metadata"], "name": f"{name[:50]}-dry"}})
    created["metadata"]["name"] = name
    return created


def _env_value(pod: dict[str, Any], name: str) -> str | None:
    """The value of the Spark container's (the last one's) env var ``name``, if it has one."""
    return next((e.get("value") for e in pod["spec"]["containers"][-1].get("env", []) if e["name"] == name), None)


def _volume_configmap(pod: dict[str, Any], volume_name: str) -> str | None:
    for volume in pod["spec"].get("volumes", []):
        if volume["name"] == volume_name:
            return str(volume["configMap"]["name"])
    return None


@dataclass
class Prepared:
    """One configuration of a Spark line's batch: the SparkDriver, what sparkop renders for it, and
    what spark-submit said when it created its objects."""

    namespace: str
    manifest: dict[str, Any]
    ours: DriverObjects
    submitted: harness.Submitted


class Batches:
    """Every configuration of a Spark line submitted at once, on the first test of that line: one JVM
    per line (harness.spark_submit_batch), each submission in a namespace of its own."""

    def __init__(self, cluster: ClusterHandle, stack: contextlib.ExitStack) -> None:
        self.cluster = cluster
        self.stack = stack
        self.lines: dict[str, dict[str, Prepared]] = {}
        self.failed: dict[str, Exception] = {}

    def of(self, version: str) -> dict[str, Prepared]:
        """The line's configurations, submitted on the first call; a batch that failed fails every
        test of its line with the same error, and is not run again."""
        if version not in self.failed and version not in self.lines:
            try:
                self.lines[version] = self._submit(version)
            except Exception as exc:
                self.failed[version] = exc
        if version in self.failed:
            raise RuntimeError(f"the spark-submit batch of Spark {version} failed") from self.failed[version]
        return self.lines[version]

    def _submit(self, version: str) -> dict[str, Prepared]:
        cluster = self.cluster
        assert cluster.cluster is not None, "conformance needs a devcluster (its CA signs spark-submit's cert)"
        work = harness.temp_dir(f"conf-{version}-")
        cert, key = harness.client_cert(cluster.cluster.directory / "pki", work)
        rendered: dict[str, tuple[str, dict[str, Any], DriverObjects]] = {}
        runs: list[list[str]] = []
        for config in sorted(CONFIGS):
            # A namespace per submission: Spark names the driver's ConfigMap once per JVM
            # (KubernetesClientUtils.configMapNameDriver), so each submission of the batch gives it the
            # same name.
            namespace = self.stack.enter_context(temporary_namespace(cluster, prefix="conf"))
            spec = CONFIGS[config]
            account = (spec.get("driver") or {}).get("serviceAccount")
            if account:
                cluster.kubectl("create", "serviceaccount", account, "-n", namespace, check=False)
            manifest = _driver_manifest(f"{config}-drv", namespace, spec, version)
            driver = parse(manifest)
            ours = render(driver, 1)
            sub = submission(driver, 1)
            assert ours.executor_template is not None
            files = work / config
            files.mkdir()
            exec_template = files / "executor-template.yaml"
            exec_template.write_text(ours.executor_template["data"]["podspec-configmap-key"])
            driver_template: Path | None = None
            if not _trivial_template(sub.driver_template):
                driver_template = files / "driver-template.yaml"
                driver_template.write_text(json.dumps(sub.driver_template))
            rendered[config] = (namespace, manifest, ours)
            args = harness.kubeflow_args(manifest, exec_template, driver_template)
            runs.append([CONNECT_STAND_IN if arg == CONNECT_SERVER else arg for arg in args])
        submitted = harness.spark_submit_batch(
            version, cluster.cluster.server, cluster.cluster.directory / "pki" / "ca.crt", cert, key, runs, work
        )
        return {
            config: Prepared(namespace, manifest, ours, result)
            for (config, (namespace, manifest, ours)), result in zip(rendered.items(), submitted, strict=True)
        }


@pytest.fixture(scope="module")
def batches(cluster: ClusterHandle) -> Iterator[Batches]:
    with contextlib.ExitStack() as stack:
        yield Batches(cluster, stack)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("version", VERSIONS)
def test_matches_spark_submit(cluster: ClusterHandle, batches: Batches, config: str, version: str) -> None:
    prepared = batches.of(version)[config]
    assert prepared.submitted.ok, f"spark-submit {version} failed for {config}:\n{prepared.submitted.log[-6000:]}"
    namespace, ours = prepared.namespace, prepared.ours

    # Ours through the real API server (defaulting, validation), without persisting; the pod under
    # another name, since spark-submit's, already created, has ours.
    mine = {
        "pod": _dry_run_renamed(cluster, ours.pod),
        "config_map": _dry_run(cluster, ours.config_map),
        "service": _dry_run(cluster, ours.service),
        "template_map": _dry_run(cluster, ours.executor_template),
    }

    pod = cluster.kubectl_json("get", "pod", ours.pod["metadata"]["name"], "-n", namespace)
    cm_name = _volume_configmap(pod, SPARK_CONF_VOLUME)
    tmpl_name = _volume_configmap(pod, POD_TEMPLATE_VOLUME)
    assert cm_name and tmpl_name
    config_map = cluster.kubectl_json("get", "configmap", cm_name, "-n", namespace)
    props = harness.properties_of(config_map)
    svc_name = props["spark.driver.host"].split(".")[0]
    theirs = {
        "pod": pod,
        "config_map": config_map,
        "service": cluster.kubectl_json("get", "service", svc_name, "-n", namespace),
        "template_map": cluster.kubectl_json("get", "configmap", tmpl_name, "-n", namespace),
    }
    # Spark 4.2+'s executor NetworkPolicy, found by the app id spark-submit gave it (one or none).
    policies = cluster.kubectl_json(
        "get", "networkpolicies", "-n", namespace, "-l", f"{labels.SPARK_APP_SELECTOR}={props['spark.app.id']}"
    )["items"]
    assert len(policies) <= 1, policies
    if policies:
        theirs["network_policy"] = policies[0]
    if ours.network_policy is not None:
        mine["network_policy"] = _dry_run(cluster, ours.network_policy)
    assert set(theirs) == set(mine), f"objects spark-submit created: {sorted(theirs)}; sparkop: {sorted(mine)}"

    # Normalise only what is random.
    # (No local dirs where LocalDirsFeatureStep is excluded.)
    spark_local = _env_value(pod, "SPARK_LOCAL_DIRS")
    our_local = ours.properties.get("spark.local.dir") or _env_value(ours.pod, "SPARK_LOCAL_DIRS")
    replacements = {
        props["spark.app.id"]: ours.properties["spark.app.id"],
        cm_name: ours.config_map["metadata"]["name"],
        tmpl_name: ours.executor_template["metadata"]["name"],
        svc_name: ours.service["metadata"]["name"],
        **(
            {policies[0]["metadata"]["name"]: ours.network_policy["metadata"]["name"]}
            if policies and ours.network_policy is not None
            else {}
        ),
        **({spark_local: our_local} if spark_local and our_local else {}),
        props["spark.app.submitTime"]: ours.properties["spark.app.submitTime"],
        CONNECT_STAND_IN: CONNECT_SERVER,
    }
    theirs = harness.replace_strings(theirs, replacements)
    normal = {
        "pod": (harness.normalise_pod(theirs["pod"]), harness.normalise_pod(mine["pod"])),
        "config_map": (
            harness.normalise_config_map(theirs["config_map"]),
            harness.normalise_config_map(mine["config_map"]),
        ),
        "service": (harness._strip(theirs["service"]), harness._strip(mine["service"])),
        "template_map": (harness._strip(theirs["template_map"]), harness._strip(mine["template_map"])),
        **(
            {"network_policy": (harness._strip(theirs["network_policy"]), harness._strip(mine["network_policy"]))}
            if "network_policy" in theirs
            else {}
        ),
    }
    differences: list[dict[str, Any]] = []
    compared = 0
    for kind, (a, b) in normal.items():
        compared += harness.count_leaves(a)
        for path, spark_value, our_value in harness.diff(a, b):
            differences.append(
                {
                    "object": kind,
                    "path": path,
                    "spark": spark_value,
                    "sparkop": our_value,
                    "deliberate": _deliberate(kind, path),
                }
            )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{config}-{version}.json").write_text(
        json.dumps(
            {"config": config, "version": version, "fields": compared, "differences": differences},
            indent=1,
            default=str,
        )
    )
    unexplained = [d for d in differences if not d["deliberate"]]
    assert not unexplained, json.dumps(unexplained, indent=1, default=str)
