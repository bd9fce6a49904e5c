"""A SparkDriver and its pods, ConfigMaps and Service as the driver controller sees them, for its unit
tests: the objects of an incarnation as rendered, pods in each state, executors adopted or not
(tests/unit/test_driver_reconcile.py, test_driver_loop.py, test_driver_network_policy.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sparkop.core.expectations import LogTail
from sparkop.core.plan import Plan, ReadLog
from sparkop.domain import labels
from sparkop.driver_controller.render import parse, render
from sparkop.driver_controller.summaries import summarize_object

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
UID = "0b4c3d9e-0000-4000-8000-000000000001"


def driver(status: dict[str, Any] | None = None, *, deleting: bool = False, replacements: int = 3) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "pi", "namespace": "ns", "uid": UID, "generation": 1, "resourceVersion": "10"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": meta,
        "spec": {
            "type": "Scala",
            "image": "apache/spark:3.5.7",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///x.jar",
            "maxDriverPodReplacements": replacements,
        },
        "status": status or {},
    }


def spark_pi_driver(name: str = "pi-1", uid: str = UID, **spec: Any) -> dict[str, Any]:
    """A SparkDriver manifest of SparkPi (Spark 3.5.7) named ``name`` in namespace ``ns``, for the
    renderer's tests; ``spec`` entries replace the defaults."""
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": {
            "type": "Scala",
            "sparkVersion": "3.5.7",
            "image": "apache/spark:3.5.7",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            **spec,
        },
    }


def objects(incarnation: int = 1) -> tuple[dict[str, Any], list[Any], list[Any]]:
    """The rendered pod, ConfigMaps and Service of an incarnation, as the indexes would hold them."""
    out = render(parse(driver()), incarnation)
    assert out.executor_template is not None
    pod = {**out.pod, "metadata": {**out.pod["metadata"], "uid": f"pod-{incarnation}", "resourceVersion": "5"}}
    cms = [summarize_object({**cm, "metadata": {**cm["metadata"], "uid": "cm"}})
           for cm in (out.config_map, out.executor_template)]  # fmt: skip
    svcs = [summarize_object({**out.service, "metadata": {**out.service["metadata"], "uid": "svc"}})]
    return pod, cms, svcs


def with_status(pod: dict[str, Any], phase: str, **extra: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, **extra}
    return {**pod, "status": status}


def running(pod: dict[str, Any]) -> dict[str, Any]:
    return with_status(
        pod, "Running", podIP="10.0.0.1", startTime="2026-01-01T11:00:00Z",
        containerStatuses=[{"name": "spark-kubernetes-driver", "state": {"running": {}}}],
    )  # fmt: skip


def terminated(pod: dict[str, Any], code: int, finished: str = "2026-01-01T11:30:00Z") -> dict[str, Any]:
    state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "finishedAt": finished}}
    return with_status(
        pod, "Succeeded" if code == 0 else "Failed",
        containerStatuses=[{"name": "spark-kubernetes-driver", "state": state}],
    )  # fmt: skip


def deleting(pod: dict[str, Any], at: str = "2026-01-01T11:59:30Z", grace: int = 30) -> dict[str, Any]:
    meta = {**pod["metadata"], "deletionTimestamp": at, "deletionGracePeriodSeconds": grace}
    return {**pod, "metadata": meta}


def executor(
    n: int, incarnation: int = 1, *, adopted: bool = False, phase: str = "Running", created: str | None = None
) -> dict[str, Any]:
    """Executor ``n`` of an incarnation in ``phase``, created at ``created`` (RFC 3339) when given."""
    refs = [
        {"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkDriver", "name": "pi", "uid": UID, "controller": adopted},
        {"apiVersion": "v1", "kind": "Pod", "name": "pi-driver", "uid": f"pod-{incarnation}",
         "controller": not adopted},
    ]  # fmt: skip
    return {
        "metadata": {
            "name": f"pi-{incarnation}-exec-{n}", "namespace": "ns", "uid": f"e{n}", "resourceVersion": "7",
            "labels": {
                labels.DRIVER: "pi", labels.INCARNATION: str(incarnation), "spark-role": "executor",
                labels.SPARK_EXEC_ID: str(n),
            },
            "ownerReferences": refs,
            **({"creationTimestamp": created} if created else {}),
        },
        "status": {"phase": phase},
    }  # fmt: skip


def kinds(plan: Plan) -> list[str]:
    return [f"{o['kind']}/{o['metadata']['name']}" for o in (a.manifest for a in plan.creates)]


def log_of(pod: str) -> str:
    """What ``decided`` answers a read of ``pod``'s log with."""
    return f"the end of {pod}'s log\n"


def decided(observed: Any, now: datetime) -> Plan:
    """``decide`` as the shell runs it: a plan that reads driver pods' log tails (core.reconciler.ReadLog)
    gets them, and is decided again with them (the Applier's Learned)."""
    from sparkop.driver_controller.decide import decide

    for _ in range(4):
        plan = decide(observed, now)
        reads = [a for a in plan.before_status if isinstance(a, ReadLog)]
        if not reads:
            return plan
        logs = {**observed.logs, **{read.uid: LogTail(log_of(read.pod)) for read in reads}}
        observed = replace(observed, logs=logs)
    raise AssertionError("a pass that keeps reading logs")
