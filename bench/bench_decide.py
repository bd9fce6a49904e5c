"""CPU of one pass of the driver controller's decision, by kind of pass: observe (the SparkDriver's body
and its children's summaries -> ``Observed``) and ``decide(observed, now)``, without a cluster.

    .venv/bin/python bench/bench_decide.py                                  # this checkout
    .venv/bin/python bench/bench_decide.py --operator-root ../before        # another checkout's code
    .venv/bin/python bench/bench_decide.py --profile steady                 # where a steady pass goes

The kinds of pass an app's life is made of:

* ``create``: a new SparkDriver, everything of its first incarnation to create (renders the pod);
* ``started``: status says Pending (as the create wrote it), the driver pod now runs with two executors:
  status moves to Running (the pass a transition brings: a status write, how long it may wait);
* ``steady``: its driver pod runs with two executors, every object exists, status is up to date (the
  pass every pod event of a running app brings: nothing to do);
* ``lost``: status says the driver pod runs, but it is gone: the loss recorded, the next incarnation
  created;
* ``ended``: the driver pod succeeded and status records it (the pass a late event brings: nothing).

Each figure is CPU time (``time.process_time``) per pass: the median of ``--rounds`` rounds of
``--passes`` passes each, after a warm-up round, so that another process on the machine moves it less
than wall time would. It still moves it (a busy machine's caches and clock): say what else ran with the
figure; the fastest round of observe + decide is printed too, the figure least moved by load. ``both``
is the pass as the controller runs it (observe, then decide on what it made); ``decide`` alone runs
again on one observation, so it can be cheaper than ``both`` less ``observe``. The scenarios are built
from manifests and rendered objects with only the API every version since the renderer has
(``render``, ``summarize_pod``/``summarize_object``, ``Observed.of``, ``decide``), so the same command
measures an older checkout: ``--operator-root`` runs this file with that checkout's interpreter, whose
``sparkop`` is that checkout's code.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
UID = "0b4c3d9e-0000-4000-8000-000000000001"
KINDS = ("create", "started", "steady", "lost", "ended")


def driver_body(status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A SparkDriver of SparkPi as the apps controller writes it (app-owned, kubeflow's pod name)."""
    return {
        "apiVersion": "sparkop.io/v1alpha1",
        "kind": "SparkDriver",
        "metadata": {
            "name": "pi-1", "namespace": "ns", "uid": UID, "generation": 1, "resourceVersion": "10",
            "creationTimestamp": "2026-01-01T11:00:00Z", "labels": {"sparkop.io/app": "pi"},
            "ownerReferences": [{"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
                                 "name": "pi", "uid": "app-uid", "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "type": "Scala", "sparkVersion": "3.5.7", "image": "apache/spark:3.5.7",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar", "arguments": ["1000"],
            "driver": {"cores": 1, "memory": "512m", "podName": "pi-driver"},
            "executor": {"instances": 2, "cores": 1, "memory": "512m"},
            "maxDriverPodReplacements": 3,
        },
        "status": status or {},
    }  # fmt: skip


class Scenarios:
    """The kinds of pass, built with the code under measurement."""

    def __init__(self) -> None:
        from sparkop.driver_controller import decide as decide_module
        from sparkop.driver_controller import observed as observed_module
        from sparkop.driver_controller.render import parse, render

        self.observed_module, self.decide = observed_module, decide_module.decide
        # Since issue 46, the summaries the caches make have a module of their own.
        try:
            from sparkop.driver_controller import summaries as summaries_module
        except ImportError:
            summaries_module = observed_module
        self.summaries_module = summaries_module
        self.parse, self.render = parse, render
        # Before issue 46, Observed was declared in decide.py.
        self.observed_type = getattr(observed_module, "Observed", None) or decide_module.Observed
        self.knows_logs = "logs" in {f.name for f in fields(self.observed_type)}

    def observe(self, body: dict[str, Any], pods: list[dict[str, Any]], children: list[dict[str, Any]]) -> Any:
        return self.observer(body, pods, children)()

    def observer(
        self, body: dict[str, Any], pods: list[dict[str, Any]], children: list[dict[str, Any]]
    ) -> Callable[[], Any]:
        """What a pass's observe does with them: the caches hold the children's summaries (made once per
        watch event, not per pass); observe reads the SparkDriver and files them into an Observed."""
        module = self.summaries_module
        summaries = [module.summarize_object(c) for c in children]
        config_maps = [s for s, c in zip(summaries, children, strict=True) if c["kind"] == "ConfigMap"]
        services = [s for s, c in zip(summaries, children, strict=True) if c["kind"] == "Service"]
        extra: dict[str, Any] = {}
        if self.knows_logs:
            from sparkop.core.expectations import LogTail

            extra["logs"] = {p["metadata"]["uid"]: LogTail(text="Pi is roughly 3.14") for p in pods}
        # Before issue 46, Observed held the raw body (decide parsed it); since, Observed.of reads it.
        make = getattr(self.observed_type, "of", self.observed_type)
        pod_summaries = [module.summarize_pod(p) for p in pods]
        return lambda: make(body, pod_summaries, config_maps, services, **extra)

    def incarnation(self, n: int) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
        """The driver pod (uid, resourceVersion as created), executors and children of incarnation ``n``."""
        out = self.render(self.parse(driver_body()), n)
        made = {"resourceVersion": "5", "creationTimestamp": "2026-01-01T11:00:01Z"}
        pod = {**out.pod, "metadata": {**out.pod["metadata"], "uid": f"pod-{n}", **made}}
        owner = {**pod["metadata"]["ownerReferences"][0], "controller": False}
        driver_ref = {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": f"pod-{n}",
                      "controller": True}  # fmt: skip
        executors = [
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"pi-1-{n}-exec-{i}", "namespace": "ns", "uid": f"exec-{n}-{i}", **made,
                          "labels": {**pod["metadata"]["labels"], "spark-role": "executor",
                                     "spark-exec-id": str(i)},
                          "ownerReferences": [owner, driver_ref]},
             "spec": {"nodeName": "node-1"},
             "status": {"phase": "Running", "startTime": "2026-01-01T11:00:10Z",
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "containerStatuses": [{"name": "spark-kubernetes-executor", "ready": True,
                                               "state": {"running": {"startedAt": "2026-01-01T11:00:10Z"}}}]}}
            for i in (1, 2)
        ]  # fmt: skip
        children = [{**o, "metadata": {**o["metadata"], "uid": f"{o['kind']}-{i}", **made}}
                    for i, o in enumerate([*out.config_maps, out.service])]  # fmt: skip
        return pod, executors, children

    def settle(self, body: dict[str, Any], pods: list[dict[str, Any]], children: list[dict[str, Any]]) -> Any:
        """The status once every write this state brings is made: a pass over it writes nothing."""
        for _ in range(10):
            plan = self.decide(self.observe(body, pods, children), NOW)
            if plan.status is None:
                assert not plan.creates, "a settled state creates nothing"
                return body["status"]
            metadata = {**body["metadata"], "resourceVersion": str(int(body["metadata"]["resourceVersion"]) + 1)}
            body = {**body, "status": plan.status.to_json(), "metadata": metadata}
        raise AssertionError("the status does not settle")

    def kinds(self) -> dict[str, Callable[[], Any]]:
        """Each kind of pass: a function that makes its observation (timed as observe)."""
        pod, executors, children = self.incarnation(1)
        started = {"running": {"startedAt": "2026-01-01T11:00:05Z"}}
        running = {**pod, "spec": {**pod["spec"], "nodeName": "node-1"},
                   "status": {"phase": "Running", "podIP": "10.0.0.1", "startTime": "2026-01-01T11:00:05Z",
                              "conditions": [{"type": "Ready", "status": "True"}],
                              "containerStatuses": [{"name": "spark-kubernetes-driver", "ready": True,
                                                     "state": started}]}}  # fmt: skip
        created = self.decide(self.observe(driver_body(), [], []), NOW)
        assert created.status is not None
        pending = created.status.to_json()
        steady_status = self.settle(driver_body(pending), [running, *executors], children)
        succeeded = copy.deepcopy(running)
        succeeded["metadata"]["finalizers"] = []
        succeeded["status"] = {
            "phase": "Succeeded", "startTime": "2026-01-01T11:00:05Z",
            "containerStatuses": [{"name": "spark-kubernetes-driver", "ready": False, "state": {"terminated": {
                "exitCode": 0, "reason": "Completed", "startedAt": "2026-01-01T11:00:05Z",
                "finishedAt": "2026-01-01T11:30:00Z"}}}],
        }  # fmt: skip
        ended_status = self.settle(driver_body(steady_status), [succeeded], children)
        assert ended_status["phase"] == "Succeeded", ended_status["phase"]
        return {
            "create": self.observer(driver_body(), [], []),
            "started": self.observer(driver_body(pending), [running, *executors], children),
            "steady": self.observer(driver_body(steady_status), [running, *executors], children),
            "lost": self.observer(driver_body(steady_status), [], children),
            "ended": self.observer(driver_body(ended_status), [succeeded], children),
        }


