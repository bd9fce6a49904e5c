"""Finished apps cloned straight into a devcluster's etcd: bench/scale.py's seeding of N apps.

kube-apiserver keeps each object as one value under ``/registry/<resource>/<namespace>/<name>``
(JSON for custom resources; protobuf for built-in kinds by default, but its storage decoder reads
JSON for any kind), without its resourceVersion, which is the etcd revision that last wrote it. Its
watch cache follows etcd, so an object put there is listed and watched like one the API server
wrote itself. Through the API server a finished app costs about nine requests (creates, status
patches, its pod's binding and status) and the controllers' work on them; put here, it is two etcd
transactions.

What a clone is: every object its template left behind (the API server's JSON, its managedFields
included), written as the API server would hold it for another app: the template's name, uids and
spark.app.id renamed throughout (keys too: managedFields name owners by uid), a new uid for each
object, every timestamp moved by the same amount (creation at the seeding's start, and the app's
own times as far apart as the template's), the pod on its own node with its own IP, and the
Endpoints and EndpointSlice the controller manager keeps for its Service.

The pure parts (keys, renaming, timestamps, transactions) are unit-tested in
tests/tools/test_bench_etcd_seed.py; :class:`Etcd` talks to etcd's gRPC gateway (JSON over HTTP).
"""

from __future__ import annotations

import base64
import json
import random
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import aiohttp

from sparkop.core import resources
from sparkop.core.jsontypes import JSON
from sparkop.domain import labels

REGISTRY: Final = "/registry"
# Where kube-apiserver keeps the built-in kinds a finished app leaves (its storage prefixes, as read
# from a devcluster's etcd: `etcdctl get --prefix --keys-only /registry`). Custom resources live
# under <group>/<plural>. seed_into_etcd checks each template's own key before cloning it.
BUILTIN_PREFIXES: Final[Mapping[tuple[str, str], str]] = {
    ("v1", "Pod"): "pods",
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Service"): "services/specs",
    ("v1", "Endpoints"): "services/endpoints",
    ("discovery.k8s.io/v1", "EndpointSlice"): "endpointslices",
}
# etcd's defaults (--max-txn-ops, --max-request-bytes): a transaction past either is refused.
MAX_TXN_OPS: Final = 128
MAX_REQUEST_BYTES: Final = 1_572_864
# The letters the API server draws a generateName suffix from (no vowels, no look-alikes).
NAME_SUFFIX_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
SERVICE_ACCOUNT_VOLUME_PREFIX: Final = "kube-api-access-"
TRIGGER_TIME_ANNOTATION: Final = "endpoints.kubernetes.io/last-change-trigger-time"
# An RFC 3339 time as the API server writes it (metav1.Time, or MicroTime with a fraction), quoted.
_TIMESTAMP: Final = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z"')


def registry_key(obj: Mapping[str, Any]) -> str:
    """The etcd key kube-apiserver keeps ``obj`` under."""
    api_version, kind = str(obj["apiVersion"]), str(obj["kind"])
    meta = obj["metadata"]
    prefix = BUILTIN_PREFIXES.get((api_version, kind))
    if prefix is None:
        group = api_version.rpartition("/")[0]
        resource = resources.known_kind(api_version, kind)
        if group != labels.GROUP or resource is None:
            raise ValueError(
                f"no etcd key known for {api_version} {kind} (known: {sorted(k for _, k in BUILTIN_PREFIXES)} "
                f"and {labels.GROUP}'s kinds): seed with --seed api, or add its storage prefix to BUILTIN_PREFIXES"
            )
        prefix = f"{group}/{resource.plural}"
    return f"{REGISTRY}/{prefix}/{meta['namespace']}/{meta['name']}"


def resource_prefix(key: str) -> str:
    """``/registry/pods/ns/name`` -> ``/registry/pods``: what an API server's watch of one resource follows."""
    return key.rsplit("/", 2)[0]


def shift_times(text: str, by: timedelta) -> str:
    """Every quoted RFC 3339 UTC time in ``text`` moved by ``by``, written back as it was (its fraction's digits)."""

    def moved(match: re.Match[str]) -> str:
        whole, fraction = match.group(1), match.group(2) or ""
        at = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S") + by
        return f'"{at.strftime("%Y-%m-%dT%H:%M:%S")}{fraction}Z"'

    return _TIMESTAMP.sub(moved, text)


class Renamer:
    """Replaces a fixed set of strings in one pass (so that no replacement is replaced again); the
    longest first where two start at the same place."""

    def __init__(self, olds: Iterable[str]):
        ordered = sorted(set(olds), key=lambda s: (-len(s), s))
        if not ordered or "" in ordered:
            raise ValueError("nothing to rename, or an empty string to rename")
        self.olds: Final = tuple(ordered)
        self._pattern = re.compile("|".join(re.escape(s) for s in ordered))

    def __call__(self, text: str, news: Mapping[str, str]) -> str:
        missing = set(self.olds) - set(news)
        if missing:
            raise ValueError(f"no new value for {sorted(missing)}")
        return self._pattern.sub(lambda m: news[m.group(0)], text)


