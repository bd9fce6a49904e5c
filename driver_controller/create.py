"""The step of a driver's decision that creates what the current incarnation lacks
(:func:`create_missing`): its PodGroup and PodDisruptionBudget, ConfigMaps, Service and NetworkPolicy
before its driver pod (the pod mounts the ConfigMaps; its executors are never without their policy),
and puts back its NetworkPolicy where someone edited it. A create the API server refused is a stop.
"""

from __future__ import annotations

from sparkop.api.models import DriverPodInfo
from sparkop.core.jsontypes import JSON
from sparkop.core.plan import Create, Ensure, Patch, refused
from sparkop.core.resources import NETWORK_POLICIES
from sparkop.domain import naming
from sparkop.driver_controller import events
from sparkop.driver_controller.actions import POLICY_RESTORED, policy_restore_patch
from sparkop.driver_controller.facts import Continue, Facts, Outcome, Stop, Why
from sparkop.driver_controller.podname import name_held
from sparkop.driver_controller.render import InvalidSpec, network_policy, spark_release
from sparkop.driver_controller.summaries import PolicySummary


def create_missing(f: Facts) -> Outcome:
    """What the current incarnation lacks. The incarnation is rendered only when the pod, a ConfigMap
    or the Service is missing; the NetworkPolicy is built on its own (:func:`render.network_policy`), so a
    pass can compare it with the one it sees, and put back an edit."""
    expected = f.names
    have_cm = {c.name for c in f.owned(f.observed.config_maps)}
    have_svc = {s.name for s in f.owned(f.observed.services)}
    pod_missing = f.driver_pod(f.incarnation) is None
    if pod_missing:
        f, held = name_held(f, expected.pod)
        if held and f.ended:
            return Stop(f, Why.NAME_TAKEN)  # the name is another's: refused, nothing is made
        # While its name is held, the pod waits; what it mounts and what finds it may be made meanwhile.
        pod_missing = not held
    wanted_policy = network_policy(f.driver, f.incarnation) if expected.network_policy else None
    # Missing, it is *ensured*: a policy of ours that only looks missing because someone removed its
    # sparkop.io/driver label (the watch selects by it) is patched back instead of being met by a
    # 409 on every pass.
    ensure_policy = Ensure(wanted_policy, f"Incarnation{f.incarnation}", concurrent=True) if wanted_policy else None
    refusal = _refusal(f, ensure_policy)
    if refusal is not None:
        return Stop(refusal, Why.REFUSED)
    current_policy = next((n for n in f.owned(f.observed.network_policies) if n.name == expected.network_policy), None)
    if current_policy is not None:
        ensure_policy = None
        f = f.after(*_restore_policy(current_policy, wanted_policy))
    if pod_missing or not expected.config_maps <= have_cm or expected.service not in have_svc:
        try:
            f, objects = f.render()
        except (InvalidSpec, ValueError) as exc:
            return Stop(f.invalid_spec(str(exc)), Why.INVALID_SPEC)
        why = f"Incarnation{f.incarnation}"
        creates: list[Create | Ensure] = []
        if pod_missing and objects.pod_group is not None:
            # Before the pod, which its scheduler matches to it; the same group for every incarnation,
            # so a retried or later create meets 409 with our own (the SparkDriver is its controller).
            creates.append(Create(objects.pod_group, why, concurrent=True))
        if pod_missing and objects.pod_disruption_budget is not None:
            # Before the pod too, and the same for every incarnation: a drain never finds it unprotected.
            creates.append(Create(objects.pod_disruption_budget, why, concurrent=True))
        creates += [
            Create(cm, why, concurrent=True) for cm in objects.config_maps if cm["metadata"]["name"] not in have_cm
        ]
        if expected.service not in have_svc:
            creates.append(Create(objects.service, why, concurrent=True))
        if ensure_policy is not None:
            creates.append(ensure_policy)
            ensure_policy = None
        if pod_missing:
            # Also when status already names it: a create the index has not seen yet meets 409.
            creates.append(Create(objects.pod, why))
        f = f.before(*creates)
        if pod_missing:
            f = _create_pod(f, expected.pod, objects.properties["spark.app.id"])
    if ensure_policy is not None:  # only the policy is missing: deleted, or taken out of our watch
        f = f.before(Ensure(ensure_policy.manifest, POLICY_RESTORED, concurrent=True))
    return Continue(
        f.update(webUIAddress=expected.web_ui_address, sparkApplicationId=naming.spark_app_id(f.uid, f.incarnation))
    )


