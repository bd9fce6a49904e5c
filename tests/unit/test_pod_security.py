"""--pod-security=restricted: the driver pod and the executor pod template meet Pod Security's
restricted profile where the spec is silent, every container included, and what the spec sets is
kept. (The API server's own verdict, with real Spark, is tests/e2e/test_restricted.py's.)"""

from __future__ import annotations

import json
from typing import Any

from sparkop.driver_controller.podbuild import RenderOptions
from sparkop.driver_controller.podsecurity import SPARK_UID
from sparkop.driver_controller.render import parse, render
from tests.support.driver_objects import spark_pi_driver

UID = "0b4c3d9e-0000-4000-8000-00000000c0de"
RESTRICTED = RenderOptions(pod_security="restricted")


def driver(**spec: Any) -> dict[str, Any]:
    return spark_pi_driver(uid=UID, **spec)


def violations(pod: dict[str, Any]) -> list[str]:
    """What Pod Security's restricted profile would refuse (the checks this option is about)."""
    spec = pod["spec"]
    pod_context = spec.get("securityContext") or {}
    containers = [*(spec.get("initContainers") or ()), *spec["containers"]]
    found = []
    for c in containers:
        context = c.get("securityContext") or {}
        name = c["name"]
        if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
            found.append(f"{name}: runAsNonRoot")
        if (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            found.append(f"{name}: seccompProfile")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation")
        if "ALL" not in ((context.get("capabilities") or {}).get("drop") or ()):
            found.append(f"{name}: capabilities")
    return found


def executor_template(objects: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(next(iter(objects.executor_template["data"].values())))
    return loaded


def test_without_the_option_nothing_is_added() -> None:
    objects = render(parse(driver()), 1)
    assert violations(objects.pod) and violations(executor_template(objects))


def test_restricted_fills_every_container_of_the_driver_and_the_executors() -> None:
    sidecar = {"name": "log-shipper", "image": "busybox"}
    init = {"name": "fetch", "image": "busybox"}
    spec = driver(driver={"sidecars": [sidecar], "initContainers": [init]}, executor={"sidecars": [sidecar]})
    objects = render(parse(spec), 1, RESTRICTED)
    assert violations(objects.pod) == []
    assert objects.pod["spec"]["securityContext"]["runAsUser"] == SPARK_UID
    assert len(objects.pod["spec"]["containers"]) == 2 and len(objects.pod["spec"]["initContainers"]) == 1
    template = executor_template(objects)
    assert violations(template) == [] and len(template["spec"]["containers"]) == 2


def test_what_the_spec_sets_is_kept() -> None:
    spec = driver(
        driver={"podSecurityContext": {"runAsUser": 1000}, "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}},
    )
    pod = render(parse(spec), 1, RESTRICTED).pod
    assert pod["spec"]["securityContext"]["runAsUser"] == 1000
    (spark,) = [c for c in pod["spec"]["containers"] if c["name"] == "spark-kubernetes-driver"]
    assert spark["securityContext"]["capabilities"] == {"add": ["NET_ADMIN"], "drop": ["ALL"]}


def test_spark_4_3s_own_privilege_escalation_property_is_left_to_spark() -> None:
    spec = driver(sparkVersion="4.3.0", image="apache/spark:4.3.0")
    pod = render(parse(spec), 1, RESTRICTED).pod
    (spark,) = [c for c in pod["spec"]["containers"] if c["name"] == "spark-kubernetes-driver"]
    assert spark["securityContext"]["allowPrivilegeEscalation"] is False and violations(pod) == []
