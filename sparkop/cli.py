"""The ``sparkop`` command."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import re
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sparkop.core import logs, selectors
from sparkop.core.limits import (
    DEFAULT_KUBE_API_BURST,
    DEFAULT_KUBE_API_QPS,
    DEFAULT_LOG_TAIL_LINES,
    DEFAULT_WORKERS,
    MAX_TRACKED_CHILDREN,
)
from sparkop.core.selectors import LabelSelector

if TYPE_CHECKING:
    from sparkop.core.runtime import Options


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def _version() -> str:
    """The installed distribution's version (the wheel's, or the checkout's editable install)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sparkop")
    except PackageNotFoundError:
        return "unknown (not installed)"


# Where `sparkop run --log-level` sets the root logger.
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
# `sparkop list -o`: kubectl get's output formats (sparkop.daily_cli prints them).
LIST_OUTPUTS = ("json", "yaml", "wide", "name")
# The shells `sparkop completion` writes a script for (shtab's).
SHELLS = ("bash", "zsh", "tcsh")


def _parser(prog: str = "sparkop") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="sparkop: a level-triggered Kubernetes operator for Apache Spark.",
        formatter_class=_Formatter,
        epilog="Start here:  sparkop demo        (a local cluster, three apps, a live table)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = _command(
        sub,
        "run",
        "run the operator (all five controllers, or some)",
        "sparkop run --kubeconfig ~/.kube/config --namespace spark-jobs --log-format json",
        about="Run the operator against the cluster in --kubeconfig (or in-cluster config).",
    )
    run.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    run.add_argument("--context", help="kubeconfig context")
    run.add_argument(
        "--namespace", "-n", action="append", default=[], help="namespace to watch (repeatable; default: all)"
    )
    run.add_argument(
        "--namespace-selector",
        type=_namespace_selector,
        default=None,
        metavar="SELECTOR",
        help="act on the applications, schedules and connect servers only in the namespaces whose labels this "
        "label selector selects (e.g. 'spark=enabled,env in (prod,staging)'), besides those --namespace lists; "
        "every namespace is then watched (kubeflow's --namespace-selector, chart value spark.jobNamespaceSelector). "
        "An app in a namespace selected later is acted on at its next change, as kubeflow's",
    )
    run.add_argument(
        "--controllers",
        default="apps,driver,scheduled,connect,history",
        help="comma-separated: apps, driver, scheduled, connect, history (default: all)",
    )
    run.add_argument(
        "--kubeflow-api",
        action="store_true",
        help="also serve kubeflow spark-operator's API: SparkApplications and ScheduledSparkApplications in "
        "sparkoperator.k8s.io/v1beta2 and SparkConnects in sparkoperator.k8s.io/v1alpha1, unchanged (their "
        "CRDs: crds/kubeflow/; docs/migrating-from-kubeflow.md)",
    )
    run.add_argument(
        "--max-tracked-executor-per-app",
        dest="max_tracked_executors",
        type=_tracked,
        default=MAX_TRACKED_CHILDREN,
        metavar="N",
        help="how many executors status.executorState names, those with the lowest Spark executor ids "
        f"(kubeflow's flag; default and most {MAX_TRACKED_CHILDREN}; 0: none)",
    )
    run.add_argument(
        "--driver-log-tail-lines",
        type=_log_tail_lines,
        default=DEFAULT_LOG_TAIL_LINES,
        metavar="N",
        help="how many lines of an ended driver container's log its SparkDriver's status keeps "
        f"(status.incarnations[].logTail, read once through the API server's pods/log; default "
        f"{DEFAULT_LOG_TAIL_LINES}; 0: none read, and the operator needs no pods/log right)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help=f"concurrent reconciles per controller (default {DEFAULT_WORKERS})",
    )
    run.add_argument(
        "--kube-api-qps",
        type=float,
        default=DEFAULT_KUBE_API_QPS,
        metavar="N",
        help=f"requests per second to the API server, sustained (default {DEFAULT_KUBE_API_QPS:g}; 0: no limit)",
    )
    run.add_argument(
        "--kube-api-burst",
        type=int,
        default=DEFAULT_KUBE_API_BURST,
        metavar="N",
        help=f"requests to the API server at once above --kube-api-qps (default {DEFAULT_KUBE_API_BURST})",
    )
    run.add_argument(
        "--ingress-url-format",
        help="create an Ingress per app for its Spark UI, e.g. '{{$appName}}.spark.example.com'",
    )
    run.add_argument("--ingress-class-name", help="ingressClassName for those Ingresses")
    run.add_argument(
        "--unschedulable-timeout",
        dest="unschedulable_timeout_seconds",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="report a driver pod as stuck after it has been unschedulable this long (default 300)",
    )
    run.add_argument(
        "--pod-security",
        choices=("restricted",),
        default="",
        help="fill what the Pod Security Standards profile requires and a spec leaves unset into the driver "
        "and executor pods (restricted: runAsNonRoot with Spark's uid 185, seccomp RuntimeDefault, no "
        "privilege escalation, capabilities drop ALL), for namespaces that enforce it",
    )
    run.add_argument(
        "--node-loss-toleration-seconds",
        type=int,
        default=None,
        metavar="SECONDS",
        help="tolerationSeconds of the node.kubernetes.io/unreachable and not-ready taints on driver and "
        "executor pods whose spec sets no nodeLossTolerationSeconds: how long a pod stays bound to a node "
        "that stopped reporting before it is evicted and a lost driver replaced (default: Kubernetes' 300)",
    )
    timeouts = run.add_argument_group(
        "timeouts",
        "defaults for the runs whose spec does not say (spec.timeouts, activeDeadlineSeconds, executorFailures); "
        "unset or 0: none",
    )
    for flag, field in (
        ("driver-start-timeout", "timeouts.driverStartSeconds: the driver container running after its pod's creation"),
        ("driver-ready-timeout", "timeouts.driverReadySeconds: the driver pod Ready after its creation"),
        ("executors-start-timeout", "timeouts.executorsStartSeconds: the run's executors running after the driver"),
        ("active-deadline", "activeDeadlineSeconds: a run still going after its creation is stopped"),
    ):
        dest = f"{flag.replace('-', '_')}_seconds"
        timeouts.add_argument(f"--{flag}", dest=dest, type=int, default=None, metavar="SECONDS", help=field)
    timeouts.add_argument(
        "--max-executor-failures",
        type=int,
        default=None,
        metavar="N",
        help="executorFailures.maxFailures: more executor pods of one driver failed within the window fail the run",
    )
    timeouts.add_argument(
        "--executor-failures-window",
        dest="executor_failures_window_seconds",
        type=int,
        default=600,
        metavar="SECONDS",
        help="executorFailures.windowSeconds for --max-executor-failures (default 600)",
    )
    run.add_argument(
        "--driver-pod-disruption-budget",
        action="store_true",
        help="give every driver a PodDisruptionBudget (minAvailable 1) unless its spec sets "
        "driverPodDisruptionBudget: false, so kubectl drain waits for running drivers",
    )
    run.add_argument(
        "--no-ui-service",
        dest="ui_service",
        action="store_false",
        help="never give an app's Spark UI a Service of its own (<app>-ui-svc, made for an Ingress or "
        "spec.sparkUIOptions); the driver's Service still serves the UI port (kubeflow's --enable-ui-service=false)",
    )
    run.add_argument(
        "--metrics-port", type=int, default=0, help="serve /metrics, /healthz and /readyz on this port (0: none)"
    )
    run.add_argument("--metrics-address", default="127.0.0.1", help="address for --metrics-port (in a pod: 0.0.0.0)")
    run.add_argument(
        "--metrics-endpoint",
        default="/metrics",
        metavar="PATH",
        type=_path,
        help="the path the metrics are served at on --metrics-port (default /metrics)",
    )
    run.add_argument(
        "--metrics-prefix",
        default="",
        metavar="PREFIX",
        help="prepended to the name of every application, executor and SparkConnect metric (default none)",
    )
    run.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_false",
        help="serve only the probes (/healthz, /readyz) on --metrics-port, no metrics",
    )
    run.add_argument(
        "--metrics-labels",
        type=_names,
        default="",
        metavar="LABELS",
        help="comma-separated object labels that label the application metrics, as kubeflow's (e.g. app_type)",
    )
    election = run.add_argument_group(
        "leader election", "with more than one replica: only the holder of a coordination.k8s.io/v1 Lease reconciles"
    )
    election.add_argument("--leader-elect", action="store_true", help="take part in leader election")
    election.add_argument(
        "--leader-elect-namespace",
        metavar="NAMESPACE",
        help="namespace of the Lease (default: the pod's own namespace, else default)",
    )
    election.add_argument("--leader-elect-name", default="sparkop-leader", metavar="NAME", help="name of the Lease")
    election.add_argument(
        "--leader-elect-identity",
        metavar="ID",
        help="this replica's name in the Lease (default: hostname_<random suffix>)",
    )
    for flag, default, meaning in (
        ("lease-duration", 15.0, "how long standbys wait after the last renewal they saw before taking over"),
        ("renew-deadline", 10.0, "how long the leader keeps acting without renewing; it stops writing then"),
        ("retry-period", 2.0, "how often the leader renews and standbys try to acquire"),
    ):
        election.add_argument(
            f"--leader-elect-{flag}",
            type=_seconds,
            default=default,
            metavar="SECONDS",
            help=f"{meaning} (default {default:g}s)",
        )
    run.add_argument(
        "--log-format", choices=["text", "json"], default="text", help="text (default) or json: one line per decision"
    )
    run.add_argument(
        "--log-level",
        choices=list(LOG_LEVELS),
        default="info",
        help="the least severe messages logged (default info; debug adds each watch's and reconcile's detail)",
    )

    crds = _command(
        sub,
        "crds",
        "write the CRD YAML generated from the API models",
        "sparkop crds --out crds/ && kubectl apply --server-side -f crds/",
    )
    crds.add_argument("--out", default="crds", help="directory to write into (default: crds)")
    crds.add_argument("--check", action="store_true", help="exit 1 if the files there are stale")

    validate = _command(
        sub,
        "validate",
        "check manifests offline with the same rules as the API server",
        "sparkop validate examples/*.yaml",
        "kubectl get sparkapp -o yaml | sparkop validate -",
        about="One line per problem, naming the file, the document (file#2 is the second) and the\n"
        "field. Documents of other kinds (ConfigMap, Secret, ...) are passed over with a note on stderr.\n"
        "Exit 0: all valid, 1: some invalid, 2: a file or document could not be read.",
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML files ('-' for stdin)")
    _complete_files(validate)

    render = _command(
        sub,
        "render",
        "print what sparkop would create for a SparkApplication or SparkDriver",
        "sparkop render examples/spark-pi.yaml | less",
        about="Offline: the SparkDriver, driver pod, ConfigMaps and Service, as YAML, for review\n"
        "and GitOps diffs. Each document is validated first; a bad one is one line on stderr (exit 1)\n"
        "and the others are still rendered. Documents of other kinds are passed over with a note.",
    )
    render.add_argument("file", metavar="FILE", help="a manifest ('-' for stdin)")
    render.add_argument(
        "--namespace", "-n", default=None, help="namespace to assume (default: the manifest's, else default)"
    )
    _complete_files(render)

    status = _command(
        sub,
        "status",
        "a human summary of one SparkApplication",
        "sparkop status spark-pi -n spark-jobs",
        connect=True,
    )
    status.add_argument("name", metavar="APP", help="SparkApplication name")

    _daily_commands(sub)

    demo = _command(
        sub,
        "demo",
        "bring up a local cluster and watch sparkop run three apps",
        "sparkop demo --keep   # leave the cluster up afterwards",
        about="Builds (first time) and starts the local control plane, installs the CRDs, starts the "
        "operator and applies three apps: one succeeds, one fails and is retried, one loses its "
        "driver pod and recovers. Ctrl-C cleans up.",
    )
    demo.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    demo.add_argument(
        "--real", action="store_true", help="real nodes and real Spark 3.5 instead of KWOK and the simulator (root)"
    )
    demo.add_argument("--name", default="sparkop-demo", help="devcluster name")

    completion = _command(
        sub,
        "completion",
        "print a shell completion script (bash, zsh or tcsh)",
        "source <(sparkop completion bash)                  # this shell",
        "sparkop completion bash > /etc/bash_completion.d/sparkop",
        'sparkop completion zsh > "${fpath[1]}/_sparkop"',
        about="The script completes every command and flag of this sparkop, generated from its parser\n"
        "(by shtab), so it never lags behind a new flag.",
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    return parser


def _complete_files(command: argparse.ArgumentParser) -> None:
    """Shell completion offers file names for a command's FILE arguments."""
    for action in command._actions:
        if action.metavar == "FILE":
            action.complete = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}  # type: ignore[attr-defined]


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    *examples: str,
    about: str | None = None,
    connect: bool = False,
) -> argparse.ArgumentParser:
    """A command of ``sparkop``: ``summary`` is its line in ``sparkop --help``, ``about`` its description,
    each of ``examples`` a line under its Example(s) heading; ``connect``: it takes kubectl's connection flags."""
    heading = "Example:" if len(examples) == 1 else "Examples:"
    return sub.add_parser(
        name,
        parents=[_connection_flags()] if connect else [],
        help=summary,
        formatter_class=_Formatter,
        description=about,
        epilog="\n  ".join((heading, *examples)) if examples else None,
    )