def _create_pod(f: Facts, expected: str, app_id: str) -> Facts:
    """Status names the driver pod whose create was planned (written only once the create was accepted),
    said once per driver pod."""
    if (f.status.driverPod.name if f.status.driverPod else None) == expected:
        return f
    f = f.update(driverPod=DriverPodInfo(name=expected))
    f = f.event(
        "Normal",
        events.Reason.INCARNATION_CREATED,
        f"incarnation {f.incarnation}: driver pod {expected}, spark.app.id {app_id}",
    )
    # Said once per driver pod created (with the event above, not on every pass): the pod is built as
    # the nearest known line's spark-submit would build it.
    release = spark_release(f.driver)
    if release is not None and release.warning:
        f = f.event("Warning", events.Reason.UNKNOWN_SPARK_VERSION, release.warning)
    return f


def _refusal(f: Facts, policy: Ensure | None) -> Facts | None:
    """An object of the current incarnation the API server refused to create (a quota, an admission
    policy, a name held by an object that is not ours, a PodGroup kind the cluster does not serve, a
    NetworkPolicy the operator's RBAC does not allow): SubmissionFailed, nothing more created; the apps
    controller decides whether to run again. None: nothing was refused."""
    if not f.observed.refusals:
        return None
    expected = f.names

    def create(kind: str, name: str) -> Create:
        return Create({"kind": kind, "metadata": {"name": name}})

    wanted: list[Create | Ensure] = [create("PodGroup", expected.pod_group)] if expected.pod_group else []
    wanted.append(create("PodDisruptionBudget", naming.driver_pdb_name(f.name)))
    wanted += [create("ConfigMap", name) for name in sorted(expected.config_maps)]
    wanted += [create("Service", expected.service), *([policy] if policy else []), create("Pod", expected.pod)]
    for action in wanted:
        refusal = refused(f.observed.refusals, action)
        if refusal is None:
            continue
        kind, name = action.kind, action.name
        # 409: the name is held by an object that is not ours (never taken for ours, never adopted).
        reason = refusal.reason if refusal.code == 409 else events.Reason.SUBMISSION_FAILED
        message = refusal.message
        if kind == "PodGroup" and refusal.code == 404:
            message = (
                f"the cluster does not serve PodGroups of spec.batchScheduler {f.driver.spec.batchScheduler}: "
                "install that scheduler's CRDs, or remove spec.batchScheduler"
            )
        return f.refused(reason, message).event(
            "Warning", events.Reason.SUBMISSION_FAILED, f"{kind} {name} refused: {message}"
        )
    return None


def _restore_policy(current: PolicySummary, wanted: JSON | None) -> tuple[Patch, ...]:
    """Put back what an edit changed of the incarnation's NetworkPolicy: one merge patch, guarded by the
    resourceVersion it was decided from, and only when something differs. One on its way out is left
    to go: its deletion brings the SparkDriver back to a pass, which creates it anew."""
    if wanted is None or current.deleting:
        return ()
    body = policy_restore_patch(current, wanted)
    if body is None:
        return ()
    api_version, version = NETWORK_POLICIES.api_version, current.resource_version
    return (Patch(api_version, "NetworkPolicy", current.name, body, version, POLICY_RESTORED, concurrent=True),)


__all__ = ["create_missing"]
