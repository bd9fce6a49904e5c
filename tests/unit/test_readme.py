"""The README's promises that can be checked without a cluster."""

from __future__ import annotations

import re

import yaml

from tests.support.readme import ROOT, section, tour_steps

# A reader types and reads each step of the tour; about 15 s a step is a brisk pace.
SECONDS_PER_TOUR_STEP = 15


def test_the_tour_app_runs_long_enough_for_a_reader_to_reach_the_drain_step() -> None:
    steps = tour_steps()
    drain = next(i for i, step in enumerate(steps) if "delete pod -l spark-role=driver" in step)
    apply = next(i for i, step in enumerate(steps) if step.startswith("kubectl apply -f examples/"))
    manifest = ROOT / steps[apply].split("-f", 1)[1].strip()
    app = yaml.safe_load(manifest.read_text())
    run_seconds = int(app["spec"]["driver"]["annotations"]["sim.sparkop.io/run-seconds"])
    assert run_seconds >= (drain - apply + 1) * SECONDS_PER_TOUR_STEP * 2, (
        f"{manifest.name} finishes after {run_seconds}s: a reader reaches the drain step later"
    )


def test_the_tour_says_a_replacement_incarnation_restarts_the_spark_job() -> None:
    assert re.search(r"from the beginning.*spark\.app\.id", section("A five-minute tour"), flags=re.S)


def test_the_readme_has_exactly_two_setup_commands() -> None:
    block = re.search(r"```sh\n(.*?)```", section("Two commands"), flags=re.S)
    assert block
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()