def _connection_flags() -> argparse.ArgumentParser:
    """kubectl's connection flags, shared by the commands for daily use."""
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_argument_group("connection (as kubectl)")
    group.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    group.add_argument("--context", help="kubeconfig context (default: the current context)")
    group.add_argument("--namespace", "-n", help="namespace (default: the context's namespace, else default)")
    return flags


def _daily_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    listing = _command(
        sub,
        "list",
        "a table of SparkApplications: state, attempts, run duration, last error",
        "sparkop list -n spark-jobs",
        "sparkop list -A -o wide",
        "sparkop list -l team=analytics -w",
        "sparkop list -o json | jq '.items[].status.applicationState'",
        about="Like kubectl get sparkapplications, plus DURATION (of the current or last run) and\n"
        "LAST ERROR (status.lastError, cut to one line).",
        connect=True,
    )
    listing.add_argument("--all-namespaces", "-A", action="store_true", help="list the apps of every namespace")
    listing.add_argument(
        "--output",
        "-o",
        choices=LIST_OUTPUTS,
        help="json or yaml: the objects (a v1 List); wide: more columns; name: kind.group/name (default: a table)",
    )
    listing.add_argument(
        "--selector", "-l", metavar="SELECTOR", help="label selector, as kubectl's (e.g. team=a,tier!=b)"
    )
    listing.add_argument(
        "--watch", "-w", action="store_true", help="after the list, print each change as it happens, until Ctrl-C"
    )

    logs_cmd = _command(
        sub,
        "logs",
        "print the log of an app's driver (or an executor) pod",
        "sparkop logs spark-pi -f",
        "sparkop logs spark-pi --executor 2",
        "sparkop logs spark-pi --attempt 1 --incarnation 1   # the first pod of the first run",
        about="The driver pod of the app's current run and driver-pod incarnation, found by its\n"
        "labels; --executor reads the executor pod with that Spark executor id instead.",
        connect=True,
    )
    logs_cmd.add_argument("app", metavar="APP", help="SparkApplication name")
    logs_cmd.add_argument("--executor", metavar="ID", help="Spark executor id (1, 2, ...) instead of the driver")
    logs_cmd.add_argument("--follow", "-f", action="store_true", help="stream the log until the container ends")
    logs_cmd.add_argument(
        "--incarnation", type=_positive, metavar="N", help="driver-pod incarnation N of the run (default: current)"
    )
    logs_cmd.add_argument(
        "--attempt",
        type=_positive,
        metavar="N",
        help="run N of the app, as sparkop status numbers them (default: current)",
    )
    logs_cmd.add_argument("--container", "-c", help="container (default: the Spark container)")
    logs_cmd.add_argument(
        "--tail", type=int, default=-1, metavar="N", help="the last N lines only (default -1: all of the log)"
    )
    logs_cmd.add_argument(
        "--since",
        type=_duration,
        metavar="DURATION",
        help="only lines newer than this, e.g. 30s, 5m, 1h30m (default: all)",
    )
    logs_cmd.add_argument("--timestamps", action="store_true", help="start each line with its RFC3339 timestamp")

    events = _command(
        sub,
        "events",
        "the events of an app and its SparkDrivers, oldest first",
        "sparkop events spark-pi -n spark-jobs",
        connect=True,
    )
    events.add_argument("app", metavar="APP", help="SparkApplication name")

    for verb, meaning in (
        ("suspend", "stop an app's run and start none until resumed (sets spec.suspend: true)"),
        ("resume", "let a suspended app start a new run (sets spec.suspend: false)"),
    ):
        command = _command(sub, verb, meaning, f"sparkop {verb} spark-pi", connect=True)
        command.add_argument("app", metavar="APP", help="SparkApplication name")

    connect = _command(
        sub,
        "connect",
        "where a SparkConnect serves; --port-forward reaches it from this machine",
        "sparkop connect analytics -n spark-jobs",
        'sparkop connect analytics --port-forward   # then: SparkSession.builder.remote("sc://127.0.0.1:15002")',
        about="Without --port-forward: the SparkConnect's state, in-cluster endpoint, server pod and\n"
        "executors (exit 0 when Ready, 1 otherwise). With it: a local port forwarded through the API\n"
        "server to the gRPC port of the server pod serving when each connection arrives, until Ctrl-C.",
        connect=True,
    )
    connect.add_argument("name", metavar="NAME", help="SparkConnect name")
    connect.add_argument(
        "--port-forward",
        nargs="?",
        const=_SERVER_PORT,
        type=_port,
        metavar="LOCAL_PORT",
        help="listen on LOCAL_PORT (default: the server's gRPC port; 0: any free port) and forward to the server",
    )
    connect.add_argument("--address", metavar="ADDR", help="address --port-forward listens on (default 127.0.0.1)")

    ui = _command(
        sub,
        "ui",
        "open a SparkApplication's Spark UI: live while it runs, its history page after",
        "sparkop ui spark-pi            # then open the printed http://127.0.0.1:PORT/ URL",
        "sparkop ui spark-pi --open --port 4040",
        about="While a run is active: the driver's live UI; once it has ended: the run's page in the\n"
        "history server it logged to (spec.historyServer). An address inside the cluster is reached through\n"
        "a local port forwarded through the API server, until Ctrl-C; one outside it is printed.",
        connect=True,
    )
    ui.add_argument("app", metavar="APP", help="SparkApplication name")
    ui.add_argument("--port", type=_port, default=0, metavar="LOCAL_PORT", help="local port (default 0: any free port)")
    ui.add_argument("--address", metavar="ADDR", help="address to listen on (default 127.0.0.1)")
    ui.add_argument("--open", action="store_true", help="open the page in a browser")
    ui.add_argument("--no-forward", action="store_true", help="only say where the UI is")


