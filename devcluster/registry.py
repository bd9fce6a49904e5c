"""A read-only OCI distribution server over the real nodes' own containerd stores.

No registry is reachable from this machine, so the kubelet's pull for a container with
`imagePullPolicy: Always` (and for an image tagged `latest` with no policy) used to fail with
ErrImagePull. Each node's containerd is told (`config_path`, a `_default/hosts.toml` per node:
containerd 1.6's documented registry host configuration) that every registry host it pulls from is
this server, over plain HTTP, under a path of its own node (`/<node>/v2/`).

The server answers from exactly what that node's containerd holds, nothing it computed:

* a tag (`HEAD/GET /<node>/v2/<name>/manifests/<tag>?ns=<registry host>`, containerd names the
  image's own registry host in `ns`) resolves through `ctr images ls` on the node's socket, so an
  image imported from a docker-archive and every alias made with `ctr images tag` since resolve
  to the digest the node already stores;
* a manifest by digest and a blob (`/<node>/v2/<name>/blobs/<digest>`) are read from the node's
  content store on disk (`<root>/io.containerd.content.v1.content/blobs/sha256/<hex>`, where
  containerd writes each blob, named by its digest, once committed).

So a pull with Always costs one HEAD request: containerd finds the manifest, config and layers it
resolves to in its store already, fetches none of them and unpacks nothing. An image the node
does not hold answers 404 (containerd reports "not found") at once, instead of after a lookup of
a registry that cannot be reached. Nothing here writes to a store: the server has no push API.

Run by the cluster as `python -m devcluster.registry --port P --node NAME SOCKET ROOT ...`
(`nodes.registry_argv`; `nodes.registry_hosts_toml` is each node's hosts.toml).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from devcluster.realnodes import CTR

LOCALHOST = "127.0.0.1"
CTR_TIMEOUT_S = 30.0
CONTENT_BLOBS = Path("io.containerd.content.v1.content") / "blobs"

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"

# The distribution spec's grammar (v1.0.0, "Pulling manifests"): a repository name of
# slash-separated components, a tag, and a digest (containerd's content store holds sha256 only).
NAME_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
NAME = rf"{NAME_COMPONENT}(?:/{NAME_COMPONENT})*"
TAG = r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}"
DIGEST = r"sha256:[a-f0-9]{64}"
NODE = r"[a-z0-9][a-z0-9-]*"
ROUTE = re.compile(rf"^/(?P<node>{NODE})/v2/(?:(?P<name>{NAME})/(?P<kind>manifests|blobs)/(?P<reference>[^/]+))?$")


@dataclass(frozen=True)
class Route:
    """What a request asks: the API root of a node, or one of its manifests or blobs."""

    node: str
    kind: Literal["root", "manifests", "blobs"]
    name: str = ""
    reference: str = ""

    @property
    def by_digest(self) -> bool:
        return re.fullmatch(DIGEST, self.reference) is not None


def route(path: str) -> Route | None:
    """The route of a request path (without its query), or None when the API has no such path."""
    matched = ROUTE.match(path)
    if matched is None:
        return None
    node, name, kind, reference = matched.group("node", "name", "kind", "reference")
    if kind is None:
        return Route(node, "root")
    if kind == "blobs" and re.fullmatch(DIGEST, reference) is None:
        return None
    if kind == "manifests" and re.fullmatch(TAG, reference) is None and re.fullmatch(DIGEST, reference) is None:
        return None
    return Route(node, "manifests" if kind == "manifests" else "blobs", name, reference)


def image_name(namespace: str, name: str, tag: str) -> str:
    """The image containerd stores for `<namespace>/<name>:<tag>` (names are stored normalised)."""
    return f"{namespace}/{name}:{tag}"


@dataclass(frozen=True)
class Target:
    """What an image name points to in containerd's image store."""

    media_type: str
    digest: str


def parse_image_list(output: str) -> dict[str, Target]:
    """`ctr images ls` (columns REF TYPE DIGEST SIZE PLATFORMS LABELS): each image's target."""
    targets: dict[str, Target] = {}
    for line in output.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3 and re.fullmatch(DIGEST, fields[2]):
            targets[fields[0]] = Target(media_type=fields[1], digest=fields[2])
    return targets


def manifest_media_type(body: bytes) -> str:
    """A manifest's media type from its own bytes: its `mediaType`, which Docker's manifests always
    carry and OCI's may leave out (then an index is the one with `manifests`)."""
    document = json.loads(body)
    declared = document.get("mediaType") if isinstance(document, dict) else None
    if isinstance(declared, str) and declared:
        return declared
    return OCI_INDEX if isinstance(document, dict) and "manifests" in document else OCI_MANIFEST


