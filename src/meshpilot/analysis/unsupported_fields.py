"""Fields meshpilot parses and then ignores: each one set in the input gets a warning.

UNSUPPORTED_FIELDS is the one table of them: a later issue that implements a field removes
its row (a test checks that every row names a real field). It was drawn up by checking, for
each field of the models in config/, whether any code outside config/ reads it; fields that
only carry Kubernetes bookkeeping (resourceVersion, managedFields, ...) or that steer
kube-proxy and cloud load balancers, not the mesh, are left out on purpose.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from meshpilot.config.base import ApiModel
from meshpilot.config.diagnostics import Diagnostic, Origin, Severity, format_path
from meshpilot.config.istio.authorization_policy import AuthorizationPolicySpec
from meshpilot.config.istio.destination_rule import LoadBalancerSettings, TrafficPolicy
from meshpilot.config.istio.request_authentication import RequestAuthenticationSpec
from meshpilot.config.istio.sidecar import OutboundTrafficPolicy
from meshpilot.config.istio.virtual_service import L4MatchAttributes
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import NOT_APPLIED_KINDS, Kind
from meshpilot.config.kube.core import ConfigMap
from meshpilot.config.kube.service import ServiceSpec
from meshpilot.config.mesh import MeshConfig, ProxyConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import read_text

__all__ = [
    "UNSUPPORTED_FIELDS",
    "UNSUPPORTED_PROXY_CONFIG_EXTRAS_READ",
    "mesh_diagnostics",
    "object_diagnostics",
    "unsupported_field_diagnostics",
]

Path = tuple[str | int, ...]

# (model, Python field name): the field is parsed and validated, and nothing uses it yet.
UNSUPPORTED_FIELDS: frozenset[tuple[type[ApiModel], str]] = frozenset(
    {
        (MeshConfig, "enable_prometheus_merge"),
        (MeshConfig, "ingress_class"),
        (MeshConfig, "ingress_controller_mode"),
        (MeshConfig, "service_settings"),
        # The agent takes these from its own flags (meshpilot proxy --help), not the mesh.
        (ProxyConfig, "discovery_address"),
        (ProxyConfig, "proxy_admin_port"),
        (ProxyConfig, "status_port"),
        (ProxyConfig, "concurrency"),
        (ProxyConfig, "drain_duration"),
        (ProxyConfig, "termination_drain_duration"),
        (ProxyConfig, "hold_application_until_proxy_starts"),
        (ProxyConfig, "proxy_metadata"),
        (ProxyConfig, "interception_mode"),
        (AuthorizationPolicySpec, "target_ref"),
        (AuthorizationPolicySpec, "target_refs"),
        (RequestAuthenticationSpec, "target_ref"),
        (RequestAuthenticationSpec, "target_refs"),
        (LoadBalancerSettings, "warmup_duration_secs"),
        (LoadBalancerSettings, "warmup"),
        (TrafficPolicy, "tunnel"),
        (TrafficPolicy, "proxy_protocol"),
        (OutboundTrafficPolicy, "egress_proxy"),
        (L4MatchAttributes, "source_subnet"),
        (ServiceSpec, "publish_not_ready_addresses"),
        (ServiceSpec, "internal_traffic_policy"),
        (ServiceSpec, "traffic_distribution"),
    }
)

# ProxyConfig keeps its untyped fields; these are the ones some code reads.
UNSUPPORTED_PROXY_CONFIG_EXTRAS_READ = frozenset({"gatewayTopology"})

_MESSAGE = "not supported yet: meshpilot parses this field and ignores it"
_KIND_MESSAGE = "validated, but not applied yet (not supported yet)"


def unsupported_field_diagnostics(
    objects: Iterable[ConfigObject[Any]], mesh: MeshConfig, mesh_origin: Origin | None = None
) -> list[Diagnostic]:
    """A warning per unsupported field set in `objects` and in the mesh settings."""
    objects = list(objects)
    found = [*object_diagnostics(objects), *mesh_diagnostics(objects, mesh, mesh_origin)]
    return sorted(found, key=Diagnostic.sort_key)


def object_diagnostics(objects: Iterable[ConfigObject[Any]]) -> list[Diagnostic]:
    """A warning per unsupported field set in these objects, and per object of a kind that
    is validated but not applied yet."""
    objects = list(objects)
    return [
        *(_kind_diagnostic(obj) for obj in objects if obj.key.kind in NOT_APPLIED_KINDS),
        *(
            _diagnostic(obj.origin, obj.key, path, obj.origin.line_of(path))
            for obj in objects
            for path in _unsupported_paths(obj.model, ())
        ),
    ]


def _kind_diagnostic(obj: ConfigObject[Any]) -> Diagnostic:
    return Diagnostic(
        file=obj.origin.file,
        line=obj.origin.line,
        message=_KIND_MESSAGE,
        kind=str(obj.key.kind),
        namespace=obj.key.namespace,
        name=obj.key.name,
        severity=Severity.WARNING,
    )


def _unsupported_paths(model: BaseModel, path: Path) -> Iterator[Path]:
    for name in sorted(model.model_fields_set):
        info = type(model).model_fields.get(name)
        if info is None:
            continue
        field_path = (*path, info.alias or name)
        value = getattr(model, name)
        if (type(model), name) in UNSUPPORTED_FIELDS:
            # A value equal to the default is what meshpilot does anyway: nothing is lost.
            if value != info.get_default(call_default_factory=True):
                yield field_path
            continue
        yield from _nested(value, field_path)
    if isinstance(model, ProxyConfig):
        for extra in sorted(model.model_extra or {}):
            if extra not in UNSUPPORTED_PROXY_CONFIG_EXTRAS_READ:
                yield (*path, extra)


def _nested(value: Any, path: Path) -> Iterator[Path]:
    if isinstance(value, ApiModel):
        yield from _unsupported_paths(value, path)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _nested(item, (*path, index))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _nested(item, (*path, str(key)))


def mesh_diagnostics(
    objects: Iterable[ConfigObject[Any]], mesh: MeshConfig, origin: Origin | None
) -> list[Diagnostic]:
    """A warning per unsupported mesh setting; `objects` may hold the istio ConfigMap they
    came from (then the warning points into its data.mesh text)."""
    paths = list(_unsupported_paths(mesh, ()))
    if not paths:
        return []
    config_map = _mesh_config_map(objects)
    if config_map is not None and (origin is None or not origin.positions):
        # The mesh is YAML text inside the ConfigMap: point at the line inside that text.
        mesh_origin = _mesh_text_origin(config_map)
        return [
            _diagnostic(
                config_map.origin, config_map.key, ("data", "mesh", *p), mesh_origin.line_of(p)
            )
            for p in paths
        ]
    origin = origin or Origin("<mesh config>", 1)
    mesh_key = ConfigKey(Kind.MESH_CONFIG, "", "mesh")
    return [_diagnostic(origin, mesh_key, p, _mesh_line(origin, p)) for p in paths]


def _mesh_line(origin: Origin, path: Path) -> int:
    # A MeshConfig object holds the settings under spec; a mesh file at the top level.
    positions = origin.positions or {}
    return positions.get(path) or positions.get(("spec", *path)) or origin.line_of(path)


def _mesh_config_map(objects: Iterable[ConfigObject[Any]]) -> ConfigObject[ConfigMap] | None:
    """The `istio` (or `istio-<revision>`) ConfigMap the mesh settings came from, as the
    loader picks it."""
    for obj in objects:
        model = obj.model
        if isinstance(model, ConfigMap) and "mesh" in model.data:
            revision = model.metadata.labels.get("istio.io/rev", "")
            if obj.key.name in ("istio", f"istio-{revision}"):
                return obj
    return None


def _mesh_text_origin(config_map: ConfigObject[ConfigMap]) -> Origin:
    """Lines of the mesh settings inside the ConfigMap's file. Only a block scalar
    (`mesh: |`) keeps the text's lines; a quoted one points every field at `mesh:`."""
    file, mesh_line = config_map.origin.file, config_map.origin.line_of(("data", "mesh"))
    key_line = _line(file, mesh_line).split("#", 1)[0].rstrip()
    if not key_line.endswith(("|", "|-", "|+", ">", ">-", ">+")):
        return Origin(file, mesh_line)
    read = read_text(config_map.model.data["mesh"], file)
    positions = read.documents[0].positions if read.documents else {}
    return Origin(file, mesh_line, {path: mesh_line + line for path, line in positions.items()})


def _line(file: str, number: int) -> str:
    """Line `number` of the file as it is now ("" if it cannot be read)."""
    try:
        with open(file, encoding="utf-8", errors="replace") as stream:
            for index, line in enumerate(stream, start=1):
                if index == number:
                    return line
    except OSError:
        pass
    return ""


def _diagnostic(origin: Origin, key: ConfigKey, path: Path, line: int) -> Diagnostic:
    return Diagnostic(
        file=origin.file,
        line=line,
        message=_MESSAGE,
        kind=str(key.kind),
        namespace=key.namespace,
        name=key.name,
        field=format_path(path),
        severity=Severity.WARNING,
    )
