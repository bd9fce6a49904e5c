"""bench/etcd_seed.py's pure parts: where the API server keeps each object, how a clone is renamed and
its times moved, and how its puts are cut into etcd transactions."""

from __future__ import annotations

import base64
import json
import random
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import etcd_seed  # noqa: E402

from sparkop.core.jsontypes import JSON  # noqa: E402
from sparkop.domain import kinds  # noqa: E402

NAMESPACE = "scale"


def meta(name: str, uid: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "namespace": NAMESPACE, "uid": uid, "resourceVersion": "42", **more}


def test_each_kind_a_finished_app_leaves_has_the_key_the_api_server_keeps_it_under() -> None:
    # As read from a devcluster's etcd after the templates ran (`/v3/kv/range --keys-only /registry`).
    expected = {
        ("sparkop.io/v1alpha1", "SparkApplication", "tmpl-0"): "/registry/sparkop.io/sparkapplications/scale/tmpl-0",
        ("sparkop.io/v1alpha1", "SparkDriver", "tmpl-0-1"): "/registry/sparkop.io/sparkdrivers/scale/tmpl-0-1",
        ("v1", "Pod", "tmpl-0-driver"): "/registry/pods/scale/tmpl-0-driver",
        ("v1", "ConfigMap", "tmpl-0-1-1-conf-map"): "/registry/configmaps/scale/tmpl-0-1-1-conf-map",
        ("v1", "Service", "tmpl-0-1-1-driver-svc"): "/registry/services/specs/scale/tmpl-0-1-1-driver-svc",
        ("v1", "Endpoints", "tmpl-0-1-1-driver-svc"): "/registry/services/endpoints/scale/tmpl-0-1-1-driver-svc",
        ("discovery.k8s.io/v1", "EndpointSlice", "tmpl-0-1-1-driver-svc-brh8z"): (
            "/registry/endpointslices/scale/tmpl-0-1-1-driver-svc-brh8z"
        ),
    }
    assert kinds.SPARK_APPLICATIONS.plural == "sparkapplications"  # the import registers sparkop's kinds
    for (api_version, kind, name), key in expected.items():
        obj = {"apiVersion": api_version, "kind": kind, "metadata": meta(name, "u")}
        assert etcd_seed.registry_key(obj) == key
        assert etcd_seed.resource_prefix(key) == key.rsplit("/", 2)[0]


def test_a_kind_whose_key_is_not_known_is_refused_with_the_way_out() -> None:
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta("ui", "u")}
    with pytest.raises(ValueError, match="--seed api"):
        etcd_seed.registry_key(ingress)


def test_times_move_by_the_same_amount_and_keep_their_form() -> None:
    text = '{"a":"2026-12-06T22:30:43Z","b":"2026-12-06T23:59:59.589254Z","c":"not 2026-12-06T22:30:43Z"}'
    moved = json.loads(etcd_seed.shift_times(text, timedelta(hours=1, seconds=17)))
    assert moved == {"a": "2026-12-06T23:31:00Z", "b": "2026-12-07T01:00:16.589254Z", "c": "not 2026-12-06T22:30:43Z"}


def test_renaming_is_one_pass_and_the_longest_name_wins() -> None:
    renamer = etcd_seed.Renamer(["tmpl-0", "tmpl-0-svc-brh8z", "uid-1"])
    text = "tmpl-0-driver tmpl-0-svc-brh8z uid-1"
    # "tmpl-0" -> "uid-1" is not then renamed again as the template's "uid-1".
    news = {"tmpl-0": "uid-1", "tmpl-0-svc-brh8z": "app-7-svc-x2x2x", "uid-1": "uid-9"}
    assert renamer(text, news) == "uid-1-driver app-7-svc-x2x2x uid-9"
    with pytest.raises(ValueError, match="no new value"):
        renamer(text, {"tmpl-0": "app-7"})