def stored_form(obj: JSON) -> JSON:
    """``obj`` (as the API server answers it) as the API server stores it: without resourceVersion."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def settled_endpoints(endpoints: JSON) -> JSON:
    """The Endpoints of a Service whose pods have all finished, as the endpoints controller's full sync
    writes it: no subsets (a finished pod is in none) and no change-trigger annotation. A template's
    own may still list its driver pod as not ready: that controller is not told of a pod whose readiness
    stayed False while its phase turned Succeeded, and a clone's first sync would otherwise rewrite it."""
    return _without_trigger_time({k: v for k, v in stored_form(endpoints).items() if k != "subsets"})


def settled_endpoint_slice(endpoint_slice: JSON) -> JSON:
    """The EndpointSlice of a Service whose pods have all finished, as the endpoint-slice controller's
    full sync leaves it: its placeholder, with no endpoints and no ports (that controller, like the
    endpoints one, may not have been told of the template's pod turning Succeeded)."""
    return _without_trigger_time(
        {k: v for k, v in stored_form(endpoint_slice).items() if k not in ("endpoints", "ports")}
    )


def _without_trigger_time(obj: JSON) -> JSON:
    meta = dict(obj["metadata"])
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != TRIGGER_TIME_ANNOTATION}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return {**obj, "metadata": meta}


