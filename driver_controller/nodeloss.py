"""How long a Spark pod stays bound to a node that stopped reporting (spec.nodeLossTolerationSeconds,
``sparkop run --node-loss-toleration-seconds``).

A node whose kubelet goes silent turns NotReady after the controller manager's node-monitor grace
period and is tainted ``node.kubernetes.io/unreachable`` (``not-ready`` when the kubelet reports
itself not ready) with effect NoExecute; the taint-eviction controller deletes each pod once its
toleration of that taint runs out. Without one of its own every pod gets 300 s from the
DefaultTolerationSeconds admission plugin. The pod's deletion is what makes sparkop replace a lost
driver (a new incarnation), so this number is the wait a user trades against a rerun.
"""

from __future__ import annotations

from typing import Final

from sparkop.core.jsontypes import JSON

NODE_LOSS_TAINTS: Final = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def tolerate(pod: JSON, seconds: int | None) -> None:
    """Add NoExecute tolerations of the node-loss taints for ``seconds`` to ``pod`` (a pod or a pod
    template), in place; a toleration the pod already has for such a key, or for every key, is kept."""
    if seconds is None:
        return
    tolerations: list[JSON] = pod.setdefault("spec", {}).setdefault("tolerations", [])
    for key in NODE_LOSS_TAINTS:
        if any(_covers(toleration, key) for toleration in tolerations):
            continue
        tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds})


def _covers(toleration: JSON, key: str) -> bool:
    """Whether ``toleration`` already decides about ``key``'s NoExecute taint (an empty key with
    operator Exists tolerates every taint)."""
    if toleration.get("effect") not in (None, "", "NoExecute"):
        return False
    return toleration.get("key") == key or (not toleration.get("key") and toleration.get("operator") == "Exists")
