"""The history controller's one decision: ``decide(observed, now) -> Plan``. Pure: no clock, no I/O.

Each pass of a SparkHistoryServer:

* **ensures** its Deployment and Service (and its Ingress or HTTPRoute when the spec asks for one):
  written only when missing or built from another spec (their ``sparkop.io/spec-hash`` annotation),
  so a server at rest costs no write; one the spec no longer asks for is deleted;
* **reports** an object the API server refused (a quota, an admission policy, a cluster that serves
  no HTTPRoutes) in ``lastError`` and one Warning event, and is Failed until its spec changes it;
* **states** where it is: Ready once its pod is Ready (``readyReplicas``), NotReady after it was
  Ready once, else Provisioning; the ``Ready`` condition says the same. ``status.url`` is where a
  user opens it and ``status.eventLogDirectory`` what the apps that log there set
  ``spark.eventLog.dir`` to: both follow from the spec alone (:mod:`api.history`), so the apps
  controller works them out the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from sparkop.api import history
from sparkop.api.history import HistoryState, SparkHistoryServerStatus
from sparkop.api.models import LastError, with_condition
from sparkop.core.jsontypes import JSON
from sparkop.core.plan import Delete, Ensure, Plan, refused
from sparkop.domain import labels
from sparkop.history_controller import build
from sparkop.history_controller.events import Reason
from sparkop.history_controller.observed import Observed

CONDITION_READY: Final = "Ready"
MAX_MESSAGE: Final = 4096


@dataclass
class _Pass:
    o: Observed
    now: datetime
    status: SparkHistoryServerStatus
    planned: Plan[SparkHistoryServerStatus] = field(default_factory=Plan)  # its status: set at the end
    refusal: str | None = None

    def ensure(self, manifest: JSON) -> None:
        """``manifest`` written when missing or built from another spec (its hash differs), unless the
        API server refused it: then that is what the pass reports."""
        action = Ensure(manifest, Reason.ENSURED, concurrent=True)
        found = refused(self.o.refusals, action)
        if found is not None:
            self.refusal = self.refusal or found.describe(f"{action.kind} {action.name}")
            return
        current = self.o.child(action.kind, action.name)
        wanted = manifest["metadata"]["annotations"][labels.SPEC_HASH]
        if current is None or current.spec_hash != wanted:
            self.planned = self.planned.with_before(action)

    def event(self, type_: str, reason: str, message: str) -> None:
        self.planned = self.planned.with_event("Normal" if type_ == "Normal" else "Warning", reason, message)


def decide(o: Observed, now: datetime) -> Plan[SparkHistoryServerStatus]:
    s = o.server
    if o.namespace_terminating or s.deleting:
        return Plan()  # the garbage collector removes what it owns
    p = _Pass(o, now, o.status.model_copy(deep=True))
    p.status.observedGeneration = s.generation
    wanted = [build.deployment(s, o.body), build.service(s, o.body)]
    wanted += [m for m in (build.ingress(s, o.body), build.http_route(s, o.body)) if m is not None]
    for manifest in wanted:
        p.ensure(manifest)
    names = {(m["kind"], m["metadata"]["name"]) for m in wanted}
    for child in o.owned():
        if (child.kind, child.name) not in names and not child.deleting:
            p.planned = p.planned.with_before(
                Delete(child.api_version, child.kind, child.name, child.uid, Reason.REMOVED)
            )
    _state(p)
    return p.planned.with_status(p.status)


def _state(p: _Pass) -> None:
    s, status = p.o.server, p.status
    deployment = p.o.child("Deployment", build.name(s))
    ready = deployment.ready_replicas if deployment is not None else 0
    target = history.event_log(s.spec)
    status.url = history.base_url(s.namespace, s.name, s.spec)
    status.serviceName = build.name(s)
    status.eventLogDirectory = target.directory if target is not None else None
    status.readyReplicas = ready
    status.startTime = status.startTime or (p.now if deployment is not None or p.planned.actions else None)
    before = status.state
    if p.refusal is not None:
        status.state = HistoryState.FAILED
        message = p.refusal[:MAX_MESSAGE]
        if status.lastError is None or status.lastError.message != message:
            status.lastError = LastError(reason="ObjectRefused", message=message, time=p.now)
            p.event("Warning", Reason.OBJECT_REFUSED, message)
    elif ready > 0:
        status.state = HistoryState.READY
        status.lastError = None
    elif before in (HistoryState.READY, HistoryState.NOT_READY):
        status.state = HistoryState.NOT_READY
    else:
        status.state = HistoryState.PROVISIONING
        status.lastError = None
    if status.state is HistoryState.READY and before is not HistoryState.READY:
        p.event("Normal", Reason.SERVER_READY, f"history server is Ready at {status.url}")
    if before is HistoryState.READY and status.state is not HistoryState.READY:
        p.event("Warning", Reason.SERVER_NOT_READY, f"no history server pod is Ready ({status.state})")
    is_ready = status.state is HistoryState.READY
    message = f"serving at {status.url}" if is_ready else f"not Ready ({status.state})"
    status.conditions = with_condition(
        status.conditions,
        CONDITION_READY,
        "True" if is_ready else "False",
        str(status.state),
        message,
        p.now,
        s.generation,
    )
