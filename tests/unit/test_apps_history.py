"""An app that names a history server: its runs write their event log there (Spark's properties, and
for a claim the volume its driver mounts), each run's record links to its page by its spark.app.id,
and an app whose server is not there waits for it instead of running without the log it asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.javaprops import parse_properties
from sparkop.api import history
from sparkop.api.models import DriverPhase, SparkDriver
from sparkop.apps_controller import events
from sparkop.apps_controller.builders import EVENT_LOG_DIR, EVENT_LOG_ENABLED, build_driver
from sparkop.apps_controller.observed import AppView, HistoryServerView, choose_history
from sparkop.domain import labels
from sparkop.driver_controller.podbuild import SPARK_CONF_FILE
from sparkop.driver_controller.submission import DRIVER_CONTAINER
from sparkop.render_cli import render_documents
from tests.support.app_runs import BASE_SPEC
from tests.support.simulation import SimCluster

CLAIM = HistoryServerView(
    "ns",
    "hist",
    history.event_log({"logDirectory": {"persistentVolumeClaim": {"claimName": "events", "path": "logs"}}}),
    "http://h",
)
ROOT = Path(__file__).resolve().parents[2]
BUCKET = HistoryServerView("shared", "hist", history.EventLog("s3a://bucket/logs"), "http://hist.example")


def app(**spec: Any) -> AppView:
    return AppView(namespace="ns", name="pi", uid="uid-1", generation=1, spec={**BASE_SPEC, **spec})


def test_a_run_logs_to_the_claim_its_driver_mounts_and_the_apps_own_properties_win() -> None:
    manifest = build_driver(app(sparkConf={EVENT_LOG_ENABLED: "false"}), 1, history_server=CLAIM)
    spec = manifest["spec"]
    assert spec["sparkConf"][EVENT_LOG_ENABLED] == "false"
    assert spec["sparkConf"][EVENT_LOG_DIR] == "file:///mnt/spark-history/logs"
    assert {"name": "spark-history", "persistentVolumeClaim": {"claimName": "events"}} in spec["volumes"]
    mount = {"name": "spark-history", "mountPath": f"{history.MOUNT_PATH}/logs", "subPath": "logs"}
    assert mount in spec["driver"]["volumeMounts"]
    assert manifest["metadata"]["annotations"][labels.HISTORY_URL] == "http://h"
    SparkDriver.model_validate(manifest)  # still a SparkDriver the CRD takes
    url_only = build_driver(app(), 1, history_server=BUCKET)["spec"]
    assert url_only["sparkConf"] == {EVENT_LOG_ENABLED: "true", EVENT_LOG_DIR: "s3a://bucket/logs"}
    assert "volumes" not in url_only


@pytest.mark.parametrize(
    ("path", "mount"),
    [
        (None, {"name": "spark-history", "mountPath": "/mnt/spark-history"}),
        (
            "spark-events",
            {"name": "spark-history", "mountPath": "/mnt/spark-history/spark-events", "subPath": "spark-events"},
        ),
        ("a/b/", {"name": "spark-history", "mountPath": "/mnt/spark-history/a/b", "subPath": "a/b"}),
    ],
)
def test_a_driver_mounts_only_its_log_directory_so_the_kubelet_makes_it(
    path: str | None, mount: dict[str, str]
) -> None:
    """A directory inside the claim is mounted as a subPath, which the kubelet creates before the driver
    starts: Spark exits at start when spark.eventLog.dir is missing, and the history server, which makes
    it too, may not have started yet (applied in the same file) or not exist at all. The claim's root
    always exists. Either way spark.eventLog.dir is where the driver mounts it."""
    claim = {"claimName": "events", **({"path": path} if path is not None else {})}
    target = history.event_log({"logDirectory": {"persistentVolumeClaim": claim}})
    assert target is not None
    assert history.driver_mount(target) == mount
    assert target.directory == f"file://{mount['mountPath']}"
    driver = build_driver(app(), 1, history_server=HistoryServerView("ns", "hist", target, "http://h"))["spec"][
        "driver"
    ]
    assert driver["volumeMounts"] == [mount]


def test_the_rendered_driver_pod_mounts_the_log_directory_as_spark_submit_would() -> None:
    """examples/history-server.yaml: the subPath reaches the driver pod through Spark's own volume
    property (mount.subPath), so spark-submit given the same properties builds the same pod."""
    docs = list(yaml.safe_load_all((ROOT / "examples" / "history-server.yaml").read_text()))
    rendered = render_documents([d for d in docs if d])
    (pod,) = [o for o in rendered if o["kind"] == "Pod"]
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == DRIVER_CONTAINER]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == history.VOLUME_NAME]
    assert mount == {
        "name": history.VOLUME_NAME,
        "mountPath": "/mnt/spark-history/spark-events",
        "subPath": "spark-events",
    }
    (conf_map,) = [o for o in rendered if o["kind"] == "ConfigMap" and SPARK_CONF_FILE in o["data"]]
    properties = parse_properties(conf_map["data"][SPARK_CONF_FILE])
    assert properties["spark.kubernetes.driver.volumes.persistentVolumeClaim.spark-history.mount.subPath"] == (
        "spark-events"
    )
    assert properties["spark.eventLog.dir"] == f"file://{mount['mountPath']}"


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
    assert not c.drivers and c.status["lastError"]["reason"] == events.Reason.HISTORY_SERVER_MISSING
    assert [e.reason for e in c.events] == [events.Reason.HISTORY_SERVER_MISSING]
    c.reconcile()
    assert [e.reason for e in c.events] == [events.Reason.HISTORY_SERVER_MISSING]  # said once
    c.history_server = CLAIM
    c.run_until_quiet()
    assert list(c.drivers) == ["pi-1"]
