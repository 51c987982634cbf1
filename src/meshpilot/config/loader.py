"""Raw documents -> typed, validated objects. Problems become Diagnostics, never exceptions."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from meshpilot.config.base import TopLevel
from meshpilot.config.diagnostics import Diagnostic, FieldError, Origin, Severity, format_path
from meshpilot.config.fail_closed import SECURITY_KINDS, failing_closed_message, stand_in
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import (
    CLUSTER_SCOPED,
    ISTIO_API_GROUPS,
    Kind,
    accepted_api_versions,
    api_group,
)
from meshpilot.config.kube.core import ConfigMap
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.models import MODEL_BY_KIND
from meshpilot.config.objects import ConfigObject
from meshpilot.config.validation import validate_object
from meshpilot.config.yaml_load import YAMLInputError, load_yaml
from meshpilot.config.yaml_source import RawDocument, read_paths, read_text

__all__ = ["LoadResult", "load_documents", "load_paths", "load_text", "parse_mesh_config"]

_MESH_FILE_NAMES = ("meshconfig.yaml", "meshconfig.yml", "mesh.yaml", "mesh.yml")
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-.")


@dataclass(slots=True)
class LoadResult:
    objects: list[ConfigObject[TopLevel]] = field(default_factory=list)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    mesh_origin: Origin | None = None
    # revisions whose ConfigMap `istio[-<rev>]` was read ("" for `istio`): one of each
    mesh_revisions: set[str] = field(default_factory=set)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # Stand-ins of invalid security policies (config/fail_closed.py); not in `objects`.
    fail_closed: list[ConfigObject[TopLevel]] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    @property
    def served(self) -> list[ConfigObject[TopLevel]]:
        """What a control plane with no earlier version would serve: the objects, and the
        fail-closed stand-in of each invalid security policy no valid copy replaces."""
        keys = {obj.key for obj in self.objects}
        return [*self.objects, *(o for o in self.fail_closed if o.key not in keys)]


def load_paths(paths: Iterable[str | Path], default_namespace: str = "default") -> LoadResult:
    """`default_namespace`: the namespace of objects that name none (istioctl's -n)."""
    read = read_paths(paths)
    result = load_documents(read.documents, default_namespace)
    result.diagnostics[:0] = read.diagnostics
    return result


def load_text(text: str, file: str = "<input>") -> LoadResult:
    read = read_text(text, file)
    result = load_documents(read.documents)
    result.diagnostics[:0] = read.diagnostics
    return result


def load_documents(
    documents: Iterable[RawDocument], default_namespace: str = "default"
) -> LoadResult:
    result = LoadResult()
    seen: dict[ConfigKey, ConfigObject[TopLevel]] = {}
    for doc in documents:
        obj = _load_one(doc, result, default_namespace)
        if obj is None:
            continue
        first = seen.get(obj.key)
        if first is not None:
            result.diagnostics.append(
                _diag(
                    obj.origin,
                    obj.key,
                    (),
                    f"duplicate object: already defined at {first.location}; this copy is ignored",
                )
            )
            continue
        seen[obj.key] = obj
        result.objects.append(obj)
    return result


def _load_one(
    doc: RawDocument, result: LoadResult, default_namespace: str
) -> ConfigObject[TopLevel] | None:
    origin = Origin(doc.file, doc.line, doc.positions)
    data = doc.data
    if not isinstance(data, dict):
        result.diagnostics.append(
            Diagnostic(
                file=doc.file,
                line=doc.line,
                message=f"expected an object with apiVersion and kind, got {_type_name(data)}",
            )
        )
        return None
    if "kind" not in data and os.path.basename(doc.file) in _MESH_FILE_NAMES:
        _set_mesh(data, origin, result)
        return None
    kind_name, api_version = data.get("kind"), data.get("apiVersion")
    if not isinstance(kind_name, str) or not kind_name:
        result.diagnostics.append(
            Diagnostic(file=doc.file, line=doc.line, field="kind", message="missing kind")
        )
        return None
    try:
        kind = Kind(kind_name)
    except ValueError:
        # Istio's own groups: an unknown kind there is a typo or a kind istiod rejects too.
        group = api_group(api_version)
        istio = group in ISTIO_API_GROUPS
        result.diagnostics.append(
            Diagnostic(
                file=doc.file,
                line=doc.line,
                kind=kind_name,
                field="kind",
                severity=Severity.ERROR if istio else Severity.WARNING,
                message=f"unknown kind {kind_name!r} in Istio API group {group!r}"
                if istio
                else f"unknown kind {kind_name!r} ignored",
                name=_meta(data, "name"),
                namespace=_meta(data, "namespace"),
            )
        )
        return None
    if kind is Kind.MESH_CONFIG:
        _set_mesh(data.get("spec") or {}, origin, result, prefix=("spec",))
        return None
    key = ConfigKey(
        kind,
        "" if kind in CLUSTER_SCOPED else (_meta(data, "namespace") or default_namespace),
        _meta(data, "name"),
    )
    if api_version not in accepted_api_versions(kind):
        accepted = ", ".join(accepted_api_versions(kind))
        message = f"apiVersion {api_version!r} is not accepted for {kind}; use one of: {accepted}"
        _refuse(result, data, origin, key, [FieldError(("apiVersion",), message)])
        return None
    if not key.name:
        result.diagnostics.append(
            _diag(origin, key, ("metadata", "name"), "metadata.name is required")
        )
        return None
    model_cls = MODEL_BY_KIND.get(kind)
    if model_cls is None:
        result.diagnostics.append(
            _diag(origin, key, ("kind",), f"{kind} is not supported yet; ignored", Severity.WARNING)
        )
        return None
    try:
        model = model_cls.model_validate(data)
    except ValidationError as exc:
        _refuse(result, data, origin, key, [FieldError(*err) for err in _pydantic_errors(exc)])
        return None
    errors = _name_errors(key) + validate_object(kind, model)
    if any(err.severity is Severity.ERROR for err in errors):
        _refuse(result, data, origin, key, errors)
        return None
    for err in errors:
        result.diagnostics.append(_diag(origin, key, err.path, err.message, err.severity))
    if isinstance(model, ConfigMap) and _is_mesh_config_map(model) and "mesh" in model.data:
        revision = model.metadata.labels.get("istio.io/rev", "")
        _set_mesh_text(
            model.data["mesh"], origin, result, "" if model.metadata.name == "istio" else revision
        )
    return ConfigObject(key, model, origin)


def _refuse(
    result: LoadResult,
    data: dict[str, Any],
    origin: Origin,
    key: ConfigKey,
    errors: list[FieldError],
) -> None:
    """Report an object that cannot be used. A security policy gets a fail-closed stand-in
    (config/fail_closed.py) and its errors say so."""
    stand = None
    if key.kind in SECURITY_KINDS and key.name:
        first = next(e for e in errors if e.severity is Severity.ERROR)
        reason = f"{format_path(first.path) or 'object'}: {first.message}"
        stand = stand_in(key.kind, key, data, origin, reason)
    for err in errors:
        message = err.message
        if stand is not None and err.severity is Severity.ERROR:
            message = failing_closed_message(key.kind, message)
        result.diagnostics.append(_diag(origin, key, err.path, message, err.severity))
    if stand is not None:
        result.fail_closed.append(stand)


def _is_mesh_config_map(cm: ConfigMap) -> bool:
    """Istio reads mesh settings from the `istio` (or `istio-<revision>`) ConfigMap."""
    revision = cm.metadata.labels.get("istio.io/rev", "")
    return cm.metadata.name in ("istio", f"istio-{revision}")


def _set_mesh_text(text: str, origin: Origin, result: LoadResult, revision: str) -> None:
    mesh_line = origin.line_of(("data", "mesh"))
    try:
        data = load_yaml(text, "data.mesh") or {}
    except YAMLInputError as exc:
        problem = exc.message.removeprefix("invalid YAML: ")
        result.diagnostics.append(
            Diagnostic(
                file=origin.file,
                line=mesh_line,
                kind="ConfigMap",
                field="data.mesh",
                message=f"invalid mesh YAML (line {exc.line} of data.mesh): {problem}",
            )
        )
        return
    _set_mesh(data, Origin(origin.file, mesh_line), result, ("data", "mesh"), revision)


def _set_mesh(
    data: Any,
    origin: Origin,
    result: LoadResult,
    prefix: tuple[str | int, ...] = (),
    revision: str | None = None,
) -> None:
    """`revision`: of a ConfigMap `istio[-<rev>]`. Each revision has its own, and each
    revision's control plane reads its own (discovery/revision_view.py); the first one
    read is the mesh of a reader that serves no revision."""
    mesh, errors = parse_mesh_config(data)
    for path, message, severity in errors:
        result.diagnostics.append(
            Diagnostic(
                file=origin.file,
                line=origin.line_of((*prefix, *path)),
                kind="MeshConfig",
                field=format_path((*prefix, *path)),
                message=message,
                severity=severity,
            )
        )
    if mesh is None:
        return
    if revision is not None and revision not in result.mesh_revisions:
        result.mesh_revisions.add(revision)
        if result.mesh_origin is not None:
            return
    elif result.mesh_origin is not None:
        result.diagnostics.append(
            Diagnostic(
                file=origin.file,
                line=origin.line,
                kind="MeshConfig",
                message=f"a second mesh config; the one at {result.mesh_origin.file}:"
                f"{result.mesh_origin.line} is used",
            )
        )
        return
    result.mesh, result.mesh_origin = mesh, origin


def parse_mesh_config(
    data: Any,
) -> tuple[MeshConfig | None, list[tuple[tuple[str | int, ...], str, Severity]]]:
    """Parse mesh settings; unknown top-level fields are warnings, wrong types are errors."""
    if not isinstance(data, dict):
        return None, [
            ((), f"mesh config must be an object, got {_type_name(data)}", Severity.ERROR)
        ]
    try:
        mesh = MeshConfig.model_validate(data)
    except ValidationError as exc:
        return None, [(path, message, Severity.ERROR) for path, message in _pydantic_errors(exc)]
    warnings: list[tuple[tuple[str | int, ...], str, Severity]] = [
        (
            (name,),
            f"mesh field {name!r} is not supported by meshpilot and is ignored",
            Severity.WARNING,
        )
        for name in sorted(mesh.model_extra or {})
    ]
    return mesh, warnings


def _pydantic_errors(exc: ValidationError) -> list[tuple[tuple[str | int, ...], str]]:
    out = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        kind = err["type"]
        if kind == "extra_forbidden":
            message = f"unknown field {loc[-1]!r}" if loc else "unknown field"
        elif kind == "missing":
            message = "required field is missing"
        else:
            message = err["msg"].removeprefix("Value error, ")
        out.append((loc, message))
    return out


def _name_errors(key: ConfigKey) -> list[FieldError]:
    errors = []
    if len(key.name) > 253 or not set(key.name) <= _NAME_CHARS or not key.name[0].isalnum():
        errors.append(
            FieldError(
                ("metadata", "name"),
                f"invalid name {key.name!r}: use lower case letters, digits, '-' "
                "and '.', starting with a letter or digit",
            )
        )
    if key.namespace and (len(key.namespace) > 63 or not set(key.namespace) <= _NAME_CHARS - {"."}):
        errors.append(FieldError(("metadata", "namespace"), f"invalid namespace {key.namespace!r}"))
    return errors


def _diag(
    origin: Origin,
    key: ConfigKey,
    path: tuple[str | int, ...],
    message: str,
    severity: Severity = Severity.ERROR,
) -> Diagnostic:
    return Diagnostic(
        file=origin.file,
        line=origin.line_of(path),
        kind=str(key.kind),
        namespace=key.namespace,
        name=key.name,
        field=format_path(path),
        message=message,
        severity=severity,
    )


def _meta(data: dict[str, Any], field_name: str) -> str:
    meta = data.get("metadata")
    value = meta.get(field_name) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else ""


def _type_name(value: Any) -> str:
    return {
        list: "a list",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
    }.get(type(value), type(value).__name__)
