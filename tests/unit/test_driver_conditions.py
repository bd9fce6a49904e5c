"""The SparkDriver's Stuck condition (driver_controller.conditions) as a table: what the current driver
pod shows and the conditions status holds -> the conditions to record, the DriverPodStuck event to
post, and when to look again."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from sparkop.api.models import Condition
from sparkop.driver_controller.conditions import queued, stuck
from sparkop.driver_controller.summaries import PodGroupSummary, PodSummary, summarize_pod, summarize_pod_group
from tests.support.driver_objects import NOW, objects, running, with_status

EARLIER = "2026-01-01T11:00:00Z"
AT_NOW = "2026-01-01T12:00:00Z"
POD = "pi-driver"
LONG = "x" * 40_000


def pending(**changes: Any) -> PodSummary:
    return replace(summarize_pod(with_status(objects()[0], "Pending")), **changes)


def started() -> PodSummary:
    return summarize_pod(running(objects()[0]))


def stuck_since(reason: str, when: str = EARLIER, status: str = "True") -> dict[str, Any]:
    return {"type": "Stuck", "status": status, "reason": reason, "lastTransitionTime": when, "observedGeneration": 1}


OTHER = {"type": "Other", "status": "True", "reason": "Theirs", "lastTransitionTime": EARLIER}
BACKOFF = {"waiting_reason": "ImagePullBackOff", "waiting_message": "no such image"}
BACKOFF_MESSAGE = f"driver pod {POD}: ImagePullBackOff: no such image"
UNSCHEDULABLE_MESSAGE = f"driver pod {POD} unschedulable for 400s: 0/3 nodes"


def unschedulable(seconds: float, **changes: Any) -> PodSummary:
    since = NOW - timedelta(seconds=seconds)
    return pending(unschedulable_since=since, unschedulable_message="0/3 nodes", **changes)


# (pod, conditions held, generation) -> (conditions recorded or None: as they are, event, requeue_after)
# fmt: off
TABLE: list[Any] = [
    pytest.param(
        pending(**BACKOFF), [], 1,
        [{**stuck_since("ImagePullBackOff", AT_NOW), "message": BACKOFF_MESSAGE}], BACKOFF_MESSAGE, None,
        id="a waiting reason that does not clear by itself: Stuck, said once",
    ),
    pytest.param(
        pending(**BACKOFF), [stuck_since("ImagePullBackOff")], 1,
        [{**stuck_since("ImagePullBackOff"), "message": BACKOFF_MESSAGE}], None, None,
        id="the same reason again: not said again, the time stays",
    ),
    pytest.param(
        pending(waiting_reason="CrashLoopBackOff"), [stuck_since("ImagePullBackOff")], 1,
        [{**stuck_since("CrashLoopBackOff"), "message": f"driver pod {POD}: CrashLoopBackOff"}],
        f"driver pod {POD}: CrashLoopBackOff", None,
        id="another waiting reason while stuck: said, the time stays (still True)",
    ),
    pytest.param(
        pending(**BACKOFF), [stuck_since("ImagePullBackOff", status="False")], 1,
        [{**stuck_since("ImagePullBackOff", AT_NOW), "message": BACKOFF_MESSAGE}], BACKOFF_MESSAGE, None,
        id="stuck again after it had recovered: the time moves",
    ),
    pytest.param(
        pending(waiting_reason="ErrImagePull", waiting_message=LONG), [], 1,
        [{**stuck_since("ErrImagePull", AT_NOW), "message": f"driver pod {POD}: ErrImagePull: {LONG}"[:32768]}],
        f"driver pod {POD}: ErrImagePull: {LONG}", None,
        id="a long message is cut to the condition's limit (the event keeps it)",
    ),
    pytest.param(
        unschedulable(60), [], 1, None, None, 240.0,
        id="unschedulable within the timeout: nothing yet, look again when it runs out",
    ),
    pytest.param(
        unschedulable(299.9), [], 1, None, None, 0.5,
        id="unschedulable just short of the timeout: look again in half a second at the soonest",
    ),
    pytest.param(
        unschedulable(400), [], 1,
        [{**stuck_since("Unschedulable", AT_NOW), "message": UNSCHEDULABLE_MESSAGE}], UNSCHEDULABLE_MESSAGE, None,
        id="unschedulable past the timeout: Stuck (Unschedulable), said once",
    ),
    pytest.param(
        unschedulable(400), [stuck_since("ImagePullBackOff")], 1,
        [{**stuck_since("Unschedulable"), "message": UNSCHEDULABLE_MESSAGE}], None, None,
        id="unschedulable while already stuck: not said again, the time stays",
    ),
    pytest.param(
        unschedulable(400, phase="Running"), [], 1, None, None, None,
        id="a stale unschedulable condition on a running pod: nothing",
    ),
    pytest.param(
        started(), [stuck_since("ImagePullBackOff")], 1,
        [{"type": "Stuck", "status": "False", "reason": "Progressing", "lastTransitionTime": AT_NOW,
          "observedGeneration": 1}], None, None,
        id="no longer stuck: False (Progressing), the time moves",
    ),
    pytest.param(
        started(), [stuck_since("Progressing", status="False")], 1,
        [stuck_since("Progressing", status="False")], None, None,
        id="still not stuck: as it was",
    ),
    pytest.param(
        started(), [stuck_since("ImagePullBackOff"), OTHER], 1,
        [OTHER, {"type": "Stuck", "status": "False", "reason": "Progressing", "lastTransitionTime": AT_NOW,
                 "observedGeneration": 1}], None, None,
        id="others' conditions are kept, the one changed goes last",
    ),
    pytest.param(
        started(), [OTHER], 1, None, None, None,
        id="never stuck: nothing to record",
    ),
    pytest.param(
        pending(**BACKOFF), [], None,
        [{"type": "Stuck", "status": "True", "reason": "ImagePullBackOff", "message": BACKOFF_MESSAGE,
          "lastTransitionTime": AT_NOW}], BACKOFF_MESSAGE, None,
        id="no generation: none recorded",
    ),
]
# fmt: on


@pytest.mark.parametrize(("pod", "held", "generation", "conditions", "event", "requeue_after"), TABLE)
def test_stuck(
    pod: PodSummary,
    held: list[dict[str, Any]],
    generation: int | None,
    conditions: list[dict[str, Any]] | None,
    event: str | None,
    requeue_after: float | None,
) -> None:
    verdict = stuck(pod, [Condition.model_validate(c) for c in held], NOW, generation, timeout=300.0)
    recorded = None if verdict.conditions is None else [c.to_json() for c in verdict.conditions]
    assert recorded == conditions
    assert verdict.event == event
    assert verdict.requeue_after == (None if requeue_after is None else pytest.approx(requeue_after))


# --- Queued: a gang that waits for its batch scheduler ------------------------------------------------

GROUP = "pi-pg"
NOT_READY = "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable"


def volcano_group(phase: str, waiting: bool = True) -> PodGroupSummary:
    """A Volcano PodGroup as the scheduler writes it: an Unschedulable condition while it waits."""
    conditions = [
        {
            "type": "Unschedulable",
            "status": "True",
            "reason": "NotEnoughResources",
            "message": NOT_READY,
            "transitionID": "5b2a",
            "lastTransitionTime": EARLIER,
        }
    ]
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": GROUP, "uid": "pg-uid", "ownerReferences": [{"uid": "drv-uid", "controller": True}]},
        "status": {"phase": phase, **({"conditions": conditions} if waiting else {})},
    }
    return summarize_pod_group(body)


def queued_since(status: str, reason: str, message: str, when: str = EARLIER) -> dict[str, Any]:
    return {"type": "Queued", "status": status, "reason": reason, "message": message, "lastTransitionTime": when}


WAITING_MESSAGE = f"PodGroup {GROUP} is Pending: {NOT_READY}"
SCHEDULING_MESSAGE = f"PodGroup {GROUP} is Scheduling: driver pod {POD}: 0/1 nodes are available: resource gap"
BOUND = f"PodGroup {GROUP} is Running; driver pod {POD} bound to node-1"

# (group, pod, conditions held) -> conditions recorded (None: as they are)
# fmt: off
QUEUED_TABLE: list[Any] = [
    pytest.param(
        volcano_group("Pending"), pending(), [],
        [queued_since("True", "NotEnoughResources", WAITING_MESSAGE, AT_NOW)],
        id="Volcano's gang not enqueued, the driver unbound: Queued, with Volcano's reason and message",
    ),
    pytest.param(
        volcano_group("Pending"), pending(), [queued_since("True", "NotEnoughResources", WAITING_MESSAGE)],
        [queued_since("True", "NotEnoughResources", WAITING_MESSAGE)],
        id="still waiting: the time stays",
    ),
    pytest.param(
        replace(volcano_group("Pending", waiting=False), api_version="scheduling.x-k8s.io/v1alpha1"), pending(), [],
        [queued_since("True", "PodGroupPending", f"PodGroup {GROUP} is Pending", AT_NOW)],
        id="a PodGroup without a condition (coscheduling's): the phase says it",
    ),
    pytest.param(
        replace(volcano_group("Scheduling", waiting=False), api_version="scheduling.x-k8s.io/v1alpha1"),
        pending(unschedulable_since=NOW, unschedulable_message="0/1 nodes are available: resource gap"), [],
        [queued_since("True", "PodGroupScheduling", SCHEDULING_MESSAGE, AT_NOW)],
        id="no condition but its scheduler's word on the driver pod: that says why",
    ),
    pytest.param(
        volcano_group("Running", waiting=False), replace(started(), node_name="node-1"),
        [queued_since("True", "NotEnoughResources", WAITING_MESSAGE)],
        [queued_since("False", "Scheduled", BOUND, AT_NOW)],
        id="the gang got its place: Queued False (Scheduled)",
    ),
    pytest.param(
        volcano_group("Running", waiting=False), replace(started(), node_name="node-1"), [], None,
        id="a gang that never waited: no condition",
    ),
    pytest.param(
        volcano_group("Inqueue"), replace(pending(), node_name="node-1"), [], None,
        id="enqueued and the driver bound: nothing waits",
    ),
    pytest.param(None, pending(), [], None, id="no PodGroup seen (its kind not served): nothing to say"),
]
# fmt: on


@pytest.mark.parametrize(("group", "pod", "held", "conditions"), QUEUED_TABLE)
def test_queued(
    group: PodGroupSummary | None,
    pod: PodSummary,
    held: list[dict[str, Any]],
    conditions: list[dict[str, Any]] | None,
) -> None:
    recorded = queued(group, pod, [Condition.model_validate(c) for c in held], NOW, None)
    assert (None if recorded is None else [c.to_json() for c in recorded]) == conditions


def test_a_pod_group_summary_leaves_out_what_volcano_refreshes_every_cycle() -> None:
    assert volcano_group("Pending") == summarize_pod_group(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "metadata": {"name": GROUP, "uid": "pg-uid", "ownerReferences": [{"uid": "drv-uid", "controller": True}]},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "Scheduled", "status": "False", "reason": "x", "message": "other"},
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "reason": "NotEnoughResources",
                        "message": NOT_READY,
                        "transitionID": "77c1",
                        "lastTransitionTime": AT_NOW,
                    },
                ],
            },
        }
    )
