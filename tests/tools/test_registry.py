"""devcluster/registry.py without containerd: its routes, how it reads `ctr images ls`, the hosts.toml
it writes, and its answers over HTTP from a content store laid out as containerd lays out its own."""

from __future__ import annotations

import hashlib
import http.client
import json
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from devcluster import nodes, registry
from devcluster.nodes import real_node
from devcluster.registry import NodeStore, Route, Target

SPARK = "docker.io/apache/spark:3.5.9"
DIGEST = "sha256:" + "e6" * 32


def test_routes_name_the_node_the_repository_and_a_tag_or_digest() -> None:
    assert registry.route("/real-node-0/v2/") == Route("real-node-0", "root")
    assert registry.route("/real-node-1/v2/apache/spark/manifests/3.5.9") == Route(
        "real-node-1", "manifests", "apache/spark", "3.5.9"
    )
    by_digest = registry.route(f"/real-node-0/v2/library/spark/manifests/{DIGEST}")
    assert by_digest == Route("real-node-0", "manifests", "library/spark", DIGEST) and by_digest.by_digest
    assert registry.route(f"/real-node-0/v2/devcluster/base-image/blobs/{DIGEST}") == Route(
        "real-node-0", "blobs", "devcluster/base-image", DIGEST
    )


@pytest.mark.parametrize(
    "path",
    [
        "/v2/",  # no node
        "/real-node-0/v2",  # the API root ends with a slash
        "/real-node-0/v2/Apache/spark/manifests/3.5.9",  # names are lower case
        "/real-node-0/v2/apache/spark/blobs/3.5.9",  # a blob is named by its digest only
        "/real-node-0/v2/apache/spark/manifests/-bad",  # a tag does not start with '-'
        f"/real-node-0/v2/apache/spark/blobs/sha256:{'E6' * 32}",  # digests are lower-case hex
        "/real-node-0/v2/../etc/blobs/" + DIGEST,
        "/real-node-0/v2/apache/spark/tags/list",  # not served
    ],
)
def test_paths_outside_the_pull_api_have_no_route(path: str) -> None:
    assert registry.route(path) is None


MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
# `ctr images ls` pads its columns with spaces (a tabwriter); an image's config digest names it too.
CTR_IMAGES_LS = "\n".join(
    [
        "REF" + " " * 40 + "TYPE" + " " * 49 + "DIGEST  SIZE      PLATFORMS   LABELS",
        f"{SPARK}    {MANIFEST_TYPE} {DIGEST} 743.7 MiB linux/amd64 io.cri-containerd.image=managed",
        f"sha256:{'06' * 32} {MANIFEST_TYPE} {DIGEST} 743.7 MiB linux/amd64 -",
        "",
    ]
)


def test_ctr_images_ls_gives_each_names_target() -> None:
    targets = registry.parse_image_list(CTR_IMAGES_LS)
    assert targets[SPARK] == Target(MANIFEST_TYPE, DIGEST)
    assert len(targets) == 2
    assert registry.parse_image_list("REF TYPE DIGEST SIZE PLATFORMS LABELS\n") == {}


def test_a_manifest_says_its_media_type_or_its_shape_does() -> None:
    docker = json.dumps({"schemaVersion": 2, "mediaType": registry.DOCKER_MANIFEST, "layers": []}).encode()
    assert registry.manifest_media_type(docker) == registry.DOCKER_MANIFEST
    assert registry.manifest_media_type(b'{"schemaVersion":2,"layers":[]}') == registry.OCI_MANIFEST
    assert registry.manifest_media_type(b'{"schemaVersion":2,"manifests":[]}') == registry.OCI_INDEX


def test_each_node_resolves_every_registry_host_at_its_own_view_and_nowhere_else(tmp_path: Path) -> None:
    node = real_node(1, tmp_path / "cluster", tmp_path / "images")
    # `_default`: the namespace containerd 1.6 falls back to for any host without a directory of its own.
    assert Path("_default/hosts.toml") == nodes.REGISTRY_HOSTS_FILE
    config = tomllib.loads(nodes.registry_hosts_toml(node, 5123))
    # A URL whose path ends in /v2 is used as is. containerd 1.6.20 ignores a file without a host table;
    # the same view as `server` leaves no registry outside to fall back to.
    view = "http://127.0.0.1:5123/real-node-1/v2"
    assert nodes.registry_url(5123, node) == view
    assert config == {"server": view, "host": {view: {"capabilities": ["pull", "resolve"]}}}


