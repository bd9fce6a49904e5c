"""kubeflow's own end-to-end suite against sparkop, its specs unchanged (issue 44).

kubeflow's spark-operator keeps its Ginkgo suite in ``test/e2e`` of its repository: specs over its
``examples/*.yaml`` and ``test/e2e/bad_examples/``, whose ``BeforeSuite`` (``suite_test.go``) installs
kubeflow's chart with helm's Go API on an existing cluster (envtest's ``UseExistingCluster``) and waits
for kubeflow's webhooks. At the release this runs (``SUITE_VERSION``, the newest release),
``test/e2e`` is a package of the operator's own module, so the Go module proxy serves it with the
module (``go mod download``): CI and every machine here can get it, and nothing of it is committed.
(On kubeflow's main branch it has since become a nested module with ``replace ... => ../..``, which the
proxy does not serve.)

What this does, each step cached under ``~/.cache/sparkop/kubeflow-e2e/<key>/``:

1. copies the module (the suite and the ``examples/`` its specs read by relative path) to a writable
   tree and changes only how the suite installs the operator (``patched_suite``): the suite's own
   ``installViaHelm``/``uninstallViaHelm`` and webhook waits are renamed out of the way, and
   ``bench/kubeflow_e2e/sparkop_install_test.go`` provides the replacements (sparkop's chart with
   ``kubeflowAPI.enabled``, installed by helm's binary; no webhook to wait for); envtest's CRD directory
   is sparkop's ``crds/kubeflow/``. Every spec file is kubeflow's, unchanged;
2. builds the suite once (``go test -c``; minutes on 2 cores the first time, one Go build);
3. starts a devcluster with two real nodes (kubelet + containerd, real Spark), imports the operator
   image built from this checkout, and names the Spark 4.0.5 image also ``apache/spark:4.0.4`` on
   each node: kubeflow's examples run ``docker.io/apache/spark:4.0.4``, no registry is reachable here,
   and 4.0.5 is the pinned release of the same Spark line (its SparkConnect example pulls it with
   ``imagePullPolicy: Always``: devcluster/registry.py answers the nodes' pulls with the alias);
4. runs the suite with a JSON report and writes every spec's result, with each failure's message and
   place, to ``bench/results/kubeflow-e2e.json`` and ``.md``.

Run it as root, under the real-node lock (about 20 minutes once built)::

    flock /work/locks/realnodes.lock .venv/bin/python bench/kubeflow_e2e.py
    .venv/bin/python bench/kubeflow_e2e.py --build-only          # step 2 only (no cluster)
    .venv/bin/python bench/kubeflow_e2e.py --focus 'spark-pi'    # a subset (Ginkgo's --focus)
    .venv/bin/python bench/kubeflow_e2e.py --from-json bench/results/kubeflow-e2e.json   # the table again

It is not part of ``make test``: the suite's real Spark runs take about 20 minutes of a CI budget
the rest of the suite already uses.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory
    sys.path.insert(0, str(ROOT))

from devcluster import images, realnodes, scheduler_crds  # noqa: E402
from devcluster.build import helm_binary  # noqa: E402
from devcluster.cluster import Cluster  # noqa: E402
from devcluster.locks import held  # noqa: E402
from devcluster.paths import cache_root  # noqa: E402

MODULE = "github.com/kubeflow/spark-operator/v2"
# The suite's release: kubeflow's newest. Pinned here, not in devcluster/gobuild/versions.env, whose
# tools section keys the tools' builds (helm, Volcano, Kueue, scheduler-plugins): a pin there rebuilds them.
SUITE_VERSION = "v2.5.2"
HERE = Path(__file__).resolve().parent
INSTALL_FILE = HERE / "kubeflow_e2e" / "sparkop_install_test.go"
RESULTS = HERE / "results"
CHART = ROOT / "charts" / "sparkop"
KUBEFLOW_CRDS = ROOT / "crds" / "kubeflow"
SUITE_FILE = "test/e2e/suite_test.go"
CI_VALUES = "charts/spark-operator-chart/ci/ci-values.yaml"
# kubeflow's examples name this image; the devcluster builds the pinned release of its line.
EXAMPLES_IMAGE = "docker.io/apache/spark:4.0.4"
DEVCLUSTER_IMAGE = "docker.io/apache/spark:4.0.5"
GINKGO_TIMEOUT = "3h"

# The suite's install, uninstall and webhook waits, renamed out of the way: sparkop_install_test.go
# defines the names the suite's BeforeSuite and AfterSuite call. Each must occur exactly once.
RENAMES: tuple[tuple[str, str], ...] = (
    ("func installViaHelm() {", "func kubeflowInstallViaHelm() {"),
    ("func uninstallViaHelm() {", "func kubeflowUninstallViaHelm() {"),
    ("func waitForMutatingWebhookReady(", "func kubeflowWaitForMutatingWebhookReady("),
    ("func waitForValidatingWebhookReady(", "func kubeflowWaitForValidatingWebhookReady("),
    # envtest installs these CRDs into the existing cluster before the chart: sparkop's, not kubeflow's.
    ('CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},',
     "CRDDirectoryPaths:     []string{sparkopKubeflowCRDs()},"),
)  # fmt: skip


def log(message: str) -> None:
    print(f"[kubeflow-e2e {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def patched_suite(text: str) -> str:
    """kubeflow's suite_test.go with only its install replaced (RENAMES); refuses a suite that changed."""
    for old, new in RENAMES:
        count = text.count(old)
        if count != 1:
            raise RuntimeError(f"{SUITE_FILE}: expected {old!r} once, found it {count} times; the suite changed")
        text = text.replace(old, new)
    return text


