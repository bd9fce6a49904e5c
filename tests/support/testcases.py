"""Validation cases as data, shared by the unit tests (``sparkop validate``) and the integration tests
(the API server, strict field validation): each invalid manifest must be rejected by both.

A case is a YAML override merged into a valid base manifest (:func:`manifest`): mappings merge
recursively, ``null`` deletes a key, anything else replaces. ``expect`` is a field path the offline
error must name.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final

import yaml

BASE_APP: Final = """
apiVersion: sparkop.io/v1alpha1
kind: SparkApplication
metadata:
  name: case
spec:
  type: Scala
  image: apache/spark:3.5.7
  mainClass: org.apache.spark.examples.SparkPi
  mainApplicationFile: local:///opt/spark/examples/jars/spark-examples_2.12-3.5.7.jar
  driver:
    cores: 1
    memory: 512m
  executor:
    instances: 1
    cores: 1
    memory: 512m
"""

BASE_DRIVER: Final = BASE_APP.replace("kind: SparkApplication", "kind: SparkDriver")

BASE_CONNECT: Final = """
apiVersion: sparkop.io/v1alpha1
kind: SparkConnect
metadata:
  name: case
spec:
  sparkVersion: 4.0.5
  image: apache/spark:4.0.5
  server:
    cores: 1
    memory: 512m
  executor:
    instances: 1
    cores: 1
    memory: 512m
"""

BASE_HISTORY: Final = """
apiVersion: sparkop.io/v1alpha1
kind: SparkHistoryServer
metadata:
  name: case
spec:
  image: apache/spark:3.5.9
  logDirectory:
    persistentVolumeClaim: {claimName: spark-events, path: spark-events}