def compact(obj: JSON) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def transactions(puts: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """``puts`` (key, value), in order, cut into etcd transactions holding at most one object of each
    resource: the API server gives every object its own resourceVersion, and a watch resumed from a
    revision skips the rest of that revision, so two objects of one resource never share one.
    Parents come before their children in ``puts``; each transaction is written after the one
    before it, so an owner is never younger than its dependents (the garbage collector deletes a
    dependent whose owner it cannot find)."""
    batches: list[list[tuple[str, str]]] = []
    seen: set[str] = set()
    size = 0
    for key, value in puts:
        resource = resource_prefix(key)
        grows = len(key) + len(value)
        if not batches or resource in seen or len(batches[-1]) >= MAX_TXN_OPS or size + grows > MAX_REQUEST_BYTES // 2:
            batches.append([])
            seen, size = set(), 0
        batches[-1].append((key, value))
        seen.add(resource)
        size += grows
    return batches


def txn_body(puts: Sequence[tuple[str, str]]) -> JSON:
    """The gRPC gateway's JSON for one unconditional transaction of puts (base64 keys and values)."""

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    return {"success": [{"requestPut": {"key": b64(key), "value": b64(value)}} for key, value in puts]}


def name_suffix(rng: random.Random, length: int = 5) -> str:
    return "".join(rng.choices(NAME_SUFFIX_ALPHABET, k=length))


def new_uid() -> str:
    return str(uuid.uuid4())


def pod_ip(index: int) -> str:
    """A pod IP of the devcluster's pod range for clone ``index``, above the few kwok hands out (10.244.0.x)."""
    high, low = divmod(index, 256)
    if high >= 255:
        raise ValueError(f"clone {index}: the pod range 10.244.0.0/16 has no address for it")
    return f"10.244.{high + 1}.{low}"


@dataclass(frozen=True)
class StoredTemplate:
    """One template's objects as the API server stores them (times already moved to the seeding), in
    the order they are written, and what a clone renames in them."""

    name: str
    keys: tuple[str, ...]
    texts: tuple[str, ...]
    uids: tuple[str, ...]  # of every object, renamed to fresh ones
    generated_names: tuple[tuple[str, str], ...]  # (name, its generateName) of objects the API server named
    node: str
    pod_ip: str
    service_account_volume: str | None
    renamer: Renamer


def stored_template(
    name: str, objects: Sequence[JSON], extra_renames: Iterable[str], node: str, ip: str, shift: timedelta
) -> StoredTemplate:
    """``objects`` (parents first, as the API server answers them) ready to be cloned; ``extra_renames``:
    other strings each clone replaces (its spark.app.id); ``node`` and ``ip``: its pod's."""
    stored = [stored_form(o) for o in objects]
    texts = tuple(shift_times(compact(o), shift) for o in stored)
    uids = tuple(str(o["metadata"]["uid"]) for o in stored)
    generated = tuple(
        (str(o["metadata"]["name"]), str(o["metadata"]["generateName"]))
        for o in stored
        if o["metadata"].get("generateName")
    )
    volumes = {
        m.group(0) for text in texts for m in re.finditer(re.escape(SERVICE_ACCOUNT_VOLUME_PREFIX) + r"[a-z0-9]+", text)
    }
    if len(volumes) > 1:
        raise ValueError(f"template {name}: more than one service-account volume: {sorted(volumes)}")
    volume = next(iter(volumes), None)
    olds = [name, *uids, *extra_renames, *(n for n, _ in generated), f'"{node}"', f'"{ip}"']
    if volume is not None:
        olds.append(volume)
    return StoredTemplate(
        name=name,
        keys=tuple(registry_key(o) for o in stored),
        texts=texts,
        uids=uids,
        generated_names=generated,
        node=node,
        pod_ip=ip,
        service_account_volume=volume,
        renamer=Renamer(olds),
    )


def clone_puts(template: StoredTemplate, news: Mapping[str, str]) -> list[tuple[str, str]]:
    """The (key, value) puts of one clone: every key and object of ``template`` renamed by ``news``
    (old string -> new one, for each of ``template.renamer.olds``)."""
    return [
        (template.renamer(k, news), template.renamer(t, news))
        for k, t in zip(template.keys, template.texts, strict=True)
    ]


def clone_renames(
    template: StoredTemplate, clone_name: str, *, node: str, ip: str, rng: random.Random
) -> dict[str, str]:
    """What ``template``'s renamed strings become in the clone ``clone_name``, but for the extra ones
    (its spark.app.id, which derives from its SparkDriver's new uid: the caller adds them): a fresh
    uid for each object, and a fresh generateName suffix for each generated name."""
    news = {template.name: clone_name, f'"{template.node}"': f'"{node}"', f'"{template.pod_ip}"': f'"{ip}"'}
    news.update({uid: new_uid() for uid in template.uids})
    for name, generate_name in template.generated_names:
        news[name] = generate_name.replace(template.name, clone_name, 1) + name_suffix(rng)
    if template.service_account_volume is not None:
        news[template.service_account_volume] = SERVICE_ACCOUNT_VOLUME_PREFIX + name_suffix(rng)
    return news


# -- etcd ---------------------------------------------------------------------------------------------


class EtcdError(RuntimeError):
    pass


class Etcd:
    """etcd's v3 API through its gRPC gateway (``/v3/...``, JSON with base64 keys and values)."""

    def __init__(self, url: str, session: aiohttp.ClientSession):
        self.url = url.rstrip("/")
        self.session = session

    async def _call(self, path: str, body: JSON) -> JSON:
        async with self.session.post(self.url + path, json=body) as response:
            text = await response.text()
            if response.status != 200:
                raise EtcdError(f"etcd {path}: {response.status} {text[:500]}")
            answer: JSON = json.loads(text)
            return answer

    async def txn(self, puts: Sequence[tuple[str, str]]) -> int:
        """Write ``puts`` in one transaction; the revision it made."""
        answer = await self._call("/v3/kv/txn", txn_body(puts))
        if not answer.get("succeeded", False):
            raise EtcdError(f"etcd transaction of {[k for k, _ in puts]} did not succeed: {answer}")
        return int(answer["header"]["revision"])

    async def get(self, key: str) -> JSON | None:
        """The key's value (decoded JSON, or None for protobuf) and mod revision, None when absent."""
        answer = await self._call("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()})
        kvs = answer.get("kvs") or []
        if not kvs:
            return None
        value = base64.b64decode(kvs[0].get("value", ""))
        decoded = json.loads(value) if value.startswith(b"{") else None
        return {"value": decoded, "mod_revision": int(kvs[0]["mod_revision"])}

    async def revision(self) -> int:
        answer = await self._call("/v3/kv/range", {"key": base64.b64encode(REGISTRY.encode()).decode()})
        return int(answer["header"]["revision"])

    async def written_since(self, revision: int, prefix: str = REGISTRY + "/") -> dict[str, int]:
        """How many keys under ``prefix`` were last written after ``revision``, by resource."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        body = {
            "key": base64.b64encode(prefix.encode()).decode(),
            "range_end": base64.b64encode(end.encode()).decode(),
            "keys_only": True,
            "min_mod_revision": revision + 1,
        }
        answer = await self._call("/v3/kv/range", body)
        counts: dict[str, int] = {}
        for kv in answer.get("kvs") or []:
            parts = base64.b64decode(kv["key"]).decode().removeprefix(REGISTRY + "/").split("/")
            # A group's resources are one level down (sparkop.io/sparkdrivers), as are a Service's parts.
            resource = "/".join(parts[:2]) if "." in parts[0] or parts[0] == "services" else parts[0]
            counts[resource] = counts.get(resource, 0) + 1
        return dict(sorted(counts.items()))

    async def db_size_bytes(self) -> int:
        answer = await self._call("/v3/maintenance/status", {})
        return int(answer["dbSize"])
