"""devcluster's Kueue support, without a cluster: its build, its configuration, the webhooks it
registers, and the overlay through which it finds the certificates it reads from a fixed path."""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path
from typing import Any

from devcluster import components, procs
from devcluster.build import TOOL_BUILDS, cache_key, control_plane, kueue_binaries, read_versions
from devcluster.certs import CertPaths, write_pki, write_serving_pair
from devcluster.paths import GOBUILD_DIR
from sparkop.domain import kinds, labels


def test_kueue_is_built_from_its_pinned_module_apart_from_the_cluster(tmp_path: Path) -> None:
    versions = read_versions()
    go_mod = (GOBUILD_DIR / "kueue" / "go.mod").read_text()
    assert f"sigs.k8s.io/kueue {versions['KUEUE_VERSION']}\n" in go_mod
    built = kueue_binaries(versions)
    assert built.binaries == ("kueue-manager",)
    (build,) = built.builds
    assert build.module == "kueue" and build.packages == ("sigs.k8s.io/kueue/cmd/kueue",)
    argv = build.command(tmp_path)
    assert argv[argv.index("-o") + 1] == f"{tmp_path}/kueue-manager"
    assert f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={versions['KUEUE_VERSION']}" in build.ldflags
    # A tool: its pin sits in versions.env's tools section, and it is keyed apart from the control plane.
    assert build.name in TOOL_BUILDS
    assert cache_key(built) != cache_key(control_plane(versions))


def test_the_external_frameworks_are_sparkop_kinds_as_kind_version_group() -> None:
    own = (kinds.SPARK_APPLICATIONS, kinds.SPARK_DRIVERS, kinds.SCHEDULED_SPARK_APPLICATIONS, kinds.SPARK_CONNECTS)
    served = {f"{resource.kind}.{labels.VERSION}.{labels.GROUP}" for resource in own}
    assert f"SparkApplication.{labels.VERSION}.{labels.GROUP}" in components.KUEUE_EXTERNAL_FRAMEWORKS
    assert set(components.KUEUE_EXTERNAL_FRAMEWORKS) <= served, components.KUEUE_EXTERNAL_FRAMEWORKS


def test_kueue_config_binds_localhost_and_uses_the_clusters_certificates(tmp_path: Path) -> None:
    config = components.kueue_config(components.KueuePorts(health=20001, webhook=20002), tmp_path)
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and config["kind"] == "Configuration"
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:20001"
    assert config["webhook"] == {"host": "127.0.0.1", "port": 20002, "certDir": str(tmp_path)}
    assert config["metrics"] == {"bindAddress": "0"}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["manageJobsWithoutQueueName"] is False
    assert config["integrations"]["externalFrameworks"] == list(components.KUEUE_EXTERNAL_FRAMEWORKS)
    argv = components.kueue_argv(tmp_path, tmp_path / "kubeconfig", tmp_path / "config.yaml")
    assert argv[0] == f"{tmp_path}/kueue-manager"
    assert f"--config={tmp_path}/config.yaml" in argv and f"--kubeconfig={tmp_path}/kubeconfig" in argv


def _hook(name: str, group: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "failurePolicy": "Fail",
        "rules": [{"apiGroups": [group], "apiVersions": ["v1beta2"], "operations": ["CREATE"], "resources": ["x"]}],
        "sideEffects": "None",
    }


def test_only_kueues_own_webhooks_are_registered_and_they_call_the_local_process() -> None:
    manifests = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                _hook("mpod.kb.io", "", "/mutate--v1-pod"),
                _hook("mworkload.kb.io", "kueue.x-k8s.io", "/mutate-kueue-x-k8s-io-v1beta2-workload"),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [_hook("vjob.kb.io", "batch", "/validate-batch-v1-job")],
        },
    ]
    mutating, validating = components.kueue_webhook_configurations(manifests, 20002, b"CA PEM")
    assert mutating["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    (hook,) = mutating["webhooks"]
    assert hook["name"] == "mworkload.kb.io" and hook["failurePolicy"] == "Fail"
    assert hook["clientConfig"] == {
        "url": "https://127.0.0.1:20002/mutate-kueue-x-k8s-io-v1beta2-workload",
        "caBundle": base64.b64encode(b"CA PEM").decode(),
    }
    assert validating["kind"] == "ValidatingWebhookConfiguration" and validating["webhooks"] == []


def test_serving_pair_is_signed_by_the_cluster_ca_for_127_0_0_1(tmp_path: Path) -> None:
    from cryptography import x509

    pki = write_pki(tmp_path / "pki")
    cert_path, key_path = write_serving_pair(CertPaths.in_dir(tmp_path / "pki"), tmp_path / "certs", "kueue-webhook")
    assert (cert_path.name, key_path.name) == ("tls.crt", "tls.key")
    assert key_path.stat().st_mode & 0o777 == 0o600
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_an_overlay_shows_a_layers_files_at_a_fixed_path_to_the_process_alone(tmp_path: Path) -> None:
    """How Kueue finds /etc/kueue/metrics/certs in the cluster's directory: here a directory of the
    test's stands for /etc, so nothing outside tmp_path is touched."""
    target = tmp_path / "etc"
    (target / "kept").mkdir(parents=True)
    layer = tmp_path / "layer"
    (layer / "kueue" / "metrics" / "certs").mkdir(parents=True)
    (layer / "kueue" / "metrics" / "certs" / "tls.crt").write_text("pem\n")
    log = tmp_path / "out.log"
    script = f"cat {target}/kueue/metrics/certs/tls.crt; ls {target}; id -u"
    pid = procs.spawn(["/bin/sh", "-c", script], log, mount_namespace=procs.OverlayMountNamespace(((layer, target),)))
    deadline = time.monotonic() + 10
    while procs.is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert log.read_text().split() == ["pem", "kept", "kueue", str(os.getuid())], log.read_text()
    assert not (target / "kueue").exists()  # outside the process's namespace, the target is as it was