"""


@dataclass(frozen=True)
class Case:
    id: str
    override: str
    expect: str  # a field path the offline error names
    kind: str = "SparkApplication"


def merge(base: Any, override: Any) -> Any:
    if not isinstance(base, dict) or not isinstance(override, dict):
        return copy.deepcopy(override)
    out = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def manifest(case: Case) -> dict[str, Any]:
    bases = {
        "SparkApplication": BASE_APP,
        "SparkDriver": BASE_DRIVER,
        "SparkConnect": BASE_CONNECT,
        "SparkHistoryServer": BASE_HISTORY,
    }
    base = yaml.safe_load(bases[case.kind])
    doc: dict[str, Any] = merge(base, yaml.safe_load(case.override))
    doc["metadata"].setdefault("name", "case")
    return doc


LONG_NAME: Final = "a" * 254


def _flow_map(entries: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in entries.items()) + "}"


# The case: 20 sparkConf values of 60 KB, each within its own bound, 1.2 MB together (more than
# the 1 MiB the driver's properties ConfigMap may hold).
BIG_SPARK_CONF: Final = "spec: {sparkConf: " + _flow_map({f"spark.big.{i}": "x" * 60_000 for i in range(20)}) + "}"
# The same total spread over the other free-text fields that go into that ConfigMap.
BIG_MIXED_PROPERTIES: Final = (
    "spec: {"
    + f"hadoopConf: {_flow_map({f'fs.big.{i}': 'h' * 60_000 for i in range(6)})}, "
    + f"driver: {{javaOptions: {'-Dx=' + 'j' * 60_000}, envVars: {_flow_map({'BIG': 'e' * 60_000})}}}, "
    + f"executor: {{annotations: {_flow_map({f'a/{i}': 'n' * 60_000 for i in range(4)})}}}, "
    + f"deps: {{jars: [{', '.join(f'local:///{i}/' + 'k' * 4_000 for i in range(50))}]}}"
    + "}"
)

INVALID: Final[tuple[Case, ...]] = (
    Case("bad-type-enum", "spec: {type: Go}", "spec.type"),
    Case("mode-client", "spec: {mode: client}", "spec.mode"),
    Case("mode-in-cluster-client", "spec: {mode: in-cluster-client}", "spec.mode"),
    Case("mode-unknown", "spec: {mode: local}", "spec.mode"),
    Case("retries-with-never", "spec: {restartPolicy: {type: Never, onFailureRetries: 3}}", "spec.restartPolicy"),
    Case(
        "submission-retry-interval-default-never",
        "spec: {restartPolicy: {onSubmissionFailureRetryInterval: 5}}",
        "spec.restartPolicy",
    ),
    Case("bad-restart-type", "spec: {restartPolicy: {type: Sometimes}}", "spec.restartPolicy.type"),
    Case(
        "retry-interval-zero",
        "spec: {restartPolicy: {type: OnFailure, onFailureRetryInterval: 0}}",
        "spec.restartPolicy.onFailureRetryInterval",
    ),
    Case(
        "negative-pod-replacements",
        "spec: {restartPolicy: {maxDriverPodReplacements: -1}}",
        "spec.restartPolicy.maxDriverPodReplacements",
    ),
    Case("missing-image", "spec: {image: null}", "spec.image"),
    Case("only-driver-image", "spec: {image: null, driver: {image: 'apache/spark:3.5.7'}}", "spec.image"),
    Case("negative-instances", "spec: {executor: {instances: -1}}", "spec.executor.instances"),
    Case("zero-cores", "spec: {driver: {cores: 0}}", "spec.driver.cores"),
    Case("cores-not-integer", "spec: {driver: {cores: two}}", "spec.driver.cores"),
    Case("unknown-spec-field", "spec: {sparkConfig: {a: b}}", "spec"),
    Case("unknown-driver-field", "spec: {driver: {memoryLimit: 1g}}", "spec.driver"),
    Case("unknown-top-level-field", "specs: {}", ""),
    Case("memory-k8s-style", "spec: {driver: {memory: 512Mi}}", "spec.driver.memory"),
    Case("memory-fraction", "spec: {executor: {memory: 1.5g}}", "spec.executor.memory"),
    Case("memory-overhead-words", "spec: {executor: {memoryOverhead: lots}}", "spec.executor.memoryOverhead"),
    Case("core-limit-malformed", "spec: {driver: {coreLimit: 1 core}}", "spec.driver.coreLimit"),
    Case("name-too-long", f"metadata: {{name: {LONG_NAME}}}", "metadata.name"),
    Case("name-not-dns", "metadata: {name: Spark_Pi}", "metadata.name"),
    Case("missing-main-class-scala", "spec: {mainClass: null}", "spec.mainClass"),
    Case("missing-main-class-java", "spec: {type: Java, mainClass: null}", "spec.mainClass"),
    Case(
        "missing-main-file-python",
        "spec: {type: Python, mainClass: null, mainApplicationFile: null}",
        "spec.mainApplicationFile",
    ),
    Case(
        "bad-toleration-operator",
        "spec: {executor: {tolerations: [{key: a, operator: Equals, value: b}]}}",
        "spec.executor.tolerations[0].operator",
    ),
    Case(
        "bad-toleration-effect",
        "spec: {driver: {tolerations: [{key: a, operator: Exists, effect: NoRun}]}}",
        "spec.driver.tolerations[0].effect",
    ),
    Case("reserved-driver-host", "spec: {sparkConf: {spark.driver.host: 10.0.0.1}}", "spec.sparkConf"),
    Case("reserved-bind-address", "spec: {sparkConf: {spark.driver.bindAddress: 0.0.0.0}}", "spec.sparkConf"),
    Case(
        "spark-conf-not-string", "spec: {sparkConf: {spark.executor.cores: 2}}", "spec.sparkConf.spark.executor.cores"
    ),
    Case(
        "min-above-max-executors",
        "spec: {dynamicAllocation: {enabled: true, minExecutors: 5, maxExecutors: 2}}",
        "spec.dynamicAllocation.minExecutors",
    ),
    Case(
        "initial-above-max",
        "spec: {dynamicAllocation: {enabled: true, initialExecutors: 9, maxExecutors: 3}}",
        "spec.dynamicAllocation.initialExecutors",
    ),
    Case("bad-image-pull-policy", "spec: {imagePullPolicy: Sometimes}", "spec.imagePullPolicy"),
    Case("volume-name-not-dns", "spec: {volumes: [{name: Bad_Name, emptyDir: {}}]}", "spec.volumes[0].name"),
    Case("volume-unknown-source", "spec: {volumes: [{name: v, emptyDirectory: {}}]}", "spec.volumes[0]"),
    Case("env-without-name", "spec: {driver: {env: [{value: x}]}}", "spec.driver.env[0]"),
    Case("duplicate-env", "spec: {driver: {env: [{name: A, value: x}, {name: A, value: y}]}}", "spec.driver.env"),
    Case(
        "bad-secret-type",
        "spec: {driver: {secrets: [{name: s, path: /s, secretType: Magic}]}}",
        "spec.driver.secrets[0].secretType",
    ),
    Case("driver-pod-name-not-dns", "spec: {driver: {podName: My_Driver}}", "spec.driver.podName"),
    Case("python-version-4", "spec: {pythonVersion: '4'}", "spec.pythonVersion"),
    Case(
        "sidecar-port-out-of-range",
        "spec: {driver: {sidecars: [{name: s, image: busybox, ports: [{containerPort: 70000}]}]}}",
        "spec.driver.sidecars[0].ports[0].containerPort",
    ),
    Case("arguments-not-list", "spec: {arguments: '1000'}", "spec.arguments"),
    Case(
        "node-selector-both-levels", "spec: {nodeSelector: {a: b}, driver: {nodeSelector: {c: d}}}", "spec.nodeSelector"
    ),
    Case("negative-ttl", "spec: {timeToLiveSeconds: -5}", "spec.timeToLiveSeconds"),
    Case(
        "template-unknown-pod-field",
        "spec: {executor: {template: {spec: {containerz: []}}}}",
        "spec.executor.template.spec",
    ),
    Case(
        "affinity-bad-operator",
        "spec: {driver: {affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
        "{nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: Near, values: [a]}]}]}}}}}",
        "spec.driver.affinity",
    ),
    Case("memory-overhead-factor-text", "spec: {memoryOverheadFactor: ten percent}", "spec.memoryOverheadFactor"),
    Case("driver-attempt-zero", "spec: {attempt: 0}", "spec.attempt", kind="SparkDriver"),
    Case(
        "driver-negative-replacements",
        "spec: {maxDriverPodReplacements: -1}",
        "spec.maxDriverPodReplacements",
        kind="SparkDriver",
    ),
    Case("driver-has-restart-policy", "spec: {restartPolicy: {type: Always}}", "spec", kind="SparkDriver"),
    Case("driver-missing-main-class", "spec: {mainClass: null}", "spec.mainClass", kind="SparkDriver"),
    Case("driver-missing-type", "spec: {type: null}", "spec", kind="SparkDriver"),
    Case("batch-scheduler", "spec: {batchScheduler: slurm}", "spec.batchScheduler"),
    Case("batch-scheduler-empty", "spec: {batchScheduler: ''}", "spec.batchScheduler"),
    Case("batch-scheduler-kueue", "spec: {batchScheduler: kueue}", "spec.batchScheduler"),
    Case("driver-batch-scheduler-unknown", "spec: {batchScheduler: slurm}", "spec.batchScheduler", kind="SparkDriver"),
    Case(
        "batch-scheduler-options",
        "spec: {batchSchedulerOptions: {queue: default, priorityClassName: high}}",
        "spec.batchSchedulerOptions",
    ),
    Case(
        "yunikorn-priority-class",
        "spec: {batchScheduler: yunikorn, batchSchedulerOptions: {priorityClassName: high}}",
        "spec.batchSchedulerOptions.priorityClassName",
    ),
    Case(
        "coscheduling-queue",
        "spec: {batchScheduler: kube-scheduler, batchSchedulerOptions: {queue: default}}",
        "spec.batchSchedulerOptions.queue",
    ),
    Case(
        "volcano-other-scheduler-name",
        "spec: {batchScheduler: volcano, executor: {schedulerName: my-scheduler}}",
        "spec.executor.schedulerName",
    ),
    Case("failure-retries-with-never", "spec: {failureRetries: 2}", "spec.failureRetries"),
    Case("retry-interval-with-never", "spec: {retryInterval: 10}", "spec.retryInterval"),
    Case(
        "failure-retries-twice",
        "spec: {failureRetries: 2, restartPolicy: {type: OnFailure, onFailureRetries: 3}}",
        "spec.failureRetries",
    ),
    Case(
        "retry-interval-twice",
        "spec: {retryInterval: 2, restartPolicy: {type: OnFailure, onSubmissionFailureRetryInterval: 3}}",
        "spec.retryInterval",
    ),
    Case(
        "driver-ingress-no-url",
        "spec: {driverIngressOptions: [{servicePort: 8080}]}",
        "spec.driverIngressOptions[0]",
    ),
    Case(
        "driver-ingress-same-url",
        "spec: {driverIngressOptions: [{servicePort: 8080, ingressURLFormat: a.example.com}, "
        "{servicePort: 8081, ingressURLFormat: a.example.com}]}",
        "spec.driverIngressOptions",
    ),
    # sparkVersion must be a version (a well-formed one of an unknown line is accepted, with a warning).
    Case("spark-version-not-a-version", "spec: {sparkVersion: latest}", "spec.sparkVersion"),
    Case("spark-version-wildcard", "spec: {sparkVersion: 4.x}", "spec.sparkVersion"),
    Case("spark-version-empty", "spec: {sparkVersion: ''}", "spec.sparkVersion"),
    # RE2's $ (CEL) ends the text; Python's would also match before a final line break.
    Case("spark-version-line-break", 'spec: {sparkVersion: "4.3.0\\n"}', "spec.sparkVersion"),
    Case("driver-spark-version-not-a-version", "spec: {sparkVersion: v4.3.0}", "spec.sparkVersion", kind="SparkDriver"),
    # The version is the pods' spark-version label too: no '+', no trailing '-', at most 63 characters.
    Case("spark-version-not-a-label-value", "spec: {sparkVersion: 4.3.0+build}", "spec.sparkVersion"),
    Case("spark-version-too-long", f"spec: {{sparkVersion: 4.3.0-{'a' * 60}}}", "spec.sparkVersion"),
    Case("spark-conf-over-configmap-budget", BIG_SPARK_CONF, "spec.sparkConf"),
    Case("inlined-properties-over-budget", BIG_MIXED_PROPERTIES, "spec.sparkConf", kind="SparkDriver"),
    Case("connect-spark-3", "spec: {sparkVersion: 3.5.9}", "spec.sparkVersion", kind="SparkConnect"),
    Case("connect-no-spark-version", "spec: {sparkVersion: null}", "spec", kind="SparkConnect"),
    Case("connect-no-image", "spec: {image: null}", "spec.image", kind="SparkConnect"),
    Case(
        "connect-only-server-template-image",
        "spec: {image: null, server: {template: {spec: {containers: [{name: spark-kubernetes-driver, image: x}]}}}}",
        "spec.image",
        kind="SparkConnect",
    ),
    Case(
        "connect-port-not-a-port",
        "spec: {sparkConf: {spark.connect.grpc.binding.port: '99999'}}",
        "spec.sparkConf",
        kind="SparkConnect",
    ),
    Case(
        "connect-service-ports-are-sparkops",
        "spec: {server: {service: {spec: {ports: [{port: 1}]}}}}",
        "spec.server.service.spec",
        kind="SparkConnect",
    ),
    Case("connect-unknown-field", "spec: {server: {replicas: 2}}", "spec.server", kind="SparkConnect"),
    Case(
        "connect-retries-negative",
        "spec: {restartPolicy: {onFailureRetries: -1}}",
        "spec.restartPolicy.onFailureRetries",
        kind="SparkConnect",
    ),
    Case(
        "connect-min-above-max",
        "spec: {dynamicAllocation: {enabled: true, minExecutors: 3, maxExecutors: 1}}",
        "spec.dynamicAllocation",
        kind="SparkConnect",
    ),
    # A history server's template written for where its pod goes only: the pod template's schema (the
    # API server's) still wants the containers, each named.
    Case(
        "history-template-without-containers",
        "spec: {template: {spec: {nodeSelector: {disktype: ssd}}}}",
        "spec.template.spec.containers",
        kind="SparkHistoryServer",
    ),
    Case(
        "history-template-container-unnamed",
        "spec: {template: {spec: {containers: [{resources: {limits: {memory: 2Gi}}}]}}}",
        "spec.template.spec.containers[0].name",
        kind="SparkHistoryServer",
    ),
    Case(
        "history-template-restart-never",
        "spec: {template: {spec: {restartPolicy: Never, containers: [{name: spark-history-server}]}}}",
        "spec.template.spec.restartPolicy",
        kind="SparkHistoryServer",
    ),
    Case(
        "history-two-log-directories",
        "spec: {logDirectory: {url: 's3a://bucket/events'}}",
        "spec.logDirectory",
        kind="SparkHistoryServer",
    ),
)

# History-server templates both the API server and sparkop validate accept.
HISTORY_TEMPLATES_ACCEPTED: Final[tuple[Case, ...]] = (
    Case(
        "history-template-named-server",
        "spec: {template: {spec: {nodeSelector: {disktype: ssd}, containers: [{name: spark-history-server}]}}}",
        "",
        kind="SparkHistoryServer",
    ),
    Case(
        "history-template-sidecar",
        "spec: {template: {spec: {containers: [{name: spark-history-server}, {name: proxy, image: nginx}]}}}",
        "",
        kind="SparkHistoryServer",
    ),
    Case(
        "history-template-labels-only",
        "spec: {template: {metadata: {labels: {team: a}}}}",
        "",
        kind="SparkHistoryServer",
    ),
)


# A realistic kubeflow spark-operator v1beta2 SparkApplication (after their examples/spark-pi*.yaml),
# used to check that changing only apiVersion is enough.
KUBEFLOW_V1BETA2_SPARK_PI: Final = """
apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata:
  name: spark-pi
  labels:
    app: spark-pi
