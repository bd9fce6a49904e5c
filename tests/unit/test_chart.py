"""charts/sparkop with the helm built here (devcluster.build.ensure_tools): `helm lint` and
`helm template`, and what the rendered objects grant and run: least-privilege RBAC cluster-wide
or per namespace, leader election with more than one replica, a value for every `sparkop run`
flag, the committed CRDs, and deploy/sparkop.yaml as the chart renders it."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.build import (
    TOOLS_SECTION,
    cache_key,
    control_plane,
    helm_binary,
    node_binaries,
    read_versions,
    tools,
)
from devcluster.paths import GOBUILD_DIR
from sparkop.cli import _parser

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "sparkop"
DEPLOY = REPO / "deploy" / "sparkop.yaml"
UPDATE = os.environ.get("SPARKOP_UPDATE_SNAPSHOTS") == "1"
RELEASE_NAMESPACE = "sparkop-system"
# What the operator's own objects need in any namespace it serves; never cluster-wide in namespaced mode.
NAMESPACED_RESOURCES = {
    "pods",
    "configmaps",
    "services",
    "events",
    "ingresses",
    "networkpolicies",  # Spark 4.2+'s executor NetworkPolicy, a SparkDriver's child
    "podgroups",  # the batch schedulers' (volcano, scheduler-plugins)
    "workloads",  # Kueue's, a queued run's
    "poddisruptionbudgets",  # a driver's, when asked (driverPodDisruptionBudget)
    "sparkapplications",
    "sparkdrivers",
    "scheduledsparkapplications",
    "sparkconnects",
}
STATUSES = {
    "sparkapplications/status",
    "sparkdrivers/status",
    "scheduledsparkapplications/status",
    "sparkconnects/status",
    "workloads/status",  # admission handed back after an eviction, Finished
}
# Kueue's cluster-scoped configuration, read (never written) whatever the namespaces.
KUEUE_READ_RULE = {
    "apiGroups": ["kueue.x-k8s.io"],
    "resources": ["resourceflavors", "workloadpriorityclasses"],
    "verbs": ["get", "list", "watch"],
}

Manifest = dict[str, Any]


@pytest.fixture(scope="module")
def helm() -> Path:
    return helm_binary(lambda line: None)


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, check=False)


def render(
    helm: Path, tmp_path: Path, values: dict[str, Any] | None = None, release: str = "sparkop"
) -> list[Manifest]:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values or {}))
    result = run_helm(helm, "template", release, str(CHART), "-n", RELEASE_NAMESPACE, "-f", str(values_file))
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def of_kind(objects: list[Manifest], kind: str) -> list[Manifest]:
    return [o for o in objects if o["kind"] == kind]


def deployment(objects: list[Manifest]) -> Manifest:
    (found,) = of_kind(objects, "Deployment")
    return found


def container(objects: list[Manifest]) -> Manifest:
    (found,) = deployment(objects)["spec"]["template"]["spec"]["containers"]
    return dict(found)


def resources_of(role: Manifest) -> set[str]:
    return {resource for rule in role["rules"] for resource in rule["resources"]}


# ------------------------------------------------------------------------------------- helm


def test_helm_is_the_pinned_version_its_build_module_requires(helm: Path) -> None:
    version = read_versions()["HELM_VERSION"]
    assert f"helm.sh/helm/v3 {version}\n" in (GOBUILD_DIR / "helm" / "go.mod").read_text()
    shown = run_helm(helm, "version", "--template", "{{ .Version }}")
    assert shown.stdout.strip() == version


def test_pinning_a_tool_rebuilds_no_cluster_binaries(tmp_path: Path) -> None:
    copy = tmp_path / "gobuild"
    shutil.copytree(GOBUILD_DIR, copy, ignore=shutil.ignore_patterns("*.go"))
    versions = read_versions()
    sets = {"control": control_plane(versions), "node": node_binaries(versions), "tools": tools(versions)}
    before = {name: cache_key(s.builds, copy) for name, s in sets.items()}
    env = copy / "versions.env"
    text = env.read_text()
    assert f"\n{TOOLS_SECTION[0]}\n" in text and f"\n{TOOLS_SECTION[1]}\n" in text
    env.write_text(text.replace(f"HELM_VERSION={versions['HELM_VERSION']}", "HELM_VERSION=v3.99.0"))
    after = {name: cache_key(s.builds, copy) for name, s in sets.items()}
    assert after["control"] == before["control"] and after["node"] == before["node"]
    assert after["tools"] != before["tools"]
    env.write_text(text.replace("ETCD_VERSION=", "ETCD_VERSION=v0"))
    assert cache_key(sets["control"].builds, copy) != before["control"]


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"replicaCount": 3, "watchNamespaces": ["a", "b"], "metrics": {"serviceMonitor": {"enabled": True}}},
    ],
    ids=["defaults", "namespaced-ha-servicemonitor"],
)
def test_helm_lint_strict(helm: Path, tmp_path: Path, values: dict[str, Any]) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    result = run_helm(helm, "lint", "--strict", str(CHART), "-f", str(values_file))
    assert result.returncode == 0, result.stdout + result.stderr


# ------------------------------------------------------------------------------------- CRDs


def test_the_chart_carries_the_committed_crds_unchanged() -> None:
    committed = {p.name: p.read_bytes() for p in (REPO / "crds").glob("*.yaml")}
    if UPDATE:
        for stale in (CHART / "crds").glob("*.yaml"):
            stale.unlink()
        for name, data in committed.items():
            (CHART / "crds" / name).write_bytes(data)
    in_chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert committed, "crds/ is empty"
    assert in_chart == committed, "charts/sparkop/crds/ differs from crds/: run with SPARKOP_UPDATE_SNAPSHOTS=1"


# ---------------------------------------------------------------------------------- defaults


def test_defaults_one_replica_cluster_wide_without_leader_election(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, tmp_path)
    deploy = deployment(objects)
    args = container(objects)["args"]
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}, "two operators without an election must never overlap"
    assert not any(arg.startswith("--leader-elect") for arg in args)
    assert not any(arg.startswith("--namespace") for arg in args)
    assert not [o for o in objects if "leases" in str(o.get("rules", ""))]
    (cluster_role,) = of_kind(objects, "ClusterRole")
    assert NAMESPACED_RESOURCES | {"namespaces", "resourceflavors", "workloadpriorityclasses"} <= resources_of(
        cluster_role
    )
    assert "customresourcedefinitions" not in resources_of(cluster_role), "CRDs are checked through discovery"
    assert not of_kind(objects, "ServiceMonitor")
    # The driver's ServiceAccount and Role in the default job namespace.
    spark_objects = [o for o in objects if o["metadata"].get("namespace") == "default"]
    assert sorted(o["kind"] for o in spark_objects) == ["Role", "RoleBinding", "ServiceAccount"]


def test_the_pod_is_non_root_read_only_without_capabilities_and_probed(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, tmp_path)
    pod = deployment(objects)["spec"]["template"]["spec"]
    main = container(objects)
    assert main["image"] == "sparkop.io/sparkop:0.1.0"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    assert main["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert main["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert main["ports"] == [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert {"--metrics-port=9090", "--metrics-address=0.0.0.0"} <= set(main["args"])
    assert main["args"][0] == "run"
    (service,) = of_kind(objects, "Service")
    assert service["spec"]["selector"] == deployment(objects)["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}]


# ------------------------------------------------------------------------------------------- HA


def test_two_replicas_turn_leader_election_on_with_a_lease_in_the_release_namespace(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, tmp_path, {"replicaCount": 2})
    args = container(objects)["args"]
    assert deployment(objects)["spec"]["replicas"] == 2
    assert deployment(objects)["spec"]["strategy"] == {"type": "RollingUpdate"}
    assert "--leader-elect" in args
    assert f"--leader-elect-namespace={RELEASE_NAMESPACE}" in args
    assert "--leader-elect-name=sparkop-leader" in args
    lease_roles = [r for r in of_kind(objects, "Role") if "leases" in resources_of(r)]
    assert [r["metadata"]["namespace"] for r in lease_roles] == [RELEASE_NAMESPACE]
    rules = {(tuple(rule["verbs"]), tuple(rule.get("resourceNames", ()))) for rule in lease_roles[0]["rules"]}
    assert rules == {(("create",), ()), (("get", "update"), ("sparkop-leader",))}
    (binding,) = [
        b for b in of_kind(objects, "RoleBinding") if b["roleRef"]["name"] == lease_roles[0]["metadata"]["name"]
    ]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sparkop", "namespace": RELEASE_NAMESPACE}]


def test_leader_election_can_be_forced_on_for_one_replica_and_never_off_for_two(helm: Path, tmp_path: Path) -> None:
    args = container(render(helm, tmp_path, {"leaderElection": {"enabled": True}}))["args"]
    assert "--leader-elect" in args
    values_file = tmp_path / "off.yaml"
    values_file.write_text(yaml.safe_dump({"replicaCount": 2, "leaderElection": {"enabled": False}}))
    refused = run_helm(helm, "template", "sparkop", str(CHART), "-f", str(values_file))
    assert refused.returncode != 0
    assert "replicaCount > 1 needs leaderElection.enabled" in refused.stderr


# ----------------------------------------------------------------------------------- namespaced


def test_watched_namespaces_get_roles_and_nothing_cluster_wide_but_their_namespace_objects(
    helm: Path, tmp_path: Path
) -> None:
    objects = render(helm, tmp_path, {"watchNamespaces": ["team-a", "team-b"]})
    args = container(objects)["args"]
    assert [a for a in args if a.startswith("--namespace")] == ["--namespace=team-a", "--namespace=team-b"]
    (cluster_role,) = of_kind(objects, "ClusterRole")
    assert cluster_role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": ["team-a", "team-b"],
            "verbs": ["get", "list", "watch"],
        },
        KUEUE_READ_RULE,
    ]
    operator_roles = [r for r in of_kind(objects, "Role") if r["metadata"]["name"] == "sparkop"]
    assert sorted(r["metadata"]["namespace"] for r in operator_roles) == ["team-a", "team-b"]
    for role in operator_roles:
        assert resources_of(role) == NAMESPACED_RESOURCES | STATUSES
    bindings = [b for b in of_kind(objects, "RoleBinding") if b["roleRef"]["name"] == "sparkop"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    # The Spark driver's ServiceAccount, Role and RoleBinding in each watched namespace, not in default.
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        spark = [o for o in of_kind(objects, kind) if o["metadata"]["name"] in ("spark", "sparkop-spark")]
        assert sorted(o["metadata"]["namespace"] for o in spark) == ["team-a", "team-b"], kind


def test_the_spark_service_account_name_and_creation_follow_the_values(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, tmp_path, {"spark": {"jobNamespaces": ["jobs"], "serviceAccount": {"name": "driver"}}})
    (account,) = [o for o in of_kind(objects, "ServiceAccount") if o["metadata"]["namespace"] == "jobs"]
    assert account["metadata"]["name"] == "driver"
    (binding,) = [o for o in of_kind(objects, "RoleBinding") if o["metadata"]["namespace"] == "jobs"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "driver", "namespace": "jobs"}]
    without = render(helm, tmp_path, {"spark": {"serviceAccount": {"create": False}, "rbac": {"create": False}}})
    assert not [o for o in without if o["metadata"].get("namespace") == "default"]


# ------------------------------------------------------------------------------------ run flags

# Every `sparkop run` flag, the values that set it and the argument the chart then passes.
FLAG_VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "--namespace": ({"watchNamespaces": ["x"]}, "--namespace=x"),
    "--controllers": ({"controllers": ["apps"]}, "--controllers=apps"),
    "--workers": ({"workers": 3}, "--workers=3"),
    "--kube-api-qps": ({"kubeApi": {"qps": 50}}, "--kube-api-qps=50"),
    "--kube-api-burst": ({"kubeApi": {"burst": 80}}, "--kube-api-burst=80"),
    "--ingress-url-format": ({"uiIngress": {"urlFormat": "{{$appName}}.ui"}}, "--ingress-url-format={{$appName}}.ui"),
    "--ingress-class-name": ({"uiIngress": {"className": "nginx"}}, "--ingress-class-name=nginx"),
    "--unschedulable-timeout": ({"unschedulableTimeout": 60}, "--unschedulable-timeout=60"),
    "--driver-pod-disruption-budget": ({"driverPodDisruptionBudget": True}, "--driver-pod-disruption-budget"),
    "--pod-security": ({"podSecurity": "restricted"}, "--pod-security=restricted"),
    "--node-loss-toleration-seconds": ({"nodeLossTolerationSeconds": 30}, "--node-loss-toleration-seconds=30"),
    "--metrics-port": ({"metrics": {"port": 8080}}, "--metrics-port=8080"),
    "--metrics-address": ({"metrics": {"address": "::"}}, "--metrics-address=::"),
    "--metrics-labels": ({"metrics": {"labels": ["app_type", "team"]}}, "--metrics-labels=app_type,team"),
    "--leader-elect": ({"leaderElection": {"enabled": True}}, "--leader-elect"),
    "--leader-elect-namespace": ({"leaderElection": {"namespace": "locks"}}, "--leader-elect-namespace=locks"),
    "--leader-elect-name": ({"leaderElection": {"leaseName": "lock"}}, "--leader-elect-name=lock"),
    "--leader-elect-identity": ({"leaderElection": {"identity": "me"}}, "--leader-elect-identity=me"),
    "--leader-elect-lease-duration": ({"leaderElection": {"leaseDuration": 30}}, "--leader-elect-lease-duration=30"),
    "--leader-elect-renew-deadline": ({"leaderElection": {"renewDeadline": 20}}, "--leader-elect-renew-deadline=20"),
    "--leader-elect-retry-period": ({"leaderElection": {"retryPeriod": 4}}, "--leader-elect-retry-period=4"),
    "--log-format": ({"logFormat": "text"}, "--log-format=text"),
}
# In a pod the operator uses its ServiceAccount (in-cluster config); a kubeconfig is for running it elsewhere.
NOT_IN_A_POD = {"--kubeconfig", "--context"}


def run_flags() -> set[str]:
    (subparsers,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    run = subparsers.choices["run"]
    return {
        flag
        for action in run._actions
        if not isinstance(action, argparse._HelpAction)
        for flag in action.option_strings
        if flag.startswith("--")
    }


def _merge(into: dict[str, Any], values: dict[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, dict):
            _merge(into.setdefault(key, {}), value)
        else:
            into[key] = value


def test_every_run_flag_has_a_value(helm: Path, tmp_path: Path) -> None:
    assert set(FLAG_VALUES) == run_flags() - NOT_IN_A_POD, "a `sparkop run` flag without a chart value (or gone)"
    values: dict[str, Any] = {}
    for fragment, _ in FLAG_VALUES.values():
        _merge(values, fragment)
    args = container(render(helm, tmp_path, values))["args"]
    missing = [expected for _, expected in FLAG_VALUES.values() if expected not in args]
    assert missing == []
    # The operator accepts what the chart passes.
    parsed = _parser().parse_args(args)
    assert (parsed.workers, parsed.leader_elect_lease_duration, parsed.namespace) == (3, 30.0, ["x"])


# -------------------------------------------------------------------------------- monitoring


def test_the_service_monitor_is_optional_and_scrapes_the_metrics_service(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, tmp_path, {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kps"}}}})
    (monitor,) = of_kind(objects, "ServiceMonitor")
    (service,) = of_kind(objects, "Service")
    assert monitor["metadata"]["labels"]["release"] == "kps"
    selected = monitor["spec"]["selector"]["matchLabels"]
    assert selected.items() <= service["metadata"]["labels"].items()
    assert (
        monitor["spec"]["endpoints"][0]["port"] == "metrics" and monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    )


# -------------------------------------------------------------------------------- deploy/


def deploy_manifest(helm: Path, tmp_path: Path) -> str:
    values_file = tmp_path / "none.yaml"
    values_file.write_text("{}\n")
    rendered = run_helm(helm, "template", "sparkop", str(CHART), "-n", RELEASE_NAMESPACE, "-f", str(values_file))
    assert rendered.returncode == 0, rendered.stderr
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NAMESPACE}}
    header = (
        "# sparkop without Helm: `helm template sparkop charts/sparkop -n sparkop-system` with the chart's\n"
        "# defaults, and its namespace. Generated, do not edit: SPARKOP_UPDATE_SNAPSHOTS=1 pytest\n"
        "# tests/unit/test_chart.py. Install the CRDs first:  kubectl apply --server-side -f crds/\n"
    )
    return header + "---\n" + yaml.safe_dump(namespace, sort_keys=False) + rendered.stdout


def test_deploy_manifest_is_the_chart_rendered_with_its_defaults(helm: Path, tmp_path: Path) -> None:
    wanted = deploy_manifest(helm, tmp_path)
    if UPDATE:
        DEPLOY.write_text(wanted)
    assert DEPLOY.read_text() == wanted, "deploy/sparkop.yaml is stale: run with SPARKOP_UPDATE_SNAPSHOTS=1"


def iter_docs(text: str) -> Iterator[Manifest]:
    yield from (doc for doc in yaml.safe_load_all(text) if doc)


def test_deploy_manifest_runs_the_operator_image_in_its_namespace() -> None:
    docs = list(iter_docs(DEPLOY.read_text()))
    assert docs[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NAMESPACE}}
    (deploy,) = of_kind(docs, "Deployment")
    assert deploy["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "sparkop.io/sparkop:0.1.0"