def template_objects() -> list[JSON]:
    owner = {"apiVersion": "sparkop.io/v1alpha1", "kind": "SparkDriver", "name": "tmpl-0-1", "uid": "uid-driver"}
    service_owner = {"apiVersion": "v1", "kind": "Service", "name": "tmpl-0-svc", "uid": "uid-svc"}
    managed = [{"manager": "sparkop", "time": "2026-12-06T22:30:44Z", "fieldsV1": {'k:{"uid":"uid-driver"}': {}}}]
    return [
        {
            "apiVersion": "sparkop.io/v1alpha1",
            "kind": "SparkApplication",
            "metadata": meta("tmpl-0", "uid-app", generation=1, creationTimestamp="2026-12-06T22:30:43Z"),
            "status": {"sparkApplicationId": "spark-abc", "lastSubmissionAttemptTime": "2026-12-06T22:30:44Z"},
        },
        {
            "apiVersion": "sparkop.io/v1alpha1",
            "kind": "SparkDriver",
            "metadata": meta("tmpl-0-1", "uid-driver", generation=1, creationTimestamp="2026-12-06T22:30:43Z"),
            "status": {"driverPod": {"name": "tmpl-0-driver", "nodeName": "kwok-node-0", "podIP": "10.244.0.3"}},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta("tmpl-0-conf", "uid-cm1", ownerReferences=[owner], managedFields=managed),
            "data": {"spark.properties": "spark.app.id=spark-abc\nspark.app.name=tmpl-0\n"},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta("tmpl-0-podspec", "uid-cm2", ownerReferences=[owner]),
        },
        {"apiVersion": "v1", "kind": "Service", "metadata": meta("tmpl-0-svc", "uid-svc", ownerReferences=[owner])},
        etcd_seed.settled_endpoints(
            {
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": meta(
                    "tmpl-0-svc",
                    "uid-ep",
                    annotations={"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-06T22:30:44Z"},
                ),
                "subsets": [{"notReadyAddresses": [{"ip": "10.244.0.3", "nodeName": "kwok-node-0"}]}],
            }
        ),
        etcd_seed.settled_endpoint_slice(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": meta(
                    "tmpl-0-svc-brh8z", "uid-slice", generateName="tmpl-0-svc-", ownerReferences=[service_owner]
                ),
                "endpoints": [{"addresses": ["10.244.0.3"], "conditions": {"ready": False}}],
                "ports": [{"name": "spark-ui", "port": 4040}],
            }
        ),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta("tmpl-0-driver", "uid-pod", ownerReferences=[owner]),
            "spec": {
                "nodeName": "kwok-node-0",
                "volumes": [{"name": "kube-api-access-srgjt"}],
                "containers": [{"volumeMounts": [{"name": "kube-api-access-srgjt"}]}],
            },
            "status": {"phase": "Succeeded", "podIP": "10.244.0.3", "startTime": "2026-12-06T22:30:44Z"},
        },
    ]