spec:
  type: Scala
  mode: cluster
  image: spark:3.5.3
  imagePullPolicy: IfNotPresent
  mainClass: org.apache.spark.examples.SparkPi
  mainApplicationFile: local:///opt/spark/examples/jars/spark-examples.jar
  arguments:
    - "5000"
  sparkVersion: 3.5.3
  sparkConf:
    spark.eventLog.enabled: "true"
    spark.eventLog.dir: file:///tmp/spark-events
    spark.kubernetes.allocation.batch.size: "10"
  hadoopConf:
    fs.s3a.endpoint: http://minio:9000
  restartPolicy:
    type: OnFailure
    onFailureRetries: 3
    onFailureRetryInterval: 10
    onSubmissionFailureRetries: 5
    onSubmissionFailureRetryInterval: 20
  timeToLiveSeconds: 3600
  volumes:
    - name: test-volume
      hostPath:
        path: /tmp
        type: Directory
    - name: spark-events
      emptyDir: {}
  deps:
    packages:
      - org.apache.hadoop:hadoop-aws:3.3.4
    excludePackages:
      - com.amazonaws:aws-java-sdk-bundle
  driver:
    labels:
      version: 3.5.3
    cores: 1
    coreLimit: 1200m
    memory: 512m
    serviceAccount: spark-operator-spark
    javaOptions: -Dlog4j.configuration=file:///opt/spark/log4j.properties
    env:
      - name: SPARK_DRIVER_EXTRA
        value: "1"
    volumeMounts:
      - name: test-volume
        mountPath: /tmp
    securityContext:
      capabilities:
        drop:
          - ALL
      runAsGroup: 185
      runAsUser: 185
      runAsNonRoot: true
      allowPrivilegeEscalation: false
      seccompProfile:
        type: RuntimeDefault
  executor:
    labels:
      version: 3.5.3
    instances: 2
    cores: 1
    memory: 512m
    memoryOverhead: 256m
    deleteOnTermination: false
    volumeMounts:
      - name: test-volume
        mountPath: /tmp
    tolerations:
      - key: spark
        operator: Exists
        effect: NoSchedule
    affinity:
      podAntiAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm:
              topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  spark-role: executor
  dynamicAllocation:
    enabled: false
  monitoring:
    exposeDriverMetrics: true
    exposeExecutorMetrics: true
    prometheus:
      jmxExporterJar: /prometheus/jmx_prometheus_javaagent-0.11.0.jar
      port: 8090
"""


def kubeflow_as_sparkop() -> dict[str, Any]:
    """The kubeflow manifest with only its apiVersion changed."""
    doc: dict[str, Any] = yaml.safe_load(KUBEFLOW_V1BETA2_SPARK_PI)
    doc["apiVersion"] = "sparkop.io/v1alpha1"
    return doc
