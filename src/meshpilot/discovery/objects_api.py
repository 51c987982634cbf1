"""/debug/objectz: the objects the control plane serves, each with its file and the line of
every field, and the mesh settings; what `meshpilot analyze --discovery` analyzes (configz
gives only the line a document starts on). Secret values are redacted, as on every debug
page: the analyzers look at which keys a Secret has, never at the values.

`objectz` writes the page, `read_objectz` turns it back into typed objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from meshpilot.config.diagnostics import Diagnostic, Origin, Severity
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.core import Secret
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.models import MODEL_BY_KIND
from meshpilot.config.objects import ConfigObject
from meshpilot.discovery.http import HttpRequest, HttpResponse, Route
from meshpilot.discovery.objects_wire import wire_dump
from meshpilot.errors import MeshpilotError
from meshpilot.store.base import ConfigStore, StoreSnapshot

__all__ = ["ObjectzError", "RemoteObjects", "object_routes", "objectz", "read_objectz"]

PATH = "/debug/objectz"


class ObjectzError(MeshpilotError):
    """The page does not hold what this version of meshpilot writes."""


@dataclass
class RemoteObjects:
    objects: list[ConfigObject[Any]] = field(default_factory=list)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def object_routes(store: ConfigStore) -> dict[str, Route]:
    async def page(_: HttpRequest) -> HttpResponse:
        body = json.dumps(objectz(store.snapshot()), indent=1) + "\n"
        return HttpResponse(200, body.encode(), "application/json")

    return {PATH: page}


def objectz(snapshot: StoreSnapshot) -> dict[str, Any]:
    return {
        "store_version": snapshot.version,
        "mesh": wire_dump(snapshot.mesh),
        "diagnostics": [
            {
                "file": d.file,
                "line": d.line,
                "severity": str(d.severity),
                "kind": d.kind,
                "namespace": d.namespace,
                "name": d.name,
                "field": d.field,
                "message": d.message,
                "code": d.code,
            }
            for d in snapshot.diagnostics
        ],
        "objects": [_object(obj) for _, obj in sorted(snapshot.objects.items())],
    }


def _object(obj: ConfigObject[Any]) -> dict[str, Any]:
    model = obj.model
    body = model.public_dump() if isinstance(model, Secret) else wire_dump(model)
    positions = sorted((obj.origin.positions or {}).items(), key=lambda item: item[1])
    return {
        "kind": str(obj.key.kind),
        "namespace": obj.namespace,
        "name": obj.name,
        "file": obj.origin.file,
        "line": obj.origin.line,
        "positions": [[list(path), line] for path, line in positions],
        "fail_closed": obj.fail_closed,
        "object": body,
    }


def read_objectz(data: Any) -> RemoteObjects:
    """The objects of an objectz page; ObjectzError when it is not one."""
    try:
        out = RemoteObjects(mesh=MeshConfig.model_validate(data["mesh"]))
        for entry in data["objects"]:
            kind = Kind(entry["kind"])
            key = ConfigKey(kind, entry["namespace"], entry["name"])
            positions = {tuple(path): int(line) for path, line in entry["positions"]}
            origin = Origin(entry["file"], int(entry["line"]), positions)
            model = MODEL_BY_KIND[kind].model_validate(entry["object"])
            out.objects.append(ConfigObject(key, model, origin, entry.get("fail_closed", "")))
        out.diagnostics = [
            Diagnostic(**{**d, "severity": Severity(d["severity"])}) for d in data["diagnostics"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise ObjectzError(
            f"the control plane's {PATH} page is not what this meshpilot reads ({exc})"
        ) from exc
    return out
