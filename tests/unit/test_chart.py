"""charts/sparkop with the helm built here (devcluster.build.ensure_tools): `helm lint` and
`helm template`, and what the rendered objects grant and run: least-privilege RBAC cluster-wide
or per namespace, leader election with more than one replica, a value for every `sparkop run`
flag, the committed CRDs, and deploy/sparkop.yaml as the chart renders it."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.build import (
    cache_key,
    control_plane,
    helm_binary,
    node_binaries,
    read_versions,
    tools,
)
from devcluster.paths import GOBUILD_DIR
from sparkop.cli import _parser
from tests.support.chart_render import (
    RELEASE_NAMESPACE,
    Manifest,
    container,
    deployment,
    of_kind,
    render,
    resources_of,
    run_helm,
)

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "sparkop"
DEPLOY = REPO / "deploy" / "sparkop.yaml"
UPDATE = os.environ.get("SPARKOP_UPDATE_SNAPSHOTS") == "1"
# What the operator's own objects need in any namespace it serves; never cluster-wide in namespaced mode.
NAMESPACED_RESOURCES = {
    "pods",
    "pods/log",  # a driver pod's log tail, kept before the pod may go
    "configmaps",
    "services",
    "events",
    "ingresses",
    "networkpolicies",  # Spark 4.2+'s executor NetworkPolicy, a SparkDriver's child (on by default)
    "poddisruptionbudgets",  # a driver's, when asked (driverPodDisruptionBudget)
    "deployments",  # a SparkHistoryServer's (the history controller runs by default)
    "sparkapplications",
    "sparkdrivers",
    "scheduledsparkapplications",
    "sparkconnects",
    "sparkhistoryservers",
}
STATUSES = {
    "sparkapplications/status",
    "sparkdrivers/status",
    "scheduledsparkapplications/status",
    "sparkconnects/status",
    "sparkhistoryservers/status",
}
# Granted only with the feature on: each value and the resources it adds.
FEATURE_RESOURCES = {
    "batchScheduler": {"podgroups"},  # Volcano's and scheduler-plugins'
    "kueue": {"workloads", "workloads/status"},  # a queued run's; admission handed back, Finished
    "gatewayAPI": {"httproutes", "grpcroutes"},  # a Spark UI's, a history server's, a Connect server's
}
# Whether a deleted driver pod's node is lost, read whatever the namespaces (Nodes are cluster-scoped).
NODES_READ_RULE = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}


@pytest.fixture(scope="module")
def helm() -> Path:
    return helm_binary(lambda line: None)


# ------------------------------------------------------------------------------------- helm


def test_helm_is_the_pinned_version_its_build_module_requires(helm: Path) -> None:
    version = read_versions()["HELM_VERSION"]
    assert f"helm.sh/helm/v3 {version}\n" in (GOBUILD_DIR / "helm" / "go.mod").read_text()
    shown = run_helm(helm, "version", "--template", "{{ .Version }}")
    assert shown.stdout.strip() == version


def test_pinning_a_tool_rebuilds_no_cluster_binaries(tmp_path: Path) -> None:
    versions = read_versions()
    copy = tmp_path / "versions.env"
    text = (GOBUILD_DIR / "versions.env").read_text()
    copy.write_text(text.replace(f"HELM_VERSION={versions['HELM_VERSION']}", "HELM_VERSION=v3.99.0"))
    pinned = read_versions(copy)
    sets = {"control": control_plane, "node": node_binaries, "tools": tools}
    before = {name: cache_key(binary_set(versions)) for name, binary_set in sets.items()}
    after = {name: cache_key(binary_set(pinned)) for name, binary_set in sets.items()}
    assert after["control"] == before["control"] and after["node"] == before["node"]
    assert after["tools"] != before["tools"]


@pytest.mark.parametrize(
    "values",
    [
        {},
        {
            "controller": {"replicas": 3, "podDisruptionBudget": {"enable": True}, "podAntiAffinity": "soft"},
            "spark": {"jobNamespaces": ["a", "b"]},
            "prometheus": {"serviceMonitor": {"create": True}, "podMonitor": {"create": True}},
        },
        {"spark": {"jobNamespaces": []}, "controller": {"kueue": {"enable": True}}},
    ],
    ids=["defaults", "ha-pdb-monitors", "cluster-wide-kueue"],
)
def test_helm_lint_strict(helm: Path, tmp_path: Path, values: dict[str, Any]) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    result = run_helm(helm, "lint", "--strict", str(CHART), "-f", str(values_file))
    assert result.returncode == 0, result.stdout + result.stderr


# ------------------------------------------------------------------------------------- CRDs


@pytest.mark.parametrize(("source", "carried"), [("crds", "crds"), ("crds/kubeflow", "kubeflow-crds")])
def test_the_chart_carries_the_committed_crds_unchanged(source: str, carried: str) -> None:
    committed = {p.name: p.read_bytes() for p in (REPO / source).glob("*.yaml")}
    if UPDATE:
        for stale in (CHART / carried).glob("*.yaml"):
            stale.unlink()
        for name, data in committed.items():
            (CHART / carried / name).write_bytes(data)
    in_chart = {p.name: p.read_bytes() for p in (CHART / carried).glob("*.yaml")}
    assert committed, f"{source}/ is empty"
    assert in_chart == committed, (
        f"charts/sparkop/{carried}/ differs from {source}/: run with SPARKOP_UPDATE_SNAPSHOTS=1"
    )


def test_kubeflows_api_is_served_and_its_crds_installed_only_when_enabled(helm: Path, tmp_path: Path) -> None:
    off = render(helm, tmp_path)
    assert of_kind(off, "CustomResourceDefinition") == []  # sparkop's own are in crds/, outside the templates
    assert "--kubeflow-api" not in container(off)["args"]
    assert "sparkoperator.k8s.io" not in str(of_kind(off, "ClusterRole") + of_kind(off, "Role"))
    on = render(helm, tmp_path, {"kubeflowAPI": {"enabled": True}})
    assert "--kubeflow-api" in container(on)["args"]
    crds = of_kind(on, "CustomResourceDefinition")
    assert sorted(c["metadata"]["name"] for c in crds) == [
        "scheduledsparkapplications.sparkoperator.k8s.io",
        "sparkapplications.sparkoperator.k8s.io",
        "sparkconnects.sparkoperator.k8s.io",
    ]
    for crd in crds:
        committed = yaml.safe_load(
            (REPO / "crds" / "kubeflow" / f"sparkoperator.k8s.io_{crd['spec']['names']['plural']}.yaml").read_text()
        )
        annotations = crd["metadata"].pop("annotations")
        # Uninstalling the release must not delete the CRDs, and with them every app of the group.
        assert annotations == {**committed["metadata"]["annotations"], "helm.sh/resource-policy": "keep"}
        committed["metadata"].pop("annotations")
        assert crd == committed
    # The rules of a watched namespace: in its Role (spark.jobNamespaces), or the ClusterRole (none).
    roles = of_kind(on, "Role") + of_kind(on, "ClusterRole")
    kubeflow = [rule for role in roles for rule in role["rules"] if rule["apiGroups"] == ["sparkoperator.k8s.io"]]
    assert {r for rule in kubeflow for r in rule["resources"]} == {
        "sparkapplications",
        "scheduledsparkapplications",
        "sparkconnects",
        "sparkapplications/status",
        "scheduledsparkapplications/status",
        "sparkconnects/status",
    }


# ---------------------------------------------------------------------------------- defaults


def test_defaults_watch_default_with_one_replica_electing_a_leader(helm: Path, tmp_path: Path) -> None:
    """kubeflow's defaults: spark.jobNamespaces [default] is the watch scope, leader election on."""
    objects = render(helm, tmp_path)
    deploy = deployment(objects)
    args = container(objects)["args"]
    assert deploy["spec"]["replicas"] == 1
    # A new pod stands by until the old one stops: one at a time, never two leaders.
    assert deploy["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    assert [a for a in args if a.startswith("--namespace")] == ["--namespace=default"]
    assert {"--leader-elect", "--leader-elect-name=sparkop-leader", "--log-level=info"} <= set(args)
    (cluster_role,) = of_kind(objects, "ClusterRole")
    assert cluster_role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": ["default"],
            "verbs": ["get", "list", "watch"],
        },
        NODES_READ_RULE,
    ]
    (operator_role,) = [r for r in of_kind(objects, "Role") if r["metadata"]["name"] == "sparkop"]
    assert operator_role["metadata"]["namespace"] == "default"
    assert resources_of(operator_role) == NAMESPACED_RESOURCES | STATUSES
    assert "customresourcedefinitions" not in resources_of(operator_role), "CRDs are checked through discovery"
    assert not of_kind(objects, "ServiceMonitor") and not of_kind(objects, "PodMonitor")
    assert not of_kind(objects, "PodDisruptionBudget")
    # The drivers' ServiceAccount, Role and RoleBinding in the job namespace, kept on uninstall.
    spark_objects = [
        o for o in objects if o["metadata"].get("namespace") == "default" and o["metadata"]["name"].endswith("-spark")
    ]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in spark_objects) == [
        ("Role", "sparkop-spark"),
        ("RoleBinding", "sparkop-spark"),
        ("ServiceAccount", "sparkop-spark"),
    ]
    for kept in spark_objects:
        assert kept["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep", kept["kind"]
    # Nothing else is kept: the operator's own objects go with the release.
    others = [o for o in objects if o not in spark_objects]
    assert not [o for o in others if "helm.sh/resource-policy" in (o["metadata"].get("annotations") or {})]


def test_the_pod_is_non_root_read_only_without_capabilities_and_probed(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, tmp_path)
    pod = deployment(objects)["spec"]["template"]["spec"]
    main = container(objects)
    assert main["image"] == "sparkop.io/sparkop:0.1.0"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    assert main["securityContext"] == {
        "runAsNonRoot": True,
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert main["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert main["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert {"--metrics-port=8080", "--metrics-address=0.0.0.0", "--metrics-endpoint=/metrics"} <= set(main["args"])
    assert main["args"][0] == "run"
    annotations = deployment(objects)["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8080",
        "prometheus.io/path": "/metrics",
    }
    (service,) = of_kind(objects, "Service")
    assert service["spec"]["selector"] == deployment(objects)["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]


# ------------------------------------------------------------------------------------- names


def test_every_name_derives_from_the_release_so_two_releases_never_collide(helm: Path, tmp_path: Path) -> None:
    def names(release: str) -> set[tuple[str, str, str]]:
        objects = render(helm, tmp_path, release=release)
        found = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects}
        lease = next(a for a in container(objects)["args"] if a.startswith("--leader-elect-name="))
        return found | {("Lease", RELEASE_NAMESPACE, lease.split("=", 1)[1])}

    first, second = names("team-a"), names("team-b")
    assert first & second == set()
    assert ("ServiceAccount", "default", "team-a-sparkop-spark") in first
    assert ("Lease", RELEASE_NAMESPACE, "team-b-sparkop-leader") in second
    assert not [n for n in first | second if n[2] == "spark"], "never Spark's documented `spark` account"


def test_the_spark_service_account_name_and_creation_follow_the_values(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, tmp_path, {"spark": {"jobNamespaces": ["jobs"], "serviceAccount": {"name": "driver"}}})
    (account,) = [o for o in of_kind(objects, "ServiceAccount") if o["metadata"]["namespace"] == "jobs"]
    assert account["metadata"]["name"] == "driver"
    (binding,) = [o for o in of_kind(objects, "RoleBinding") if o["metadata"]["name"] == "sparkop-spark"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "driver", "namespace": "jobs"}]
    without = render(helm, tmp_path, {"spark": {"serviceAccount": {"create": False}, "rbac": {"create": False}}})
    assert not [o for o in without if o["metadata"]["name"].endswith("-spark")]


# ------------------------------------------------------------------------------------------- HA


def test_more_replicas_elect_on_a_lease_named_after_the_release_and_may_spread(helm: Path, tmp_path: Path) -> None:
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}]
    values = {
        "controller": {
            "replicas": 2,
            "podAntiAffinity": "hard",
            "topologySpreadConstraints": spread,
            "podDisruptionBudget": {"enable": True},
        }
    }
    objects = render(helm, tmp_path, values, release="batch")
    args = container(objects)["args"]
    fullname = "batch-sparkop"
    assert deployment(objects)["spec"]["replicas"] == 2
    assert {
        "--leader-elect",
        f"--leader-elect-namespace={RELEASE_NAMESPACE}",
        f"--leader-elect-name={fullname}-leader",
    } <= set(args)
    lease_roles = [r for r in of_kind(objects, "Role") if "leases" in resources_of(r)]
    assert [r["metadata"]["namespace"] for r in lease_roles] == [RELEASE_NAMESPACE]
    rules = {(tuple(rule["verbs"]), tuple(rule.get("resourceNames", ()))) for rule in lease_roles[0]["rules"]}
    assert rules == {(("create",), ()), (("get", "update"), (f"{fullname}-leader",))}
    (binding,) = [
        b for b in of_kind(objects, "RoleBinding") if b["roleRef"]["name"] == lease_roles[0]["metadata"]["name"]
    ]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": fullname, "namespace": RELEASE_NAMESPACE}]
    pod = deployment(objects)["spec"]["template"]["spec"]
    selector = deployment(objects)["spec"]["selector"]["matchLabels"]
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector}}
    assert pod["topologySpreadConstraints"] == [{**spread[0], "labelSelector": {"matchLabels": selector}}]
    (budget,) = of_kind(objects, "PodDisruptionBudget")
    assert budget["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}


def test_without_leader_election_one_replica_is_recreated_and_more_are_refused(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, tmp_path, {"controller": {"leaderElection": {"enable": False}}})
    assert deployment(objects)["spec"]["strategy"] == {"type": "Recreate"}, "two operators must never overlap"
    assert not [a for a in container(objects)["args"] if a.startswith("--leader-elect")]
    assert not [o for o in objects if "leases" in str(o.get("rules", ""))]
    refused = refusal(helm, tmp_path, {"controller": {"replicas": 2, "leaderElection": {"enable": False}}})
    assert "controller.replicas > 1 needs controller.leaderElection.enable" in refused


def refusal(helm: Path, tmp_path: Path, values: dict[str, Any]) -> str:
    values_file = tmp_path / "refused.yaml"
    values_file.write_text(yaml.safe_dump(values))
    result = run_helm(helm, "template", "sparkop", str(CHART), "-f", str(values_file))
    assert result.returncode != 0, result.stdout[:2000]
    return result.stderr


# ----------------------------------------------------------------------------------- namespaces


def test_job_namespaces_get_roles_and_nothing_cluster_wide_but_their_namespace_objects(
    helm: Path, tmp_path: Path
) -> None:
    objects = render(helm, tmp_path, {"spark": {"jobNamespaces": ["team-a", "team-b"]}})
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
        NODES_READ_RULE,
    ]
    operator_roles = [r for r in of_kind(objects, "Role") if r["metadata"]["name"] == "sparkop"]
    assert sorted(r["metadata"]["namespace"] for r in operator_roles) == ["team-a", "team-b"]
    bindings = [b for b in of_kind(objects, "RoleBinding") if b["roleRef"]["name"] == "sparkop"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        spark = [o for o in of_kind(objects, kind) if o["metadata"]["name"] == "sparkop-spark"]
        assert sorted(o["metadata"]["namespace"] for o in spark) == ["team-a", "team-b"], kind


def test_a_namespace_selector_watches_every_namespace_with_a_cluster_role(helm: Path, tmp_path: Path) -> None:
    """kubeflow's spark.jobNamespaceSelector: the namespaces it selects besides those listed. Their labels
    change, so the operator watches every namespace and needs the whole cluster's rules."""
    values = {"spark": {"jobNamespaces": ["default"], "jobNamespaceSelector": "spark=enabled"}}
    objects = render(helm, tmp_path, values)
    args = container(objects)["args"]
    assert [a for a in args if a.startswith("--namespace")] == [
        "--namespace=default",
        "--namespace-selector=spark=enabled",
    ]
    (cluster_role,) = of_kind(objects, "ClusterRole")
    assert NAMESPACED_RESOURCES | STATUSES | {"namespaces"} <= resources_of(cluster_role)
    assert not [r for r in cluster_role["rules"] if "resourceNames" in r]
    assert not [r for r in of_kind(objects, "Role") if r["metadata"]["name"] == "sparkop"]
    spark = [o for o in of_kind(objects, "ServiceAccount") if o["metadata"]["name"] == "sparkop-spark"]
    assert [o["metadata"]["namespace"] for o in spark] == ["default"]  # the listed ones', as before
    parsed = _parser().parse_args(args)
    assert parsed.namespace == ["default"] and parsed.namespace_selector.matches({"spark": "enabled"})


def test_a_selector_the_api_server_would_refuse_stops_the_operator_naming_it() -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "--namespace-selector", "env in (prod staging)"])


