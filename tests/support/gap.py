"""A watch gap a client cannot resume from: etcd forgets the history (compaction) and the API server's
watch cache starts over (restart), so every watch from before is answered 410 Gone."""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import Any

from devcluster.testing import ClusterHandle


def compact_etcd_and_restart_apiserver(cluster: ClusterHandle) -> int:
    """Compact etcd up to its current revision, restart the API server; returns the revision.

    Call it from the thread that lives as long as the cluster: the processes a devcluster starts die
    with the thread that started them."""
    assert cluster.cluster is not None
    url = f"http://127.0.0.1:{cluster.cluster.ports.etcd_client}"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            result: dict[str, Any] = json.load(response)
            return result

    revision = int(post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    post("/v3/kv/compaction", {"revision": revision, "physical": True})
    cluster.restart_apiserver()
    return revision
