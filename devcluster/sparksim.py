"""A stand-in for the Spark driver's Kubernetes scheduler backend.

Real drivers never run on kwok's fake nodes, so this process does what a Spark driver
(KubernetesClusterSchedulerBackend + BasicExecutorFeatureStep) would do, the way Spark does
it, and independently of sparkop's code:

* for every Running pod labelled spark-role=driver, create `spark.executor.instances`
  executor pods named `<prefix>-exec-<n>`, owned by the driver pod, optionally built from
  the executor pod template mounted into the driver, once the driver has run for a moment: a real
  driver asks for its executors only after its JVM has started its SparkContext, seconds after the
  pod turned Running (`--executor-delay`, or per driver pod the annotation
  `sim.sparkop.io/executor-delay-seconds`);
* when the driver finishes or goes away, delete its executors (as Spark does on stop).

It is level-triggered: it keeps the labelled pods in a cache fed by one watch (listed again after
any gap), looks at the drivers whose pods or executors changed, and at every unfinished driver
every few seconds, so it converges from any state and can be restarted at any time.

Driver annotations `sim.sparkop.io/exec-<x>` are copied to executors as `sim.sparkop.io/<x>`
so tests can drive executor outcomes through the kwok stages.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import logging
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

from devcluster.components import FAKE_NODE_ANNOTATION, FAKE_NODE_LABEL
from devcluster.javaprops import parse_properties

log = logging.getLogger("sparksim")

Obj = dict[str, Any]

SPARK_CONF_DIR = "/opt/spark/conf"
PROPERTIES_KEY = "spark.properties"
EXECUTOR_CONTAINER = "spark-kubernetes-executor"
SIM_PREFIX = "sim.sparkop.io/"
SIM_EXEC_PREFIX = "sim.sparkop.io/exec-"
EXECUTORS_ANNOTATION = "sim.sparkop.io/executors"
DEFAULT_EXECUTORS = 2
EXECUTOR_DELAY_ANNOTATION = "sim.sparkop.io/executor-delay-seconds"
# From a driver pod's Running to the creation of its executors: a real driver's JVM starts, builds its
# SparkContext, then asks for its executors.
DEFAULT_EXECUTOR_DELAY_S = 3.0
FINISHED = ("Succeeded", "Failed")
RESYNC_S = 5.0
# A pass whose requests went out as the API server restarted can wait on a connection that never
# answers (the client sets no timeout of its own): it is given up, and the resync brings its drivers back.
PASS_TIMEOUT_S = 60.0
MIN_OVERHEAD_MIB = 384


# -- pure logic: what Spark would build -----------------------------------------------------


def driver_container(driver: Obj) -> Obj:
    """The driver pod's Spark container: its last. Spark's submission client takes the template's Spark
    container out (named by spark.kubernetes.driver.podTemplateContainerName, else the first) and appends
    it after the template's other containers, whatever its name; a sidecar may carry any name."""
    containers: list[Obj] = driver["spec"]["containers"]
    return containers[-1]


def driver_exited(driver: Obj) -> bool:
    """The driver's JVM has ended: its container terminated, whatever the pod's phase still says
    (the kubelet turns the phase terminal a moment later). A driver that ended creates nothing."""
    name = driver_container(driver).get("name")
    statuses = driver.get("status", {}).get("containerStatuses") or []
    return any(s.get("name") == name and "terminated" in (s.get("state") or {}) for s in statuses)


@dataclass(frozen=True)
class ConfigMapFile:
    """A file the driver sees, backed by key `key` of ConfigMap `name`."""

    name: str
    key: str


def configmap_file(driver: Obj, file_path: str) -> ConfigMapFile | None:
    """Find which ConfigMap key backs `file_path` inside the driver pod, if any.

    A ConfigMap volume mounted at the file's directory exposes each key as a file, or
    only the listed `items` under their `path`s.
    """
    directory, basename = posixpath.split(posixpath.normpath(file_path))
    mounts = [m for c in driver["spec"].get("containers", []) for m in c.get("volumeMounts", [])]
    volumes = {v["name"]: v for v in driver["spec"].get("volumes", [])}
    for mount in mounts:
        if posixpath.normpath(mount.get("mountPath", "")) != directory:
            continue
        source = volumes.get(mount.get("name", ""), {}).get("configMap")
        if not source:
            continue
        items = source.get("items")
        if items:
            key = next((i["key"] for i in items if i.get("path") == basename), None)
            if key is None:
                continue
        else:
            key = basename
        return ConfigMapFile(source["name"], key)
    return None