@pytest.mark.parametrize("scope", [[], [""], ["a", ""]], ids=["empty", "empty-string", "with-empty-string"])
def test_an_empty_scope_or_one_holding_an_empty_string_is_the_whole_cluster(
    helm: Path, tmp_path: Path, scope: list[str]
) -> None:
    """kubeflow's meaning of spark.jobNamespaces: [] or [""] watches every namespace."""
    objects = render(helm, tmp_path, {"spark": {"jobNamespaces": scope}})
    assert not [a for a in container(objects)["args"] if a.startswith("--namespace")]
    (cluster_role,) = of_kind(objects, "ClusterRole")
    assert NAMESPACED_RESOURCES | STATUSES | {"namespaces"} <= resources_of(cluster_role)
    assert not [r for r in of_kind(objects, "Role") if "leases" not in resources_of(r)]
    assert not [o for o in of_kind(objects, "ServiceAccount") if o["metadata"]["name"] == "sparkop-spark"]


# --------------------------------------------------------------------------- rights per feature


@pytest.mark.parametrize("scope", [["jobs"], []], ids=["namespaced", "cluster-wide"])
def test_each_features_rights_are_granted_only_when_it_is_enabled(helm: Path, tmp_path: Path, scope: list[str]) -> None:
    def granted(controller: dict[str, Any]) -> set[str]:
        objects = render(helm, tmp_path, {"spark": {"jobNamespaces": scope}, "controller": controller})
        roles = [
            *of_kind(objects, "ClusterRole"),
            *[r for r in of_kind(objects, "Role") if r["metadata"]["name"] == "sparkop"],
        ]
        return set().union(*(resources_of(r) for r in roles))

    base = granted({})
    assert "networkpolicies" in base and not (FEATURE_RESOURCES["batchScheduler"] | FEATURE_RESOURCES["kueue"]) & base
    assert granted({"batchScheduler": {"enable": True}}) - base == FEATURE_RESOURCES["batchScheduler"]
    kueue_cluster_reads = {"resourceflavors", "workloadpriorityclasses"}
    assert granted({"kueue": {"enable": True}}) - base == FEATURE_RESOURCES["kueue"] | kueue_cluster_reads
    assert base - granted({"networkPolicy": {"enable": False}}) == {"networkpolicies"}
    assert not FEATURE_RESOURCES["gatewayAPI"] & base
    assert granted({"gatewayAPI": {"enable": True}}) - base == FEATURE_RESOURCES["gatewayAPI"]
    assert base - granted({"controllers": ["apps", "driver", "scheduled", "connect"]}) == {"deployments"}
    # An operator that keeps no driver log tails (--driver-log-tail-lines=0) reads no pod's log.
    assert base - granted({"driverLogTailLines": 0}) == {"pods/log"}
    objects = render(
        helm, tmp_path, {"spark": {"jobNamespaces": scope}, "controller": {"batchScheduler": {"enable": True}}}
    )
    (podgroups,) = [
        rule
        for r in of_kind(objects, "ClusterRole") + of_kind(objects, "Role")
        for rule in r["rules"]
        if "podgroups" in rule["resources"]
    ][:1]
    assert podgroups["apiGroups"] == ["scheduling.volcano.sh", "scheduling.x-k8s.io"]


