"""The batch schedulers' CRDs, so that a devcluster's API server checks the PodGroups sparkop creates
against their real schemas: Volcano's ``podgroups.scheduling.volcano.sh`` and scheduler-plugins'
``podgroups.scheduling.x-k8s.io``, read from their upstream Go modules at the versions pinned in
versions.env (``go mod download``: the module cache keeps them, nothing is built).

Installed by the tests that need them (``install``), not by ``up``: only those tests use them, and a
cluster without them is what most users run (sparkop then reports the missing kind).
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devcluster import build
from devcluster.build import read_versions


@dataclass(frozen=True)
class SchedulerCRD:
    module: str
    version_key: str  # the pin in versions.env
    path: str  # the CRD's file inside the module
    name: str  # metadata.name of the CRD


CRDS = (
    SchedulerCRD(
        "volcano.sh/volcano",
        "VOLCANO_VERSION",
        "config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml",
        "podgroups.scheduling.volcano.sh",
    ),
    SchedulerCRD(
        "sigs.k8s.io/scheduler-plugins",
        "SCHEDULER_PLUGINS_VERSION",
        "config/crd/bases/scheduling.x-k8s.io_podgroups.yaml",
        "podgroups.scheduling.x-k8s.io",
    ),
)


def module_dir(module: str, version: str) -> Path:
    """Where the Go module cache holds ``module@version`` (downloaded from the module proxy once)."""
    return build.module_dir(f"{module}@{version}")


def crd_files() -> list[Path]:
    versions = read_versions()
    return [module_dir(crd.module, versions[crd.version_key]) / crd.path for crd in CRDS]


VOLCANO_CRDS_DIR = "config/crd/volcano/bases"


def volcano_crd_files() -> list[Path]:
    """Every CRD Volcano's scheduler and controller manager watch (Queue, PodGroup, Job, Command,
    Numatopology): the scheduler gives up when one it lists is not served."""
    directory = module_dir("volcano.sh/volcano", read_versions()["VOLCANO_VERSION"]) / VOLCANO_CRDS_DIR
    return sorted(directory.glob("*.yaml"))


SCHEDULER_PLUGINS_CRDS_DIR = "config/crd/bases"


def coscheduling_crd_files() -> list[Path]:
    """scheduler-plugins' CRDs (PodGroup, ElasticQuota): its controller watches both and stops when
    one is not served; its scheduler reads the PodGroups."""
    version = read_versions()["SCHEDULER_PLUGINS_VERSION"]
    return sorted((module_dir("sigs.k8s.io/scheduler-plugins", version) / SCHEDULER_PLUGINS_CRDS_DIR).glob("*.yaml"))


def install(kubectl: Path, kubeconfig: Path, timeout: float = 30.0, files: list[Path] | None = None) -> None:
    """Apply the schedulers' PodGroup CRDs (or ``files``) and wait until the API server serves them."""
    base = [str(kubectl), f"--kubeconfig={kubeconfig}"]
    paths = crd_files() if files is None else files
    for path in paths:
        subprocess.run([*base, "apply", "--server-side", "--force-conflicts", "-f", str(path)], check=True, timeout=60)
    wanted = {_crd_name(path) for path in paths}
    names = [f"crd/{name}" for name in sorted(wanted)]
    deadline = time.monotonic() + timeout
    while True:
        got = subprocess.run([*base, "get", "-o", "json", *names], capture_output=True, check=True, timeout=60)
        listed = json.loads(got.stdout)
        items = listed.get("items", [listed])  # one name: the object itself
        established = {
            crd["metadata"]["name"]
            for crd in items
            for cond in (crd.get("status") or {}).get("conditions") or []
            if cond.get("type") == "Established" and cond.get("status") == "True"
        }
        if established >= wanted:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"scheduler CRDs not established after {timeout}s: {sorted(established)}")
        time.sleep(0.2)


def _crd_name(path: Path) -> str:
    """metadata.name of the CRD in ``path`` (``<group>_<plural>.yaml`` -> ``<plural>.<group>``)."""
    group, _, plural = path.stem.partition("_")
    return f"{plural}.{group}"


KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_CRDS_DIR = "config/components/crd/bases"
KUEUE_WEBHOOKS_FILE = "config/components/webhook/manifests.yaml"


def kueue_module_dir() -> Path:
    return module_dir(KUEUE_MODULE, read_versions()["KUEUE_VERSION"])


def kueue_crd_files() -> list[Path]:
    """Every CRD of Kueue's release manifests (Workload, ClusterQueue, LocalQueue, ResourceFlavor,
    WorkloadPriorityClass, Cohort, AdmissionCheck, Topology, MultiKueue's, ...): its manager watches
    them all. As the bases are, without the patches that point conversion at a webhook Service:
    every version is stored as v1beta2, and v1beta2 is the one to use."""
    return sorted((kueue_module_dir() / KUEUE_CRDS_DIR).glob("*.yaml"))


def kueue_webhook_manifests() -> list[dict[str, Any]]:
    """Kueue's MutatingWebhookConfiguration and ValidatingWebhookConfiguration as its release has them
    (every webhook, pointing at its in-cluster Service); components.kueue_webhook_configurations
    keeps the ones for Kueue's own kinds and points them at the local process."""
    text = (kueue_module_dir() / KUEUE_WEBHOOKS_FILE).read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


GATEWAY_API_CRDS_DIR = "config/crd/standard"


def gateway_api_crd_files() -> list[Path]:
    """Gateway API's standard channel (GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant,
    BackendTLSPolicy), from the module at the version the Gateway implementation requires."""
    directory = module_dir("sigs.k8s.io/gateway-api", read_versions()["GATEWAY_API_VERSION"]) / GATEWAY_API_CRDS_DIR
    return sorted(directory.glob("*.yaml"))