def executor_count(props: dict[str, str], driver: Obj) -> int:
    value = props.get("spark.executor.instances")
    if value is None:
        value = driver["metadata"].get("annotations", {}).get(EXECUTORS_ANNOTATION)
    return int(value) if value is not None else DEFAULT_EXECUTORS


def executor_delay(driver: Obj, default: float) -> float:
    """Seconds from the driver pod's Running to its executors' creation: the driver pod's annotation
    ``sim.sparkop.io/executor-delay-seconds``, else ``default``."""
    value = (driver["metadata"].get("annotations") or {}).get(EXECUTOR_DELAY_ANNOTATION)
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        log.warning(
            "driver %s: %s=%r is not a number of seconds", driver["metadata"]["name"], EXECUTOR_DELAY_ANNOTATION, value
        )
        return default
    return max(seconds, 0.0)


def executor_name_prefix(props: dict[str, str], driver: Obj) -> str:
    prefix = props.get("spark.kubernetes.executor.podNamePrefix")
    if prefix:
        return prefix
    name: str = driver["metadata"]["name"]
    return name.removesuffix("-driver")


def app_id(props: dict[str, str], driver: Obj) -> str:
    label = driver["metadata"].get("labels", {}).get("spark-app-selector")
    return str(label or props.get("spark.app.id") or driver["metadata"]["name"])


def app_name_label(app_name: str) -> str:
    """Spark's KubernetesConf.getAppNameLabel: a valid label value derived from the app name."""
    value = re.sub(r"[^a-z0-9\-.]", "-", app_name.strip().lower())[:63]
    return value.strip("-.")


def parse_size_mib(value: str, default_unit: str = "m") -> int:
    """Spark memory strings ("4g", "512m", "1024") in MiB; a bare number uses `default_unit`."""
    match = re.fullmatch(r"\s*(\d+)\s*([kmgtp]?)b?\s*", value.lower())
    if not match:
        raise ValueError(f"not a Spark memory size: {value!r}")
    number, unit = int(match.group(1)), match.group(2) or default_unit
    factor = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024**2, "p": 1024**3}[unit]
    return int(number * factor)


def executor_memory_mib(props: dict[str, str]) -> int:
    memory = parse_size_mib(props.get("spark.executor.memory", "1g"))
    if "spark.executor.memoryOverhead" in props:
        overhead = parse_size_mib(props["spark.executor.memoryOverhead"])
    else:
        factor = float(
            props.get("spark.executor.memoryOverheadFactor")
            or props.get("spark.kubernetes.memoryOverheadFactor")
            or 0.1
        )
        overhead = max(int(memory * factor), MIN_OVERHEAD_MIB)
    return memory + overhead


def _prefixed(props: dict[str, str], prefix: str) -> dict[str, str]:
    return {k.removeprefix(prefix): v for k, v in props.items() if k.startswith(prefix)}


def executor_image(props: dict[str, str], driver: Obj) -> str:
    return str(
        props.get("spark.kubernetes.executor.container.image")
        or props.get("spark.kubernetes.container.image")
        or driver_container(driver).get("image", "")
    )


def sim_annotations_for_executors(driver: Obj) -> dict[str, str]:
    annotations: dict[str, str] = driver["metadata"].get("annotations", {})
    return {
        SIM_PREFIX + k.removeprefix(SIM_EXEC_PREFIX): v for k, v in annotations.items() if k.startswith(SIM_EXEC_PREFIX)
    }


def select_template_container(template: Obj, container_name: str | None) -> tuple[Obj, list[Obj]]:
    """Spark's selectSparkContainer: the named container (else the first) and the others."""
    containers: list[Obj] = template.get("spec", {}).get("containers", [])
    if not containers:
        return {}, []
    index = next((i for i, c in enumerate(containers) if c.get("name") == container_name), 0)
    return containers[index], containers[:index] + containers[index + 1 :]