# ------------------------------------------------------------------------------------ run flags

# Every `sparkop run` flag, the values that set it and the argument the chart then passes.
FLAG_VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "--namespace": ({"spark": {"jobNamespaces": ["x"]}}, "--namespace=x"),
    "--namespace-selector": (
        {"spark": {"jobNamespaceSelector": "spark=enabled,env in (a,b)"}},
        "--namespace-selector=spark=enabled,env in (a,b)",
    ),
    "--controllers": ({"controller": {"controllers": ["apps"]}}, "--controllers=apps"),
    "--workers": ({"controller": {"workers": 3}}, "--workers=3"),
    "--kube-api-qps": ({"controller": {"kubeApi": {"qps": 50}}}, "--kube-api-qps=50"),
    "--kube-api-burst": ({"controller": {"kubeApi": {"burst": 80}}}, "--kube-api-burst=80"),
    "--ingress-url-format": (
        {"controller": {"uiIngress": {"enable": True, "urlFormat": "{{$appName}}.ui"}}},
        "--ingress-url-format={{$appName}}.ui",
    ),
    "--ingress-class-name": (
        {"controller": {"uiIngress": {"ingressClassName": "nginx"}}},
        "--ingress-class-name=nginx",
    ),
    "--no-ui-service": ({"controller": {"uiService": {"enable": False}}}, "--no-ui-service"),
    "--unschedulable-timeout": ({"controller": {"unschedulableTimeout": 60}}, "--unschedulable-timeout=60"),
    "--driver-pod-disruption-budget": (
        {"controller": {"driverPodDisruptionBudget": True}},
        "--driver-pod-disruption-budget",
    ),
    "--pod-security": ({"controller": {"podSecurity": "restricted"}}, "--pod-security=restricted"),
    "--node-loss-toleration-seconds": (
        {"controller": {"nodeLossTolerationSeconds": 30}},
        "--node-loss-toleration-seconds=30",
    ),
    "--metrics-port": ({"prometheus": {"metrics": {"port": 8081}}}, "--metrics-port=8081"),
    "--metrics-address": ({"prometheus": {"metrics": {"address": "::"}}}, "--metrics-address=::"),
    "--metrics-labels": ({"prometheus": {"metrics": {"labels": "app_type,team"}}}, "--metrics-labels=app_type,team"),
    "--metrics-endpoint": ({"prometheus": {"metrics": {"endpoint": "/m"}}}, "--metrics-endpoint=/m"),
    "--metrics-prefix": ({"prometheus": {"metrics": {"prefix": "team_"}}}, "--metrics-prefix=team_"),
    "--leader-elect": ({"controller": {"leaderElection": {"enable": True}}}, "--leader-elect"),
    "--leader-elect-namespace": (
        {"controller": {"leaderElection": {"namespace": "locks"}}},
        "--leader-elect-namespace=locks",
    ),
    "--leader-elect-name": ({"controller": {"leaderElection": {"leaseName": "lock"}}}, "--leader-elect-name=lock"),
    "--leader-elect-identity": ({"controller": {"leaderElection": {"identity": "me"}}}, "--leader-elect-identity=me"),
    "--leader-elect-lease-duration": (
        {"controller": {"leaderElection": {"leaseDuration": "30s"}}},
        "--leader-elect-lease-duration=30s",
    ),
    "--leader-elect-renew-deadline": (
        {"controller": {"leaderElection": {"renewDeadline": 20}}},
        "--leader-elect-renew-deadline=20",
    ),
    "--leader-elect-retry-period": (
        {"controller": {"leaderElection": {"retryPeriod": "4s"}}},
        "--leader-elect-retry-period=4s",
    ),
    "--driver-start-timeout": ({"controller": {"timeouts": {"driverStartSeconds": 60}}}, "--driver-start-timeout=60"),
    "--driver-ready-timeout": ({"controller": {"timeouts": {"driverReadySeconds": 90}}}, "--driver-ready-timeout=90"),
    "--executors-start-timeout": (
        {"controller": {"timeouts": {"executorsStartSeconds": 120}}},
        "--executors-start-timeout=120",
    ),
    "--active-deadline": ({"controller": {"timeouts": {"activeDeadlineSeconds": 3600}}}, "--active-deadline=3600"),
    "--max-executor-failures": ({"controller": {"timeouts": {"maxExecutorFailures": 5}}}, "--max-executor-failures=5"),
    "--executor-failures-window": (
        {"controller": {"timeouts": {"executorFailuresWindowSeconds": 300}}},
        "--executor-failures-window=300",
    ),
    "--log-format": ({"controller": {"logEncoder": "console"}}, "--log-format=text"),
    "--log-level": ({"controller": {"logLevel": "debug"}}, "--log-level=debug"),
    "--kubeflow-api": ({"kubeflowAPI": {"enabled": True}}, "--kubeflow-api"),
    "--max-tracked-executor-per-app": (
        {"controller": {"maxTrackedExecutorPerApp": 50}},
        "--max-tracked-executor-per-app=50",
    ),
    "--driver-log-tail-lines": ({"controller": {"driverLogTailLines": 20}}, "--driver-log-tail-lines=20"),
}
# Flags a value sets apart from FLAG_VALUES' combination (it turns the metrics off).
SEPARATE_FLAGS: dict[str, tuple[dict[str, Any], str]] = {
    "--no-metrics": ({"prometheus": {"metrics": {"enable": False}}}, "--no-metrics"),
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
    assert set(FLAG_VALUES) | set(SEPARATE_FLAGS) == run_flags() - NOT_IN_A_POD, (
        "a `sparkop run` flag without a chart value (or gone)"
    )
    values: dict[str, Any] = {}
    for fragment, _ in FLAG_VALUES.values():
        _merge(values, fragment)
    args = container(render(helm, tmp_path, values))["args"]
    missing = [expected for _, expected in FLAG_VALUES.values() if expected not in args]
    assert missing == []
    # The operator accepts what the chart passes.
    parsed = _parser().parse_args(args)
    assert (parsed.workers, parsed.leader_elect_lease_duration, parsed.namespace) == (3, 30.0, ["x"])
    assert (parsed.metrics_endpoint, parsed.metrics_prefix, parsed.ui_service, parsed.log_level) == (
        "/m",
        "team_",
        False,
        "debug",
    )
    for fragment, expected in SEPARATE_FLAGS.values():
        separate = container(render(helm, tmp_path, fragment))["args"]
        assert expected in separate and not [a for a in separate if a.startswith("--metrics-endpoint")]
        assert _parser().parse_args(separate).metrics is False


# ------------------------------------------------------------------------------ the missing values


def test_env_volumes_sidecars_labels_and_annotations_reach_the_pod_and_every_object(helm: Path, tmp_path: Path) -> None:
    values = {
        "commonLabels": {"team": "platform"},
        "commonAnnotations": {"owner": "platform@example.com"},
        "controller": {
            "env": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
            "envFrom": [{"configMapRef": {"name": "proxy"}}],
            "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "ca", "configMap": {"name": "corp-ca"}}],
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "ca", "mountPath": "/etc/ssl/corp"}],
            "sidecars": [{"name": "proxy", "image": "envoy:1"}],
            "labels": {"tier": "control"},
            "annotations": {"checksum": "x"},
            "hostUsers": False,
            "revisionHistoryLimit": 3,
            "serviceAccount": {"automountServiceAccountToken": True, "annotations": {"iam": "role"}},
        },
        "spark": {"serviceAccount": {"automountServiceAccountToken": False}},
    }
    objects = render(helm, tmp_path, values)
    deploy = deployment(objects)
    pod = deploy["spec"]["template"]
    main = container(objects)
    assert main["env"] == values["controller"]["env"] and main["envFrom"] == values["controller"]["envFrom"]
    assert main["volumeMounts"][1] == {"name": "ca", "mountPath": "/etc/ssl/corp"}
    assert pod["spec"]["volumes"][1] == {"name": "ca", "configMap": {"name": "corp-ca"}}
    assert [c["name"] for c in pod["spec"]["containers"]] == ["sparkop", "proxy"]
    assert pod["metadata"]["labels"]["tier"] == "control" and pod["metadata"]["annotations"]["checksum"] == "x"
    assert pod["spec"]["hostUsers"] is False and deploy["spec"]["revisionHistoryLimit"] == 3
    for obj in objects:
        assert obj["metadata"]["labels"]["team"] == "platform", obj["kind"]
        assert obj["metadata"]["annotations"]["owner"] == "platform@example.com", obj["kind"]
    (operator_account,) = [o for o in of_kind(objects, "ServiceAccount") if o["metadata"]["name"] == "sparkop"]
    assert operator_account["metadata"]["annotations"] == {"iam": "role", "owner": "platform@example.com"}
    (driver_account,) = [o for o in of_kind(objects, "ServiceAccount") if o["metadata"]["name"] == "sparkop-spark"]
    assert driver_account["automountServiceAccountToken"] is False