def per_pass(work: Callable[[], Any], passes: int, rounds: int) -> list[float]:
    """CPU seconds per call of ``work`` in each of ``rounds`` rounds (after one to warm up), sorted."""
    results = []
    for r in range(rounds + 1):
        start = time.process_time()
        for _ in range(passes):
            work()
        if r:
            results.append((time.process_time() - start) / passes)
    return sorted(results)


def measure(kinds: list[str], passes: int, rounds: int) -> None:
    scenarios = Scenarios()
    made = scenarios.kinds()
    decide = scenarios.decide
    print(f"CPU per pass, microseconds: median of {rounds} rounds of {passes} passes (the fastest round)")
    print(f"{'pass':8} {'observe':>8} {'decide':>8} {'both':>8} {'(fastest)':>10}")
    for kind in kinds:
        observe = made[kind]
        observed = observe()
        o = per_pass(observe, passes, rounds)
        d = per_pass(lambda observed=observed: decide(observed, NOW), passes, rounds)
        b = per_pass(lambda observe=observe: decide(observe(), NOW), passes, rounds)
        medians = [statistics.median(xs) * 1e6 for xs in (o, d, b)]
        print(f"{kind:8} {medians[0]:8.1f} {medians[1]:8.1f} {medians[2]:8.1f} {f'({b[0] * 1e6:.1f})':>10}")


def profile(kind: str, passes: int) -> None:
    scenarios = Scenarios()
    observe = scenarios.kinds()[kind]
    decide = scenarios.decide
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(passes):
        decide(observe(), NOW)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=500, help="passes per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--profile", choices=KINDS, help="cProfile this kind of pass (observe + decide) instead")
    parser.add_argument("--operator-root", type=Path, help="measure the code of this checkout (its .venv)")
    args = parser.parse_args()
    if args.operator_root is not None:
        root = args.operator_root.resolve()
        rest = [a for a in sys.argv[1:] if not a.startswith("--operator-root") and a != str(args.operator_root)]
        command = [str(root / ".venv/bin/python"), str(Path(__file__).resolve()), *rest]
        head = subprocess.run(["git", "-C", str(root), "log", "--oneline", "-1"], capture_output=True, text=True)
        print(f"# {root}: {head.stdout.strip()[:100]}", flush=True)
        sys.exit(subprocess.run(command, cwd=root, env={**os.environ, "PYTHONPATH": ""}).returncode)
    if args.profile:
        profile(args.profile, args.passes)
    else:
        measure(args.kinds, args.passes, args.rounds)


if __name__ == "__main__":
    main()
