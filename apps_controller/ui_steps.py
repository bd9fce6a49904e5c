"""The Spark UI sub-controller's decisions: :func:`spark_ui` runs in every pass of an app that is not
finished; a finished app's pass only deletes the objects (:func:`delete_ui_objects`). The objects
themselves come from the pure builders of :mod:`apps_controller.ui`.
"""

from __future__ import annotations

from sparkop.api.models import DriverInfo, LastError
from sparkop.apps_controller import events
from sparkop.apps_controller.draft import Draft
from sparkop.apps_controller.status import driver_info
from sparkop.apps_controller.ui import (
    ACTIVE_STATES,
    COMPONENT_DRIVER_INGRESS,
    COMPONENT_UI,
    DRIVER_INGRESS_ENSURED,
    UI_ENSURED,
    UI_REMOVED,
    UI_RESTORED,
    DriverIngress,
    UIOptions,
    build_driver_ingress,
    build_driver_ingress_service,
    build_ingress,
    build_route,
    build_service,
    driver_service_ui,
    own_service_wanted,
    restore_patch,
    service_address,
    ui_url,
)
from sparkop.core.plan import Delete, Ensure, Patch, refused
from sparkop.domain import labels, naming


def spark_ui(d: Draft) -> None:
    """Spark UI Service (and Ingress), and the Services and Ingresses of spec.driverIngressOptions,
    while a run is active; removed otherwise."""
    app_id = d.status.sparkApplicationId
    if not (d.state in ACTIVE_STATES and app_id is not None):
        remove_ui(d)
        return
    _driver_ingresses(d, app_id)
    if not d.obs.ui.service:
        remove_ui(d, component=COMPONENT_UI)
        return
    if not own_service_wanted(d.obs.app, d.obs.ui):
        delete_ui_objects(d, component=COMPONENT_UI)  # one made for options since removed
        _at_driver_service(d)
        return
    opts = UIOptions.of(d.obs.app)
    if not _service(d, app_id, opts):
        remove_ui(d, component=COMPONENT_UI)
        return
    if d.obs.ui.ingress_url_format:
        _ingress(d, opts)
    else:
        delete_ui_objects(d, kind="Ingress", component=COMPONENT_UI)
        d.set_driver_info(webUIIngressName=None, webUIIngressAddress=None)
    _route(d, opts)


def _route(d: Draft, opts: UIOptions) -> None:
    """spec.sparkUIOptions.httpRoute: an HTTPRoute to the UI Service, through the Gateway it names."""
    manifest = build_route(d.obs.app, opts)
    if manifest is None:
        delete_ui_objects(d, kind="HTTPRoute", component=COMPONENT_UI)
        return
    action = Ensure(manifest, UI_ENSURED)
    if _refused(d, action, f"Spark UI HTTPRoute {action.name}"):
        return
    _converge(d, action)


def _at_driver_service(d: Draft) -> None:
    """The UI as the current SparkDriver's own Service serves it."""
    cur = d.current
    drv = d.driver(cur.run) if cur is not None else None
    found = driver_service_ui(drv.web_ui_address if drv is not None else None)
    if drv is None or found is None:
        d.update(driverInfo=DriverInfo(podName=driver_info(d.status).podName))
        return
    name, port = found
    d.set_driver_info(
        webUIServiceName=name,
        webUIPort=port,
        webUIAddress=drv.web_ui_address,
        webUIIngressName=None,
        webUIIngressAddress=None,
    )


def _driver_ingresses(d: Draft, app_id: str) -> None:
    """kubeflow's driverIngressOptions: per entry a Service, and an Ingress to it; created, and put
    back when edited or deleted, like the Spark UI's. A refused object is reported and skipped."""
    app = d.obs.app
    wanted: set[tuple[str, str]] = set()
    for entry in DriverIngress.all_of(app):
        service = Ensure(build_driver_ingress_service(app, app_id, entry), DRIVER_INGRESS_ENSURED)
        wanted.add((service.kind, service.name))
        if _refused(d, service, f"driver ingress Service {service.name}"):
            continue
        _converge(d, service)
        ingress = Ensure(build_driver_ingress(app, app_id, entry, d.obs.ui.ingress_class_name), DRIVER_INGRESS_ENSURED)
        wanted.add((ingress.kind, ingress.name))
        if not _refused(d, ingress, f"driver ingress Ingress {ingress.name}"):
            _converge(d, ingress)
    for obj in d.obs.owned_ui:
        is_driver_ingress = obj.labels.get(labels.COMPONENT) == COMPONENT_DRIVER_INGRESS
        if is_driver_ingress and (obj.kind, obj.name) not in wanted and not obj.deleting:
            d.before(Delete(obj.api_version, obj.kind, obj.name, obj.uid, UI_REMOVED))


def _service(d: Draft, app_id: str, opts: UIOptions) -> bool:
    app = d.obs.app
    action = Ensure(build_service(app, app_id, opts), UI_ENSURED)
    name = naming.ui_service_name(app.name)
    if _refused(d, action, f"Spark UI Service {name}"):
        return False
    _converge(d, action)
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
    _converge(d, action)
    d.set_driver_info(webUIIngressName=name, webUIIngressAddress=url.address)


def _converge(d: Draft, action: Ensure) -> None:
    """Compare the UI object the watch index holds with the one wanted: missing, it is created;
    edited in a field sparkop sets, it is patched back (only if unchanged since it was observed);
    as wanted, nothing is written. One on its way out is left to go: its deletion brings the app
    back to this pass, which then creates it anew."""
    current = next((o for o in d.obs.owned_ui if (o.kind, o.name) == (action.kind, action.name)), None)
    if current is None:
        d.before(action)
    elif not current.deleting and (patch := restore_patch(current, action.manifest)) is not None:
        api_version = str(action.manifest["apiVersion"])
        d.before(Patch(api_version, action.kind, action.name, patch, current.resource_version, UI_RESTORED))


def _refused(d: Draft, action: Ensure, what: str) -> bool:
    """A UI object the API server refused is not retried with the same content: lastError and
    one Warning event say why; the app itself carries on."""
    refusal = refused(d.obs.refusals, action)
    if refusal is None:
        return False
    text = refusal.describe(what)
    last = d.status.lastError
    if last is None or (last.reason, last.message) != (events.Reason.UI_REFUSED, text):
        d.update(lastError=LastError(reason=events.Reason.UI_REFUSED, message=text, time=d.now))
        d.event(events.WARNING, events.Reason.UI_REFUSED, text)
    return True


def remove_ui(d: Draft, component: str | None = None) -> None:
    delete_ui_objects(d, component=component)
    d.update(driverInfo=DriverInfo(podName=driver_info(d.status).podName))


def delete_ui_objects(d: Draft, kind: str | None = None, component: str | None = None) -> None:
    """Delete the Spark UI and driver-ingress objects this app controls (of ``kind``, of ``component``),
    as the watch index sees them: status may not know one (the operator died between its create and
    the status write)."""
    for obj in d.obs.owned_ui:
        if not obj.deleting and kind in (None, obj.kind) and component in (None, obj.labels.get(labels.COMPONENT)):
            d.before(Delete(obj.api_version, obj.kind, obj.name, obj.uid, UI_REMOVED))
