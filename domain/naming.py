"""The one naming function family: every name sparkop creates (SparkDrivers, driver pods, their
ConfigMaps and Services, UI objects, pod groups, spark.app.id) is deterministic, so a create retried
after a crash hits 409 AlreadyExists instead of making a duplicate. The DNS rules themselves are
``core.names``'s; they are re-exported here, so a controller names everything through this module.
"""

from __future__ import annotations

import sys
from typing import Final

from sparkop.core.names import DNS_LABEL_MAX, HASH_LEN, bounded, digest, dns_label, event_name, label_value
from sparkop.domain.labels import GROUP

# The longest suffix sparkop puts after an incarnation's prefix; every name it makes stays a DNS label.
_LONGEST_SUFFIX: Final = "-podspec-conf-map"
# Spark itself requires spark.kubernetes.executor.podNamePrefix to be at most 47 characters, so that
# "<prefix>-exec-<id>" stays a DNS label; our own suffixes need one character less.
POD_PREFIX_MAX: Final = DNS_LABEL_MAX - len(_LONGEST_SUFFIX)
# The longest name of an object (a DNS subdomain).
OBJECT_NAME_MAX: Final = 253


# What the SparkDrivers of another group's apps and Connect servers end with: an app ``pi`` may exist in
# sparkop's group and in kubeflow's in one namespace, and its runs are SparkDrivers, sparkop's one kind.
# sparkop's own end with the run number, so no name of one group is ever a name of the other.
_GROUP_MARK: Final = "-kf"


def _group_suffix(group: str) -> str:
    return "" if group == GROUP else _GROUP_MARK


def _label_ending(name: str, suffix: str) -> str:
    """``name`` shortened (core.names.dns_label) so that it ends with ``suffix`` and stays a DNS-1035 label."""
    return dns_label(name, DNS_LABEL_MAX - len(suffix)) + suffix


def _name_ending(name: str, suffix: str) -> str:
    """``name`` shortened (core.names.bounded) so that it ends with ``suffix`` and stays an object name
    (a DNS subdomain, 253 characters)."""
    return bounded(name, OBJECT_NAME_MAX - len(suffix)) + suffix


def driver_name(app_name: str, run: int, group: str = GROUP) -> str:
    """The SparkDriver of an app's ``run``-th run (runs are numbered from 1 and never reused):
    ``<app>-<run>`` for an app of sparkop's group, ``<app>-<run>-kf`` for one of kubeflow's."""
    return _name_ending(app_name, f"-{run}{_group_suffix(group)}")


def scheduled_run_name(scheduled_name: str, minutes: int) -> str:
    """The SparkApplication of a ScheduledSparkApplication's run scheduled at ``minutes`` since the Unix
    epoch (CronJob's naming: one name per scheduled minute, so a time is never started twice)."""
    return _name_ending(scheduled_name, f"-{minutes}")


def connect_server_name(connect_name: str, run: int, group: str = GROUP) -> str:
    """The SparkDriver of a SparkConnect's ``run``-th server (runs are numbered from 1, never reused);
    one of kubeflow's group ends with ``-kf``, as an app's runs do."""
    return _name_ending(connect_name, f"-server-{run}{_group_suffix(group)}")


def connect_server_pod_name(connect_name: str) -> str:
    """The server pod of a SparkConnect of kubeflow's group, as kubeflow names it (``<name>-server``):
    every run's and every incarnation's, one at a time."""
    return _name_ending(connect_name, "-server")


def connect_service_name(connect_name: str) -> str:
    """The stable Service of a SparkConnect (kubeflow's ``<name>-server``), a DNS-1035 label."""
    return _label_ending(connect_name, "-server")


def history_name(server_name: str) -> str:
    """A SparkHistoryServer's Deployment, Service, ConfigMap, Ingress and HTTPRoute (one of each), a
    DNS-1035 label."""
    return _label_ending(server_name, "-history")


def history_service_name(server_name: str) -> str:
    return history_name(server_name)


def ui_route_name(app_name: str) -> str:
    """The Spark UI HTTPRoute of an app."""
    return _label_ending(app_name, "-ui-route")


def connect_route_name(connect_name: str) -> str:
    """The GRPCRoute of a SparkConnect's server."""
    return _label_ending(connect_name, "-server-route")


def ui_service_name(app_name: str) -> str:
    """The Spark UI Service of an app (kubeflow's ``<app>-ui-svc``), a DNS-1035 label."""
    return _label_ending(app_name, "-ui-svc")


def ui_ingress_name(app_name: str) -> str:
    """The Spark UI Ingress of an app (kubeflow's ``<app>-ui-ingress``)."""
    return _label_ending(app_name, "-ui-ingress")


def pod_group_name(driver: str) -> str:
    """A SparkDriver's batch-scheduler PodGroup (kubeflow's ``<app>-pg``), one per run; a label
    value too, as coscheduling's pod-group label names it."""
    return _label_ending(driver, "-pg")


def workload_name(driver: str) -> str:
    """A SparkDriver's Kueue Workload, one per run, whatever the driver-pod incarnation."""
    return _name_ending(driver, "-workload")


def driver_ingress_service_name(app_name: str, port: int) -> str:
    """The Service of one of an app's driverIngressOptions (kubeflow's ``<app>-driver-<port>``)."""
    return _label_ending(app_name, f"-driver-{port}")


def driver_ingress_name(app_name: str, port: int) -> str:
    """The Ingress of one of an app's driverIngressOptions (kubeflow's ``<app>-ing-<port>``)."""
    return _label_ending(app_name, f"-ing-{port}")


def driver_pdb_name(driver: str) -> str:
    """A SparkDriver's PodDisruptionBudget (one for all its driver-pod incarnations)."""
    return _name_ending(driver, "-driver-pdb")


def pod_prefix(driver: str, incarnation: int) -> str:
    """Prefix of every pod, ConfigMap and Service of one driver-pod incarnation."""
    return dns_label(f"{driver}-{incarnation}", POD_PREFIX_MAX)


def driver_pod_name(owner: str, pod_name: str | None = None) -> str:
    """The driver pod of every run and every incarnation, as kubeflow names it: ``pod_name`` (a
    ``spec.driver.podName``) when set, else ``<owner>-driver``. ``owner`` is the app (whose SparkDrivers
    get the name in their spec) or, for a SparkDriver written by hand, the SparkDriver. One name at a
    time: the next pod of the name is created only once the last one is gone (driver_controller)."""
    if pod_name:
        return pod_name
    return _name_ending(owner, "-driver")


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


def executor_id_of(pod_name: str) -> int:
    """The Spark executor id at the end of an executor pod's name (Spark's ``<prefix>-exec-<id>``), or
    a number above every id when it has none."""
    head, _, tail = pod_name.rpartition("-exec-")
    return int(tail) if head and tail.isdigit() else sys.maxsize


def spark_app_id(driver_uid: str, incarnation: int) -> str:
    """spark.app.id in Spark's own shape ("spark-" + 32 hex), fixed by the SparkDriver's uid and
    incarnation so that a retried create renders byte-identical objects."""
    return "spark-" + digest(f"{driver_uid}/{incarnation}", 32)


__all__ = [
    "DNS_LABEL_MAX",
    "HASH_LEN",
    "POD_PREFIX_MAX",
    "bounded",
    "dns_label",
    "event_name",
    "label_value",
]
