"""Run real spark-submit against a devcluster and compare what it created with our renderer
(tests/conformance/test_spark_submit.py, tests/conformance/report.py, bench/submit_cost.py).

* ``ensure_spark(version)`` installs pyspark into ``~/.cache/sparkop/pyspark-<version>`` once
  (``devcluster.images.ensure_pyspark``); its ``bin/spark-submit`` runs with the machine's Java 17.
* ``kubeflow_args(driver)`` builds the spark-submit command line kubeflow's operator would build
  for the same spec (``internal/controller/sparkapplication/submission.go``), written
  independently of ``driver_controller.submission``, plus the properties sparkop owns (pod name,
  executor pod-name prefix, executor pod template).
* ``capture`` reads back the driver pod, its ConfigMap, Service and executor template ConfigMap.
* ``normalise`` replaces only what is random: the app id, the generated names derived from it,
  the local-dir UUID, the submit time, uids, timestamps and server-generated fields.
* ``compare`` walks both trees and lists every difference by path.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devcluster.images import ensure_pyspark, scala_version
from devcluster.paths import cache_root
from sparkop.core.jsontypes import JSON
from sparkop.driver_controller.sparkconf import parse_properties

CACHE = cache_root()
# Properties only the submitting client uses; they never reach a driver we create.
SUBMISSION_ONLY = re.compile(r"^spark\.kubernetes\.(authenticate\.submission\.|submission\.waitAppCompletion$)")


def ensure_spark(version: str) -> Path:
    """SPARK_HOME of pyspark ``version``, installed into the cache once (the same install the
    devcluster's Spark images are built from)."""
    return ensure_pyspark(version, lambda line: None) / "pyspark"


def client_cert(pki_dir: Path, out: Path) -> tuple[Path, Path]:
    """An RSA admin client certificate signed by the devcluster CA: fabric8 (Spark's Kubernetes
    client) cannot read the EC keys devcluster issues."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    cert_path, key_path = out / "spark-submit.crt", out / "spark-submit.key"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    ca_key: Any = serialization.load_pem_private_key((pki_dir / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((pki_dir / "ca.crt").read_bytes())
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "spark-submit"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


# --- the spark-submit command line kubeflow would run ------------------------------------------


def kubeflow_args(
    driver: Mapping[str, Any], executor_template_file: Path, driver_template_file: Path | None
) -> list[str]:
    """spark-submit arguments for a SparkDriver manifest, after kubeflow's buildSparkSubmitArgs
    (only the fields the conformance configurations use)."""
    from sparkop.domain import naming

    meta, spec = driver["metadata"], _with_monitoring(driver)
    name, ns = meta["name"], meta["namespace"]
    args: list[str] = []

    def conf(key: str, value: Any) -> None:
        args.extend(["--conf", f"{key}={value}"])

    if spec.get("type") not in ("Python", "R"):
        args += ["--class", spec["mainClass"]]
    args += ["--name", spec.get("appName") or name]
    deps = spec.get("deps") or {}
    for field, flag in (
        ("jars", "--jars"),
        ("packages", "--packages"),
        ("excludePackages", "--exclude-packages"),
        ("repositories", "--repositories"),
        ("pyFiles", "--py-files"),
        ("files", "--files"),
        ("archives", "--archives"),
    ):
        if deps.get(field):
            args += [flag, ",".join(deps[field])]
    conf("spark.kubernetes.namespace", ns)
    if spec.get("image"):
        conf("spark.kubernetes.container.image", spec["image"])
    if spec.get("imagePullPolicy"):
        conf("spark.kubernetes.container.image.pullPolicy", spec["imagePullPolicy"])
    if spec.get("imagePullSecrets"):
        conf("spark.kubernetes.container.image.pullSecrets", ",".join(spec["imagePullSecrets"]))
    if spec.get("pythonVersion"):
        conf("spark.kubernetes.pyspark.pythonVersion", spec["pythonVersion"])
    if spec.get("memoryOverheadFactor"):
        conf("spark.kubernetes.memoryOverheadFactor", spec["memoryOverheadFactor"])
    for key, value in (spec.get("sparkConf") or {}).items():
        conf(key, value)
    for key, value in (spec.get("hadoopConf") or {}).items():
        conf(f"spark.hadoop.{key}", value)
    if spec.get("hadoopConfigMap"):
        conf("spark.kubernetes.hadoop.configMapName", spec["hadoopConfigMap"])
    if driver_template_file is not None:
        conf("spark.kubernetes.driver.podTemplateFile", driver_template_file)
        conf("spark.kubernetes.driver.podTemplateContainerName", "spark-kubernetes-driver")
    conf("spark.kubernetes.driver.pod.name", naming.driver_pod_name(name))
    for role in ("driver", "executor"):
        pod = spec.get(role) or {}
        image = pod.get("image") or spec.get("image")
        if image:
            conf(f"spark.kubernetes.{role}.container.image", image)
        # kubeflow's driverConfOption / executorConfOption, field by field.
        for field, key in (
            ("cores", f"spark.{role}.cores"),
            ("coreRequest", f"spark.kubernetes.{role}.request.cores"),
            ("coreLimit", f"spark.kubernetes.{role}.limit.cores"),
            ("memory", f"spark.{role}.memory"),
            ("memoryOverhead", f"spark.{role}.memoryOverhead"),
            ("serviceAccount", f"spark.kubernetes.authenticate.{role}.serviceAccountName"),
            ("javaOptions", f"spark.{role}.extraJavaOptions"),
        ):
            if pod.get(field) is not None:
                conf(key, pod[field])
        for key, value in (pod.get("labels") or {}).items():
            conf(f"spark.kubernetes.{role}.label.{key}", value)
        for key, value in (pod.get("annotations") or {}).items():
            conf(f"spark.kubernetes.{role}.annotation.{key}", value)
        for key, ref in (pod.get("envSecretKeyRefs") or {}).items():
            conf(f"spark.kubernetes.{role}.secretKeyRef.{key}", f"{ref['name']}:{ref['key']}")
        for key, value in (pod.get("nodeSelector") or {}).items():
            conf(f"spark.kubernetes.{role}.node.selector.{key}", value)
        env_prefix = "spark.kubernetes.driverEnv." if role == "driver" else "spark.executorEnv."
        for key, value in (pod.get("envVars") or {}).items():
            conf(f"{env_prefix}{key}", value)
        for secret in pod.get("secrets") or ():
            conf(f"spark.kubernetes.{role}.secrets.{secret['name']}", secret["path"])
            if secret.get("secretType") == "GCPServiceAccount":
                conf(f"{env_prefix}GOOGLE_APPLICATION_CREDENTIALS", f"{secret['path']}/key.json")
            if secret.get("secretType") == "HadoopDelegationToken":
                conf(f"{env_prefix}HADOOP_TOKEN_FILE_LOCATION", f"{secret['path']}/hadoop.token")
    driver_spec = spec.get("driver") or {}
    for key, value in (driver_spec.get("serviceLabels") or {}).items():
        conf(f"spark.kubernetes.driver.service.label.{key}", value)
    for key, value in (driver_spec.get("serviceAnnotations") or {}).items():
        conf(f"spark.kubernetes.driver.service.annotation.{key}", value)
    executor = spec.get("executor") or {}
    if executor.get("instances") is not None:
        conf("spark.executor.instances", executor["instances"])
    # Volumes of the four types Spark mounts from properties (kubeflow's driverVolumeMountsOption).
    # Spark reads no options.readOnly: a claim is read-only when its mount is (mount.readOnly), and an
    # NFS source never is. A source marked read-only where that would lose the mark reaches
    # spark-submit as written, in the pod templates (sparkop's rule: submission._by_properties).
    volumes = {v["name"]: v for v in spec.get("volumes") or ()}
    for role in ("driver", "executor"):
        for mount in (spec.get(role) or {}).get("volumeMounts") or ():
            volume = volumes[mount["name"]]
            kind = next((k for k in ("emptyDir", "hostPath", "nfs", "persistentVolumeClaim") if k in volume), None)
            if kind is None or mount.get("subPathExpr") or mount.get("mountPropagation"):
                continue
            if volume[kind].get("readOnly") and not (kind == "persistentVolumeClaim" and mount.get("readOnly")):
                continue
            base = f"spark.kubernetes.{role}.volumes.{kind}.{volume['name']}"
            conf(f"{base}.mount.path", mount["mountPath"])
            if mount.get("subPath"):
                conf(f"{base}.mount.subPath", mount["subPath"])
            if mount.get("readOnly"):
                conf(f"{base}.mount.readOnly", "true")
            source = volume[kind]
            if kind == "emptyDir" and source.get("sizeLimit"):
                conf(f"{base}.options.sizeLimit", source["sizeLimit"])
            if kind == "emptyDir" and source.get("medium"):
                conf(f"{base}.options.medium", source["medium"])
            if kind == "hostPath":
                conf(f"{base}.options.path", source["path"])
                if source.get("type"):
                    conf(f"{base}.options.type", source["type"])
            if kind == "nfs":
                conf(f"{base}.options.path", source["path"])
                conf(f"{base}.options.server", source["server"])
            if kind == "persistentVolumeClaim":
                conf(f"{base}.options.claimName", source["claimName"])
    dyn = spec.get("dynamicAllocation") or {}
    if dyn.get("enabled"):
        conf("spark.dynamicAllocation.enabled", "true")
        for field in ("initialExecutors", "minExecutors", "maxExecutors"):
            if dyn.get(field) is not None:
                conf(f"spark.dynamicAllocation.{field}", dyn[field])
        conf("spark.dynamicAllocation.shuffleTracking.enabled", "true")
        if dyn.get("shuffleTrackingTimeout") is not None:
            conf("spark.dynamicAllocation.shuffleTracking.timeout", dyn["shuffleTrackingTimeout"])
    # What sparkop owns (the same values its renderer sets).
    conf("spark.kubernetes.executor.podNamePrefix", naming.pod_prefix(name, 1))
    conf("spark.kubernetes.executor.podTemplateFile", executor_template_file)
    # The user's container name is honoured (kubeflow would force Spark's default here).
    container = (spec.get("sparkConf") or {}).get("spark.kubernetes.executor.podTemplateContainerName")
    conf("spark.kubernetes.executor.podTemplateContainerName", container or "spark-kubernetes-executor")
    if spec.get("proxyUser"):
        args += ["--proxy-user", spec["proxyUser"]]
    args.append(spec.get("mainApplicationFile") or "spark-internal")
    args += [str(a) for a in spec.get("arguments") or ()]
    return args


def _with_monitoring(driver: Mapping[str, Any]) -> JSON:
    """The spec after kubeflow's configPrometheusMonitoring: it writes spark.metrics.* into sparkConf,
    and the prometheus.io annotations and the -javaagent option into the exposed roles' fields."""
    spec = copy.deepcopy(dict(driver["spec"]))
    mon = spec.get("monitoring") or {}
    prom = mon.get("prometheus")
    if not prom:
        return spec
    port = prom.get("port") or 8090
    config = prom.get("configFile") or "/etc/metrics/conf/prometheus.yaml"
    agent = f"-javaagent:{prom['jmxExporterJar']}={port}:{config}"
    spark_conf = spec.setdefault("sparkConf", {})
    spark_conf["spark.metrics.namespace"] = f"{driver['metadata']['namespace']}.{driver['metadata']['name']}"
    spark_conf["spark.metrics.conf"] = mon.get("metricsPropertiesFile") or "/etc/metrics/conf/metrics.properties"
    for role, on in (("driver", mon.get("exposeDriverMetrics")), ("executor", mon.get("exposeExecutorMetrics"))):
        if not on:
            continue
        pod = spec.setdefault(role, {})
        pod["annotations"] = {
            **(pod.get("annotations") or {}),
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(port),
            "prometheus.io/path": "/metrics",
        }
        pod["javaOptions"] = f"{pod['javaOptions']} {agent}" if pod.get("javaOptions") else agent
    return spec


# The environment a spark-submit run must not inherit from whoever runs the tests.
FOREIGN_ENV = ("KUBECONFIG", "SPARK_HOME", "PYSPARK_PYTHON", "SPARK_LOCAL_DIRS", "HADOOP_CONF_DIR", "SPARK_CONF_DIR")


def spark_submit_command(
    version: str, server: str, ca: Path, cert: Path, key: Path, args: list[str], workdir: Path
) -> tuple[list[str], dict[str, str]]:
    """argv and environment of ``spark-submit --deploy-mode cluster`` against ``server`` with a client
    certificate, returning once the driver pod exists (waitAppCompletion=false)."""
    home = ensure_spark(version)
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    env.update(SPARK_HOME=str(home), SPARK_USER="spark", HOME=str(workdir), SPARK_LOCAL_IP="127.0.0.1")
    argv = [
        str(home / "bin" / "spark-submit"),
        "--master",
        f"k8s://{server}",
        "--deploy-mode",
        "cluster",
        "--conf",
        "spark.kubernetes.submission.waitAppCompletion=false",
        "--conf",
        f"spark.kubernetes.authenticate.submission.caCertFile={ca}",
        "--conf",
        f"spark.kubernetes.authenticate.submission.clientCertFile={cert}",
        "--conf",
        f"spark.kubernetes.authenticate.submission.clientKeyFile={key}",
        *args,
    ]
    return argv, env


def spark_submit(version: str, server: str, ca: Path, cert: Path, key: Path, args: list[str], workdir: Path) -> str:
    argv, env = spark_submit_command(version, server, ca, cert, key, args, workdir)
    result = subprocess.run(argv, env=env, cwd=workdir, capture_output=True, text=True, timeout=180, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"spark-submit failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
        )
    return result.stderr


# --- many submissions, one JVM ------------------------------------------------------------------

# Next to the conformance tests that use it; this module is shared with bench/submit_cost.py.
BATCH_SOURCE = Path(__file__).resolve().parents[1] / "conformance" / "BatchSubmit.java"
BATCH_MAIN = "BatchSubmit"
SPARK_SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
ARG_SEPARATOR = "\x01"
_MARKER = re.compile(r"^=== sparkop-batch (\d+) (start|ok|failed)$", re.M)


@dataclass(frozen=True)
class Submitted:
    """One submission of a batch: whether spark-submit returned normally, and what it logged."""

    ok: bool
    log: str


def _batch_classes() -> Path:
    """BatchSubmit compiled once per content (it needs no Spark to compile: it calls SparkSubmit by reflection)."""
    source = BATCH_SOURCE.read_bytes()
    out = CACHE / "conformance-batch" / hashlib.sha256(source).hexdigest()[:12]
    if not (out / f"{BATCH_MAIN}.class").is_file():
        javac = shutil.which("javac")
        if javac is None:
            raise RuntimeError("javac is not on PATH (apt-get install openjdk-17-jdk-headless)")
        tmp = Path(tempfile.mkdtemp(prefix="batch-", dir=CACHE))
        subprocess.run([javac, "--release", "17", "-d", str(tmp), str(BATCH_SOURCE)], check=True, capture_output=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(out)
    return out


def _jvm_command(home: Path, first_args: list[str], env: Mapping[str, str]) -> list[str]:
    """The java command line Spark's own launcher builds for spark-submit (class path, module options,
    memory), up to the main class: what bin/spark-class would exec."""
    java = shutil.which("java") or "java"
    launcher = [java, "-Xmx128m", "-cp", f"{home}/jars/*", "org.apache.spark.launcher.Main", SPARK_SUBMIT_CLASS]
    printed = subprocess.run([*launcher, *first_args], env=dict(env), capture_output=True, check=False)
    if printed.returncode != 0:
        raise RuntimeError(f"Spark's launcher failed ({printed.returncode}): {printed.stderr.decode()[-3000:]}")
    # What bin/spark-class reads: lines to show, a NUL line, then the command, NUL-separated.
    _, _, command = printed.stdout.decode().partition("\0\n")
    tokens = command.split("\0")
    return tokens[: tokens.index(SPARK_SUBMIT_CLASS)]


def spark_submit_batch(
    version: str, server: str, ca: Path, cert: Path, key: Path, runs: list[list[str]], workdir: Path
) -> list[Submitted]:
    """``spark_submit`` for each argument list of ``runs``, in one JVM (a JVM and Spark's Kubernetes
    client start once, not once per run), in order; one :class:`Submitted` per run."""
    argvs = [spark_submit_command(version, server, ca, cert, key, args, workdir) for args in runs]
    home = ensure_spark(version)
    # What bin/load-spark-env.sh exports for the launcher.
    env = {**argvs[0][1], "SPARK_SCALA_VERSION": scala_version(home, version), "SPARK_CONF_DIR": str(home / "conf")}
    command = _jvm_command(home, argvs[0][0][1:], env)
    classpath = command.index("-cp") + 1
    command[classpath] = f"{command[classpath]}{os.pathsep}{_batch_classes()}"
    lines = workdir / "submissions.txt"
    lines.write_text("".join(ARG_SEPARATOR.join(argv[1:]) + "\n" for argv, _ in argvs))
    result = subprocess.run(
        [*command, BATCH_MAIN, str(lines)],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120 + 60 * len(runs),
        check=False,
    )
    logs: dict[int, list[str]] = {}
    outcomes: dict[int, bool] = {}
    current: int | None = None
    for line in result.stderr.splitlines():
        marker = _MARKER.match(line)
        if marker:
            index, what = int(marker.group(1)), marker.group(2)
            current = index if what == "start" else None
            if what != "start":
                outcomes[index] = what == "ok"
            continue
        if current is not None:
            logs.setdefault(current, []).append(line)
    tail = f"(the JVM exited {result.returncode}: {result.stderr[-3000:]})"
    return [Submitted(outcomes.get(i, False), "\n".join(logs.get(i, [])) or tail) for i in range(len(runs))]


# --- normalisation and comparison --------------------------------------------------------------

SERVER_FIELDS = {
    ("metadata", "uid"),
    ("metadata", "resourceVersion"),
    ("metadata", "creationTimestamp"),
    ("metadata", "generation"),
    ("metadata", "managedFields"),
    ("spec", "nodeName"),
    ("status",),
}


def _strip(obj: JSON) -> JSON:
    out = copy.deepcopy(obj)
    for path in SERVER_FIELDS:
        cursor: Any = out
        for part in path[:-1]:
            cursor = cursor.get(part, {}) if isinstance(cursor, dict) else {}
        if isinstance(cursor, dict):
            cursor.pop(path[-1], None)
    return out


def replace_strings(obj: Any, replacements: Mapping[str, str]) -> Any:
    if isinstance(obj, str):
        for old, new in replacements.items():
            obj = obj.replace(old, new)
        return obj
    if isinstance(obj, list):
        return [replace_strings(x, replacements) for x in obj]
    if isinstance(obj, dict):
        return {replace_strings(k, replacements): replace_strings(v, replacements) for k, v in obj.items()}
    return obj


_API_ACCESS = re.compile(r"kube-api-access-[a-z0-9]{5}")


def properties_of(config_map: JSON) -> dict[str, str]:
    return parse_properties(config_map.get("data", {}).get("spark.properties", ""))


def normalise_config_map(config_map: JSON) -> JSON:
    """The ConfigMap with spark.properties parsed (order and escaping are not semantics) and the
    submission-only properties dropped."""
    out = _strip(config_map)
    props = {k: v for k, v in properties_of(config_map).items() if not SUBMISSION_ONLY.match(k)}
    out.setdefault("data", {})["spark.properties"] = props
    return out


def _sort_named(value: Any) -> Any:
    """Lists of named entries (env, volumes, mounts) whose order Spark takes from a hash map are
    compared by name; everything else keeps its order."""
    if isinstance(value, list) and value and all(isinstance(x, dict) and "name" in x for x in value):
        return sorted((_sort_named(x) for x in value), key=lambda x: str(x["name"]))
    if isinstance(value, list):
        return [_sort_named(x) for x in value]
    if isinstance(value, dict):
        return {k: _sort_named(v) for k, v in value.items()}
    return value


def normalise_pod(pod: JSON) -> JSON:
    out = _strip(pod)
    out = json.loads(_API_ACCESS.sub("kube-api-access-xxxxx", json.dumps(out)))
    spec = out.get("spec", {})
    for key in ("containers", "initContainers"):
        for container in spec.get(key, []):
            for field in ("env", "volumeMounts"):
                if field in container:
                    container[field] = _sort_named(container[field])
    if "volumes" in spec:
        spec["volumes"] = _sort_named(spec["volumes"])
    # Spark shuffles spark.local.dir (Utils.randomize) before numbering spark-local-dir-N.
    for container in spec.get("containers", []):
        mounts = [m for m in container.get("volumeMounts", []) if m["name"].startswith("spark-local-dir-")]
        for mount, path in zip(mounts, sorted(m["mountPath"] for m in mounts), strict=True):
            mount["mountPath"] = path
        for env in container.get("env", []):
            if env["name"] == "SPARK_LOCAL_DIRS" and "value" in env:
                env["value"] = ",".join(sorted(env["value"].split(",")))
    return out


def diff(a: Any, b: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, spark's value, ours) for every difference."""
    if isinstance(a, dict) and b is None:
        b = {}
    if isinstance(b, dict) and a is None:
        a = {}
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{key}" if path else str(key)
            yield from diff(a.get(key), b.get(key), sub)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from diff(x, y, f"{path}[{index}]")
    elif a != b:
        yield path, a, b


def count_leaves(value: Any) -> int:
    if isinstance(value, dict):
        return sum(count_leaves(v) for v in value.values()) or 1
    if isinstance(value, list):
        return sum(count_leaves(v) for v in value) or 1
    return 1


def temp_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
