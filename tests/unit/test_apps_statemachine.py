"""Property test of the SparkApplication state machine: any sequence of observations (driver phases,
lost drivers, driver-pod replacements, stuck driver pods, spec edits, suspend toggles, TTL edits,
time passing, an API server that refuses SparkDriver creates or the Spark UI objects), any crash
point inside a pass (the crash also forgets the refusals the process had learned), stale and lagging
views — and the invariants hold:

* counters never exceed the restart policy: with OnFailure, executionAttempts <= onFailureRetries+1
  and submissionAttempts <= onSubmissionFailureRetries+1; with Never, both <= 1;
* each counter moves exactly with the records it counts (SimCluster checks every write): a run is
  counted once, in the write that first records its driver pod accepted, and is given back only
  when we stop it ourselves; one submission per SparkDriver planned; an outcome, once recorded,
  never changes;
* a RUNNING or SUBMITTED app's current run is counted (the ATTEMPTS column is never 0 while a driver
  runs; SUBMITTED says the run's driver pod was accepted, as kubeflow's does), and a run planned whose
  pod is not accepted yet keeps the state it was planned from (never SUBMITTED);
* COMPLETED and FAILED never change; FAILED has lastError and a True Failed condition;
* conditions are bounded, unique, and a lastTransitionTime moves only with its condition's status;
* a settled app is quiet: another pass writes nothing;
* the plan is a function of (spec, status, observed, now) alone (SimCluster calls reconcile twice);
* no two SparkDrivers are ever created with the same run number, and at most one unfinished
  SparkDriver exists at a time (SimCluster refuses such a create);
* a create happens only after the status write that recorded its run;
* the status always validates against api.models.SparkApplicationStatus.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from sparkop.api.models import (
    ApplicationState,
    AttemptOutcome,
    Condition,
    DriverPhase,
    RestartPolicyType,
    SparkApplicationStatus,
)
from sparkop.apps_controller import status as apps_status
from sparkop.apps_controller.observed import UIConfig
from tests.support.simulation import EPOCH, SimCluster, Snapshot
from tests.support.specs import PYTHON_PI_SPEC

SPEC = PYTHON_PI_SPEC

policies = st.builds(
    lambda kind, f, s, fi, si: {
        "type": kind,
        **({"onFailureRetries": f} if f is not None and kind != "Never" else {}),
        **({"onSubmissionFailureRetries": s} if s is not None and kind != "Never" else {}),
        **({"onFailureRetryInterval": fi, "onSubmissionFailureRetryInterval": si} if kind != "Never" else {}),
    },
    st.sampled_from(["Never", "OnFailure", "Always"]),
    st.none() | st.integers(0, 2),
    st.none() | st.integers(0, 2),
    st.integers(1, 4),
    st.integers(1, 4),
)
outcomes = st.sampled_from(
    [
        (DriverPhase.PENDING, None),
        (DriverPhase.RUNNING, None),
        (DriverPhase.SUCCEEDED, "Completed"),
        (DriverPhase.FAILED, "Error"),
        (DriverPhase.FAILED, "DriverPodLost"),
        (DriverPhase.SUBMISSION_FAILED, "Forbidden"),
    ]
)


class AppLifecycle(RuleBasedStateMachine):
    cluster: SimCluster
    policy: dict[str, Any]

    @initialize(policy=policies, ttl=st.none() | st.integers(0, 30), ingress=st.booleans())
    def start(self, policy: dict[str, Any], ttl: int | None, ingress: bool) -> None:
        spec = {**SPEC, "restartPolicy": policy}
        if ttl is not None:
            spec["timeToLiveSeconds"] = ttl
        self.policy = policy
        ui = UIConfig(ingress_url_format="example.com/{{$appNamespace}}/{{$appName}}" if ingress else None)
        self.cluster = SimCluster(spec=spec, ui=ui)
        self.terminal: str | None = None
        self.counted: dict[int, Any] = {}

    # -- the operator ----------------------------------------------------------------------------

    @rule()
    def reconcile(self) -> None:
        self.cluster.reconcile()

    @rule(steps=st.integers(0, 4))
    def reconcile_and_crash(self, steps: int) -> None:
        """The operator dies after ``steps`` of [before-actions, status write, after-actions]."""
        self.cluster.reconcile(crash_after=steps)

    @rule(back=st.integers(1, 6))
    def reconcile_from_a_stale_view(self, back: int) -> None:
        """An old snapshot of app and drivers (a lagging informer, a replayed event)."""
        history = self.cluster.history
        if len(history) >= back:
            self.cluster.reconcile(snap=history[-back])

    @rule()
    def reconcile_with_lagging_drivers(self) -> None:
        """Fresh app, SparkDrivers as the previous pass saw them (the driver index lags)."""
        history = self.cluster.history
        if history:
            fresh = self.cluster.snapshot()
            self.cluster.reconcile(snap=Snapshot(fresh.app, fresh.status, fresh.rv, history[-1].drivers))

    @rule()
    def settle(self) -> None:
        self.cluster.run_until_quiet()
        writes, status = self.cluster.writes, self.cluster.status
        self.cluster.reconcile()
        assert (self.cluster.writes, self.cluster.status) == (writes, status), "a settled app wrote status"

    # -- the world ---------------------------------------------------------------------------------

    @precondition(lambda self: bool(self.cluster.unfinished()))
    @rule(outcome=outcomes)
    def driver_progresses(self, outcome: tuple[DriverPhase, str | None]) -> None:
        phase, reason = outcome
        (drv,) = self.cluster.unfinished()
        self.cluster.set_phase(drv.name, phase, reason, 1 if phase is DriverPhase.FAILED else None)

    @precondition(lambda self: bool(self.cluster.unfinished()))
    @rule()
    def driver_pod_replaced(self) -> None:
        (drv,) = self.cluster.unfinished()
        drv.incarnation += 1
        drv.phase = drv.phase or DriverPhase.PENDING  # a pod existed, was lost; its successor pends

    @precondition(lambda self: bool(self.cluster.unfinished()))
    @rule(
        stuck=st.sampled_from([None, ("True", "ImagePullBackOff"), ("True", "Unschedulable"), ("False", "Progressing")])
    )
    def driver_pod_stuck(self, stuck: tuple[str, str] | None) -> None:
        (drv,) = self.cluster.unfinished()
        since = self.cluster.now if drv.stuck is None or drv.stuck.status != (stuck or ("",))[0] else None
        drv.stuck = (
            None
            if stuck is None
            else Condition(
                type="Stuck", status=stuck[0], reason=stuck[1], message="why", lastTransitionTime=since or EPOCH
            )
        )

    @rule(on=st.booleans())
    def api_server_refuses_spark_drivers(self, on: bool) -> None:
        """A quota or an admission policy on SparkDrivers comes and goes."""
        self.cluster.refuse_drivers = on

    @rule(on=st.booleans())
    def api_server_refuses_ui_objects(self, on: bool) -> None:
        self.cluster.refuse_ui = on

    @rule()
    def user_deletes_a_seen_driver(self) -> None:
        seen = self.cluster.app_status.currentDriver
        if seen in self.cluster.drivers:
            del self.cluster.drivers[seen]

    @rule(value=st.integers(1, 3))
    def edit_spec(self, value: int) -> None:
        self.cluster.edit_spec(arguments=[str(value)])

    @rule()
    def toggle_suspend(self) -> None:
        self.cluster.edit_spec(suspend=not self.cluster.spec.get("suspend", False))

    @rule(ttl=st.none() | st.integers(0, 30))
    def edit_ttl(self, ttl: int | None) -> None:
        self.cluster.edit_spec(timeToLiveSeconds=ttl)

    @rule(seconds=st.sampled_from([0.1, 0.5, 1.0, 2.0, 5.0, 31.0]))
    def time_passes(self, seconds: float) -> None:
        self.cluster.advance(seconds)

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def counters_within_policy(self) -> None:
        if not hasattr(self, "cluster"):
            return
        status = self.cluster.app_status
        kind = RestartPolicyType(self.policy["type"])
        retries_f = self.policy.get("onFailureRetries") or 0
        retries_s = self.policy.get("onSubmissionFailureRetries") or 0
        if kind is RestartPolicyType.NEVER:
            assert status.executionAttempts <= 1 and status.submissionAttempts <= 1
        elif kind is RestartPolicyType.ON_FAILURE:
            assert status.executionAttempts <= retries_f + 1
            assert status.submissionAttempts <= retries_s + 1
        assert status.executionAttempts >= 0 and status.submissionAttempts >= 0

    @invariant()
    def a_running_app_shows_its_attempt(self) -> None:
        if not hasattr(self, "cluster") or self.cluster.deleted:
            return
        status = self.cluster.app_status
        current = apps_status.current(status)
        if apps_status.state(status) in (ApplicationState.RUNNING, ApplicationState.SUBMITTED):
            assert current is not None and apps_status.counted(current), status
            assert status.executionAttempts >= 1
        if current is not None and not apps_status.finished(current) and not apps_status.counted(current):
            assert apps_status.run_planned(status) or apps_status.state(status) in (
                ApplicationState.SUSPENDING,
                ApplicationState.INVALIDATING,
            ), status

    @invariant()
    def conditions_are_bounded_and_failures_explained(self) -> None:
        if not hasattr(self, "cluster") or self.cluster.deleted:
            return
        status = self.cluster.app_status
        types = [c.type for c in status.conditions]
        assert len(types) == len(set(types)) <= 6
        if apps_status.state(status) is ApplicationState.FAILED:
            failed = apps_status.condition(status, "Failed")
            assert status.lastError is not None and failed is not None and failed.status == "True"
        running = apps_status.condition(status, "Running")
        if running is not None:
            assert (running.status == "True") == (apps_status.state(status) is ApplicationState.RUNNING)

    @invariant()
    def terminal_stays_terminal_and_outcomes_never_change(self) -> None:
        if not hasattr(self, "cluster") or self.cluster.deleted:
            return
        status = self.cluster.app_status
        if self.terminal is not None:
            assert apps_status.state(status).value == self.terminal
        if apps_status.state(status) in (ApplicationState.COMPLETED, ApplicationState.FAILED):
            self.terminal = apps_status.state(status).value
        for record in status.attempts:
            if apps_status.finished(record):
                assert self.counted.setdefault(record.run, record) == record
        for run, record in self.counted.items():
            assert record.outcome is not AttemptOutcome.RUNNING
            assert all(r == record for r in status.attempts if r.run == run)

    @invariant()
    def one_unfinished_driver_at_most(self) -> None:
        if hasattr(self, "cluster"):
            assert len(self.cluster.unfinished()) <= 1
            assert len(self.cluster.created) == len(set(self.cluster.created.values()))

    @invariant()
    def status_is_valid_for_the_crd(self) -> None:
        if hasattr(self, "cluster") and self.cluster.status:
            SparkApplicationStatus.model_validate(self.cluster.status)


AppLifecycle.TestCase.settings = settings(
    max_examples=int(os.environ.get("SPARKOP_HYPOTHESIS_EXAMPLES", "150")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAppLifecycle = AppLifecycle.TestCase
