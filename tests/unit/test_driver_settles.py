"""The driver controller decides once per change: what a pass wrote to status leaves nothing for a
second decision on the same view: every plan of its decide is ``settled`` (core.plan.Plan), which
lets a pass end at its status write instead of deciding again on what it wrote.

Checked over any history of a SparkDriver's pods (the driver pod pending, scheduled, running, ended,
lost and replaced; executors coming and going, being deleted), the pass after each change deciding
from the status the earlier passes wrote: deciding again on what it wrote gives no status change, no
event, no action it did not take already (the Applier does not send those again: a create of ours the
cache has yet to show, a patch of a version it patched, a delete of a uid it deleted) and no earlier
requeue."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as hst

from sparkop.core.plan import Plan
from sparkop.domain import labels
from sparkop.driver_controller.observed import Observed, Settings
from sparkop.driver_controller.summaries import summarize_pod
from tests.support.driver_objects import (
    NOW,
    decided,
    deleting,
    driver,
    executor,
    objects,
    running,
    terminated,
    with_status,
)

# What can happen to a SparkDriver's pods between two passes.
CHANGES = hst.sampled_from(
    [
        "scheduled",
        "running",
        "succeeded",
        "failed",
        "lost",
        "driver deleting",
        "executor",
        "executor running",
        "executor ended",
        "executor deleting",
        "executor gone",
        "time",
    ]
)


def _scheduled(pod: dict[str, Any]) -> dict[str, Any]:
    scheduled = with_status(pod, "Pending")
    return {**scheduled, "spec": {**scheduled.get("spec", {}), "nodeName": "node-1"}}


class World:
    """A SparkDriver's owned pods as the caches show them, and the status the passes wrote."""

    def __init__(self) -> None:
        self.status: dict[str, Any] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.cms: list[Any] = []
        self.svcs: list[Any] = []
        self.now = NOW
        self.executors = 0

    def observed(self, status: dict[str, Any] | None = None) -> Observed:
        """What a pass sees; ``status``: the SparkDriver's, if not the one the passes wrote."""
        body = driver(self.status if status is None else status, replacements=2)
        return Observed.of(body, [summarize_pod(p) for p in self.pods.values()], self.cms, self.svcs, Settings())

    def driver_pod(self) -> str | None:
        return next((n for n, p in self.pods.items() if "-driver" in n and "exec" not in n), None)

    def change(self, what: str) -> None:
        name = self.driver_pod()
        if what == "time":
            self.now += timedelta(seconds=45)
        elif what == "executor":
            incarnation = int(self.status.get("incarnation") or 1)
            pod = executor(self.executors, incarnation, phase="Pending")
            self.pods[pod["metadata"]["name"]] = pod
            self.executors += 1
        elif what.startswith("executor"):
            names = [n for n in self.pods if "exec" in n]
            if not names:
                return
            exec_name = names[0]
            pod = self.pods[exec_name]
            if what == "executor running":
                self.pods[exec_name] = with_status(pod, "Running")
            elif what == "executor ended":
                self.pods[exec_name] = with_status(pod, "Succeeded")
            elif what == "executor deleting":
                self.pods[exec_name] = deleting(pod)
            else:
                del self.pods[exec_name]
        elif name is not None:
            pod = self.pods[name]
            self.pods[name] = {
                "scheduled": _scheduled,
                "running": running,
                "succeeded": lambda p: terminated(p, 0),
                "failed": lambda p: terminated(p, 1),
                "driver deleting": lambda p: deleting(running(p)),
            }.get(what, lambda p: p)(pod)
            if what == "lost":
                del self.pods[name]

    def apply(self, plan: Plan[Any]) -> None:
        """A plan as the caches show it later: its status as written, its creates made, its patches
        (finalizers released) and deletes (pods being deleted; ConfigMaps and Services gone) done."""
        if plan.status is not None:
            self.status = plan.status.to_json()
        for create in plan.creates:
            manifest = create.manifest
            if manifest["kind"] == "Pod":
                meta = {**manifest["metadata"], "uid": f"uid-{manifest['metadata']['name']}", "resourceVersion": "5"}
                self.pods[meta["name"]] = {**manifest, "metadata": meta}
            else:
                incarnation = int(manifest["metadata"]["labels"][labels.INCARNATION])
                _, cms, svcs = objects(incarnation)
                made = {(o.kind, o.name): o for o in [*cms, *svcs]}
                obj = made[(manifest["kind"], manifest["metadata"]["name"])]
                target = self.svcs if obj.kind == "Service" else self.cms
                if all(o.name != obj.name for o in target):
                    target.append(obj)
        for patch in plan.patches:
            if patch.kind == "Pod" and patch.name in self.pods:
                pod = self.pods[patch.name]
                self.pods[patch.name] = {**pod, "metadata": {**pod["metadata"], "finalizers": []}}
        for delete in plan.deletes:
            if delete.kind == "Pod" and delete.name in self.pods:
                self.pods[delete.name] = deleting(self.pods[delete.name])
            self.cms = [o for o in self.cms if (o.kind, o.name) != (delete.kind, delete.name)]
            self.svcs = [o for o in self.svcs if (o.kind, o.name) != (delete.kind, delete.name)]


@settings(max_examples=400, deadline=None)
@given(changes=hst.lists(CHANGES, max_size=14))
def test_deciding_again_on_what_a_pass_wrote_changes_nothing(changes: list[str]) -> None:
    world = World()
    for what in ["", *changes]:
        if what:
            world.change(what)
        # As the shell decides: a driver pod's log tail read first, when the pass asks for one.
        first = decided(world.observed(), world.now)
        assert first.settled
        written = first.status.to_json() if first.status is not None else world.status
        again = decided(world.observed(written), world.now)
        assert again.status is None or again.status.to_json() == written, (what, written, again.status)
        assert again.events == (), (what, again.events)
        # The very actions the pass took (same target, body and precondition): the Applier sends none again.
        assert all(action in first.actions for action in again.actions), (what, again.actions, first.actions)
        if again.requeue_after is not None:
            assert first.requeue_after is not None and first.requeue_after <= again.requeue_after, (
                what,
                first.requeue_after,
                again.requeue_after,
            )
        world.apply(first)
