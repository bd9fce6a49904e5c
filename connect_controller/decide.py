"""The connect controller's one decision: ``decide(observed, now) -> Plan``. Pure: no clock, no I/O.

A SparkConnect runs one server at a time behind its stable Service; each server run is a SparkDriver
(``connect_controller.build``), numbered from 1, never reused (``status.lastRun``). Each pass:

* **records** what its servers did: the first time one is Ready (``readyTime``), one that ended on its
  own (``Exited``: a server never completes, so any end is a failure, counted in ``restarts`` and
  ``failuresInARow``; a server that had served for :data:`STABLE_SECONDS` starts that count afresh, so
  a server that crashes soon after each start is not restarted forever), one whose driver pod the API
  server refused (``SubmissionFailed``: Failed at once, with the API server's reason, since another
  server of the same spec would be refused too), one deleted by someone else
  (``Deleted``: restarted at once, not a failure). A recorded server's SparkDriver is deleted after
  the status write that records it;
* **starts** the next server when none runs the current spec: at once for the first, after a spec
  change (a roll) or a deletion; after ``onFailureRetryInterval * 2^(failures in a row - 1)`` seconds
  (at most 300) for one that exited; never once ``onFailureRetries`` failures in a row are used up
  (the SparkConnect is Failed, and frozen until its spec changes);
* **points the Service** at the newest server of the current spec once it is Ready, else keeps it on
  the one it selects while that one still runs (a roll: the old server serves until the new one is
  Ready, then is deleted, so two servers never serve at once); a lost server pod is replaced inside
  its run by the driver controller, behind the same selector. A kubeflow SparkConnect's servers share
  kubeflow's pod name ``<name>-server``, so there the old server is stopped when the new one starts,
  and the new pod follows once the old one is gone (as kubeflow replaces its server);
* **suspends**: ``spec.suspend`` stops every server (the Service stays, selecting nothing alive).

State: Suspended, Failed, Ready (the serving server's pod is Ready: its gRPC port accepts
connections), NotReady (it was Ready once), else Provisioning. The ``ServerPodReady`` condition
says the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from sparkop.api.connect import (
    MAX_RETRY_INTERVAL,
    ConnectServerStatus,
    ConnectState,
    ServerOutcome,
    ServerRun,
    SparkConnectStatus,
)
from sparkop.api.models import DriverPhase, ExecutorCounts, LastError, with_condition
from sparkop.connect_controller import build
from sparkop.connect_controller.events import Reason
from sparkop.connect_controller.observed import ConnectView, Observed, ServerView
from sparkop.core.plan import Action, Create, Delete, Ensure, Observation, Plan, refused
from sparkop.domain import labels, naming

# The ServerPodReady condition: its type and reasons.
CONDITION_READY: Final = "ServerPodReady"
REASON_READY: Final = "ServerPodReady"
REASON_NOT_READY: Final = "ServerPodNotReady"

# Metrics (observations the Applier records after the status write that makes them).
METRIC_RESTARTS: Final = "sparkop_connect_server_restarts"
MAX_RUNS_KEPT: Final = 16
# A server that served this long before it ended starts the count of failures in a row afresh (the
# kubelet's crash-loop backoff forgets after 10 minutes of running, too).
STABLE_SECONDS: Final = 600.0
MAX_MESSAGE: Final = 4096


@dataclass
class _Pass:
    o: Observed
    now: datetime
    status: SparkConnectStatus
    planned: Plan[SparkConnectStatus] = field(default_factory=Plan)  # its status: set at the end
    refused: bool = False  # a server's driver pod the API server refused: starting another cannot help

    @property
    def c(self) -> ConnectView:
        return self.o.connect

    def event(self, kind: str, reason: str, message: str) -> None:
        self.planned = self.planned.with_event(
            "Normal" if kind == "Normal" else "Warning", reason, message[:MAX_MESSAGE]
        )

    def wake(self, seconds: float) -> None:
        self.planned = self.planned.requeue(seconds)

    def before(self, action: Action) -> None:
        self.planned = self.planned.with_before(action)

    def after(self, action: Action) -> None:
        self.planned = self.planned.with_after(action)

    def observe(self, observation: Observation) -> None:
        self.planned = self.planned.with_observations(observation)

    def record(self, run: ServerRun) -> None:
        runs = [r for r in self.status.runs or () if r.run != run.run] + [run]
        self.status.runs = sorted(runs, key=lambda r: r.run)[-MAX_RUNS_KEPT:]

    def run_record(self, server: ServerView) -> ServerRun:
        found = next((r for r in self.status.runs or () if r.run == server.run), None)
        return found or ServerRun(
            run=server.run, driver=server.name, outcome=ServerOutcome.RUNNING, startTime=server.created or self.now
        )


def backoff(interval: int, failures: int) -> float:
    """Seconds before the restart that follows ``failures`` failures in a row (>= 1)."""
    return float(min(MAX_RETRY_INTERVAL, interval * 2 ** max(0, failures - 1)))


def decide(o: Observed, now: datetime) -> Plan[SparkConnectStatus]:
    c = o.connect
    if o.namespace_terminating or c.deleting:
        return Plan()  # the garbage collector removes the servers and the Service
    if o.status.state is ConnectState.FAILED and o.status.observedGeneration == c.generation:
        return Plan()  # frozen until the spec changes
    p = _Pass(o, now, o.status.model_copy(deep=True))
    if p.status.state is ConnectState.FAILED:  # and the spec changed since: start afresh
        p.status.failuresInARow, p.status.lastError, p.status.nextRestartTime = 0, None, None
        p.status.state = ConnectState.PROVISIONING
    p.status.observedGeneration = c.generation
    servers = list(o.owned_servers)
    pending = _record_servers(p, servers)
    live = [s for s in servers if s.live] + pending
    current = [s for s in live if s.spec_hash == c.spec_hash]
    if c.suspended:
        for s in live:
            _stop(p, s, ServerOutcome.SUSPENDED, "Suspended", "spec.suspend is true")
        live, current = [], []
    elif not current and not p.refused and not _failed(p):
        if build.one_server_pod_name(c):
            # The new server's pod needs the name the old one holds: no roll, the old server stops first.
            for s in live:
                _stop(p, s, ServerOutcome.REPLACED, "Replaced", "the spec changed: its server is replaced")
            live = []
        started = _start(p, now)
        if started is not None:
            current = [started]
            live = [*live, started]
    target = _target(p, live, current)
    _service(p, target)
    _route(p)
    if target is not None and target.ready and not c.suspended:
        for s in live:
            if s is not target and s.run < target.run:
                _stop(p, s, ServerOutcome.REPLACED, "Replaced", f"server {target.name} serves the current spec")
    _state(p, target)
    return p.planned.with_status(p.status)


def _record_servers(p: _Pass, servers: list[ServerView]) -> list[ServerView]:
    """What each server did since the last write; the servers recorded and not seen yet (their
    create is issued again: 409 when it exists)."""
    known = {s.run for s in servers}
    for server in servers:
        p.status.lastRun = max(p.status.lastRun, server.run)  # created by a pass whose write was lost
        record = p.run_record(server)
        if record.uid is None:
            record = record.model_copy(update={"uid": server.uid})
        if server.ready and record.readyTime is None and record.outcome is ServerOutcome.RUNNING:
            record = record.model_copy(update={"readyTime": p.now})
        if server.finished and server.phase is DriverPhase.SUBMISSION_FAILED:
            if record.outcome is ServerOutcome.RUNNING:
                message = f"server {server.name}: {server.message or 'its driver pod was refused'}"
                record = record.model_copy(
                    update={
                        "outcome": ServerOutcome.EXITED,
                        "reason": "SubmissionFailed",
                        "message": message[:MAX_MESSAGE],
                        "finishTime": p.now,
                    }
                )
                p.event("Warning", Reason.SERVER_REFUSED, message)
            p.refused = True
            p.status.state = ConnectState.FAILED
            p.status.lastError = LastError(reason="SubmissionFailed", message=record.message, time=p.now)
            if not server.deleting:
                p.after(Delete(labels.API_VERSION, build.DRIVER_KIND, server.name, server.uid, "SubmissionFailed"))
        elif server.finished:
            if record.outcome is ServerOutcome.RUNNING:
                reason = server.reason or (f"ExitCode{server.exit_code}" if server.exit_code is not None else "Exited")
                message = f"server {server.name} ended ({server.phase}): {server.message or reason}"
                record = record.model_copy(
                    update={
                        "outcome": ServerOutcome.EXITED,
                        "reason": reason,
                        "message": message[:MAX_MESSAGE],
                        "finishTime": p.now,
                    }
                )
                p.status.restarts += 1
                served = record.readyTime is not None and (p.now - record.readyTime).total_seconds() >= STABLE_SECONDS
                p.status.failuresInARow = 1 if served else p.status.failuresInARow + 1
                p.status.lastError = LastError(reason=reason, message=message[:MAX_MESSAGE], time=p.now)
                p.event("Warning", Reason.SERVER_EXITED, message)
                p.observe(Observation(METRIC_RESTARTS, labels=(("reason", "Exited"),)))
            if not server.deleting:
                p.after(Delete(labels.API_VERSION, build.DRIVER_KIND, server.name, server.uid, Reason.SERVER_EXITED))
        p.record(record)
    pending: list[ServerView] = []
    for record in list(p.status.runs or ()):
        if record.outcome is not ServerOutcome.RUNNING or record.run in known:
            continue
        if record.uid is None:
            if _create(p, record.run):
                pending.append(_planned(p, record.run))
            continue
        message = f"server {record.driver} was deleted"
        p.record(
            record.model_copy(
                update={"outcome": ServerOutcome.DELETED, "reason": "Deleted", "message": message, "finishTime": p.now}
            )
        )
        p.status.restarts += 1
        p.event("Warning", Reason.SERVER_DELETED, message + "; starting another")
        p.observe(Observation(METRIC_RESTARTS, labels=(("reason", "Deleted"),)))
    return pending


def _planned(p: _Pass, run: int) -> ServerView:
    """A server created (or about to be) and not observed yet: of the current spec."""
    name = naming.connect_server_name(p.c.name, run, p.c.group)
    return ServerView(name=name, uid="", run=run, owner_uid=p.c.uid, spec_hash=p.c.spec_hash, created=p.now)


def _create(p: _Pass, run: int) -> bool:
    """Create run ``run``'s SparkDriver after the status write that records it; False (and Failed)
    when the API server refused it."""
    manifest = build.build_server(p.c, p.o.body, run)
    create = Create(manifest, Reason.SERVER_STARTED)
    refusal = refused(p.o.refusals, create)
    if refusal is not None:
        message = refusal.describe(f"server {manifest['metadata']['name']}")
        p.status.state = ConnectState.FAILED
        p.status.lastError = LastError(reason="ServerRefused", message=message[:MAX_MESSAGE], time=p.now)
        p.event("Warning", Reason.SERVER_REFUSED, message)
        for record in p.status.runs or ():
            if record.run == run and record.outcome is ServerOutcome.RUNNING:
                p.record(
                    record.model_copy(
                        update={
                            "outcome": ServerOutcome.EXITED,
                            "reason": "ServerRefused",
                            "message": message[:MAX_MESSAGE],
                            "finishTime": p.now,
                        }
                    )
                )
        return False
    p.after(create)
    return True


def _failed(p: _Pass) -> bool:
    """Whether restarts are used up (the SparkConnect is Failed) or one is still waiting its turn."""
    retries, interval = p.c.failure_retries, p.c.failure_retry_interval
    failures = p.status.failuresInARow
    if failures == 0:
        p.status.nextRestartTime = None
        return False
    if failures > retries:
        p.status.state = ConnectState.FAILED
        message = (
            f"{failures} servers in a row ended without becoming Ready (onFailureRetries {retries}); "
            f"last: {p.status.lastError.message if p.status.lastError else 'unknown'}"
        )
        p.status.lastError = LastError(reason="RetriesExhausted", message=message[:MAX_MESSAGE], time=p.now)
        p.status.nextRestartTime = None
        p.event("Warning", Reason.CONNECT_FAILED, message)
        return True
    last_end = max((r.finishTime for r in p.status.runs or () if r.finishTime is not None), default=p.now)
    due = last_end + timedelta(seconds=backoff(interval, failures))
    if due > p.now:
        p.status.nextRestartTime = due
        p.wake((due - p.now).total_seconds())
        return True
    p.status.nextRestartTime = None
    return False


def _start(p: _Pass, now: datetime) -> ServerView | None:
    run = p.status.lastRun + 1
    name = naming.connect_server_name(p.c.name, run, p.c.group)
    p.status.lastRun = run
    p.status.startTime = p.status.startTime or now
    p.record(ServerRun(run=run, driver=name, outcome=ServerOutcome.RUNNING, startTime=now))
    if not _create(p, run):
        return None
    why = "first server" if run == 1 else "restart" if p.status.failuresInARow else "spec changed or server gone"
    p.event("Normal", Reason.SERVER_STARTED, f"started server {name} (run {run}: {why})")
    return _planned(p, run)


def _target(p: _Pass, live: list[ServerView], current: list[ServerView]) -> ServerView | None:
    """The server the Service selects: the newest of the current spec once it is Ready, else the one
    it selects now while that still runs, else the newest running."""
    newest = max(current, key=lambda s: s.run, default=None)
    if newest is not None and newest.ready:
        return newest
    service = p.o.service(build.service_name(p.c))
    selected = service.selector.get(labels.DRIVER) if service is not None else None
    still = next((s for s in live if naming.label_value(s.name) == selected), None)
    if still is not None:
        return still
    return newest or max(live, key=lambda s: s.run, default=None)


def _service(p: _Pass, target: ServerView | None) -> None:
    """The Service exists and selects ``target`` (when there is none, what it selected)."""
    name = build.service_name(p.c)
    service = p.o.service(name)
    if target is not None:
        driver = target.name
    elif service is not None and service.selector.get(labels.DRIVER):
        driver = service.selector[labels.DRIVER]
    else:
        driver = naming.connect_server_name(p.c.name, max(1, p.status.lastRun), p.c.group)
    manifest = build.build_service(p.c, p.o.body, driver)
    ensure = Ensure(manifest, "Service")
    refusal = refused(p.o.refusals, ensure)
    if refusal is not None:
        message = refusal.describe(f"Service {name}")
        if p.status.lastError is None or p.status.lastError.message != message[:MAX_MESSAGE]:
            p.event("Warning", Reason.SERVER_REFUSED, message)
        p.status.lastError = LastError(reason="ServiceRefused", message=message[:MAX_MESSAGE], time=p.now)
        return
    p.before(ensure)
    if service is not None and target is not None and service.selector.get(labels.DRIVER) != naming.label_value(driver):
        p.event("Normal", Reason.SERVICE_SWITCHED, f"Service {name} now selects server {driver}")


def _route(p: _Pass) -> None:
    """spec.grpcRoute: a GRPCRoute to the stable Service through the Gateway it names; one no longer
    asked for is deleted. A refusal (a cluster without Gateway API) is reported, the server serves on."""
    manifest = build.build_route(p.c, p.o.body)
    name = naming.connect_route_name(p.c.name)
    if manifest is None:
        found = p.o.service(name, kind="GRPCRoute")
        if found is not None:
            p.before(Delete(found.api_version, found.kind, found.name, found.uid, Reason.ROUTE_REMOVED))
        return
    ensure = Ensure(manifest, "GRPCRoute")
    refusal = refused(p.o.refusals, ensure)
    if refusal is None:
        p.before(ensure)
        return
    message = refusal.describe(f"GRPCRoute {name}")
    if p.status.lastError is None or p.status.lastError.message != message[:MAX_MESSAGE]:
        p.event("Warning", Reason.SERVER_REFUSED, message)
    p.status.lastError = LastError(reason="RouteRefused", message=message[:MAX_MESSAGE], time=p.now)


def _stop(p: _Pass, server: ServerView, outcome: ServerOutcome, reason: str, message: str) -> None:
    record = p.run_record(server)
    if record.outcome is ServerOutcome.RUNNING:
        p.record(
            record.model_copy(update={"outcome": outcome, "reason": reason, "message": message, "finishTime": p.now})
        )
        p.event(
            "Normal",
            Reason.SERVER_REPLACED if outcome is ServerOutcome.REPLACED else Reason.SUSPENDED,
            f"stopped server {server.name}: {message}",
        )
    if server.uid:
        p.after(Delete(labels.API_VERSION, build.DRIVER_KIND, server.name, server.uid, reason))


def _state(p: _Pass, target: ServerView | None) -> None:
    c, status = p.c, p.status
    status.server = ConnectServerStatus(
        podName=target.pod_name if target else None,
        podIp=target.pod_ip if target else None,
        serviceName=build.service_name(c),
        driver=target.name if target else None,
        incarnation=target.incarnation or None if target else None,
    )
    status.endpoint = build.endpoint(c)
    status.executors = ExecutorCounts(**(target.executors if target else {})) if target else ExecutorCounts()
    ready = target is not None and target.ready and not c.suspended
    before = status.state
    if c.suspended:
        status.state = ConnectState.SUSPENDED
        status.nextRestartTime = None
    elif status.state is ConnectState.FAILED and (target is None or not ready):
        pass
    elif ready:
        status.state = ConnectState.READY
    elif any(r.readyTime is not None for r in status.runs or ()):
        status.state = ConnectState.NOT_READY
    else:
        status.state = ConnectState.PROVISIONING
    if status.state is ConnectState.READY and before is not ConnectState.READY and target is not None:
        p.event("Normal", Reason.SERVER_READY, f"server {target.pod_name or target.name} is Ready at {status.endpoint}")
    if before is ConnectState.READY and status.state is not ConnectState.READY:
        p.event("Warning", Reason.SERVER_NOT_READY, f"no server is Ready ({status.state})")
    reason = REASON_READY if ready else REASON_NOT_READY
    message = (
        f"server pod {target.pod_name} is Ready" if ready and target else f"no server pod is Ready ({status.state})"
    )
    status.conditions = with_condition(
        status.conditions, CONDITION_READY, "True" if ready else "False", reason, message, p.now, c.generation
    )