def test_the_server_argv_names_each_nodes_socket_and_store(tmp_path: Path) -> None:
    real = [real_node(i, tmp_path, tmp_path / "images") for i in range(2)]
    argv = nodes.registry_argv(5123, real)
    assert argv[1:5] == ["-m", "devcluster.registry", "--port", "5123"]
    assert argv[5:9] == ["--node", "real-node-0", str(real[0].containerd_socket), str(real[0].image_store)]
    assert argv[9:] == ["--node", "real-node-1", str(real[1].containerd_socket), str(real[1].image_store)]


# -- over HTTP, with a content store on disk and image names from a table instead of containerd -----


@dataclass(frozen=True)
class TableStore(NodeStore):
    names: dict[str, Target] = field(default_factory=dict)

    def target(self, image: str) -> Target | None:
        return self.names.get(image)


def put_blob(root: Path, content: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(content).hexdigest()
    path = root / registry.CONTENT_BLOBS / "sha256" / digest.removeprefix("sha256:")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return digest


@dataclass(frozen=True)
class Served:
    port: int
    manifest: bytes
    manifest_digest: str
    layer: bytes
    layer_digest: str


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    layer = bytes(range(256)) * 4096
    layer_digest = put_blob(tmp_path, layer)
    config_digest = put_blob(tmp_path, b'{"architecture":"amd64"}')
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": registry.DOCKER_MANIFEST,
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": config_digest},
            "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar", "digest": layer_digest}],
        },
        separators=(",", ":"),
    ).encode()
    manifest_digest = put_blob(tmp_path, manifest)
    names = {SPARK: Target(registry.DOCKER_MANIFEST, manifest_digest)}
    server = registry.RegistryServer(0, [TableStore("real-node-0", tmp_path / "sock", tmp_path, names)])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(server.server_address[1], manifest, manifest_digest, layer, layer_digest)
    finally:
        server.shutdown()
        server.server_close()


def request(served: Served, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_a_head_on_a_tag_resolves_to_the_digest_the_node_holds(served: Served) -> None:
    status, headers, body = request(served, "HEAD", "/real-node-0/v2/apache/spark/manifests/3.5.9?ns=docker.io")
    assert status == 200 and body == b""
    assert headers["docker-content-digest"] == served.manifest_digest
    assert headers["content-type"] == registry.DOCKER_MANIFEST
    assert headers["content-length"] == str(len(served.manifest))
    assert headers["docker-distribution-api-version"] == "registry/2.0"


def test_manifests_and_blobs_come_back_byte_for_byte(served: Served) -> None:
    status, headers, body = request(served, "GET", "/real-node-0/v2/apache/spark/manifests/3.5.9?ns=docker.io")
    assert status == 200 and body == served.manifest
    assert "sha256:" + hashlib.sha256(body).hexdigest() == headers["docker-content-digest"]
    status, headers, body = request(served, "GET", f"/real-node-0/v2/apache/spark/manifests/{served.manifest_digest}")
    assert status == 200 and body == served.manifest and headers["content-type"] == registry.DOCKER_MANIFEST
    status, headers, body = request(served, "GET", f"/real-node-0/v2/apache/spark/blobs/{served.layer_digest}")
    assert status == 200 and body == served.layer and headers["content-length"] == str(len(served.layer))
    status, headers, body = request(served, "HEAD", f"/real-node-0/v2/apache/spark/blobs/{served.layer_digest}")
    assert status == 200 and body == b"" and headers["content-length"] == str(len(served.layer))
    assert request(served, "GET", "/real-node-0/v2/")[:1] == (200,)


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/real-node-0/v2/apache/spark/manifests/9.9.9?ns=docker.io", "MANIFEST_UNKNOWN"),
        ("/real-node-0/v2/apache/spark/manifests/3.5.9?ns=quay.io", "MANIFEST_UNKNOWN"),  # another host's image
        ("/real-node-0/v2/apache/spark/manifests/3.5.9", "NAME_UNKNOWN"),  # no ns: not asked through containerd
        (f"/real-node-0/v2/apache/spark/blobs/sha256:{'0' * 64}", "BLOB_UNKNOWN"),
        ("/real-node-7/v2/apache/spark/manifests/3.5.9?ns=docker.io", "NAME_UNKNOWN"),  # no such node
        ("/real-node-0/v2/apache/spark/tags/list", "NAME_INVALID"),
    ],
)
def test_what_the_node_does_not_hold_is_not_found_with_a_registry_error(served: Served, path: str, code: str) -> None:
    status, headers, body = request(served, "GET", path)
    assert status == 404 and headers["content-type"] == "application/json"
    assert [error["code"] for error in json.loads(body)["errors"]] == [code]
