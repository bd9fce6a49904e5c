"""The executors' NetworkPolicy (Spark 4.2+) as a SparkDriver's child: built without rendering, created
with the incarnation's other objects before its pod, put back when deleted or edited (one patch, only
when it differs), deleted with a stale incarnation and once the driver has ended; and the
UnknownSparkVersion Warning, said once per driver pod created."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sparkop.core.plan import Delete, Ensure, Patch, Plan, Refusal, refusal_key
from sparkop.domain import labels
from sparkop.driver_controller.actions import policy_restore_patch
from sparkop.driver_controller.build import EXCLUDED_STEPS_KEY, FEATURE_STEP_PACKAGE
from sparkop.driver_controller.observed import Observed
from sparkop.driver_controller.render import names, network_policy, parse, render
from sparkop.driver_controller.summaries import (
    PolicySummary,
    policy_view,
    summarize_object,
    summarize_pod,
    summarize_policy,
    trim_policy,
)
from tests.support.driver_objects import NOW, UID, decided, deleting, driver, executor, kinds, running, terminated
from tests.support.fake_driver_runtime import KEY, FakeKube, controller
from tests.support.simulation import _merge_patch as merge_patched

Obj = dict[str, Any]
POLICY_API = "networking.k8s.io/v1"
POLICY_STEP = FEATURE_STEP_PACKAGE + "NetworkPolicyFeatureStep"
OTHER_STEP = FEATURE_STEP_PACKAGE + "LocalDirsFeatureStep"


def spark(version: str | None, status: Obj | None = None, **spark_conf: str) -> Obj:
    """test_driver_reconcile's SparkDriver, of Spark ``version``."""
    body = driver(status)
    if version is not None:
        body["spec"]["sparkVersion"] = version
    if spark_conf:
        body["spec"]["sparkConf"] = dict(spark_conf)
    return body


def stored(manifest: Obj, uid: str = "np-1", version: str = "20") -> Obj:
    """``manifest`` as the API server holds it once created: server fields, and policyTypes defaulted."""
    obj = copy.deepcopy(manifest)
    obj["metadata"] |= {"uid": uid, "resourceVersion": version, "creationTimestamp": "2026-01-01T11:00:00Z",
                        "managedFields": [{"manager": "sparkop"}]}  # fmt: skip
    obj["spec"].setdefault("policyTypes", ["Ingress"])
    return obj


def present(body: Obj, incarnation: int = 1) -> tuple[list[Obj], list[Any], list[Any], Obj]:
    """What the indexes hold of a running incarnation: its pod, ConfigMaps, Service and NetworkPolicy."""
    out = render(parse(body), incarnation)
    assert out.executor_template is not None and out.network_policy is not None
    pod = {**out.pod, "metadata": {**out.pod["metadata"], "uid": f"pod-{incarnation}", "resourceVersion": "5"}}
    cms = [summarize_object({**cm, "metadata": {**cm["metadata"], "uid": f"cm-{incarnation}-{n}"}})
           for n, cm in enumerate((out.config_map, out.executor_template))]  # fmt: skip
    svcs = [summarize_object({**out.service, "metadata": {**out.service["metadata"], "uid": f"svc-{incarnation}"}})]
    return [running(pod)], cms, svcs, stored(out.network_policy, uid=f"np-{incarnation}")


def plan_for(body: Obj, pods: list[Obj] = (), cms: list[Any] = (), svcs: list[Any] = (),  # type: ignore[assignment]
             policies: list[Obj] = (), refusals: dict[str, Refusal] | None = None) -> Plan[Any]:  # type: ignore[assignment]  # fmt: skip
    observed = Observed.of(
        body, [summarize_pod(p) for p in pods], list(cms), list(svcs),
        network_policies=[summarize_policy(p) for p in policies], refusals=refusals or {},
    )  # fmt: skip
    return decided(observed, NOW)


def running_status(incarnation: int = 1) -> Obj:
    return {"phase": "Running", "incarnation": incarnation,
            "driverPod": {"name": "pi-driver", "uid": f"pod-{incarnation}"}}  # fmt: skip