# -------------------------------------------------------------------------------- monitoring


def test_the_monitors_are_optional_and_scrape_the_metrics_port(helm: Path, tmp_path: Path) -> None:
    monitors = {
        "serviceMonitor": {"create": True, "labels": {"release": "kps"}},
        "podMonitor": {"create": True, "labels": {"release": "kps"}},
        "metrics": {"endpoint": "/prom", "portName": "prom"},
    }
    objects = render(helm, tmp_path, {"prometheus": monitors})
    (service_monitor,) = of_kind(objects, "ServiceMonitor")
    (pod_monitor,) = of_kind(objects, "PodMonitor")
    (service,) = of_kind(objects, "Service")
    assert service_monitor["metadata"]["labels"]["release"] == "kps" == pod_monitor["metadata"]["labels"]["release"]
    assert service_monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service_monitor["spec"]["endpoints"][0] | {"interval": 0, "scrapeTimeout": 0} == {
        "port": "prom", "path": "/prom", "interval": 0, "scrapeTimeout": 0,
    }  # fmt: skip
    pod_labels = deployment(objects)["spec"]["template"]["metadata"]["labels"]
    assert pod_monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pod_monitor["spec"]["podMetricsEndpoints"] == [
        {"port": "prom", "path": "/prom", "scheme": "http", "interval": "15s"}
    ]
    assert container(objects)["ports"][0]["name"] == "prom"


