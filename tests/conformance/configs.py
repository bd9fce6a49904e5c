"""The SparkDriver specs conformance runs through spark-submit and through our renderer."""

from __future__ import annotations

from typing import Any

EXAMPLES_JAR = "local:///opt/spark/examples/jars/spark-examples.jar"
PI_PY = "local:///opt/spark/examples/src/main/python/pi.py"
DATAFRAME_R = "local:///opt/spark/examples/src/main/r/dataframe.R"
JMX_JAR = "/prometheus/jmx_prometheus_javaagent-1.0.1.jar"

CONFIGS: dict[str, dict[str, Any]] = {
    "scala-minimal": {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "arguments": ["100"],
    },
    "scala-resources": {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "driver": {"cores": 2, "coreRequest": "1500m", "coreLimit": "2", "memory": "2g", "memoryOverhead": "512m"},
        "executor": {"instances": 3, "cores": 2, "memory": "4g"},
    },
    "scala-overhead-factor": {
        "type": "Java",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "memoryOverheadFactor": "0.3",
        "sparkConf": {"spark.driver.memoryOverheadFactor": "0.25", "spark.driver.minMemoryOverhead": "700m"},
        "driver": {"memory": "1500m", "javaOptions": "-XX:+UseG1GC -Dfoo=bar"},
        "deps": {"jars": ["local:///opt/extra/a.jar", "local:///opt/extra/b.jar"], "files": ["local:///etc/x.conf"]},
    },
    "python-basic": {
        "type": "Python",
        "image": "apache/spark-py:3.5.7",
        "mainApplicationFile": PI_PY,
        "arguments": ["10", "--verbose"],
        "deps": {"pyFiles": ["local:///opt/lib/helpers.zip"]},
        "sparkConf": {"spark.pyspark.python": "python3"},
        "driver": {"memory": "900m"},
    },
    "python-env-secrets-labels": {
        "type": "Python",
        "image": "apache/spark-py:3.5.7",
        "mainApplicationFile": PI_PY,
        "driver": {
            "envVars": {"A_VAR": "one", "B_VAR": "two words"},
            "envSecretKeyRefs": {"DB_PASSWORD": {"name": "db", "key": "password"}},
            "secrets": [
                {"name": "gcp-sa", "path": "/mnt/gcp", "secretType": "GCPServiceAccount"},
                {"name": "plain", "path": "/mnt/plain", "secretType": "Generic"},
            ],
            "labels": {"team": "data", "tier": "batch"},
            "annotations": {"example.com/owner": "alice", "example.com/app-id": "{{APP_ID}}"},
            "serviceLabels": {"svc": "label"},
            "serviceAnnotations": {"example.com/svc": "yes"},
            "nodeSelector": {"disk": "ssd"},
        },
        "executor": {"instances": 1, "labels": {"team": "data"}},
    },
    "scala-volumes": {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "spark-data", "readOnly": True}},
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "host", "hostPath": {"path": "/var/log/spark", "type": "DirectoryOrCreate"}},
            {"name": "share", "nfs": {"server": "nfs.example.com", "path": "/exports/share"}},
        ],
        "driver": {
            "volumeMounts": [
                {"name": "data", "mountPath": "/data", "readOnly": True},
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "host", "mountPath": "/host-logs", "subPath": "driver"},
                {"name": "share", "mountPath": "/share"},
            ]
        },
    },
    # issue 9: a read-only mount makes the claim read-only (spark-submit writes
    # persistentVolumeClaim.readOnly from mount.readOnly), given as sparkConf (the issue's case) and as
    # spec volumes for both roles; source read-only marks Spark has no property for (a claim mounted
    # read-write, NFS) go through the pod templates.
    "scala-volumes-readonly": {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "sparkConf": {
            f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.conf.{key}": value
            for role in ("driver", "executor")
            for key, value in (
                ("mount.path", "/conf"),
                ("options.claimName", "spark-conf"),
                ("mount.readOnly", "true"),
            )
        },
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "spark-data"}},
            {"name": "ro-claim", "persistentVolumeClaim": {"claimName": "spark-ro", "readOnly": True}},
            {"name": "share", "nfs": {"server": "nfs.example.com", "path": "/exports/share", "readOnly": True}},
        ],
        "driver": {
            "volumeMounts": [
                {"name": "data", "mountPath": "/data", "readOnly": True},
                {"name": "ro-claim", "mountPath": "/ro"},
                {"name": "share", "mountPath": "/share", "readOnly": True},
            ]
        },
        "executor": {
            "instances": 1,
            "volumeMounts": [
                {"name": "data", "mountPath": "/data", "readOnly": True},
                {"name": "share", "mountPath": "/share"},
            ],
        },
    },
    "scala-ports-conf": {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "imagePullPolicy": "Always",
        "imagePullSecrets": ["regcred", "other"],
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "proxyUser": "alice",
        "hadoopConfigMap": "hadoop-conf",
        "hadoopConf": {"fs.s3a.endpoint": "http://minio:9000"},
        "sparkConf": {
            "spark.driver.port": "7777",
            "spark.driver.blockManager.port": "7788",
            "spark.ui.port": "4141",
            "spark.local.dir": "/tmp/a,/tmp/b",
            "spark.kubernetes.local.dirs.tmpfs": "true",
        },
        "driver": {"serviceAccount": "spark"},
    },
    "scala-pod-template": {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "driver": {
            "template": {
                "metadata": {"labels": {"from-template": "yes"}, "annotations": {"tmpl": "1"}},
                "spec": {
                    "containers": [
                        {"name": "log-shipper", "image": "busybox:1.36", "args": ["sleep", "infinity"]},
                        {
                            "name": "spark-kubernetes-driver",
                            "env": [{"name": "FROM_TEMPLATE", "value": "1"}],
                            "resources": {"limits": {"cpu": "3"}},
                        },
                    ],
                },
            },
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "spark", "effect": "NoSchedule"}],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 185},
            "podSecurityContext": {"fsGroup": 185},
            "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["true"]}],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db.local"]}],
            "terminationGracePeriodSeconds": 45,
        },
        "executor": {
            "instances": 2,
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "spark", "effect": "NoSchedule"}],
            "env": [{"name": "EXEC_ENV", "value": "x"}],
        },
    },
    # issue 9: the user names each template's Spark container, and a sidecar comes first.
    "scala-template-container-names": {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "sparkConf": {
            "spark.kubernetes.driver.podTemplateContainerName": "main",
            "spark.kubernetes.executor.podTemplateContainerName": "main",
        },
        "driver": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "log-shipper", "image": "busybox:1.36", "args": ["sleep", "infinity"]},
                        {"name": "main", "env": [{"name": "FROM_TEMPLATE", "value": "1"}]},
                    ]
                }
            },
            "env": [{"name": "DRIVER_ENV", "value": "x"}],
        },
        "executor": {
            "instances": 1,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "log-shipper", "image": "busybox:1.36", "args": ["sleep", "infinity"]},
                        {"name": "main", "env": [{"name": "FROM_TEMPLATE", "value": "1"}]},
                    ]
                }
            },
            "env": [{"name": "EXEC_ENV", "value": "x"}],
        },
    },
    "r-basic": {
        "type": "R",
        "image": "apache/spark-r:3.5.7",
        "mainApplicationFile": DATAFRAME_R,
        "arguments": ["--rows", "10"],
        "driver": {"memory": "1g", "cores": 1},
        "executor": {"instances": 1},
    },
    "scala-deps-packages": {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "deps": {
            "jars": ["https://repo1.maven.org/maven2/org/xerial/snappy/snappy-java/1.1.10.5/snappy-java-1.1.10.5.jar"],
            "files": ["https://files.example.com/conf/app.conf"],
            # Resolved with Ivy from Maven Central by spark-submit (and again by the driver).
            "packages": ["org.postgresql:postgresql:42.7.3"],
            "excludePackages": ["org.checkerframework:checker-qual"],
            "repositories": ["https://repo1.maven.org/maven2"],
        },
    },
    "python-deps-remote": {
        "type": "Python",
        "image": "apache/spark-py:3.5.7",
        "mainApplicationFile": "https://files.example.com/jobs/etl.py",
        "deps": {
            "pyFiles": ["https://files.example.com/lib/helpers.zip", "https://files.example.com/lib/more.py"],
            "files": ["https://files.example.com/conf/settings.json"],
            "archives": ["https://files.example.com/envs/pyenv.tar.gz#environment"],
        },
    },
    "scala-dynamic-allocation": {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "dynamicAllocation": {
            "enabled": True,
            "initialExecutors": 2,
            "minExecutors": 1,
            "maxExecutors": 8,
            "shuffleTrackingTimeout": 60000,
        },
        "executor": {"instances": 2, "cores": 1},
    },
    "scala-monitoring": {
        "type": "Scala",
        "image": "apache/spark:3.5.7",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "monitoring": {
            "exposeDriverMetrics": True,
            "exposeExecutorMetrics": True,
            "prometheus": {"jmxExporterJar": JMX_JAR, "port": 8091},
        },
        "driver": {"javaOptions": "-XX:+UseG1GC"},
    },
    # Spark 4.1+ settings (earlier lines pass them through as plain properties): a custom connect
    # port, publishNotReadyAddresses, allowPrivilegeEscalation from the general setting merged into a
    # driver security context, and the executors' own override.
    "scala-connect-security": {
        "type": "Scala",
        "image": "apache/spark:4.3.0",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "sparkConf": {
            "spark.connect.grpc.binding.port": "15010",
            "spark.kubernetes.driver.service.publishNotReadyAddresses": "true",
            "spark.kubernetes.securityContext.allowPrivilegeEscalation": "true",
            "spark.kubernetes.executor.securityContext.allowPrivilegeEscalation": "false",
        },
        "driver": {"securityContext": {"runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}},
    },
    # spark.kubernetes.driver.pod.excludedFeatureSteps (4.1+): no NetworkPolicy, no local dirs, no
    # mounted secrets; the driver-specific allowPrivilegeEscalation wins over the general one.
    "scala-excluded-steps": {
        "type": "Scala",
        "image": "apache/spark:4.3.0",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": EXAMPLES_JAR,
        "sparkConf": {
            "spark.kubernetes.driver.pod.excludedFeatureSteps": (
                "org.apache.spark.deploy.k8s.features.NetworkPolicyFeatureStep, "
                "org.apache.spark.deploy.k8s.features.LocalDirsFeatureStep,"
                "org.apache.spark.deploy.k8s.features.MountSecretsFeatureStep,com.example.NoSuchStep"
            ),
            "spark.kubernetes.securityContext.allowPrivilegeEscalation": "false",
            "spark.kubernetes.driver.securityContext.allowPrivilegeEscalation": "true",
        },
        "driver": {"secrets": [{"name": "plain", "path": "/mnt/plain", "secretType": "Generic"}]},
    },
}


def _connect_server() -> dict[str, Any]:
    """The SparkDriver a SparkConnect runs its server as (connect_controller.build): Spark's
    SparkConnectServer with no primary resource (spark-internal), the gRPC port declared and probed,
    the server template's labels."""
    from sparkop.connect_controller import build
    from sparkop.connect_controller.observed import ConnectView

    body: dict[str, Any] = {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkConnect",
        "metadata": {"name": "connect", "namespace": "default", "uid": "00000000-0000-4000-8000-0000000000cc"},
        "spec": {
            "sparkVersion": "4.0.5",
            "image": "apache/spark:4.0.5",
            "sparkConf": {"spark.sql.shuffle.partitions": "8"},
            "server": {"cores": 1, "memory": "1g", "template": {"metadata": {"labels": {"team": "bi"}}}},
            "executor": {"instances": 2, "cores": 1, "memory": "1g"},
        },
    }
    spec: dict[str, Any] = build.build_server(ConnectView.from_body(body), body, 1)["spec"]
    for field in ("sparkVersion", "appName", "attempt", "maxDriverPodReplacements"):
        spec.pop(field)  # set per line and per capture by the test, as for every other configuration
    # The port the builder declares for lines before 4.1 only (4.1+ declare it themselves): one spec
    # here runs on every line.
    spec["driver"]["ports"] = [p for p in spec["driver"].get("ports", []) if p["name"] != "spark-connect"]
    if not spec["driver"]["ports"]:
        del spec["driver"]["ports"]
    return spec


CONFIGS["connect-server"] = _connect_server()
