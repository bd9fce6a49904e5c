"""An app that names a history server: its runs write their event log there (Spark's properties, and
for a claim the volume its driver mounts), each run's record links to its page by its spark.app.id,
and an app whose server is not there waits for it instead of running without the log it asked for."""

from __future__ import annotations

from typing import Any

from sparkop.api import history
from sparkop.api.models import DriverPhase, SparkDriver
from sparkop.apps_controller import events
from sparkop.apps_controller.builders import EVENT_LOG_DIR, EVENT_LOG_ENABLED, build_driver
from sparkop.apps_controller.observed import AppView, HistoryServerView, choose_history
from sparkop.domain import labels
from tests.support.app_runs import BASE_SPEC
from tests.support.simulation import SimCluster

CLAIM = HistoryServerView("ns", "hist", history.EventLog("file:///mnt/spark-history/logs", "events"), "http://h")
BUCKET = HistoryServerView("shared", "hist", history.EventLog("s3a://bucket/logs"), "http://hist.example")


def app(**spec: Any) -> AppView:
    return AppView(namespace="ns", name="pi", uid="uid-1", generation=1, spec={**BASE_SPEC, **spec})


def test_a_run_logs_to_the_claim_its_driver_mounts_and_the_apps_own_properties_win() -> None:
    manifest = build_driver(app(sparkConf={EVENT_LOG_ENABLED: "false"}), 1, history_server=CLAIM)
    spec = manifest["spec"]
    assert spec["sparkConf"][EVENT_LOG_ENABLED] == "false"
    assert spec["sparkConf"][EVENT_LOG_DIR] == "file:///mnt/spark-history/logs"
    assert {"name": "spark-history", "persistentVolumeClaim": {"claimName": "events"}} in spec["volumes"]
    assert {"name": "spark-history", "mountPath": history.MOUNT_PATH} in spec["driver"]["volumeMounts"]
    assert manifest["metadata"]["annotations"][labels.HISTORY_URL] == "http://h"
    SparkDriver.model_validate(manifest)  # still a SparkDriver the CRD takes
    url_only = build_driver(app(), 1, history_server=BUCKET)["spec"]
    assert url_only["sparkConf"] == {EVENT_LOG_ENABLED: "true", EVENT_LOG_DIR: "s3a://bucket/logs"}
    assert "volumes" not in url_only


def test_which_server_an_app_logs_to() -> None:
    servers = {("ns", "hist"): (CLAIM,), ("ns", ""): (CLAIM,), ("shared", "hist"): (BUCKET,)}

    def lookup(key: tuple[str, str]) -> tuple[HistoryServerView, ...]:
        return servers.get(key, ())

    assert choose_history(app(), lookup).server is CLAIM  # the namespace's default
    assert choose_history(app(historyServer={"enabled": False}), lookup).server is None
    assert choose_history(app(historyServer={"name": "hist", "namespace": "shared"}), lookup).server is BUCKET
    missing = choose_history(app(historyServer={"name": "other"}), lookup)
    assert missing.server is None and "ns/other" in (missing.missing or "")
    servers[("elsewhere", "hist")] = (CLAIM,)
    far = choose_history(app(historyServer={"name": "hist", "namespace": "elsewhere"}), lookup)
    assert far.missing is not None and "cannot mount" in far.missing


def test_each_run_links_to_its_page_by_the_spark_app_id_of_its_driver() -> None:
    c = SimCluster(spec={**BASE_SPEC, "historyServer": {"name": "hist"}}, name="pi", history_server=CLAIM)
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.RUNNING)
    c.run_until_quiet()
    c.set_phase("pi-1", DriverPhase.SUCCEEDED)
    c.run_until_quiet()
    (record,) = c.status["attempts"]
    app_id = c.drivers["pi-1"].view().spark_application_id
    assert record["sparkApplicationId"] == app_id
    assert record["historyURL"] == f"http://h/history/{app_id}/"
    assert c.status["applicationState"]["state"] == "COMPLETED"


def test_an_app_whose_server_is_not_there_waits_for_it() -> None:
    c = SimCluster(spec={**BASE_SPEC, "historyServer": {"name": "hist"}}, name="pi")
    plan = c.reconcile()
    assert plan is not None and plan.after_status == () and plan.requeue_after is not None
    assert not c.drivers and c.status["lastError"]["reason"] == events.HISTORY_SERVER_MISSING
    assert [e.reason for e in c.events] == [events.HISTORY_SERVER_MISSING]
    c.reconcile()
    assert [e.reason for e in c.events] == [events.HISTORY_SERVER_MISSING]  # said once
    c.history_server = CLAIM
    c.run_until_quiet()
    assert list(c.drivers) == ["pi-1"]
