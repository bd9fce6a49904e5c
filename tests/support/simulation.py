"""An in-memory API server for one SparkApplication and its SparkDrivers, driven by the real
``core.applier.Applier`` (status write with a resourceVersion precondition; 409 on create is
success for our own object; 404 on delete is success; deletes carry a uid precondition). Used by the
unit and property tests to run the pure state machine against crashes, stale observations and a
simulated driver controller.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

from sparkop.api.models import ApplicationState, AttemptOutcome, Condition, DriverPhase, SparkApplicationStatus
from sparkop.apps_controller.decide import decide
from sparkop.apps_controller.observed import (
    AppView,
    DriverView,
    HistoryServerView,
    Observed,
    OwnedObject,
    UIConfig,
    choose_history,
)
from sparkop.apps_controller.status import counted, finished, read_status, state
from sparkop.core import kube
from sparkop.core.applier import Applier, CreateRefused
from sparkop.core.jsontypes import JSON
from sparkop.core.plan import Event, Plan, Refusal
from sparkop.domain import labels
from sparkop.domain.labels import API_VERSION

T = TypeVar("T")

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


QUOTA_MESSAGE = 'sparkdrivers.sparkop.io "{name}" is forbidden: exceeded quota: sparkop, requested: count/sparkdrivers'


class InvariantError(AssertionError):
    pass


class _Crash(BaseException):
    """The operator process died here (not an API error: nothing in the Applier catches it)."""


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies ``application/merge-patch+json``."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge_patch(merged.get(key), value)
    return merged


_LOOP = asyncio.new_event_loop()


def _run(call: Coroutine[Any, Any, T]) -> T:
    """Run a pass on an event loop of its own (the Applier sends independent writes together). The
    simulated API server answers at once, so a pass never waits on anything but its own tasks; one
    that left a task behind would be a pass that did not finish its writes."""
    result = _LOOP.run_until_complete(call)
    if leftover := [t for t in asyncio.all_tasks(_LOOP) if not t.done()]:
        raise RuntimeError(f"a pass left {len(leftover)} task(s) running")
    return result


@dataclass
class SimDriver:
    name: str
    uid: str
    run: int
    owner_uid: str
    app_generation: int
    spec_hash: str | None
    spec: JSON
    phase: DriverPhase | None = None
    incarnation: int = 1
    reason: str | None = None
    exit_code: int | None = None
    stuck: Condition | None = None
    queued: Condition | None = None
    created: datetime | None = None  # its creationTimestamp
    history_url: str | None = None

    @property
    def pod_name(self) -> str | None:
        """The driver controller names a pod in status once its create succeeded."""
        refused = self.phase is DriverPhase.SUBMISSION_FAILED and self.incarnation == 1
        # kubeflow's naming: the app's one driver pod name, whatever the run and incarnation
        return None if self.phase is None or refused else f"{self.name.rpartition('-')[0]}-driver"

    def view(self) -> DriverView:
        return DriverView(
            name=self.name,
            uid=self.uid,
            run=self.run,
            owner_uid=self.owner_uid,
            app_generation=self.app_generation,
            spec_hash=self.spec_hash,
            phase=self.phase,
            pod_name=self.pod_name,
            spark_application_id=f"spark-{self.uid}-{self.incarnation}",
            incarnation=self.incarnation,
            executors={"running": 2} if self.phase is DriverPhase.RUNNING else {},
            exit_code=self.exit_code,
            reason=self.reason,
            stuck=self.stuck,
            queued=self.queued,
            created=self.created,
            history_url=self.history_url,
        )


@dataclass
class Snapshot:
    """What an index held at one moment."""

    app: AppView
    status: JSON
    rv: int
    drivers: tuple[DriverView, ...]
    ui_objects: tuple[OwnedObject, ...] = ()


@dataclass
class SimCluster:
    spec: JSON
    name: str = "app"
    namespace: str = "ns"
    uid: str = "app-uid"
    generation: int = 1
    status: JSON = field(default_factory=dict)
    rv: int = 1
    deleted: bool = False
    now: datetime = EPOCH
    ui: UIConfig = field(default_factory=UIConfig)
    history_server: HistoryServerView | None = None  # the history server the app's runs log to
    labels: dict[str, str] = field(default_factory=dict)  # the SparkApplication's metadata.labels
    api_version: str = API_VERSION  # the SparkApplication's group (kubeflow's: --kubeflow-api)
    drivers: dict[str, SimDriver] = field(default_factory=dict)
    created: dict[int, str] = field(default_factory=dict)  # run -> uid of the one SparkDriver ever made
    ui_objects: dict[tuple[str, str], JSON] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    history: list[Snapshot] = field(default_factory=list)
    creates: list[tuple[int, datetime]] = field(default_factory=list)
    writes: int = 0
    # The API server refuses SparkDriver creates (a quota, an admission policy) / the UI objects.
    refuse_drivers: bool = False
    refuse_ui: bool = False
    learned: int = 0  # passes that ended on a refusal (the shell reconciles again at once)
    _uids: int = 0
    _steps: int = 10**9  # API calls left before the operator process dies
    _applier: Applier[tuple[str, str]] | None = None
    held: bool = False  # the last pass's status change was held back by the Applier (progress)
    held_for: float | None = None  # for how long

    @property
    def applier(self) -> Applier[tuple[str, str]]:
        """The operator process's Applier (a new one after a crash: what it learned is gone)."""
        if self._applier is None:
            self._applier = Applier(self, kube.Rules(), lambda obj, what, reason: None, clock=self.clock)
        return self._applier

    def clock(self) -> float:
        """The Applier's clock is the simulation's: a status change it holds back (progress) is written
        once ``advance`` (or ``run_until_quiet``) moves past its window."""
        return self.now.timestamp()

    @property
    def refusals(self) -> dict[str, Refusal]:
        """What the (one) operator process learned."""
        return dict(self.applier.expectations.learnt((self.namespace, self.name), self.uid).refusals)

    # -- the user ----------------------------------------------------------------------------------

    def edit_spec(self, **changes: Any) -> None:
        for key, value in changes.items():
            if value is None:
                self.spec.pop(key, None)
            else:
                self.spec[key] = value
        self.generation += 1
        self.rv += 1

    # -- observation -------------------------------------------------------------------------------

    def app_view(self) -> AppView:
        return AppView(
            namespace=self.namespace,
            name=self.name,
            uid=self.uid,
            generation=self.generation,
            spec=copy.deepcopy(self.spec),
            labels=dict(self.labels),
            api_version=self.api_version,
        )

    def snapshot(self) -> Snapshot:
        return Snapshot(
            self.app_view(),
            copy.deepcopy(self.status),
            self.rv,
            tuple(d.view() for d in sorted(self.drivers.values(), key=lambda d: d.run)),
            tuple(self.ui_view(manifest) for manifest in self.ui_objects.values()),
        )

    @staticmethod
    def ui_view(manifest: JSON) -> OwnedObject:
        """A UI object as the watch index holds it (its uid fixed by kind and name)."""
        meta = manifest["metadata"]
        body = {**manifest, "metadata": {**meta, "uid": f"uid-{manifest['kind']}-{meta['name']}"}}
        return OwnedObject.from_body(body)

    def history_servers(self, key: tuple[str, str]) -> tuple[HistoryServerView, ...]:
        """The history server filed under ``key`` (its own, and its namespace's default one's)."""
        server = self.history_server
        if server is None:
            return ()
        filed = {(server.namespace, server.name)} | ({(server.namespace, "")} if server.default else set())
        return (server,) if key in filed else ()

    def observed(self, snap: Snapshot | None = None) -> tuple[Observed, int]:
        s = snap or self.snapshot()
        status = read_status(s.status)
        history = choose_history(s.app, self.history_servers)
        observed = Observed(s.app, status, s.drivers, self.ui, self.refusals, ui_objects=s.ui_objects, history=history)
        return observed, s.rv

    def unfinished(self) -> list[SimDriver]:
        return [d for d in self.drivers.values() if d.phase is None or not d.phase.terminal]

    # -- one pass of the shell ---------------------------------------------------------------------

    def reconcile(
        self, snap: Snapshot | None = None, crash_after: int | None = None
    ) -> Plan[SparkApplicationStatus] | None:
        """Reconcile from ``snap`` (default: a fresh view) and apply the plan. ``crash_after`` = k stops
        after k API writes of [before-actions..., status write, after-actions...] (events are free)."""
        if self.deleted:
            return None
        fresh = self.snapshot()
        self.history.append(fresh)
        obs, rv = self.observed(snap or fresh)
        for drv in obs.drivers:  # what the shell's caches show, it tells the Applier (core.controller)
            self.applier.expectations.creation_observed((self.namespace, self.name), "SparkDriver", drv.name)
        for obj in obs.ui_objects:
            self.applier.expectations.creation_observed((self.namespace, self.name), obj.kind, obj.name)
        plan = decide(obs, self.now)
        if decide(obs, self.now) != plan:
            raise InvariantError("decide is not a function of its inputs")
        writes = self.writes
        if self.apply(plan, obs.status, rv, crash_after) and plan.settled and self.writes > writes:
            self._check_settled(plan, snap or fresh)
        return plan

    def _check_settled(self, plan: Plan[SparkApplicationStatus], seen: Snapshot) -> None:
        """A plan marked settled (the shell ends its pass at the write): deciding again on what it
        wrote, with everything else as the pass saw it, changes nothing."""
        again_seen = Snapshot(seen.app, copy.deepcopy(self.status), self.rv, seen.drivers, seen.ui_objects)
        obs, _ = self.observed(again_seen)
        again = decide(obs, self.now)
        if again.status is not None and again.status.to_json() != self.status:
            raise InvariantError(f"a settled write left a status change: {again.status.to_json()} != {self.status}")
        if again.events:
            raise InvariantError(f"a settled write left events: {again.events}")
        if any(action not in plan.actions for action in again.actions):
            raise InvariantError(f"a settled write left actions: {again.actions} beyond {plan.actions}")
        if again.requeue_after is not None and (plan.requeue_after is None or plan.requeue_after > again.requeue_after):
            raise InvariantError(f"a settled write left an earlier requeue: {again.requeue_after}")

    def apply(
        self, plan: Plan[SparkApplicationStatus], seen: SparkApplicationStatus, rv: int, crash_after: int | None = None
    ) -> bool:
        """Apply ``plan`` as the shell does, with the real Applier, as if decided on ``seen`` at ``rv``."""
        self._steps = crash_after if crash_after is not None else 10**9
        body: JSON = {
            "apiVersion": labels.API_VERSION,
            "kind": "SparkApplication",
            "metadata": {"namespace": self.namespace, "name": self.name, "uid": self.uid, "resourceVersion": str(rv)},
            "status": seen.to_json(),
        }
        self.held = False
        try:
            applied = _run(
                self.applier.apply(
                    (self.namespace, self.name), body, plan, SparkApplicationStatus.to_json, namespace=self.namespace
                )
            )
        except _Crash:
            self._applier = None  # the process died: what it learned is gone
            return False
        except CreateRefused:
            self.learned += 1
            return False  # like the shell: remembered, and the key is reconciled again at once
        except kube.Conflict:
            return False  # the decision was made from an old view
        new = plan.status.to_json() if plan.status is not None else None
        self.held = plan.status_wait > 0 and new is not None and new != body["status"] and self.status == body["status"]
        self.held_for = applied.requeue_after if self.held else None
        return not applied.gone

    # -- the simulated API server (a core.applier.Client) ----------------------------------------

    def _step(self) -> None:
        if self._steps <= 0:
            raise _Crash
        self._steps -= 1

    async def create(self, body: JSON) -> bool:
        self._step()
        if body["kind"] == "SparkDriver":
            return self._create_driver(body)
        meta = body["metadata"]
        if self.refuse_ui:
            raise kube.Refused(422, "Invalid", f'{body["kind"]} "{meta["name"]}" is invalid')
        key = (body["kind"], meta["name"])
        if key in self.ui_objects:
            return False  # ours (only this app makes them): the Applier patches it to the manifest
        self.ui_objects[key] = copy.deepcopy(body)
        return True

    async def patch(self, resource: Any, namespace: str | None, name: str, patch: Any, **_: Any) -> JSON | None:
        self._step()
        existing = self.ui_objects.get((resource.kind, name))
        if existing is None:
            return None
        merged = _merge_patch(existing, patch)
        merged["metadata"].pop("resourceVersion", None)  # the simulation keeps no resourceVersion of these
        self.ui_objects[(resource.kind, name)] = merged
        return merged

    async def delete(
        self,
        resource: Any,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        grace_seconds: int | None = None,
    ) -> bool:
        self._step()
        if resource.kind == "SparkDriver":
            drv = self.drivers.get(name)
            if drv is not None and (uid is None or uid == drv.uid):
                del self.drivers[name]
                return True
        elif resource.kind == "SparkApplication":
            if uid == self.uid:
                self.deleted = True
                self.drivers.clear()  # garbage collector
                self.ui_objects.clear()
                return True
        else:
            existing = self.ui_objects.get((resource.kind, name))
            if existing is not None and self.ui_view(existing).uid == uid:
                del self.ui_objects[(resource.kind, name)]
                return True
        return False

    async def patch_status(
        self,
        resource: Any,
        namespace: str,
        name: str,
        *,
        old: Mapping[str, Any],
        new: Mapping[str, Any],
        resource_version: str,
    ) -> JSON | None:
        self._step()
        if resource_version != str(self.rv):
            raise kube.Conflict("the decision was made from an old view")
        if new != self.status:
            self._check_status(read_status(self.status), read_status(new))
            self.status = copy.deepcopy(dict(new))
            self.rv += 1
            self.writes += 1
        return {"metadata": {"resourceVersion": str(self.rv)}, "status": copy.deepcopy(self.status)}

    async def event(self, regarding: JSON, *, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))

    def _create_driver(self, manifest: JSON) -> bool:
        meta = manifest["metadata"]
        name = meta["name"]
        run = int(meta["labels"][labels.RUN])
        if self.refuse_drivers:
            raise kube.Refused(403, "Forbidden", QUOTA_MESSAGE.format(name=name))
        if name in self.drivers:
            return False  # 409 AlreadyExists, ours
        if run in self.created:
            raise InvariantError(f"run {run} created twice ({name})")
        if self.unfinished():
            raise InvariantError(f"creating {name} while {[d.name for d in self.unfinished()]} is unfinished")
        committed = read_status(self.status)
        if committed.lastRun < run:
            raise InvariantError(f"creating run {run} before status recorded it")
        self._uids += 1
        uid = f"drv-uid-{self._uids}"
        ann = meta.get("annotations", {})
        self.drivers[name] = SimDriver(
            name=name,
            uid=uid,
            run=run,
            owner_uid=meta["ownerReferences"][0]["uid"],
            app_generation=int(ann.get(labels.APP_GENERATION, 0)),
            spec_hash=ann.get(labels.SPEC_HASH),
            spec=manifest["spec"],
            created=self.now,
            history_url=ann.get(labels.HISTORY_URL),
        )
        self.created[run] = uid
        self.creates.append((run, self.now))
        return True

    def _check_status(self, old: SparkApplicationStatus, new: SparkApplicationStatus) -> None:
        """Recorded outcomes never change; a terminal status never changes; each counter moves exactly
        with the records it counts; a condition's lastTransitionTime moves only with its status."""
        if state(old).value in ("COMPLETED", "FAILED") and new != old:
            raise InvariantError(f"the status of a finished app changed: {old} -> {new}")
        before = {r.run: r for r in old.attempts or ()}
        for rec in new.attempts or ():
            was = before.get(rec.run)
            if was is not None and finished(was) and was != rec:  # recorded exactly once
                raise InvariantError(f"finished attempt {rec.run} changed: {was} -> {rec}")
            given_back = rec.outcome is AttemptOutcome.INVALIDATED and rec.attempt is None
            if was is not None and counted(was) and rec.attempt != was.attempt and not given_back:
                raise InvariantError(f"attempt {rec.run} counted twice or renumbered: {was} -> {rec}")
        self._check_counters(old, new, before)
        old_conditions = {c.type: c for c in old.conditions or ()}
        for cond in new.conditions or ():
            prev = old_conditions.get(cond.type)
            moved = prev is not None and prev.lastTransitionTime != cond.lastTransitionTime
            if moved and prev is not None and prev.status == cond.status:
                raise InvariantError(f"condition {cond.type} moved its lastTransitionTime: {prev} -> {cond}")

    @staticmethod
    def _check_counters(old: SparkApplicationStatus, new: SparkApplicationStatus, before: dict[int, Any]) -> None:
        if state(new) is ApplicationState.PENDING_RERUN and new.executionAttempts == new.submissionAttempts == 0:
            return  # a spec change: both counters start again
        was_counted = {run: counted(r) for run, r in before.items()}
        gained = sum(1 for r in new.attempts or () if counted(r) and not was_counted.get(r.run, False))
        given_back = sum(1 for r in new.attempts or () if not counted(r) and was_counted.get(r.run, False))
        if new.executionAttempts - old.executionAttempts != gained - given_back:
            raise InvariantError(
                f"executionAttempts {old.executionAttempts} -> {new.executionAttempts} "
                f"but {gained} run(s) counted and {given_back} given back"
            )
        if new.lastRun > old.lastRun:  # one new run planned (or adopted): one more submission
            fresh = state(old) in (ApplicationState.PENDING_RERUN, ApplicationState.RESUMING)
            expected = 1 if fresh else old.submissionAttempts + 1
            if new.submissionAttempts != expected:
                raise InvariantError(f"submissionAttempts {old.submissionAttempts} -> {new.submissionAttempts}")
        elif new.submissionAttempts != old.submissionAttempts:
            raise InvariantError(f"submissionAttempts moved without a submission: {old} -> {new}")

    # -- the simulated driver controller --------------------------------------------------------

    def set_phase(self, name: str, phase: DriverPhase, reason: str | None = None, exit_code: int | None = None) -> None:
        drv = self.drivers[name]
        if drv.phase is not None and drv.phase not in (DriverPhase.PENDING, DriverPhase.RUNNING):
            return  # terminal phases never change
        drv.phase = phase
        drv.reason = reason
        drv.exit_code = exit_code

    def run_until_quiet(self, limit: int = 50) -> None:
        """Reconcile until a pass changes nothing (no write, no action). A status change the Applier
        held back (progress) is waited for: the time moves on by the window, as the shell's requeue."""
        for _ in range(limit):
            before = (copy.deepcopy(self.status), set(self.drivers), self.deleted, self.learned)
            plan = self.reconcile()
            if self.held:
                assert self.held_for is not None  # a held write names its deadline
                self.advance(self.held_for)
                continue
            if plan is None or (
                before == (self.status, set(self.drivers), self.deleted, self.learned)
                and not any(a.kind in ("SparkDriver", "SparkApplication") for a in plan.creates + plan.deletes)
            ):
                return
        raise InvariantError("no fixpoint")

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @property
    def state(self) -> str:
        return str(state(read_status(self.status)).value)

    @property
    def app_status(self) -> SparkApplicationStatus:
        return read_status(self.status)
