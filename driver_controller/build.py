"""``build(submission)``: every object of one driver-pod incarnation, as spark-submit creates them: the
driver pod folded through Spark's feature steps (:mod:`driver_controller.podbuild`) in its order, its
ConfigMaps, Service and NetworkPolicy, and what sparkop adds beside them (the batch scheduler's
PodGroup, Kueue's pod sets, the driver's PodDisruptionBudget), all labelled and owned as the
SparkDriver's. Which feature steps run follows the app's Spark line and
``spark.kubernetes.driver.pod.excludedFeatureSteps``. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from sparkop.api.spark_lines import Feature, SparkRelease
from sparkop.core.jsontypes import JSON
from sparkop.domain import labels, naming
from sparkop.driver_controller import nodeloss, podsecurity, schedulers, sparkconf
from sparkop.driver_controller.podbuild import (
    DriverObjects,
    FeatureSteps,
    RenderOptions,
    node_loss_seconds,
    own,
    select_spark_container,
)
from sparkop.driver_controller.submission import InvalidSpec, Submission


def _own(obj: JSON, sub: Submission) -> None:
    own(obj, sub.namespace, sub.sparkop_labels, sub.owner)


def build(sub: Submission, options: RenderOptions | None = None) -> DriverObjects:
    """The driver pod, its ConfigMap, Service and executor template ConfigMap for ``sub``.

    Takes ``sub``'s pod templates over (they become the driver pod and the executor template's
    content) rather than copying them: ``submission()`` builds them fresh for each call."""
    b = FeatureSteps(sub, options or RenderOptions())
    pod = sub.driver_template  # consumed: the Submission is a one-shot request (see build's docstring)
    container = select_spark_container(pod, sub.driver_container)
    pod["apiVersion"], pod["kind"] = "v1", "Pod"
    runs = _steps_run(sub, b.conf)
    b.basic(pod, container)
    pod_group = _batch_scheduling(b, sub, pod, container)
    pod_sets = _queued(b, sub, container)
    if runs("DriverKubernetesCredentialsFeatureStep"):
        b.credentials(pod)
    service = b.service()
    policy = (
        b.network_policy() if sub.has(Feature.EXECUTOR_NETWORK_POLICY) and runs("NetworkPolicyFeatureStep") else None
    )
    if runs("MountSecretsFeatureStep"):
        b.secrets(pod, container)
    if runs("EnvSecretsFeatureStep"):
        b.env_secrets(container)
    if runs("MountVolumesFeatureStep"):
        b.volumes(pod, container)
    if runs("DriverCommandFeatureStep"):
        b.command(container)
    if runs("HadoopConfDriverFeatureStep"):
        b.hadoop(pod, container)
    template = b.pod_template(pod, container)
    if runs("LocalDirsFeatureStep"):
        b.local_dirs(pod, container)
    config_map = b.client(pod, container)
    metrics = b.metrics_config_map()
    for obj in (pod, config_map, service, template, metrics, policy):
        if obj is not None:
            _own(obj, sub)
    pod["metadata"]["labels"] = {**pod["metadata"]["labels"], **sub.pod_labels}
    pod["metadata"]["finalizers"] = [labels.DRIVER_OUTCOME_FINALIZER]
    # Spark writes no termination message, so with the API default a failed driver's status would
    # only say "exit code 1": the end of its log (the exception) is the message instead. A template
    # that sets a policy keeps it.
    container.setdefault("terminationMessagePolicy", "FallbackToLogsOnError")
    if b.options.pod_security == podsecurity.RESTRICTED:
        podsecurity.fill_restricted(pod)
    nodeloss.tolerate(pod, node_loss_seconds(sub, b.options))
    return DriverObjects(
        pod=pod,
        config_map=config_map,
        service=service,
        executor_template=template,
        properties=b.final_properties,
        metrics_config_map=metrics,
        pod_group=pod_group,
        pod_sets=pod_sets,
        network_policy=policy,
        pod_disruption_budget=driver_pdb(sub, b.options),
    )


def wants_driver_pdb(spec_value: bool | None, options: RenderOptions) -> bool:
    return spec_value if spec_value is not None else options.driver_pdb


def driver_pdb(sub: Submission, options: RenderOptions) -> JSON | None:
    """The driver's PodDisruptionBudget when the spec (or the operator's default) asks for one: not
    Spark's (spark-submit makes none), so it carries sparkop's labels but no incarnation, and selects
    the SparkDriver's driver pods of every incarnation."""
    asked = sub.source.spec.driverPodDisruptionBudget if sub.source is not None else None
    if not wants_driver_pdb(asked, options):
        return None
    own_labels = {k: v for k, v in sub.sparkop_labels.items() if k != labels.INCARNATION}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": naming.driver_pdb_name(sub.name),
            "namespace": sub.namespace,
            "labels": own_labels,
            "ownerReferences": [sub.owner],
        },
        "spec": {
            "minAvailable": 1,
            "selector": {
                "matchLabels": {labels.DRIVER: own_labels[labels.DRIVER], labels.SPARK_ROLE: labels.ROLE_DRIVER}
            },
        },
    }


