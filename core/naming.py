"""The one naming function family. Every name sparkop creates is deterministic, so a
create retried after a crash hits 409 AlreadyExists instead of making a duplicate.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

DNS_LABEL_MAX: Final = 63
# The longest suffix sparkop puts after an incarnation's prefix; every name it makes stays a DNS label.
_LONGEST_SUFFIX: Final = "-podspec-conf-map"
# Spark itself requires spark.kubernetes.executor.podNamePrefix to be at most 47 characters, so that
# "<prefix>-exec-<id>" stays a DNS label; our own suffixes need one character less.
POD_PREFIX_MAX: Final = DNS_LABEL_MAX - len(_LONGEST_SUFFIX)
HASH_LEN: Final = 8

_INVALID = re.compile(r"[^a-z0-9-]+")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def _digest(text: str, length: int = HASH_LEN) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def bounded(name: str, limit: int) -> str:
    """``name`` as a DNS-1123 name of at most ``limit`` characters ([a-z0-9-], alphanumeric at both
    ends). A name that already is one comes back unchanged; any other is cleaned (lowercased, every
    other character run turned into ``-``), cut to fit, and suffixed with a hash of the original, so
    that two different names never give the same result (``dot.app`` and ``dot-app`` differ)."""
    return _derived(name, limit)


def _derived(name: str, limit: int, prefix: str = "") -> str:
    clean = prefix + (_INVALID.sub("-", name.lower()).strip("-") or "x")
    if clean == name and len(clean) <= limit:
        return clean
    head = clean[: limit - HASH_LEN - 1].rstrip("-")
    return f"{head}-{_digest(name)}"


def dns_label(name: str, limit: int = DNS_LABEL_MAX) -> str:
    """A DNS-1035 label (starts with a letter), as Service names require; as injective as
    :func:`bounded` (a name that does not start with a letter gets an ``s-`` prefix and a hash)."""
    label = bounded(name, limit)
    if label[0].isalpha():
        return label
    return _derived(name, limit, prefix="s-")


def label_value(name: str) -> str:
    """A label value for an object name (names may reach 253 characters, label values 63): the name
    itself when it fits (an object name of up to 63 characters is a valid label value, dots
    included), else :func:`bounded`."""
    return name if _LABEL_VALUE.fullmatch(name) else bounded(name, DNS_LABEL_MAX)


def driver_name(app_name: str, run: int) -> str:
    """The SparkDriver of an app's ``run``-th run (runs are numbered from 1 and never reused)."""
    suffix = f"-{run}"
    return bounded(app_name, 253 - len(suffix)) + suffix


def scheduled_run_name(scheduled_name: str, minutes: int) -> str:
    """The SparkApplication of a ScheduledSparkApplication's run scheduled at ``minutes`` since the Unix
    epoch (CronJob's naming: one name per scheduled minute, so a time is never started twice)."""
    suffix = f"-{minutes}"
    return bounded(scheduled_name, 253 - len(suffix)) + suffix


def ui_service_name(app_name: str) -> str:
    """The Spark UI Service of an app (kubeflow's ``<app>-ui-svc``), a DNS-1035 label."""
    suffix = "-ui-svc"
    return dns_label(app_name, DNS_LABEL_MAX - len(suffix)) + suffix


def ui_ingress_name(app_name: str) -> str:
    """The Spark UI Ingress of an app (kubeflow's ``<app>-ui-ingress``)."""
    suffix = "-ui-ingress"
    return dns_label(app_name, DNS_LABEL_MAX - len(suffix)) + suffix


def pod_group_name(driver: str) -> str:
    """A SparkDriver's batch-scheduler PodGroup (kubeflow's ``<app>-pg``), one per run; a label
    value too, as coscheduling's pod-group label names it."""
    suffix = "-pg"
    return dns_label(driver, DNS_LABEL_MAX - len(suffix)) + suffix


def driver_ingress_service_name(app_name: str, port: int) -> str:
    """The Service of one of an app's driverIngressOptions (kubeflow's ``<app>-driver-<port>``)."""
    suffix = f"-driver-{port}"
    return dns_label(app_name, DNS_LABEL_MAX - len(suffix)) + suffix


def driver_ingress_name(app_name: str, port: int) -> str:
    """The Ingress of one of an app's driverIngressOptions (kubeflow's ``<app>-ing-<port>``)."""
    suffix = f"-ing-{port}"
    return dns_label(app_name, DNS_LABEL_MAX - len(suffix)) + suffix


def pod_prefix(driver: str, incarnation: int) -> str:
    """Prefix of every pod, ConfigMap and Service of one driver-pod incarnation."""
    return dns_label(f"{driver}-{incarnation}", POD_PREFIX_MAX)


def driver_pod_name(driver: str, incarnation: int) -> str:
    return f"{pod_prefix(driver, incarnation)}-driver"


def driver_service_name(driver: str, incarnation: int) -> str:
    return f"{pod_prefix(driver, incarnation)}-driver-svc"


def driver_configmap_name(driver: str, incarnation: int) -> str:
    return f"{pod_prefix(driver, incarnation)}-conf-map"


def executor_template_configmap_name(driver: str, incarnation: int) -> str:
    return f"{pod_prefix(driver, incarnation)}{_LONGEST_SUFFIX}"


def network_policy_name(driver: str, incarnation: int) -> str:
    """The incarnation's executor NetworkPolicy (Spark 4.2+'s ``<prefix>-policy``)."""
    return f"{pod_prefix(driver, incarnation)}-policy"


def metrics_configmap_name(driver: str, incarnation: int) -> str:
    """The incarnation's metrics.properties / prometheus.yaml ConfigMap (kubeflow's ``<app>-prom-conf``)."""
    return f"{pod_prefix(driver, incarnation)}-prom-conf"


def event_name(object_name: str, nanos: int) -> str:
    """An Event's name, client-go's ``<object>.<hex time>`` (a DNS-1123 subdomain, unique per object
    and instant)."""
    name = f"{object_name}.{nanos:x}"
    return name if len(name) <= 253 else bounded(name, 253)


def spark_app_id(driver_uid: str, incarnation: int) -> str:
    """spark.app.id in Spark's own shape ("spark-" + 32 hex), fixed by the SparkDriver's uid and
    incarnation so that a retried create renders byte-identical objects."""
    return "spark-" + _digest(f"{driver_uid}/{incarnation}", 32)