def test_metrics_off_serves_the_probes_only(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, tmp_path, {"prometheus": {"metrics": {"enable": False}, "service": {"create": False}}})
    main = container(objects)
    assert "--no-metrics" in main["args"] and "--metrics-port=8080" in main["args"]
    assert main["readinessProbe"]["httpGet"]["port"] == "metrics"
    assert "annotations" not in deployment(objects)["spec"]["template"]["metadata"]
    assert not of_kind(objects, "Service")
    refused = refusal(helm, tmp_path, {"prometheus": {"metrics": {"enable": False}, "podMonitor": {"create": True}}})
    assert "need prometheus.metrics.enable" in refused


# -------------------------------------------------------------------------------- the schema


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"controller": {"replica": 2}}, "at '/controller': additional properties 'replica' not allowed"),
        ({"replicaCount": 2}, "additional properties 'replicaCount' not allowed"),
        ({"spark": {"jobNamespace": ["a"]}}, "at '/spark': additional properties 'jobNamespace' not allowed"),
        ({"controller": {"logLevel": "verbose"}}, "at '/controller/logLevel'"),
        ({"controller": {"workers": "many"}}, "at '/controller/workers'"),
        ({"prometheus": {"metrics": {"endpoint": "metrics"}}}, "at '/prometheus/metrics/endpoint'"),
    ],
    ids=["misspelt", "sparkop-0.1-name", "misspelt-nested", "choice", "type", "pattern"],
)
def test_the_schema_refuses_a_misspelt_or_wrong_value_naming_it(
    helm: Path, tmp_path: Path, values: dict[str, Any], named: str
) -> None:
    refused = refusal(helm, tmp_path, values)
    assert "values don't meet the specifications of the schema" in refused and named in refused, refused


def test_helm_lint_is_clean_with_the_schema(helm: Path) -> None:
    result = run_helm(helm, "lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr


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
