"""The Spark UI sub-controller's decisions: :func:`spark_ui` runs in every pass of an app that is not
finished; a finished app's pass only deletes the objects (:func:`delete_ui_objects`). The objects
themselves come from the pure builders of :mod:`apps_controller.ui`.
"""

from __future__ import annotations

from api.models import DriverInfo, LastError
from apps_controller import events
from apps_controller.draft import Draft
from apps_controller.status import driver_info
from apps_controller.ui import (
    ACTIVE_STATES,
    UI_ENSURED,
    UI_REMOVED,
    UIOptions,
    build_ingress,
    build_service,
    service_address,
    ui_url,
)
from core import naming
from core.reconciler import Delete, Ensure, Event, refusal_key


def spark_ui(d: Draft) -> None:
    """Spark UI Service (and Ingress) while a run is active; removed otherwise."""
    app_id = d.status.sparkApplicationId
    if not (d.obs.ui.service and d.state in ACTIVE_STATES and app_id is not None):
        remove_ui(d)
        return
    opts = UIOptions.of(d.obs.app)
    if not _service(d, app_id, opts):
        remove_ui(d)
    elif d.obs.ui.ingress_url_format:
        _ingress(d, opts)
    else:
        delete_ui_objects(d, kind="Ingress")
        d.set_driver_info(webUIIngressName=None, webUIIngressAddress=None)


def _service(d: Draft, app_id: str, opts: UIOptions) -> bool:
    app, before = d.obs.app, d.obs.status
    action = Ensure(build_service(app, app_id, opts), UI_ENSURED)
    name = naming.ui_service_name(app.name)
    if _refused(d, action, f"Spark UI Service {name}"):
        return False
    info = driver_info(before)
    if (info.webUIServiceName, info.webUIPort, before.sparkApplicationId) != (name, opts.service_port, app_id):
        d.before.append(action)
    d.set_driver_info(webUIServiceName=name, webUIPort=opts.service_port, webUIAddress=service_address(app, opts))
    return True


def _ingress(d: Draft, opts: UIOptions) -> None:
    app, cfg = d.obs.app, d.obs.ui
    url = ui_url(app, cfg)
    assert url is not None
    action = Ensure(build_ingress(app, url, opts, cfg.ingress_class_name), UI_ENSURED)
    name = naming.ui_ingress_name(app.name)
    if _refused(d, action, f"Spark UI Ingress {name}"):
        delete_ui_objects(d, kind="Ingress")
        d.set_driver_info(webUIIngressName=None, webUIIngressAddress=None)
        return
    info = driver_info(d.obs.status)
    if (info.webUIIngressName, info.webUIIngressAddress) != (name, url.address):
        d.before.append(action)
    d.set_driver_info(webUIIngressName=name, webUIIngressAddress=url.address)


def _refused(d: Draft, action: Ensure, what: str) -> bool:
    """A UI object the API server refused is not retried with the same content: lastError and
    one Warning event say why; the app itself carries on."""
    refusal = d.obs.refusals.get(refusal_key(action))
    if refusal is None:
        return False
    text = refusal.describe(what)
    last = d.status.lastError
    if last is None or (last.reason, last.message) != (events.UI_REFUSED, text):
        d.update(lastError=LastError(reason=events.UI_REFUSED, message=text, time=d.now))
        d.events.append(Event(events.WARNING, events.UI_REFUSED, text))
    return True


def remove_ui(d: Draft) -> None:
    delete_ui_objects(d)
    d.update(driverInfo=DriverInfo(podName=driver_info(d.status).podName))


def delete_ui_objects(d: Draft, kind: str | None = None) -> None:
    """Delete the Spark UI objects this app controls (of ``kind``), as the watch index sees them:
    status may not know one (the operator died between its create and the status write)."""
    for obj in d.obs.owned_ui:
        if not obj.deleting and kind in (None, obj.kind):
            d.before.append(Delete(obj.api_version, obj.kind, obj.name, obj.uid, UI_REMOVED))