# --port-forward without a number: the local port is the server's own.
_SERVER_PORT = -1


def _namespace_selector(text: str) -> LabelSelector:
    try:
        return selectors.parse(text)
    except selectors.InvalidSelector as exc:
        raise argparse.ArgumentTypeError(f"not a label selector: {exc}") from None


def _bounded(low: int, high: int | None, example: str, bounds: str) -> Callable[[str], int]:
    """The parser of a whole number from ``low`` to ``high`` (None: no bound above): a text that is no
    number is told what to write (``example``), one out of bounds what the bounds are."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {example}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r}: {bounds}")
        return value

    return parse


_port = _bounded(0, 65535, "a port number; write 15002, or 0 for any free port", "a port is 0-65535 (0: any free port)")
_tracked = _bounded(0, MAX_TRACKED_CHILDREN, "a number; write e.g. 100", f"between 0 (none) and {MAX_TRACKED_CHILDREN}")
_positive = _bounded(1, None, "a number; write 1, 2, ...", "numbering starts at 1")
_log_tail_lines = _bounded(0, None, "a number; write e.g. 50", "0 (none read) or more")


def _daily(args: argparse.Namespace) -> int:
    from sparkop import daily_cli

    target = daily_cli.Target(args.kubeconfig, args.context, args.namespace)
    if args.command == "list":
        options = daily_cli.ListOptions(args.all_namespaces, args.output, args.selector, args.watch)
        return daily_cli.list_main(target, options)
    if args.command == "logs":
        from sparkop.core.kube import LogReading

        tail = None if args.tail < 0 else args.tail
        reading = LogReading(args.container, args.follow, tail, args.since, args.timestamps)
        pod = daily_cli.PodChoice(args.attempt, args.incarnation, args.executor)
        return daily_cli.logs_main(target, args.app, pod, reading)
    if args.command == "events":
        return daily_cli.events_main(target, args.app)
    if args.command == "connect":
        from sparkop import connect_cli

        return connect_cli.main(
            target,
            args.name,
            port_forward=args.port_forward is not None,
            local_port=None if args.port_forward in (None, _SERVER_PORT) else args.port_forward,
            address=args.address,
        )
    if args.command == "ui":
        from sparkop import ui_cli

        return ui_cli.main(
            target, args.app, port=args.port, address=args.address, forward=not args.no_forward, open_=args.open
        )
    return daily_cli.suspend_main(target, args.app, suspend=args.command == "suspend")


def main(argv: Sequence[str] | None = None, prog: str = "sparkop") -> int:
    args = _parser(prog).parse_args(argv)
    if args.command == "run":
        return _run(args)
    if args.command == "crds":
        from sparkop.api.crds import main as crds_main

        return crds_main(args.out, check=args.check)
    if args.command == "validate":
        from sparkop.api.validate import main as validate_main

        return validate_main(args.files)
    if args.command == "render":
        from sparkop.render_cli import main as render_main

        return render_main(args.file, namespace=args.namespace)
    if args.command == "status":
        from sparkop import daily_cli, status_cli

        return status_cli.main(daily_cli.Target(args.kubeconfig, args.context, args.namespace), args.name)
    if args.command in ("list", "logs", "events", "suspend", "resume", "connect", "ui"):
        return _daily(args)
    if args.command == "demo":
        from sparkop.demo import main as demo_main

        return demo_main(name=args.name, keep=args.keep, real=args.real)
    if args.command == "completion":
        return _completion(args.shell, prog)
    raise AssertionError(args.command)


def kubectl_main() -> int:
    """``kubectl-sparkop``: kubectl runs an executable of that name on PATH as ``kubectl sparkop``."""
    return main(prog="kubectl sparkop")


def _completion(shell: str, prog: str) -> int:
    import shtab

    # A function name cannot hold the space of "kubectl sparkop": that script completes kubectl-sparkop.
    print(shtab.complete(_parser(prog.replace(" ", "-")), shell=shell), end="")
    return 0


def _path(text: str) -> str:
    if not text.startswith("/"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a path; write one that starts with /, e.g. /metrics")
    return text


# kubectl's --since: a Go duration of hours, minutes and seconds.
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def _duration(text: str) -> int:
    """Whole seconds (rounded up, as the API server's sinceSeconds takes them) of 30s, 5m, 1h30m."""
    match = _DURATION.fullmatch(text)
    if not text or match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; write e.g. 30s, 5m or 1h30m")
    hours, minutes, seconds = (float(part or 0) for part in match.groups())
    total = math.ceil(hours * 3600 + minutes * 60 + seconds)
    if total <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration must be positive")
    return total


def _seconds(text: str) -> float:
    """A duration: 15, 15s, 1.5s or 2m."""
    scale = 60.0 if text.endswith("m") else 1.0
    try:
        value = float(text.removesuffix("s").removesuffix("m")) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; write seconds, e.g. 15 or 15s") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration must be positive")
    return value


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list of names (blanks dropped)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def run_options(args: argparse.Namespace) -> Options:
    """The operator's options from ``sparkop run``'s flags: each such flag's dest is the field it sets."""
    from sparkop.core.runtime import Options

    given = vars(args)
    return Options(**{field.name: given[field.name] for field in dataclasses.fields(Options) if field.name in given})


