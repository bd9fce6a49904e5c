"""Pod Security Standards defaults (``sparkop run --pod-security=restricted``): what the ``restricted``
profile requires and a spec left out, filled into the driver pod and the executor pod template, so an
app runs in a namespace that enforces that profile without hand-written security contexts. Only what
the spec left unset is filled: a value it sets is kept (and the API server says why it is refused).

restricted asks (Kubernetes' pod-security admission): runAsNonRoot, a seccomp profile RuntimeDefault
(or Localhost), and for every container no privilege escalation and capabilities dropping ALL. The
uid is Spark's own image user, 185, unless the spec names one.
"""

from __future__ import annotations

from typing import Any, Final

from sparkop.core.jsontypes import JSON

RESTRICTED: Final = "restricted"
PROFILES: Final = (RESTRICTED,)
SPARK_UID: Final = 185


def fill_restricted(pod: JSON) -> None:
    """Fill the restricted profile's requirements into ``pod`` (a pod or a pod template), in place."""
    spec = pod.setdefault("spec", {})
    containers = [c for key in ("initContainers", "containers") for c in spec.get(key) or () if isinstance(c, dict)]
    pod_context = spec.setdefault("securityContext", {})
    pod_context.setdefault("runAsNonRoot", True)
    if "runAsUser" not in pod_context and not all(_has(c, "runAsUser") for c in containers):
        pod_context["runAsUser"] = SPARK_UID
    if "seccompProfile" not in pod_context and not all(_has(c, "seccompProfile") for c in containers):
        pod_context["seccompProfile"] = {"type": "RuntimeDefault"}
    for container in containers:
        context = container.setdefault("securityContext", {})
        context.setdefault("allowPrivilegeEscalation", False)
        context.setdefault("capabilities", {}).setdefault("drop", ["ALL"])


def _has(container: JSON, field: str) -> bool:
    context: Any = container.get("securityContext")
    return isinstance(context, dict) and field in context