def source_key(version: str) -> str:
    digest = hashlib.sha256(version.encode())
    digest.update(INSTALL_FILE.read_bytes())
    digest.update(repr(RENAMES).encode())
    return f"{version}-{digest.hexdigest()[:12]}"


def work_dir(version: str) -> Path:
    return cache_root() / "kubeflow-e2e" / source_key(version)


def _writable(tree: Path) -> None:
    for path in [tree, *tree.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def ensure_suite(version: str) -> Path:
    """The suite's test binary, built from a patched copy of the module (once per key)."""
    target = work_dir(version)
    binary = target / "e2e.test"
    if binary.is_file():
        return binary
    target.parent.mkdir(parents=True, exist_ok=True)
    with held(target.parent / f"{target.name}.lock", lambda pid: log(f"waiting for process {pid} building it")):
        if binary.is_file():
            return binary
        module = scheduler_crds.module_dir(MODULE, version)
        source = target / "src"
        shutil.rmtree(source, ignore_errors=True)
        shutil.copytree(module, source, symlinks=True)
        _writable(source)
        suite = source / SUITE_FILE
        suite.write_text(patched_suite(suite.read_text()))
        shutil.copy(INSTALL_FILE, suite.parent / INSTALL_FILE.name)
        log(f"building kubeflow's e2e suite {version} (go test -c; minutes on 2 cores the first time)")
        started = time.monotonic()
        env = {**os.environ, "GOFLAGS": "-mod=mod", "GOWORK": "off", "GOTOOLCHAIN": "local"}
        partial = target / "e2e.test.partial"
        subprocess.run(["go", "test", "-c", "-o", str(partial), "./test/e2e"], cwd=source, env=env, check=True)
        partial.rename(binary)
        log(f"built in {time.monotonic() - started:.0f} s")
    return binary


# Values of kubeflow's ci-values.yaml that sparkop's chart refuses (it names each, and the install
# fails): left out, each recorded in the result with why; the specs that need one fail for that reason.
# None today: the chart takes spark.jobNamespaceSelector (--namespace-selector) and accepts
# controller.kubeAPIQPS/kubeAPIBurst unused (NOTES.txt says its bound is controller.kubeApi.*).
REFUSED_VALUES: dict[tuple[str, str], str] = {}


# Values added to kubeflow's, each with why: what a kubeflow user's install means that sparkop's chart
# needs said. Recorded in the result.
ADDED_VALUES: dict[str, tuple[Any, str]] = {
    "fullnameOverride": (
        "spark-operator",
        "kubeflow's chart names its objects after the release (spark-operator: the drivers' ServiceAccount "
        "spark-operator-spark, which every example names); sparkop's adds its chart's name unless the release "
        "name holds it (spark-operator-sparkop-spark)",
    ),
}


def chart_values(module: Path, operator_image: images.BuiltImage) -> tuple[dict[str, Any], dict[str, str]]:
    """kubeflow's own ci-values.yaml (what its suite installs with) less the values sparkop's chart refuses,
    plus ADDED_VALUES (both returned with why), then what sparkop needs here: the kubeflow API on, and
    the operator image built on this machine (no registry)."""
    values: dict[str, Any] = yaml.safe_load((module / CI_VALUES).read_text()) or {}
    changed = {}
    for (section, key), why in REFUSED_VALUES.items():
        if key in (values.get(section) or {}):
            changed[f"left out: {section}.{key}={values[section].pop(key)!r}"] = why
    for key, (value, why) in ADDED_VALUES.items():
        values[key] = value
        changed[f"added: {key}={value!r}"] = why
    values["kubeflowAPI"] = {**values.get("kubeflowAPI", {}), "enabled": True}
    values["image"] = {**values.get("image", {}), "tag": operator_image.key, "pullPolicy": "Never"}
    return values, changed


def serve_crds(cluster: Cluster, timeout: float = 300) -> None:
    """sparkop's CRDs of kubeflow's group, served before the suite starts. envtest installs them again
    (an update) and then waits at most 10 s for them to be served: sparkop's three (45,000 lines of
    schema) took the API server longer than that on a loaded machine the first time."""
    kubectl = [str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}"]
    subprocess.run([*kubectl, "apply", "--server-side", "--force-conflicts", "-f", str(KUBEFLOW_CRDS)], check=True)
    names = [f"crd/{path.stem.split('_', 1)[1]}.{path.stem.split('_', 1)[0]}" for path in KUBEFLOW_CRDS.glob("*.yaml")]
    wait = [*kubectl, "wait", "--for=condition=Established", f"--timeout={timeout:.0f}s", *names]
    subprocess.run(wait, check=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = subprocess.run([*kubectl, "api-resources", "--api-group=sparkoperator.k8s.io", "-o", "name"],
                                capture_output=True, text=True)  # fmt: skip
        if len(listed.stdout.split()) >= len(names):
            return
        time.sleep(1)
    raise TimeoutError(f"kubeflow's group not served {timeout:.0f}s after its CRDs were applied")


def alias_examples_image(cluster: Cluster) -> None:
    for node in cluster.real_nodes:
        done = realnodes.ctr(node, "images", "tag", "--force", DEVCLUSTER_IMAGE, EXAMPLES_IMAGE)
        if done.returncode != 0:
            raise RuntimeError(f"{node.name}: ctr images tag failed: {done.stderr.strip()}")


@dataclass(frozen=True)
class SpecResult:
    """One node of the suite's report: a spec (It), or the suite's BeforeSuite/AfterSuite."""

    name: str
    kind: str
    state: str
    seconds: float
    message: str = ""
    location: str = ""


def spec_results(report: Sequence[Mapping[str, Any]]) -> list[SpecResult]:
    """Every spec of Ginkgo's JSON report (--json-report), in the order they ran."""
    results = []
    for suite in report:
        for spec in suite.get("SpecReports") or ():
            texts = [*(spec.get("ContainerHierarchyTexts") or ()), spec.get("LeafNodeText") or ""]
            failure = spec.get("Failure") or {}
            where = failure.get("Location") or {}
            location = f"{Path(where['FileName']).name}:{where['LineNumber']}" if where.get("FileName") else ""
            results.append(
                SpecResult(
                    name=" / ".join(t for t in texts if t) or spec.get("LeafNodeType", ""),
                    kind=str(spec.get("LeafNodeType", "")),
                    state=str(spec.get("State", "")),
                    seconds=round(float(spec.get("RunTime") or 0) / 1e9, 1),
                    message=str(failure.get("Message") or ""),
                    location=location,
                )
            )
    return results


def run_suite(
    binary: Path, cluster: Cluster, module: Path, run_dir: Path, focus: str | None
) -> tuple[list[SpecResult], int, dict[str, str]]:
    """The suite on ``cluster``; its values, report and output go to ``run_dir``. The specs' results,
    the suite's exit code, and how the values differ from kubeflow's ci-values (with why)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    serve_crds(cluster)
    operator_image = images.ensure_operator_image(log)
    cluster.import_images([operator_image])
    alias_examples_image(cluster)
    values = run_dir / "values.json"
    chosen, changed = chart_values(module, operator_image)
    values.write_text(json.dumps(chosen, indent=2))
    report = run_dir / "report.json"
    report.unlink(missing_ok=True)
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": f"{Path(cluster.state.bin_dir)}:{os.environ.get('PATH', '')}",
        "SPARKOP_CHART": str(CHART),
        "SPARKOP_VALUES": str(values),
        "SPARKOP_HELM": str(helm_binary(log)),
        "SPARKOP_KUBEFLOW_CRDS": str(KUBEFLOW_CRDS),
    }
    argv = [str(binary), "-test.v", "-ginkgo.v", f"-ginkgo.json-report={report}", f"-ginkgo.timeout={GINKGO_TIMEOUT}"]
    if focus:
        argv.append(f"-ginkgo.focus={focus}")
    suite_dir = binary.parent / "src" / "test" / "e2e"  # its specs read ../../examples and bad_examples/
    log_path = run_dir / "output.log"
    log(f"running the suite; its output goes to {log_path}")
    with log_path.open("w") as output:
        code = subprocess.run(argv, cwd=suite_dir, env=env, stdout=output, stderr=subprocess.STDOUT).returncode
    if not report.is_file():
        raise RuntimeError(f"the suite wrote no report (exit {code}); see {log_path}")
    return spec_results(json.loads(report.read_text())), code, changed


def markdown(result: Mapping[str, Any]) -> str:
    lines = [
        "# kubeflow's end-to-end suite against sparkop",
        "",
        f"kubeflow's `test/e2e` at {result['kubeflow_version']}, specs unchanged, against sparkop "
        f"({result['sparkop_commit']}) installed by its chart with `kubeflowAPI.enabled` on a devcluster with two "
        f"real nodes; {result['started']}, {result['seconds']:.0f} s. `bench/kubeflow_e2e.py`.",
        "",
        "| spec | result | s | why (for a spec that did not pass) |",
        "|---|---|---|---|",
    ]
    for spec in result["specs"]:
        why = spec["message"].strip().replace("\n", " ").replace("|", "\\|")
        if len(why) > 300:
            why = why[:300] + "…"
        where = f" ({spec['location']})" if spec["location"] else ""
        reason = f"{why}{where}" if spec["state"] != "passed" else ""
        lines.append(f"| {spec['name']} | {spec['state']} | {spec['seconds']} | {reason} |")
    counts = result["counts"]
    lines += ["", ", ".join(f"{n} {state}" for state, n in sorted(counts.items())), ""]
    if result.get("ci_values_changed"):
        lines += ["How the install's values differ from kubeflow's ci-values.yaml, and why:", ""]
        lines += [f"- `{value}`: {why}" for value, why in result["ci_values_changed"].items()]
        lines.append("")
    return "\n".join(lines)


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return done.stdout.strip() + ("+changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-only", action="store_true", help="build the suite, start no cluster")
    parser.add_argument("--focus", help="run only the specs matching this regular expression (Ginkgo's focus)")
    parser.add_argument("--keep", action="store_true", help="leave the cluster up afterwards")
    parser.add_argument("--out", type=Path, default=RESULTS / "kubeflow-e2e.json")
    parser.add_argument("--from-json", type=Path, help="only render the markdown of a recorded run")
    args = parser.parse_args(argv)
    markdown_path = args.out.with_suffix(".md")
    if args.from_json is not None:
        markdown_path.write_text(markdown(json.loads(args.from_json.read_text())))
        print(markdown_path.read_text())
        return 0
    version = SUITE_VERSION
    binary = ensure_suite(version)
    if args.build_only:
        print(binary)
        return 0
    if not KUBEFLOW_CRDS.is_dir():
        parser.error(f"{KUBEFLOW_CRDS} is missing: this checkout does not serve kubeflow's API (issue 44) yet")
    started, began = time.strftime("%Y-%m-%d %H:%M"), time.monotonic()
    cluster = Cluster.up(f"kubeflow-e2e-{os.getpid()}", nodes=0, real_nodes=2, die_with_parent=not args.keep)
    try:
        module = scheduler_crds.module_dir(MODULE, version)
        specs, code, changed = run_suite(binary, cluster, module, binary.parent / "run", args.focus)
    finally:
        if not args.keep:
            cluster.down()
    counts: dict[str, int] = {}
    for spec in specs:
        counts[spec.state] = counts.get(spec.state, 0) + 1
    result = {
        "kubeflow_version": version,
        "sparkop_commit": _commit(),
        "started": started,
        "seconds": round(time.monotonic() - began, 1),
        "suite_exit_code": code,
        "focus": args.focus,
        "ci_values_changed": changed,
        "counts": counts,
        "specs": [asdict(spec) for spec in specs],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    markdown_path.write_text(markdown(result))
    print(markdown_path.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