def on_fake_nodes(executor: Obj) -> Obj:
    """A simulated executor is scheduled only onto kwok's fake nodes: on a real node the kubelet
    would start the Spark image with a driver URL nobody listens on."""
    executor["spec"]["nodeSelector"] = {**(executor["spec"].get("nodeSelector") or {}), **dict([FAKE_NODE_LABEL])}
    return executor


def simulated(executor: Obj) -> bool:
    """Whether an executor is one the simulator made (see :func:`on_fake_nodes`)."""
    key, value = FAKE_NODE_LABEL
    return bool(((executor.get("spec") or {}).get("nodeSelector") or {}).get(key) == value)


def build_executor_pod(driver: Obj, props: dict[str, str], exec_id: int, template: Obj | None = None) -> Obj:
    """The executor pod Spark's driver would create, starting from the template if given.

    Like Spark's PodBuilder edits: template labels/annotations/ownerReferences are kept and
    Spark's are added on top; name, restartPolicy and image are overridden.
    """
    base = copy.deepcopy(template) if template else {}
    base.pop("status", None)
    container, sidecars = select_template_container(
        base, props.get("spark.kubernetes.executor.podTemplateContainerName")
    )

    name = f"{executor_name_prefix(props, driver)}-exec-{exec_id}"
    application = app_id(props, driver)
    labels = {
        **_prefixed(props, "spark.kubernetes.executor.label."),
        "spark-app-selector": application,
        "spark-app-name": app_name_label(props.get("spark.app.name", application)),
        "spark-role": "executor",
        "spark-exec-id": str(exec_id),
        "spark-exec-resourceprofile-id": "0",
    }
    annotations = {**_prefixed(props, "spark.kubernetes.executor.annotation."), **sim_annotations_for_executors(driver)}
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": driver["metadata"]["name"],
        "uid": driver["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    metadata = base.get("metadata") or {}
    metadata.pop("resourceVersion", None)
    metadata.pop("uid", None)
    metadata.update(
        name=name,
        namespace=driver["metadata"]["namespace"],
        labels={**(metadata.get("labels") or {}), **labels},
        annotations={**(metadata.get("annotations") or {}), **annotations},
        ownerReferences=[*(metadata.get("ownerReferences") or []), owner],
    )

    cores = props.get("spark.executor.cores", "1")
    memory = f"{executor_memory_mib(props)}Mi"
    resources = container.get("resources") or {}
    requests = {**(resources.get("requests") or {}), "memory": memory}
    requests["cpu"] = props.get("spark.kubernetes.executor.request.cores", cores)
    limits = {**(resources.get("limits") or {}), "memory": memory}
    if "spark.kubernetes.executor.limit.cores" in props:
        limits["cpu"] = props["spark.kubernetes.executor.limit.cores"]
    env = [
        {"name": "SPARK_EXECUTOR_ID", "value": str(exec_id)},
        {"name": "SPARK_APPLICATION_ID", "value": application},
        {"name": "SPARK_EXECUTOR_CORES", "value": cores},
        {"name": "SPARK_EXECUTOR_MEMORY", "value": props.get("spark.executor.memory", "1g")},
        {"name": "SPARK_RESOURCE_PROFILE_ID", "value": "0"},
        {"name": "SPARK_CONF_DIR", "value": SPARK_CONF_DIR},
        {"name": "SPARK_EXECUTOR_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "SPARK_EXECUTOR_POD_NAME", "value": name},
    ]
    container = {
        **container,
        "name": container.get("name") or EXECUTOR_CONTAINER,
        "image": executor_image(props, driver),
        "imagePullPolicy": props.get("spark.kubernetes.container.image.pullPolicy", "IfNotPresent"),
        "args": [*(container.get("args") or []), "executor"],
        "env": [*(container.get("env") or []), *env],
        "resources": {"requests": requests, "limits": limits},
    }

    spec = base.get("spec") or {}
    node_selector = {
        **(spec.get("nodeSelector") or {}),
        **_prefixed(props, "spark.kubernetes.node.selector."),
        **_prefixed(props, "spark.kubernetes.executor.node.selector."),
    }
    spec.update(hostname=name[-63:].lstrip("-."), restartPolicy="Never", containers=[container, *sidecars])
    if node_selector:
        spec["nodeSelector"] = node_selector
    service_account = props.get("spark.kubernetes.authenticate.executor.serviceAccountName")
    if service_account:
        spec["serviceAccountName"] = service_account
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def owned_by(pod: Obj, owner_uid: str) -> bool:
    return any(ref.get("uid") == owner_uid for ref in pod["metadata"].get("ownerReferences") or [])


def driver_owner_uid(executor: Obj) -> str | None:
    refs = executor["metadata"].get("ownerReferences") or []
    return next((r["uid"] for r in refs if r.get("kind") == "Pod" and r.get("controller")), None)


def _pod_owners(pod: Obj) -> list[str]:
    return [str(r["uid"]) for r in pod["metadata"].get("ownerReferences") or [] if r.get("kind") == "Pod"]


def _role(pod: Obj) -> str | None:
    return (pod["metadata"].get("labels") or {}).get("spark-role")


# -- the control loop -----------------------------------------------------------------------


class Simulator:
    """Spark's driver-side executor management for every driver pod in the cluster.

    One watch of the pods labelled ``spark-role`` keeps a cache (listed first, re-listed after a
    gap); a pass looks only at the drivers whose pods changed, or whose executors did, so its cost
    is that of the changes, not of every pod in the cluster. Every RESYNC_S every unfinished driver
    is looked at again, as a level-triggered loop should."""

    def __init__(
        self, api_client: Any, ready_file: Path | None = None, executor_delay: float = DEFAULT_EXECUTOR_DELAY_S
    ):
        from kubernetes_asyncio import client

        self.core = client.CoreV1Api(api_client)
        self.ready_file = ready_file
        self.executor_delay = executor_delay
        self.wake = asyncio.Event()
        self.synced = asyncio.Event()
        self.pods: dict[str, Obj] = {}  # uid -> pod (drivers and executors)
        self.owned: dict[str, set[str]] = {}  # driver uid -> uids of pods naming it as an owner
        self.dirty: set[str] = set()  # driver uids to look at in the next pass
        # What a driver read at its start (Spark reads its properties and template once): by uid.
        self.started: dict[str, tuple[dict[str, str], Obj | None]] = {}
        # Node name -> whether it is one of kwok's fake nodes (a node never changes kind).
        self.fake_nodes: dict[str, bool] = {}
        # When (the loop's clock) each driver was first seen Running, and the drivers whose executors
        # are due later (driver uid -> when): a driver asks for executors a moment after it runs.
        self.running_since: dict[str, float] = {}
        self.due: dict[str, float] = {}

    async def run(self) -> None:
        watcher = asyncio.create_task(self._watch_forever())
        try:
            await self.synced.wait()
            loop = asyncio.get_running_loop()
            next_resync = loop.time()
            while True:
                if loop.time() >= next_resync:
                    self.dirty |= self._to_resync()
                    next_resync = loop.time() + RESYNC_S
                self.dirty |= self._come_due(loop.time())
                try:
                    await asyncio.wait_for(self.reconcile_dirty(), PASS_TIMEOUT_S)
                    if self.ready_file is not None and not self.ready_file.exists():
                        self.ready_file.touch()
                except Exception:  # the apiserver may be restarting; the resync retries
                    log.exception("reconcile pass failed")
                    await asyncio.sleep(1.0)
                if not self.dirty:
                    wake_at = min([next_resync, *self.due.values()])
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.wake.wait(), max(0.0, wake_at - loop.time()))
                self.wake.clear()
        finally:
            watcher.cancel()

    # -- the cache -----------------------------------------------------------------------------

    async def _watch_forever(self) -> None:
        while True:
            try:
                version = await self._list()
                while True:
                    version = await self._watch(version)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # 410 Gone, a restarting apiserver: list again
                log.info("watch interrupted (%s); listing again", err)
                await asyncio.sleep(1.0)

    async def _list(self) -> str:
        # Raw JSON: plain dicts are what the pure functions above take.
        response: Any = await self.core.list_pod_for_all_namespaces(
            label_selector="spark-role", _request_timeout=PASS_TIMEOUT_S, _preload_content=False
        )
        listing = json.loads(await response.read())
        self.pods, self.owned = {}, {}
        for pod in listing["items"]:
            self._store(pod)  # marks each pod and its owners: an owner no longer listed counts as gone
        self.started = {uid: read for uid, read in self.started.items() if uid in self.pods}
        self.running_since = {uid: at for uid, at in self.running_since.items() if uid in self.pods}
        self.synced.set()
        self.wake.set()
        return str(listing["metadata"]["resourceVersion"])

    async def _watch(self, version: str) -> str:
        """Apply one watch's events to the cache; the resourceVersion to watch on from."""
        response: Any = await self.core.list_pod_for_all_namespaces(
            label_selector="spark-role",
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=120,
            _request_timeout=150,
            _preload_content=False,
        )
        buffered = b""
        async with response:
            async for chunk in response.content.iter_any():
                buffered += chunk
                *lines, buffered = buffered.split(b"\n")
                for line in lines:
                    if line.strip():
                        version = self._apply(json.loads(line), version)
        return version

    def _apply(self, event: Obj, version: str) -> str:
        kind, pod = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            raise RuntimeError(f"watch error: {pod.get('message')}")
        version = str((pod.get("metadata") or {}).get("resourceVersion") or version)
        if kind == "BOOKMARK":
            return version
        if kind == "DELETED":
            self._forget(pod)
        else:
            self._store(pod)
        self.wake.set()
        return version

    def _store(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        old = self.pods.get(uid)
        if old is not None:
            self._unlink(old)
        self.pods[uid] = pod
        for owner in _pod_owners(pod):
            self.owned.setdefault(owner, set()).add(uid)
            self.dirty.add(owner)
        self.dirty.add(uid)

    def _forget(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        old = self.pods.pop(uid, None)
        if old is not None:
            self._unlink(old)
        self.started.pop(uid, None)
        self.running_since.pop(uid, None)
        self.due.pop(uid, None)
        self.dirty.add(uid)
        self.dirty.update(_pod_owners(pod))

    def _unlink(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        for owner in _pod_owners(pod):
            members = self.owned.get(owner)
            if members is not None:
                members.discard(uid)
                if not members:
                    del self.owned[owner]

    def _come_due(self, now: float) -> set[str]:
        """The drivers whose executors are due by ``now`` (taken off the list)."""
        ready = {uid for uid, at in self.due.items() if at <= now}
        for uid in ready:
            del self.due[uid]
        return ready

    def _to_resync(self) -> set[str]:
        """Drivers still running, and every owner that still has pods (a finished driver's executors,
        orphans whose driver is gone): what a pass that failed may have left undone."""
        running = {
            uid
            for uid, pod in self.pods.items()
            if _role(pod) == "driver" and (pod.get("status") or {}).get("phase") not in FINISHED
        }
        return running | set(self.owned)

    # -- a pass --------------------------------------------------------------------------------

    async def reconcile_dirty(self) -> None:
        dirty, self.dirty = self.dirty, set()
        tasks = []
        for uid in dirty:
            pod = self.pods.get(uid)
            executors = [
                self.pods[e] for e in self.owned.get(uid, ()) if e in self.pods and _role(self.pods[e]) == "executor"
            ]
            if pod is not None and _role(pod) == "driver":
                tasks.append(self.reconcile_driver(pod, executors))
            elif pod is None:
                # Executors whose driver pod is gone: Spark's stop() would have deleted them. Only
                # ours: a real driver's executors are its own (and the garbage collector's).
                tasks += [self._delete(e) for e in executors if driver_owner_uid(e) == uid and simulated(e)]
        await asyncio.gather(*tasks)

    async def reconcile_driver(self, driver: Obj, executors: list[Obj]) -> None:
        if not await self._on_fake_node(driver):
            return  # a real driver on a real node (or one not scheduled yet): real Spark's to run
        meta, phase = driver["metadata"], driver.get("status", {}).get("phase")
        if meta.get("deletionTimestamp") or phase in FINISHED or driver_exited(driver):
            await asyncio.gather(*(self._delete(e) for e in executors if not e["metadata"].get("deletionTimestamp")))
            return
        if phase != "Running":
            return
        now = asyncio.get_running_loop().time()
        due = self.running_since.setdefault(meta["uid"], now) + executor_delay(driver, self.executor_delay)
        if now < due and not executors:
            self.due[meta["uid"]] = due  # its JVM is still starting its SparkContext
            return
        started = self.started.get(meta["uid"])
        if started is None:
            props = await self._driver_properties(driver)
            if props is None:
                return  # the resync looks again
            started = (props, await self._executor_template(driver, props))
            self.started[meta["uid"]] = started
        props, template = started
        existing = {e["metadata"]["name"] for e in executors}
        wanted = [
            on_fake_nodes(build_executor_pod(driver, props, n, template))
            for n in range(1, executor_count(props, driver) + 1)
        ]
        await asyncio.gather(*(self._create(pod) for pod in wanted if pod["metadata"]["name"] not in existing))

    async def _read_configmap_key(self, namespace: str, ref: ConfigMapFile) -> str | None:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            configmap = await self.core.read_namespaced_config_map(ref.name, namespace)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        data: dict[str, str] = configmap.data or {}
        return data.get(ref.key)

    async def _driver_properties(self, driver: Obj) -> dict[str, str] | None:
        """spark.properties from the ConfigMap at /opt/spark/conf; {} if none is mounted,
        None if it is mounted but not readable yet (try again next pass)."""
        ref = configmap_file(driver, f"{SPARK_CONF_DIR}/{PROPERTIES_KEY}")
        if ref is None:
            return {}
        text = await self._read_configmap_key(driver["metadata"]["namespace"], ref)
        if text is None:
            log.info("driver %s: properties ConfigMap %s not there yet", driver["metadata"]["name"], ref.name)
            return None
        return parse_properties(text)

    async def _executor_template(self, driver: Obj, props: dict[str, str]) -> Obj | None:
        path = props.get("spark.kubernetes.executor.podTemplateFile")
        if not path:
            return None
        ref = configmap_file(driver, path)
        text = await self._read_configmap_key(driver["metadata"]["namespace"], ref) if ref else None
        if text is None:
            # Spark would fail to start the executors; say so and build without the template.
            log.warning("driver %s: executor template %s not found", driver["metadata"]["name"], path)
            return None
        loaded = yaml.safe_load(text)
        return loaded if isinstance(loaded, dict) else None

    async def _on_fake_node(self, pod: Obj) -> bool:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return False
        fake = self.fake_nodes.get(node)
        if fake is None:
            from kubernetes_asyncio.client.exceptions import ApiException

            try:
                body = await self.core.read_node(node, _request_timeout=PASS_TIMEOUT_S)
            except ApiException as err:
                if err.status == 404:
                    return False  # gone with its pods
                raise
            key, value = FAKE_NODE_ANNOTATION
            fake = self.fake_nodes[node] = (body.metadata.annotations or {}).get(key) == value
        return fake

    async def _create(self, pod: Obj) -> None:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            await self.core.create_namespaced_pod(pod["metadata"]["namespace"], cast(Any, pod))
            log.info("created executor %s/%s", pod["metadata"]["namespace"], pod["metadata"]["name"])
        except ApiException as err:
            if err.status == 409:  # already there (another pass or a previous run made it)
                return
            if err.status == 403 and "being terminated" in str(err.body):
                return  # the namespace is going away
            raise

    async def _delete(self, pod: Obj) -> None:
        from kubernetes_asyncio.client.exceptions import ApiException

        meta = pod["metadata"]
        try:
            await self.core.delete_namespaced_pod(meta["name"], meta["namespace"])
            log.info("deleted executor %s/%s", meta["namespace"], meta["name"])
        except ApiException as err:
            if err.status != 404:
                raise


async def _main(kubeconfig: str, ready_file: Path | None, executor_delay: float) -> None:
    from kubernetes_asyncio import config

    api_client = await config.new_client_from_config(config_file=kubeconfig)
    async with api_client:
        await Simulator(api_client, ready_file, executor_delay).run()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devcluster.sparksim", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--ready-file", type=Path, help="touched after the first full pass")
    parser.add_argument(
        "--executor-delay",
        type=float,
        default=DEFAULT_EXECUTOR_DELAY_S,
        metavar="SECONDS",
        help=f"from a driver pod's Running to its executors' creation, unless the pod's annotation "
        f"{EXECUTOR_DELAY_ANNOTATION} says (default {DEFAULT_EXECUTOR_DELAY_S:g})",
    )
    args = parser.parse_args(argv)
    if args.executor_delay < 0:
        parser.error("--executor-delay: a number of seconds, 0 or more")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kubernetes_asyncio").setLevel(logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.kubeconfig, args.ready_file, args.executor_delay))


if __name__ == "__main__":
    main()