def policy_writes(plan: Plan[Any]) -> list[Any]:
    return [a for a in plan.actions if getattr(a, "kind", None) == "NetworkPolicy"]


# --- what is wanted, without rendering ------------------------------------------------------------


VERSIONS = [None, "3.5.7", "4.0.0", "4.1.0", "4.2.0", "4.2", "4.3.0", "4.3.1-preview1", "3.4.1", "5.0.0"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("incarnation", [1, 3])
@pytest.mark.parametrize(
    "excluded", [None, POLICY_STEP, f" {OTHER_STEP} , {POLICY_STEP}", OTHER_STEP, "NetworkPolicyFeatureStep"]
)
def test_the_policy_built_without_rendering_is_the_rendered_one(
    version: str | None, incarnation: int, excluded: str | None
) -> None:
    """render.network_policy and names() decide and build as podbuild does, for every line and exclusion."""
    body = spark(version)
    body["metadata"]["labels"] = {labels.APP: "pi-app"}
    if excluded is not None:
        body["spec"]["sparkConf"] = {EXCLUDED_STEPS_KEY: excluded}
    model = parse(body)
    rendered = render(model, incarnation).network_policy
    assert network_policy(model, incarnation) == rendered
    name = names(model, incarnation).network_policy
    assert name == (rendered["metadata"]["name"] if rendered is not None else None)


def test_a_43_driver_has_one_a_41_driver_or_an_excluded_step_none() -> None:
    assert names(parse(spark("4.3.0")), 2).network_policy == "pi-2-policy"
    assert names(parse(spark("4.1.0")), 2).network_policy is None
    assert names(parse(spark("4.3.0", **{EXCLUDED_STEPS_KEY: POLICY_STEP})), 2).network_policy is None


# --- created ---------------------------------------------------------------------------------------


def test_created_for_a_43_driver_with_the_configmaps_and_service_before_the_pod() -> None:
    plan = plan_for(spark("4.3.0"))
    assert kinds(plan) == [
        "ConfigMap/pi-1-podspec-conf-map", "ConfigMap/pi-1-conf-map", "Service/pi-1-driver-svc",
        "NetworkPolicy/pi-1-policy", "Pod/pi-driver",
    ]  # fmt: skip
    *before_pod, pod = plan.before_status
    assert all(a.concurrent for a in before_pod) and not pod.concurrent  # one round trip, then the pod
    (policy,) = policy_writes(plan)
    assert isinstance(policy, Ensure)
    assert policy.manifest == render(parse(spark("4.3.0")), 1).network_policy
    meta = policy.manifest["metadata"]
    assert meta["labels"][labels.DRIVER] == "pi" and meta["labels"][labels.INCARNATION] == "1"
    assert [(r["kind"], r["uid"], r["controller"]) for r in meta["ownerReferences"]] == [("SparkDriver", UID, True)]
    assert [e.reason for e in plan.events] == ["DriverPodCreated"]  # a known line: no warning


@pytest.mark.parametrize(
    ("version", "conf"),
    [("4.1.0", {}), (None, {}), ("4.3.0", {EXCLUDED_STEPS_KEY: POLICY_STEP})],
)
def test_none_for_a_41_driver_or_with_the_step_excluded(version: str | None, conf: dict[str, str]) -> None:
    plan = plan_for(spark(version, **conf))
    assert "Pod/pi-driver" in kinds(plan)
    assert policy_writes(plan) == []


# --- as wanted, restored, put back -----------------------------------------------------------------


def test_nothing_is_written_when_it_is_as_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    body = spark("4.3.0", running_status())
    pods, cms, svcs, policy = present(body)
    first = plan_for(body, pods, cms, svcs, [policy])
    assert first.status is not None  # the pod's uid and IP recorded
    settled = spark("4.3.0", first.status.to_json())

    def no_render(*_: Any) -> Any:
        raise AssertionError("rendered although nothing is missing")

    monkeypatch.setattr("sparkop.driver_controller.facts.render", no_render)
    again = plan_for(settled, pods, cms, svcs, [policy])
    assert again.status is None and again.actions == () and again.events == ()
    # Others' labels and annotations are theirs: still nothing to write.
    policy["metadata"]["labels"]["team"] = "data"
    policy["metadata"]["annotations"] = {"note": "reviewed"}
    assert plan_for(settled, pods, cms, svcs, [policy]).actions == ()


def test_restored_when_missing_without_rendering(monkeypatch: pytest.MonkeyPatch) -> None:
    body = spark("4.3.0", running_status())
    pods, cms, svcs, _deleted = present(body)
    monkeypatch.setattr("sparkop.driver_controller.facts.render", lambda *_: pytest.fail("rendered"))
    plan = plan_for(body, pods, cms, svcs, [])
    assert kinds(plan) == ["NetworkPolicy/pi-1-policy"]
    (ensure,) = plan.before_status
    assert isinstance(ensure, Ensure) and ensure.reason == "NetworkPolicyRestored"
    assert ensure.manifest == network_policy(parse(body), 1)
    assert not [e for e in plan.events if e.reason == "DriverPodCreated"]


def test_one_being_deleted_is_left_to_go() -> None:
    body = spark("4.3.0", running_status())
    pods, cms, svcs, policy = present(body)
    policy["metadata"]["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    policy["spec"]["ingress"] = []
    assert policy_writes(plan_for(body, pods, cms, svcs, [policy])) == []


def edited(policy: Obj, how: str) -> Obj:
    policy = copy.deepcopy(policy)
    spec, meta = policy["spec"], policy["metadata"]
    if how == "rule added":
        spec["ingress"].append({"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]})
    elif how == "peer opened":
        spec["ingress"][0]["from"][0]["podSelector"] = {}
    elif how == "selector widened":
        spec["podSelector"]["matchExpressions"] = [{"key": "x", "operator": "Exists"}]
    elif how == "egress denied":
        spec["policyTypes"] = ["Ingress", "Egress"]
    elif how == "egress rules added":
        spec["egress"] = [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]
        spec["policyTypes"] = ["Ingress", "Egress"]
    elif how == "ingress removed":
        del spec["ingress"]
    elif how == "label changed":
        meta["labels"][labels.SPARK_APP_SELECTOR] = "spark-someone-else"
    elif how == "label removed":
        del meta["labels"][labels.INCARNATION]
    return policy


EDITS = ["rule added", "peer opened", "selector widened", "egress denied", "egress rules added", "ingress removed",
         "label changed", "label removed"]  # fmt: skip


@pytest.mark.parametrize("how", EDITS)
def test_an_edit_is_put_back_with_one_patch(how: str) -> None:
    body = spark("4.3.0", running_status())
    pods, cms, svcs, policy = present(body)
    changed = edited(policy, how)
    changed["metadata"]["labels"]["team"] = "data"  # someone else's label: kept
    changed["metadata"]["resourceVersion"] = "21"
    plan = plan_for(body, pods, cms, svcs, [changed])
    (patch,) = policy_writes(plan)
    assert isinstance(patch, Patch) and not patch.json_patch
    assert (patch.api_version, patch.name, patch.resource_version) == (POLICY_API, "pi-1-policy", "21")
    assert patch.reason == "NetworkPolicyRestored"
    assert plan.creates == ()
    after = merge_patched(changed, patch.body)
    assert after["spec"] == policy["spec"]
    assert after["metadata"]["labels"] == {**policy["metadata"]["labels"], "team": "data"}
    # The patched object is as wanted: the next pass writes nothing.
    assert policy_writes(plan_for(body, pods, cms, svcs, [after])) == []


def test_a_policy_created_by_an_older_api_server_default_is_not_patched_forever() -> None:
    """The comparison counts what the API server defaults as wanted, and nothing else differs."""
    model = parse(spark("4.3.0"))
    wanted = network_policy(model, 1)
    assert wanted is not None
    summary = summarize_policy(stored(wanted))
    assert policy_restore_patch(summary, wanted) is None
    without_default = summarize_policy({**stored(wanted), "spec": wanted["spec"]})
    assert policy_restore_patch(without_default, wanted) == {"spec": {"policyTypes": ["Ingress"]}}


# --- deleted ---------------------------------------------------------------------------------------


def test_deleted_for_a_stale_incarnation() -> None:
    body = spark("4.3.0", running_status(2) | {"incarnations": [
        {"incarnation": 1, "podName": "pi-driver", "outcome": "Lost", "time": "2026-01-01T11:00:00Z"}]})  # fmt: skip
    _, old_cms, old_svcs, old_policy = present(body, 1)
    pods, cms, svcs, policy = present(body, 2)
    plan = plan_for(body, pods, [*old_cms, *cms], [*old_svcs, *svcs], [old_policy, policy])
    deletes = [d for d in plan.deletes if d.kind == "NetworkPolicy"]
    assert deletes == [Delete(POLICY_API, "NetworkPolicy", "pi-1-policy", "np-1")]
    assert deletes[0].reason == "StaleIncarnation"
    assert policy_writes(plan) == deletes  # the current one is as wanted


def test_deleted_with_the_executors_on_the_pass_the_driver_ends() -> None:
    body = spark("4.3.0", running_status())
    pods, cms, svcs, policy = present(body)
    ending = [terminated(pods[0], 0), executor(1, adopted=True)]
    plan = plan_for(body, ending, cms, svcs, [policy])
    assert plan.status is not None and plan.status.phase == "Succeeded"
    # The executor is Spark's own clean-up's for a moment (the driver exited by itself); the policy goes.
    assert {(d.kind, d.name, d.reason) for d in plan.deletes} == {("NetworkPolicy", "pi-1-policy", "DriverEnded")}
    assert plan.creates == ()
    killed = [terminated(pods[0], 137), executor(1, adopted=True)]
    plan = plan_for(body, killed, cms, svcs, [policy])
    assert {(d.kind, d.name, d.reason) for d in plan.deletes} == {
        ("Pod", "pi-1-exec-1", "DriverEnded"), ("NetworkPolicy", "pi-1-policy", "DriverEnded"),
    }  # fmt: skip


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "SubmissionFailed"])
def test_deleted_once_the_driver_ended_and_the_status_stays_frozen(phase: str) -> None:
    body = spark("4.3.0", running_status())
    pods, cms, svcs, policy = present(body)
    ended = {**running_status(), "phase": phase, "completionTime": "2026-01-01T11:30:00Z", "observedGeneration": 1}
    plan = plan_for(spark("4.3.0", ended), [terminated(pods[0], 0 if phase == "Succeeded" else 1)], cms, svcs,
                    [policy])  # fmt: skip
    assert plan.status is None  # frozen: the delete writes nothing else
    assert [(d.kind, d.name, d.uid, d.reason) for d in plan.deletes] == [
        ("NetworkPolicy", "pi-1-policy", "np-1", "DriverEnded")
    ]
    # Being deleted already, or gone: nothing more.
    going = copy.deepcopy(policy)
    going["metadata"]["deletionTimestamp"] = "2026-01-01T11:31:00Z"
    assert plan_for(spark("4.3.0", ended), [], cms, svcs, [going]).actions == ()
    assert plan_for(spark("4.3.0", ended), [], cms, svcs, []).actions == ()


def test_a_policy_of_another_sparkdriver_of_the_same_name_is_left_alone() -> None:
    body = spark("4.3.0", running_status(2))
    pods, cms, svcs, policy = present(body, 2)
    stranger = present(body, 1)[3]
    stranger["metadata"]["ownerReferences"] = [{**stranger["metadata"]["ownerReferences"][0], "uid": "other"}]
    assert policy_writes(plan_for(body, pods, cms, svcs, [stranger, policy])) == []


# --- refused ---------------------------------------------------------------------------------------


def test_a_refused_create_is_submission_failed_naming_the_policy() -> None:
    """403 because the operator's RBAC lacks networkpolicies: SubmissionFailed, nothing more created."""
    body = spark("4.3.0")
    wanted = network_policy(parse(body), 1)
    assert wanted is not None
    message = 'networkpolicies.networking.k8s.io is forbidden: User "op" cannot create resource "networkpolicies"'
    refusals = {refusal_key(Ensure(wanted)): Refusal(403, "Forbidden", message)}
    plan = plan_for(body, refusals=refusals)
    assert plan.creates == ()
    assert plan.status is not None and plan.status.phase == "SubmissionFailed"
    assert plan.status.lastError is not None and plan.status.lastError.message == message
    (event,) = plan.events
    assert (event.type, event.reason) == ("Warning", "SubmissionFailed")
    assert event.message.startswith("NetworkPolicy pi-1-policy refused: ")


# --- UnknownSparkVersion ---------------------------------------------------------------------------


def test_an_unknown_line_is_said_once_with_the_driver_pod_created() -> None:
    body = spark("5.0.0")
    plan = plan_for(body)
    created, warned = plan.events
    assert (created.type, created.reason, warned.type, warned.reason) == (
        "Normal", "DriverPodCreated", "Warning", "UnknownSparkVersion",
    )  # fmt: skip
    assert "5.0.0" in warned.message and "rendered as spark-submit 4.3" in warned.message
    assert plan.status is not None
    # The create is retried while the index has not seen the pod: no second event.
    assert plan_for(spark("5.0.0", plan.status.to_json())).events == ()
    # The pod is there and running: none either.
    pods, cms, svcs, policy = present(body)
    assert plan_for(spark("5.0.0", running_status()), pods, cms, svcs, [policy]).events == ()


def test_a_replacement_driver_pod_says_it_again() -> None:
    body = spark("5.0.0", running_status())
    pods, cms, svcs, policy = present(body)
    plan = plan_for(body, [deleting(pods[0])], cms, svcs, [policy])
    assert [e.reason for e in plan.events] == ["DriverPodLost"]  # its pod waits for the lost one to go
    assert plan.status is not None
    replaced = plan_for(spark("5.0.0", plan.status.to_json()), [], cms, svcs, [policy])
    assert [e.reason for e in replaced.events] == ["DriverPodCreated", "UnknownSparkVersion"]


# --- the index's summary ---------------------------------------------------------------------------


def test_the_summary_of_a_trimmed_policy_is_that_of_the_whole_one() -> None:
    wanted = network_policy(parse(spark("4.3.0")), 1)
    assert wanted is not None
    whole = stored(wanted)
    whole["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "x" * 500}
    assert summarize_policy(trim_policy(copy.deepcopy(whole))) == summarize_policy(whole)
    assert "managedFields" not in trim_policy(whole)["metadata"]
    summary = summarize_policy(whole)
    assert isinstance(summary, PolicySummary)
    assert (summary.incarnation, summary.owner_uid, summary.deleting) == (1, UID, False)
    # A write that changes neither labels nor spec asks for no pass.
    touched = {**whole, "metadata": {**whole["metadata"], "resourceVersion": "99"}}
    assert policy_view(touched) == policy_view(whole)
    assert policy_view(edited(whole, "rule added")) != policy_view(whole)


# --- through the shell -----------------------------------------------------------------------------


async def test_the_shell_creates_it_with_the_configmaps_and_service_then_the_pod() -> None:
    fake = FakeKube()
    ctrl, _ = controller(fake, spark("4.3.0"))
    await ctrl.reconcile(KEY)
    assert fake.calls == [
        "create ConfigMap pi-1-podspec-conf-map", "create ConfigMap pi-1-conf-map", "create Service pi-1-driver-svc",
        "create NetworkPolicy pi-1-policy", "create Pod pi-driver", "status", "event DriverPodCreated",
    ]  # fmt: skip


async def test_the_shell_deletes_it_once_the_driver_ended_without_a_status_write() -> None:
    from sparkop.driver_controller import controller as declaration

    body = spark("4.3.0", {**running_status(), "phase": "Succeeded", "completionTime": "2026-01-01T11:30:00Z",
                           "observedGeneration": 1})  # fmt: skip
    _, cms, svcs, policy = present(body)
    fake = FakeKube()
    ctrl, runtime = controller(fake, body)
    runtime.indexes[declaration.INDEX_CONFIGMAPS][KEY] = cms
    runtime.indexes[declaration.INDEX_SERVICES][KEY] = svcs
    runtime.indexes[declaration.INDEX_NETWORK_POLICIES][KEY] = [summarize_policy(policy)]
    await ctrl.reconcile(KEY)
    assert fake.calls == ["delete NetworkPolicy pi-1-policy"]