def _stop_quietly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _run(args: argparse.Namespace) -> int:
    # A stop that arrives while the operator is still importing is a clean stop too.
    signal.signal(signal.SIGTERM, _stop_quietly)
    from sparkop.core.leader import ElectionConfig, default_identity, default_namespace
    from sparkop.operator import LeadershipLost, Serving, run_blocking

    logs.configure(args.log_format, LOG_LEVELS[args.log_level])
    election = None
    if args.leader_elect:
        try:
            election = ElectionConfig(
                namespace=args.leader_elect_namespace or default_namespace(),
                name=args.leader_elect_name,
                identity=args.leader_elect_identity or default_identity(),
                lease_duration=args.leader_elect_lease_duration,
                renew_deadline=args.leader_elect_renew_deadline,
                retry_period=args.leader_elect_retry_period,
            )
        except ValueError as exc:
            print(f"sparkop run: {exc}", file=sys.stderr)
            return 2
    try:
        run_blocking(
            kubeconfig=args.kubeconfig,
            context=args.context,
            namespaces=args.namespace,
            controllers=list(_names(args.controllers)),
            options=run_options(args),
            election=election,
            serving=(
                Serving(
                    args.metrics_port,
                    args.metrics_address,
                    endpoint=args.metrics_endpoint if args.metrics else None,
                    prefix=args.metrics_prefix,
                )
                if args.metrics_port
                else None
            ),
        )
    except LeadershipLost as exc:
        # Logged where it happened; a restart makes this replica a standby again.
        print(f"sparkop run: leadership lost ({exc}); exiting to restart as a standby", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
