"""``sparkop render FILE``: what sparkop would create, offline.

For each SparkApplication: its first SparkDriver, then that driver's ConfigMaps, Service and pod
(incarnation 1). For each SparkDriver: its objects. For each ScheduledSparkApplication: the
SparkApplication of one run (scheduled at a placeholder time), then that app's objects. For each
SparkConnect: its stable Service and its first server's SparkDriver, then that driver's objects. Either
group's SparkApplication, ScheduledSparkApplication and SparkConnect (sparkop's, or kubeflow's as
``sparkop run --kubeflow-api`` serves it). The output is stable (placeholder uids and time, no
timestamps), so it diffs cleanly in review and GitOps.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pydantic
import yaml

from sparkop.api import manifests, validate
from sparkop.api.manifests import clip, one_line, quote
from sparkop.core.jsontypes import JSON
from sparkop.domain import kinds, labels

# Objects that do not exist yet have no uid; these stand in for them, visibly.
PLACEHOLDER_APP_UID = "00000000-0000-0000-0000-00000000a001"
PLACEHOLDER_DRIVER_UID = "00000000-0000-0000-0000-00000000d001"
PLACEHOLDER_SCHEDULED_UID = "00000000-0000-0000-0000-00000000c001"
PLACEHOLDER_CONNECT_UID = "00000000-0000-0000-0000-00000000cc01"
PLACEHOLDER_HISTORY_UID = "00000000-0000-0000-0000-00000000e001"
PLACEHOLDER_SCHEDULED_TIME = datetime(2000, 1, 1, tzinfo=UTC)


class RenderError(ValueError):
    pass


def _with_identity(body: JSON, uid: str, namespace: str | None) -> JSON:
    meta = dict(body.get("metadata") or {})
    meta.setdefault("uid", uid)
    meta["namespace"] = namespace or meta.get("namespace") or "default"
    meta.setdefault("generation", 1)
    return {**body, "metadata": meta}


def render_driver_objects(driver: JSON) -> Iterator[JSON]:
    from sparkop.driver_controller.render import parse, render

    objects = render(parse(driver), incarnation=1)
    yield objects.config_map
    if objects.executor_template is not None:
        yield objects.executor_template
    yield objects.service
    if objects.network_policy is not None:
        yield objects.network_policy
    if objects.pod_disruption_budget is not None:
        yield objects.pod_disruption_budget
    yield objects.pod


def history_servers(docs: Iterable[Any], namespace: str | None = None) -> dict[tuple[str, str], Any]:
    """The SparkHistoryServers among ``docs``, as the apps controller reads them, by (namespace, name)
    and, for a namespace's default, (namespace, ""): an app of the same file that names one is rendered
    logging there."""
    from sparkop.apps_controller.observed import HistoryServerView, history_keys

    found: dict[tuple[str, str], Any] = {}
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "SparkHistoryServer":
            body = _with_identity(doc, PLACEHOLDER_HISTORY_UID, namespace)
            for key in history_keys(body):
                found.setdefault(key, HistoryServerView.from_body(body))
    return found


def render_document(
    doc: JSON, namespace: str | None = None, servers: Mapping[tuple[str, str], Any] | None = None
) -> list[JSON]:
    """What sparkop creates for one SparkApplication, SparkDriver, ScheduledSparkApplication, SparkConnect or
    SparkHistoryServer (``servers``: the history servers an app may name, :func:`history_servers`). Raises
    RenderError for another kind, InvalidSpec for a spec Spark would refuse."""
    from sparkop.apps_controller.builders import build_driver
    from sparkop.apps_controller.observed import AppView, choose_history

    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if api_version != labels.API_VERSION and kinds.api_of(str(api_version), str(kind)) is None:
        raise RenderError(
            f"apiVersion must be {labels.API_VERSION} or kubeflow's for the kind (got {quote(api_version)})"
        )
    if doc.get("kind") == "ScheduledSparkApplication":
        from sparkop.schedule_controller.decide import build_run
        from sparkop.schedule_controller.observed import ScheduledView

        scheduled = _with_identity(doc, PLACEHOLDER_SCHEDULED_UID, namespace)
        run = build_run(ScheduledView.from_body(scheduled), scheduled, PLACEHOLDER_SCHEDULED_TIME)
        run = _with_identity(run, PLACEHOLDER_APP_UID, namespace)
        return [run, *render_document(run, namespace)]
    if doc.get("kind") == "SparkConnect":
        from sparkop.connect_controller import build
        from sparkop.connect_controller.observed import ConnectView

        sc = _with_identity(doc, PLACEHOLDER_CONNECT_UID, namespace)
        view = ConnectView.from_body(sc)
        server = _with_identity(build.build_server(view, sc, run=1), PLACEHOLDER_DRIVER_UID, view.namespace)
        return [build.build_service(view, sc, server["metadata"]["name"]), server, *render_driver_objects(server)]
    if doc.get("kind") == "SparkHistoryServer":
        from sparkop.history_controller import build as history
        from sparkop.history_controller.observed import ServerView

        body = _with_identity(doc, PLACEHOLDER_HISTORY_UID, namespace)
        server_view = ServerView.from_body(body)
        made = (history.deployment(server_view, body), history.service(server_view, body))
        ways_in = (history.ingress(server_view, body), history.http_route(server_view, body))
        return [*made, *(o for o in ways_in if o is not None)]
    if doc.get("kind") == "SparkApplication":
        app = AppView.from_body(_with_identity(doc, PLACEHOLDER_APP_UID, namespace))
        known = servers or {}
        chosen = choose_history(app, lambda key: tuple(v for k, v in known.items() if k == key))
        built = build_driver(app, run=1, history_server=chosen.server)
        driver = _with_identity(built, PLACEHOLDER_DRIVER_UID, app.namespace)
    elif doc.get("kind") == "SparkDriver":
        driver = _with_identity(doc, PLACEHOLDER_DRIVER_UID, namespace)
    else:
        raise RenderError(
            f"cannot render kind {quote(doc.get('kind'))}: expected SparkApplication, SparkDriver, "
            "ScheduledSparkApplication, SparkConnect or SparkHistoryServer"
        )
    return [driver, *render_driver_objects(driver)]


def render_documents(docs: Iterable[JSON], namespace: str | None = None) -> list[JSON]:
    """What sparkop creates for each of its documents among ``docs`` (others, a claim or RBAC beside
    them, are passed over)."""
    listed = [doc for doc in docs if doc and doc.get("apiVersion") == labels.API_VERSION]
    servers = history_servers(listed, namespace)
    return [obj for doc in listed if doc for obj in render_document(doc, namespace, servers)]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (spark.properties, pod templates) as literal blocks, so diffs read well."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(objects: list[JSON]) -> str:
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def _document_name(body: Any) -> str:
    meta = body.get("metadata") if isinstance(body, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    kind = body.get("kind") if isinstance(body, dict) else None
    return f"{clip(kind, 64) if isinstance(kind, str) else '?'}/{clip(name) if isinstance(name, str) else '?'}"


def _first_problem(exc: Exception) -> str:
    """One line for an error the renderer raised on a document that passed validation."""
    from sparkop.driver_controller.render import InvalidSpec

    if isinstance(exc, pydantic.ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return clip(f"{where}: {first['msg']}", 300)
    if isinstance(exc, RenderError | InvalidSpec):
        return clip(str(exc), 300)
    return clip(f"sparkop could not render it ({type(exc).__name__}: {exc}); this is a bug, please report it", 300)


def render_file(path: str, namespace: str | None = None) -> tuple[list[JSON], list[str], list[str]]:
    """(objects, problems, notes) of file ``path``: each document is validated first (the messages of
    ``sparkop validate``), then rendered; a bad document is one line in ``problems`` and does not
    stop the others. Documents of other kinds are passed over with a note. OSError when the file
    cannot be read."""
    source, documents = manifests.read(path)
    objects: list[JSON] = []
    problems: list[str] = []
    notes: list[str] = []
    checked_all = list(validate.check(documents))
    servers = history_servers((c.body for c in checked_all if not c.note and not c.errors), namespace)
    for checked in checked_all:
        if checked.note:
            notes.append(f"{checked.source}: {checked.note}")
            continue
        if checked.errors:
            more = len(checked.errors) - 1
            suffix = f" (and {more} more: run sparkop validate {source})" if more else ""
            problems.append(f"{checked.errors[0]}{suffix}")
            continue
        try:
            objects.extend(render_document(checked.body, namespace, servers))
        except Exception as exc:  # the CLI boundary: one line per document, never a traceback
            problems.append(one_line(f"{checked.source}: {_document_name(checked.body)}: {_first_problem(exc)}"))
    return objects, problems, notes


def main(path: str, *, namespace: str | None = None) -> int:
    """``sparkop render FILE``: the objects of every good document on stdout; one line per bad
    document on stderr and exit 1 when there is one."""
    try:
        objects, problems, notes = render_file(path, namespace)
    except OSError as exc:
        print(f"sparkop render: {path}: cannot read: {one_line(exc.strerror or str(exc))}", file=sys.stderr)
        return 1
    for note in notes:
        print(f"sparkop render: {note}", file=sys.stderr)
    if objects:
        sys.stdout.write(dump(objects))
    for problem in problems:
        print(f"sparkop render: {problem}", file=sys.stderr)
    return 1 if problems else 0
