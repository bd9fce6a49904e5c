"""The defaults the README's `sparkop run` table states are the parser's (sparkop/cli.py)."""

from __future__ import annotations

import argparse
import re
from importlib.metadata import version

import pytest

from sparkop import cli
from sparkop.operator import DEFAULT_CONTROLLERS
from tests.support.readme import section


def run_parser() -> argparse.ArgumentParser:
    (subcommands,) = [a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)]
    parser: argparse.ArgumentParser = subcommands.choices["run"]
    return parser


def readme_row(flag: str) -> str:
    """The meaning column of the flag's row in the README's table."""
    match = re.search(rf"^\| `{re.escape(flag)}`[^|]*\| (.*) \|$", section("Running it"), flags=re.M)
    assert match, f"the README's `sparkop run` table has no row for {flag}"
    return match.group(1)


def test_the_readme_states_the_defaults_of_sparkop_run() -> None:
    run = run_parser()
    controllers = re.search(r"\(default `([^`]+)`", readme_row("--controllers"))
    assert controllers and controllers.group(1) == run.get_default("controllers")
    workers = re.search(r"\(default (\d+)\)", readme_row("--workers"))
    assert workers and int(workers.group(1)) == run.get_default("workers")
    api = re.search(r"\(default (\d+)/s, bursts of (\d+)", readme_row("--kube-api-qps"))
    assert api and (float(api.group(1)), int(api.group(2))) == (
        run.get_default("kube_api_qps"),
        run.get_default("kube_api_burst"),
    )
    timeout = re.search(r"\(default (\d+)\)", readme_row("--unschedulable-timeout"))
    assert timeout and float(timeout.group(1)) == run.get_default("unschedulable_timeout_seconds")
    log_format = re.search(r"`(\w+)` \(default\)", readme_row("--log-format"))
    assert log_format and log_format.group(1) == run.get_default("log_format")


def test_the_controllers_flag_names_every_controller_its_default_runs() -> None:
    row = readme_row("--controllers")
    for controller in run_parser().get_default("controllers").split(","):
        assert f"`{controller}`" in row, (controller, row)


def test_sparkop_run_runs_every_controller_by_default() -> None:
    assert run_parser().get_default("controllers") == ",".join(DEFAULT_CONTROLLERS)


def test_sparkop_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"sparkop {version('sparkop')}\n"


def test_every_operator_option_is_set_by_a_flag_of_sparkop_run() -> None:
    """Each option is one flag whose dest is its name, with the option's own default, and a flag given
    reaches its option (listed_namespaces is the manager's, from --namespace)."""
    from dataclasses import fields

    from sparkop.core.runtime import Options

    defaults = vars(cli._parser().parse_args(["run"]))
    assert {f.name for f in fields(Options)} - set(defaults) == {"listed_namespaces"}
    assert cli.run_options(cli._parser().parse_args(["run"])) == Options()
    flags = ["--driver-start-timeout", "60", "--executor-failures-window", "30", "--unschedulable-timeout", "9"]
    flags += ["--max-tracked-executor-per-app", "7", "--metrics-labels", "app_type, team,", "--no-ui-service"]
    given = cli._parser().parse_args(["run", *flags])
    options = cli.run_options(given)
    assert (options.driver_start_timeout_seconds, options.executor_failures_window_seconds) == (60, 30)
    assert (options.unschedulable_timeout_seconds, options.max_tracked_executors) == (9.0, 7)
    assert (options.metrics_labels, options.ui_service) == (("app_type", "team"), False)