@dataclass(frozen=True)
class NodeStore:
    """One real node's containerd: its socket (for image names) and its root (for content)."""

    name: str
    socket: Path
    root: Path

    def blob_path(self, digest: str) -> Path:
        algorithm, _, encoded = digest.partition(":")
        return self.root / CONTENT_BLOBS / algorithm / encoded

    def target(self, image: str) -> Target | None:
        """The image's target, asked of containerd itself (its names are not on disk in a readable form)."""
        result = subprocess.run(
            [CTR, "--address", str(self.socket), "--namespace", "k8s.io", "images", "ls", f"name=={json.dumps(image)}"],
            capture_output=True,
            text=True,
            timeout=CTR_TIMEOUT_S,
            check=False,
        )
        if result.returncode != 0:
            raise RegistryError(f"ctr images ls on {self.name}: {result.stderr.strip()}")
        return parse_image_list(result.stdout).get(image)


class RegistryError(RuntimeError):
    pass


@dataclass(frozen=True)
class Answer:
    status: HTTPStatus
    headers: dict[str, str]
    body: bytes = b""
    file: Path | None = None  # a blob, streamed after the headers


def error_answer(status: HTTPStatus, code: str, message: str) -> Answer:
    body = json.dumps({"errors": [{"code": code, "message": message}]}).encode()
    return Answer(status, {"Content-Type": "application/json", "Content-Length": str(len(body))}, body)


def answer(stores: dict[str, NodeStore], path: str, query: str) -> Answer:
    """The response to a GET (a HEAD sends its headers only)."""
    found = route(path)
    if found is None:
        return error_answer(HTTPStatus.NOT_FOUND, "NAME_INVALID", f"no such path in the distribution API: {path}")
    store = stores.get(found.node)
    if store is None:
        return error_answer(HTTPStatus.NOT_FOUND, "NAME_UNKNOWN", f"no real node {found.node!r} in this cluster")
    if found.kind == "root":
        return Answer(HTTPStatus.OK, {"Content-Type": "application/json", "Content-Length": "2"}, b"{}")
    if found.kind == "blobs":
        blob = store.blob_path(found.reference)
        if not blob.is_file():
            return error_answer(HTTPStatus.NOT_FOUND, "BLOB_UNKNOWN", f"{store.name} holds no blob {found.reference}")
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(blob.stat().st_size)}
        return Answer(HTTPStatus.OK, {**headers, "Docker-Content-Digest": found.reference}, file=blob)
    digest, media_type = found.reference, ""
    if not found.by_digest:
        namespace = parse_qs(query).get("ns", [""])[0]
        if not namespace:
            return error_answer(
                HTTPStatus.NOT_FOUND,
                "NAME_UNKNOWN",
                "no ns parameter: pull through containerd, which names the registry",
            )
        image = image_name(namespace, found.name, found.reference)
        target = store.target(image)
        if target is None:
            return error_answer(HTTPStatus.NOT_FOUND, "MANIFEST_UNKNOWN", f"{store.name} holds no image {image}")
        digest, media_type = target.digest, target.media_type
    try:
        body = store.blob_path(digest).read_bytes()
    except FileNotFoundError:
        return error_answer(HTTPStatus.NOT_FOUND, "MANIFEST_UNKNOWN", f"{store.name} holds no manifest {digest}")
    headers = {
        "Content-Type": media_type or manifest_media_type(body),
        "Content-Length": str(len(body)),
        "Docker-Content-Digest": digest,
    }
    return Answer(HTTPStatus.OK, headers, body)


class RegistryServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, stores: Sequence[NodeStore]) -> None:
        super().__init__((LOCALHOST, port), RegistryHandler)
        self.stores = {store.name: store for store in stores}


class RegistryHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # containerd keeps its connections open
    server: RegistryServer

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, *, send_body: bool) -> None:
        started = time.monotonic()
        parts = urlsplit(self.path)
        try:
            reply = answer(self.server.stores, parts.path, parts.query)
        except (RegistryError, subprocess.TimeoutExpired, OSError, ValueError) as error:
            reply = error_answer(HTTPStatus.INTERNAL_SERVER_ERROR, "UNKNOWN", str(error))
        self.send_response(reply.status)
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        if send_body:
            if reply.file is not None:
                with reply.file.open("rb") as handle:
                    self.connection.sendfile(handle)
            else:
                self.wfile.write(reply.body)
        elapsed_ms = (time.monotonic() - started) * 1000
        length = reply.headers.get("Content-Length", "0")
        print(f"{self.command} {self.path} {reply.status.value} {length}B {elapsed_ms:.0f}ms", flush=True)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _respond logs each request once, with its time


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster.registry", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--node", nargs=3, action="append", default=[], metavar=("NAME", "SOCKET", "ROOT"), help="a node's containerd"
    )
    args = parser.parse_args(argv)
    stores = [NodeStore(name, Path(socket), Path(root)) for name, socket, root in args.node]
    server = RegistryServer(args.port, stores)
    print(f"serving {', '.join(store.name for store in stores)} on {LOCALHOST}:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
