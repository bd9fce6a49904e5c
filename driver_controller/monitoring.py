"""spec.monitoring as kubeflow's operator does it (``internal/controller/sparkapplication/monitoring_config.go``,
its configPrometheusMonitoring): the files of the incarnation's metrics ConfigMap, and the properties
that run the Prometheus JMX exporter agent in the exposed roles. Pure."""

from __future__ import annotations

from typing import Final

from sparkop.api.models import MonitoringSpec, SparkDriver

METRICS_CONF_DIR: Final = "/etc/metrics/conf"  # where the metrics ConfigMap is mounted (kubeflow's path)
METRICS_VOLUME: Final = "metrics-conf-volume"
METRICS_PROPERTIES_KEY: Final = "metrics.properties"
PROMETHEUS_CONFIG_KEY: Final = "prometheus.yaml"
DEFAULT_PROMETHEUS_PORT: Final = 8090
DEFAULT_PROMETHEUS_PORT_NAME: Final = "jmx-exporter"
# Spark's metrics through its JMX sink, where the exporter agent reads them.
DEFAULT_METRICS_PROPERTIES: Final = """\
*.sink.jmx.class=org.apache.spark.metrics.sink.JmxSink
driver.source.jvm.class=org.apache.spark.metrics.source.JvmSource
executor.source.jvm.class=org.apache.spark.metrics.source.JvmSource
"""
# The exporter's rules for what Spark's JmxSink registers: MBeans metrics:name=<ns>.<app>.driver.<metric>
# and metrics:name=<ns>.<app>.<executor id>.<metric> (spark.metrics.namespace is "<ns>.<app>"), with a
# type=gauges|counters|... key that Dropwizard may list before or after the name.
DEFAULT_PROMETHEUS_CONFIG: Final = r"""lowercaseOutputName: true
rules:
  - pattern: 'metrics<(?:type=\w+, )?name=([^.,]+)\.([^,]+?)\.driver\.([^,]+)(?:, type=\w+)?><>Value'
    name: spark_driver_$3
    type: GAUGE
    labels: {app_namespace: "$1", app_name: "$2"}
  - pattern: 'metrics<(?:type=\w+, )?name=([^.,]+)\.([^,]+?)\.driver\.([^,]+)(?:, type=\w+)?><>Count'
    name: spark_driver_$3_total
    type: COUNTER
    labels: {app_namespace: "$1", app_name: "$2"}
  - pattern: 'metrics<(?:type=\w+, )?name=([^.,]+)\.([^,]+?)\.(\d+)\.([^,]+)(?:, type=\w+)?><>Value'
    name: spark_executor_$4
    type: GAUGE
    labels: {app_namespace: "$1", app_name: "$2", executor_id: "$3"}
  - pattern: 'metrics<(?:type=\w+, )?name=([^.,]+)\.([^,]+?)\.(\d+)\.([^,]+)(?:, type=\w+)?><>Count'
    name: spark_executor_$4_total
    type: COUNTER
    labels: {app_namespace: "$1", app_name: "$2", executor_id: "$3"}
"""


def metrics_files(monitoring: MonitoringSpec | None) -> dict[str, str]:
    """The files of the incarnation's metrics ConfigMap (``naming.metrics_configmap_name``), mounted at
    ``METRICS_CONF_DIR`` in the driver and the executors; empty when no ConfigMap is needed.

    As kubeflow: with ``prometheus`` set, metrics.properties (``metricsProperties``, else a JMX-sink
    default) unless ``metricsPropertiesFile`` names one in the image, and prometheus.yaml
    (``prometheus.configuration``, else a default) unless ``prometheus.configFile`` does. Unlike
    kubeflow, ``metricsProperties`` is also honoured without ``prometheus`` (e.g. for a Graphite sink)."""
    files: dict[str, str] = {}
    if monitoring is None:
        return files
    if not monitoring.metricsPropertiesFile and (monitoring.prometheus is not None or monitoring.metricsProperties):
        files[METRICS_PROPERTIES_KEY] = monitoring.metricsProperties or DEFAULT_METRICS_PROPERTIES
    prom = monitoring.prometheus
    if prom is not None and not prom.configFile:
        files[PROMETHEUS_CONFIG_KEY] = prom.configuration or DEFAULT_PROMETHEUS_CONFIG
    return files


def exposed_roles(monitoring: MonitoringSpec) -> tuple[str, ...]:
    """The roles whose JVMs run the Prometheus JMX exporter agent."""
    if monitoring.prometheus is None:
        return ()
    return tuple(
        role
        for role, on in (("driver", monitoring.exposeDriverMetrics), ("executor", monitoring.exposeExecutorMetrics))
        if on
    )


def monitoring_conf(conf: dict[str, str], driver: SparkDriver) -> None:
    """spark.metrics.conf / spark.metrics.namespace, and for each exposed role the JMX exporter agent
    and the prometheus.io scrape annotations (kubeflow sets the same ones)."""
    mon = driver.spec.monitoring
    if mon is None:
        return
    files = metrics_files(mon)
    if mon.metricsPropertiesFile:
        conf["spark.metrics.conf"] = mon.metricsPropertiesFile
    elif METRICS_PROPERTIES_KEY in files:
        conf["spark.metrics.conf"] = f"{METRICS_CONF_DIR}/{METRICS_PROPERTIES_KEY}"
    prom = mon.prometheus
    if prom is None:
        return
    # kubeflow: "<namespace>.<app>" instead of the per-run app id, so that series stay one per app.
    conf["spark.metrics.namespace"] = f"{driver.metadata['namespace']}.{driver.spec.appName or driver.metadata['name']}"
    port = prom.port or DEFAULT_PROMETHEUS_PORT
    config = prom.configFile or f"{METRICS_CONF_DIR}/{PROMETHEUS_CONFIG_KEY}"
    agent = f"-javaagent:{prom.jmxExporterJar}={port}:{config}"
    for role in exposed_roles(mon):
        key = f"spark.{role}.extraJavaOptions"
        conf[key] = f"{conf[key]} {agent}" if conf.get(key) else agent
        annotations = f"spark.kubernetes.{role}.annotation."
        conf[f"{annotations}prometheus.io/scrape"] = "true"
        conf[f"{annotations}prometheus.io/port"] = str(port)
        conf[f"{annotations}prometheus.io/path"] = "/metrics"
