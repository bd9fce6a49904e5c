"""The driver controller's shell without a cluster: a fake API client recording every call (and raising
the errors a test queues), a runtime over in-memory indexes, and the driver controller's Loop on them
(tests/unit/test_driver_loop.py, test_driver_network_policy.py)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from sparkop.core.controller import Loop
from sparkop.core.runtime import Options, Runtime
from sparkop.driver_controller import controller as declaration
from sparkop.driver_controller.controller import driver_controller
from sparkop.driver_controller.summaries import summarize_pod
from tests.support.driver_objects import objects
from tests.support.fake_index import FakeIndex

KEY = ("ns", "pi")


def api_error(status: int, reason: str, message: str) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps({"kind": "Status", "status": "Failure", "reason": reason, "message": message})
    return exc


class FakeKube:
    """Records calls; ``fail`` maps a call prefix ("create Pod", "status", ...) to errors raised in turn."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail: dict[str, list[BaseException]] = {}
        self.statuses: list[dict[str, Any]] = []

    def _call(self, what: str) -> None:
        self.calls.append(what)
        for prefix, errors in self.fail.items():
            if what.startswith(prefix) and errors:
                raise errors.pop(0)

    async def create(self, body: dict[str, Any]) -> bool:
        self._call(f"create {body['kind']} {body['metadata']['name']}")
        return True

    async def patch_status(self, resource: Any, namespace: str, name: str, *, old: Any, new: Any,
                           resource_version: str) -> Any:  # fmt: skip
        self._call("status")
        self.statuses.append(new)
        return {}

    async def patch(self, resource: Any, namespace: str, name: str, patch: Any, **_: Any) -> Any:
        self._call(f"patch {name}")
        return {}

    async def delete(
        self, resource: Any, namespace: str, name: str, *, uid: str | None = None, grace_seconds: int | None = None
    ) -> bool:
        self._call(f"delete {resource.kind} {name}" + (f" grace {grace_seconds}" if grace_seconds is not None else ""))
        return True

    async def pod_log_tail(self, namespace: str, name: str, *, container: str | None, lines: int, limit: int) -> str:
        self._call(f"log {name}")
        return f"the end of {name}'s log\n"

    async def event(self, regarding: Any, *, type_: str, reason: str, message: str) -> None:
        self._call(f"event {reason}")


class FakeRuntime:
    def __init__(self, fake: FakeKube) -> None:
        self.kube = fake
        self.options = Options()
        self.indexes: dict[str, FakeIndex] = {
            name: FakeIndex()
            for name in (
                declaration.INDEX_DRIVERS,
                declaration.INDEX_PODS,
                declaration.INDEX_CONFIGMAPS,
                declaration.INDEX_SERVICES,
                declaration.INDEX_NETWORK_POLICIES,
                declaration.INDEX_VOLCANO_POD_GROUPS,
                declaration.INDEX_COSCHEDULING_POD_GROUPS,
                declaration.INDEX_WORKLOADS,
                declaration.INDEX_FLAVORS,
                declaration.INDEX_PRIORITY_CLASSES,
                declaration.INDEX_DRIVER_PODS_BY_NAME,
                declaration.INDEX_NODES,
            )
        }

    def index(self, name: str) -> FakeIndex:
        return self.indexes[name]

    ensure_holds = Runtime.ensure_holds  # the real check, on these indexes
    filed = Runtime.filed  # the real reading of an index, on these

    def queue(self, name: str, reconcile: Any) -> Any:
        return None

    def namespace_terminating(self, namespace: str) -> bool:
        return False


def controller(fake: FakeKube, body: dict[str, Any], pods: list[dict[str, Any]] = (),  # type: ignore[assignment]
               with_objects: bool = False) -> tuple[Loop[Any, Any], FakeRuntime]:  # fmt: skip
    runtime = FakeRuntime(fake)
    runtime.indexes[declaration.INDEX_DRIVERS][KEY] = [body]
    runtime.indexes[declaration.INDEX_PODS][KEY] = [summarize_pod(p) for p in pods]
    for pod in pods:
        if (pod["metadata"].get("labels") or {}).get("spark-role") == "driver":
            runtime.indexes[declaration.INDEX_DRIVER_PODS_BY_NAME][("ns", pod["metadata"]["name"])] = [
                summarize_pod(pod)
            ]
    if with_objects:
        _, cms, svcs = objects()
        runtime.indexes[declaration.INDEX_CONFIGMAPS][KEY] = cms
        runtime.indexes[declaration.INDEX_SERVICES][KEY] = svcs
    return Loop(runtime, driver_controller(runtime)), runtime  # type: ignore[arg-type]
