"""``sparkop render FILE``: what sparkop would create, offline.

For each SparkApplication: its first SparkDriver, then that driver's ConfigMaps, Service and pod
(incarnation 1). For each SparkDriver: its objects. The output is stable (placeholder uids, no
timestamps), so it diffs cleanly in review and GitOps.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from sparkop import labels

Body = dict[str, Any]

# Objects that do not exist yet have no uid; these stand in for them, visibly.
PLACEHOLDER_APP_UID = "00000000-0000-0000-0000-00000000a001"
PLACEHOLDER_DRIVER_UID = "00000000-0000-0000-0000-00000000d001"


class RenderError(ValueError):
    pass


def _load(path: str) -> list[Body]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _with_identity(body: Body, uid: str, namespace: str | None) -> Body:
    meta = dict(body.get("metadata") or {})
    meta.setdefault("uid", uid)
    meta["namespace"] = namespace or meta.get("namespace") or "default"
    meta.setdefault("generation", 1)
    return {**body, "metadata": meta}


def render_driver_objects(driver: Body) -> Iterator[Body]:
    from driver_controller.render import parse, render

    objects = render(parse(driver), incarnation=1)
    yield objects.config_map
    if objects.executor_template is not None:
        yield objects.executor_template
    yield objects.service
    yield objects.pod


def render_documents(docs: Iterable[Body], namespace: str | None = None) -> list[Body]:
    from apps_controller.builders import build_driver
    from apps_controller.model import AppView

    out: list[Body] = []
    for doc in docs:
        if doc.get("apiVersion") != labels.API_VERSION:
            raise RenderError(
                f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}: apiVersion must be "
                f"{labels.API_VERSION} (got {doc.get('apiVersion')!r})"
            )
        if doc.get("kind") == "SparkApplication":
            app = AppView.from_body(_with_identity(doc, PLACEHOLDER_APP_UID, namespace))
            driver = _with_identity(build_driver(app, run=1), PLACEHOLDER_DRIVER_UID, app.namespace)
        elif doc.get("kind") == "SparkDriver":
            driver = _with_identity(doc, PLACEHOLDER_DRIVER_UID, namespace)
        else:
            raise RenderError(f"cannot render kind {doc.get('kind')!r}: expected SparkApplication or SparkDriver")
        out.append(driver)
        out.extend(render_driver_objects(driver))
    return out


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (spark.properties, pod templates) as literal blocks, so diffs read well."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(objects: list[Body]) -> str:
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def main(path: str, *, namespace: str | None = None) -> int:
    from driver_controller.render import InvalidSpec

    try:
        objects = render_documents(_load(path), namespace)
    except (RenderError, InvalidSpec, OSError, yaml.YAMLError) as exc:
        print(f"sparkop render: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(dump(objects))
    return 0