# Spark 4.1+'s spark.kubernetes.driver.pod.excludedFeatureSteps names feature steps by class; a name
# matching none is ignored, as Spark ignores it. sparkop cannot do without these three.
FEATURE_STEP_PACKAGE: Final = "org.apache.spark.deploy.k8s.features."
EXCLUDED_STEPS_KEY: Final = "spark.kubernetes.driver.pod.excludedFeatureSteps"
REQUIRED_STEPS: Final = {
    "BasicDriverFeatureStep": "it names the driver pod and gives it its image and resources",
    "DriverServiceFeatureStep": "the driver Service is how executors reach the driver, and sparkop owns it",
    "PodTemplateConfigMapStep": "the executor pod template is how sparkop owns the executors",
}


def excluded_steps(release: SparkRelease, listed: str) -> frozenset[str]:
    """The feature steps (class names without the package) that ``listed``, a value of
    spark.kubernetes.driver.pod.excludedFeatureSteps, excludes on ``release``'s line."""
    if not release.has(Feature.EXCLUDED_FEATURE_STEPS):
        return frozenset()
    names = (name.strip() for name in listed.split(","))
    return frozenset(name.removeprefix(FEATURE_STEP_PACKAGE) for name in names if name.startswith(FEATURE_STEP_PACKAGE))


def makes_network_policy(release: SparkRelease, listed: str) -> bool:
    """Whether spark-submit of ``release``'s line creates the executors' NetworkPolicy, given the
    excluded feature steps ``listed``."""
    return release.has(Feature.EXECUTOR_NETWORK_POLICY) and "NetworkPolicyFeatureStep" not in excluded_steps(
        release, listed
    )


def _steps_run(sub: Submission, conf: Mapping[str, str]) -> Callable[[str], bool]:
    """Whether the feature step of this class name runs for ``sub``'s Spark line and properties."""
    excluded = excluded_steps(sub.release, conf.get(EXCLUDED_STEPS_KEY, ""))
    for step, why in REQUIRED_STEPS.items():
        if step in excluded:
            raise InvalidSpec(
                f"sparkConf {EXCLUDED_STEPS_KEY}: {FEATURE_STEP_PACKAGE}{step} cannot be excluded under sparkop "
                f"({why}); remove it from the list"
            )
    return lambda step: step not in excluded


def _queued(b: FeatureSteps, sub: Submission, container: JSON) -> schedulers.PodSetRequests | None:
    """The pod sets of a run that queues in Kueue (its SparkDriver names a queue); after the basic
    step, which computes the driver's requests."""
    if sub.source is None or not (sub.source.metadata.get("labels") or {}).get(labels.KUEUE_QUEUE_NAME):
        return None
    asked = schedulers.pod_set_requests(b.conf, sub.resource_type, sub.has(Feature.MIN_MEMORY_OVERHEAD), container)
    if sparkconf.parse_bool(b.conf.get("spark.dynamicAllocation.enabled")):
        # The Workload holds what Kueue admitted: the executors that start with the driver. A run that
        # could ask for more would take what its queue never gave it.
        most = b.conf.get("spark.dynamicAllocation.maxExecutors")
        if most is None or int(most) > asked.executors:
            raise InvalidSpec(
                f"spark.dynamicAllocation.maxExecutors is {most or 'unset (no limit)'} with the Kueue label "
                f"{labels.KUEUE_QUEUE_NAME}: its Workload holds the {asked.executors} executor(s) that start with "
                f"the driver, and Kueue admitted no more; set dynamicAllocation.maxExecutors to at most "
                f"{asked.executors} (dynamic allocation then scales within what was admitted), or disable it"
            )
    return asked


def _batch_scheduling(b: FeatureSteps, sub: Submission, pod: JSON, container: JSON) -> JSON | None:
    """The batch scheduler's marks on the driver pod and the executor template (before it is written
    into its ConfigMap), and its PodGroup; after the basic step, which computes the driver's requests."""
    if sub.source is None or not sub.source.spec.batchScheduler:
        return None
    plan = schedulers.scheduling(
        sub.source,
        owner=sub.owner,
        app_id=b.app_id,
        conf=b.conf,
        resource_type=sub.resource_type,
        min_overhead_conf=sub.has(Feature.MIN_MEMORY_OVERHEAD),
        driver_pod=pod,
        driver_container=container,
        executor_template=sub.executor_template,
    )
    plan.driver.apply(pod)
    plan.executor.apply(sub.executor_template)
    return plan.pod_group
