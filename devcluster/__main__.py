"""CLI: python -m devcluster {up,down,status,restart,node,build,prepare,images,list,prune}.

Progress goes to stderr; `up` prints `export KUBECONFIG=...` as the last line of stdout,
so `eval "$(python -m devcluster up)"` works.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from devcluster import components
from devcluster.build import (
    KUBERNETES_ENV,
    LATER_BUILDS,
    BuildError,
    ensure_built,
    ensure_node_binaries,
    kubernetes_releases,
    later_steps,
    select_release,
)
from devcluster.cluster import (
    DEFAULT_NAME,
    RESTART_TARGETS,
    Cluster,
    ClusterError,
    list_clusters,
    prune,
    real_node_cluster,
    remove_cluster,
    stderr_log,
)
from devcluster.images import ImageError, ensure_images
from devcluster.realnodes import RealNodeError, install_missing_packages

PREPARE_STAGES = ("first", "later", "all")


def _schedulers(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in components.SCHEDULERS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown scheduler {', '.join(unknown)}: choose from {', '.join(components.SCHEDULERS)}"
        )
    return tuple(name for name in components.SCHEDULERS if name in names)


def _kubernetes(text: str) -> str:
    try:
        return select_release(text).minor
    except BuildError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m devcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    releases = kubernetes_releases()
    release = argparse.ArgumentParser(add_help=False)
    release.add_argument(
        "--kubernetes",
        type=_kubernetes,
        metavar="MINOR",
        help=f"the Kubernetes release to build and run: {', '.join(r.minor for r in releases)}, a pinned version, "
        f"oldest or newest; default ${KUBERNETES_ENV}, else the newest ({releases[-1].kubernetes})",
    )

    up = sub.add_parser("up", parents=[release], help="start a cluster (building binaries first if needed)")
    up.add_argument("--name", default=DEFAULT_NAME)
    up.add_argument("--nodes", type=int, default=3, help="number of fake kwok nodes")
    up.add_argument("--node-cpu", default="8", help="allocatable CPU per node (quantity)")
    up.add_argument("--node-memory", default="32Gi", help="allocatable memory per node (quantity)")
    up.add_argument("--no-simulator", dest="simulator", action="store_false", help="no Spark-driver simulator")
    up.add_argument(
        "--real-nodes",
        type=int,
        default=0,
        metavar="N",
        help="also start N real nodes (containerd + kubelet, with kube-proxy and CoreDNS); needs root",
    )
    up.add_argument(
        "--node-lifecycle",
        action="store_true",
        help="run the node-lifecycle and taint-eviction controllers without real nodes too (real nodes always have "
        "them): a fake node whose Lease kwok stops renewing turns NotReady as a real one does",
    )
    up.add_argument(
        "--schedulers",
        type=_schedulers,
        default=(),
        metavar="LIST",
        help=f"also run these batch schedulers, comma-separated (of: {', '.join(components.SCHEDULERS)}), "
        "built from their Go modules on first use",
    )
    up.add_argument(
        "--gateway",
        choices=components.GATEWAYS,
        default=None,
        help="also run a Gateway API implementation (HTTPRoute, GRPCRoute) with a Gateway default/devcluster on "
        "127.0.0.1, built from its Go module on first use",
    )
    up.add_argument(
        "--timeout", type=float, default=90.0, help="seconds to wait for readiness (a first build is not counted)"
    )

    for command, text in (("down", "stop a cluster and delete its data"), ("status", "show a cluster")):
        sub.add_parser(command, help=text).add_argument("--name", default=DEFAULT_NAME)

    restart = sub.add_parser("restart", help="restart kube-apiserver and/or etcd (or another component) in place")
    restart.add_argument("--name", default=DEFAULT_NAME)
    restart.add_argument("component", nargs="?", choices=tuple(RESTART_TARGETS), default="all")

    node = sub.add_parser(
        "node", help="lose a real node (kill: SIGKILL its kubelet, containerd and containers) or bring it back (start)"
    )
    node.add_argument("--name", default=DEFAULT_NAME)
    node.add_argument("action", choices=("kill", "start"))
    node.add_argument("node", metavar="NODE", help="a real node's name, e.g. real-node-1")

    build = sub.add_parser("build", parents=[release], help="build the control-plane binaries into the cache")
    build.add_argument("--real-nodes", action="store_true", help="also build the real-node binaries")
    prepare = sub.add_parser(
        "prepare",
        parents=[release],
        help="everything the tests and real nodes need, once: Debian packages (apt-get), binaries and images "
        "(a no-op when warm)",
    )
    prepare.add_argument(
        "--stage",
        choices=PREPARE_STAGES,
        default="all",
        help="first: what every test needs (packages, the control plane, the real-node binaries, the images); "
        f"later: what only some need ({', '.join(LATER_BUILDS)}), which `make test` builds beside the suite; "
        "all (default): both",
    )
    images = sub.add_parser(
        "images",
        help="build the real nodes' images into the cache, and import them into the running real nodes if any",
    )
    images.add_argument("--spark", action="append", metavar="VERSION", help="Spark version (default: the pinned ones)")
    sub.add_parser("list", help="list known clusters")
    prune_cmd = sub.add_parser("prune", help="remove clusters whose processes are all gone")
    prune_cmd.add_argument("--prefix", default="")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except (ClusterError, BuildError, RealNodeError, ImageError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    if getattr(args, "kubernetes", None):
        # The environment carries the choice: every build and `up` in this process (and its children)
        # follows it, as it follows a SPARKOP_KUBERNETES set by the caller.
        os.environ[KUBERNETES_ENV] = args.kubernetes
    if args.command == "build":
        print(ensure_built(stderr_log))
        if args.real_nodes:
            print(ensure_node_binaries(stderr_log))
    elif args.command == "up":
        cluster = Cluster.up(
            args.name,
            nodes=args.nodes,
            node_cpu=args.node_cpu,
            node_memory=args.node_memory,
            simulator=args.simulator,
            real_nodes=args.real_nodes,
            node_lifecycle=args.node_lifecycle,
            schedulers=args.schedulers,
            gateway=args.gateway,
            timeout=args.timeout,
        )
        print(f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}")
    elif args.command == "down":
        if not remove_cluster(args.name):
            stderr_log(f"no cluster named {args.name!r}")
    elif args.command == "status":
        status = Cluster.load(args.name).status()
        print(json.dumps(status, indent=2))
        return 0 if status["apiserver_ready"] else 1
    elif args.command == "restart":
        Cluster.load(args.name).restart(args.component)
    elif args.command == "node":
        cluster = Cluster.load(args.name)
        if args.action == "kill":
            cluster.kill_node(args.node)
        else:
            cluster.start_node(args.node)
    elif args.command == "prepare":
        if args.stage in ("first", "all"):
            install_missing_packages(stderr_log)
            ensure_built(stderr_log)
            ensure_images(stderr_log, pause_binary=ensure_node_binaries(stderr_log) / "pause")
        if args.stage in ("later", "all"):
            # The batch schedulers and the Gateway of a few tests (those marked needs_build): `make test`
            # builds them beside the suite instead (tests/run_suite.py, devcluster/background.py).
            for step in later_steps():
                step.run(stderr_log)
    elif args.command == "images":
        spark = tuple(args.spark) if args.spark else None
        pause = ensure_node_binaries(stderr_log) / "pause"
        built = ensure_images(stderr_log, pause_binary=pause, spark_versions=spark)
        for image in built:
            print(f"{image.archive}\t{image.archive.stat().st_size / 1e6:.0f} MB\t{' '.join(image.refs)}")
        running = real_node_cluster()
        if running is not None:
            running.import_images(built)
    elif args.command == "list":
        for name in list_clusters():
            print(name)
    elif args.command == "prune":
        for name in prune(args.prefix):
            print(f"removed {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