def test_a_clone_is_its_template_renamed_throughout_as_the_api_server_would_store_it() -> None:
    shift = timedelta(minutes=10)
    stored = etcd_seed.stored_template("tmpl-0", template_objects(), ["spark-abc"], "kwok-node-0", "10.244.0.3", shift)
    news = etcd_seed.clone_renames(stored, "app-00007", node="kwok-node-3", ip="10.244.1.7", rng=random.Random(1))
    news["spark-abc"] = "spark-def"
    puts = etcd_seed.clone_puts(stored, news)
    objects = {key: json.loads(value) for key, value in puts}
    by_kind = {(o["kind"], o["metadata"]["name"]): o for o in objects.values()}

    # Every object: a fresh uid of its own, no resourceVersion (etcd's revision is it), its key renamed.
    uids = {o["metadata"]["uid"] for o in objects.values()}
    assert len(uids) == len(objects) and not uids & set(stored.uids)
    assert not any("resourceVersion" in o["metadata"] for o in objects.values())
    for key, obj in objects.items():
        assert key == etcd_seed.registry_key(obj)
    text = " ".join(value for _, value in puts)
    for old in ("tmpl-0", "uid-", "spark-abc", "kwok-node-0", "10.244.0.3", "srgjt", "brh8z"):
        assert old not in text

    driver = by_kind[("SparkDriver", "app-00007-1")]
    pod = by_kind[("Pod", "app-00007-driver")]
    # Owners and their dependents agree on the new uids, managedFields' keys included.
    conf = by_kind[("ConfigMap", "app-00007-conf")]
    assert conf["metadata"]["ownerReferences"][0]["uid"] == driver["metadata"]["uid"]
    assert list(conf["metadata"]["managedFields"][0]["fieldsV1"]) == [f'k:{{"uid":"{driver["metadata"]["uid"]}"}}']
    assert conf["data"]["spark.properties"] == "spark.app.id=spark-def\nspark.app.name=app-00007\n"
    service = by_kind[("Service", "app-00007-svc")]
    (slice_,) = [o for o in objects.values() if o["kind"] == "EndpointSlice"]
    assert slice_["metadata"]["ownerReferences"][0]["uid"] == service["metadata"]["uid"]
    assert slice_["metadata"]["name"].startswith("app-00007-svc-") and len(slice_["metadata"]["name"]) == 19
    # The pod is on the clone's node with the clone's IP, and its SparkDriver says so.
    assert pod["spec"]["nodeName"] == driver["status"]["driverPod"]["nodeName"] == "kwok-node-3"
    assert pod["status"]["podIP"] == driver["status"]["driverPod"]["podIP"] == "10.244.1.7"
    (volume,) = pod["spec"]["volumes"]
    assert volume["name"].startswith("kube-api-access-") and volume == pod["spec"]["containers"][0]["volumeMounts"][0]
    # Times moved together; the Endpoints and EndpointSlice are the full sync's: no finished pod in them.
    app = by_kind[("SparkApplication", "app-00007")]
    assert app["metadata"]["creationTimestamp"] == "2026-12-06T22:40:43Z"
    assert app["status"]["lastSubmissionAttemptTime"] == pod["status"]["startTime"] == "2026-12-06T22:40:44Z"
    endpoints = by_kind[("Endpoints", "app-00007-svc")]
    assert "subsets" not in endpoints and "annotations" not in endpoints["metadata"]
    assert "endpoints" not in slice_ and "ports" not in slice_  # the placeholder of a Service with no endpoints


def test_a_clone_goes_in_transactions_with_one_object_of_a_resource_each_owners_first() -> None:
    stored = etcd_seed.stored_template(
        "tmpl-0", template_objects(), ["spark-abc"], "kwok-node-0", "10.244.0.3", timedelta(0)
    )
    news = etcd_seed.clone_renames(stored, "app-00001", node="kwok-node-1", ip="10.244.1.1", rng=random.Random(2))
    news["spark-abc"] = "spark-def"
    batches = etcd_seed.transactions(etcd_seed.clone_puts(stored, news))
    resources = [[etcd_seed.resource_prefix(key).removeprefix("/registry/") for key, _ in batch] for batch in batches]
    assert resources == [
        ["sparkop.io/sparkapplications", "sparkop.io/sparkdrivers", "configmaps"],
        ["configmaps", "services/specs", "services/endpoints", "endpointslices", "pods"],
    ]
    # An owner is in the same transaction as its dependent or an earlier one.
    where = {json.loads(v)["metadata"]["uid"]: n for n, batch in enumerate(batches) for _, v in batch}
    for n, batch in enumerate(batches):
        for _, value in batch:
            for owner in json.loads(value)["metadata"].get("ownerReferences") or []:
                assert where[owner["uid"]] <= n
    body = etcd_seed.txn_body(batches[0])
    first = body["success"][0]["requestPut"]
    assert base64.b64decode(first["key"]).decode() == "/registry/sparkop.io/sparkapplications/scale/app-00001"
    assert json.loads(base64.b64decode(first["value"]))["metadata"]["name"] == "app-00001"


def test_transactions_stay_within_etcds_limits() -> None:
    many = [(f"/registry/r{i}/ns/n", "x") for i in range(300)]
    assert [len(b) for b in etcd_seed.transactions(many)] == [128, 128, 44]
    big = [(f"/registry/r{i}/ns/n", "x" * 300_000) for i in range(6)]
    assert all(sum(len(v) for _, v in b) <= etcd_seed.MAX_REQUEST_BYTES for b in etcd_seed.transactions(big))


def test_clone_pod_ips_are_distinct_and_in_the_pod_range() -> None:
    ips = [etcd_seed.pod_ip(i) for i in range(50_000)]
    assert len(set(ips)) == len(ips)
    assert ips[0] == "10.244.1.0" and ips[-1] == "10.244.196.79"
    with pytest.raises(ValueError, match="no address"):
        etcd_seed.pod_ip(255 * 256)
