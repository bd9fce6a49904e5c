"""`sparkop ui`'s choice, pure: the live UI while a run is active, the last run's history page after,
forwarded when that is a Service in the cluster, printed when it is not, and a clear word when an app
has neither."""

from __future__ import annotations

from typing import Any

import pytest

from sparkop.daily_cli import Unavailable
from sparkop.ui_cli import History, Live, choose, in_cluster


def app(state: str, pod: str | None = None, *history: str, **spec: Any) -> dict[str, Any]:
    attempts = [{"run": i + 1, "historyURL": url} for i, url in enumerate(history)]
    return {
        "metadata": {"name": "pi", "namespace": "jobs"},
        "spec": spec,
        "status": {"applicationState": {"state": state}, "driverInfo": {"podName": pod}, "attempts": attempts},
    }


def test_a_running_app_shows_its_live_ui_on_the_spark_ui_port() -> None:
    assert choose(app("RUNNING", "pi-1-1-driver")) == Live("pi-1-1-driver", 4040)
    assert choose(app("RUNNING", "p", sparkConf={"spark.ui.port": "4050"})) == Live("p", 4050)


def test_a_finished_app_shows_its_last_runs_history_page() -> None:
    url = "http://history-history.jobs.svc:18080/history/spark-2/"
    found = choose(app("FAILED", "pi-2-1-driver", "http://history-history.jobs.svc:18080/history/spark-1/", url))
    assert found == History(url, "history-history", "jobs", 18080, "/history/spark-2/")
    outside = choose(app("COMPLETED", None, "https://spark.example.com/history/history/spark-1/"))
    assert isinstance(outside, History) and outside.server is None
    assert in_cluster("https://spark.example.com/x") is None


def test_an_app_with_no_ui_to_show_says_why() -> None:
    with pytest.raises(Unavailable, match=r"logs to no history server: set spec\.historyServer"):
        choose(app("COMPLETED"))
    with pytest.raises(Unavailable, match="not running yet"):
        choose(app("SUBMITTED"))
    # a run planned, its driver pod not accepted yet: the state is still NEW (or the one it was planned from)
    planned = app("NEW", "pi-driver")
    planned["status"] |= {"lastRun": 1, "attempts": [{"run": 1, "outcome": "Running"}]}
    with pytest.raises(Unavailable, match=r"\(NEW\) has no Spark UI to show: its driver pod is not running yet"):
        choose(planned)
