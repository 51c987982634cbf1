"""The injector configuration in Istio's layout, loaded and checked.

ConfigMap `istio-sidecar-injector[-<rev>]` holds `config` (policy, templates,
defaultTemplates, injectedAnnotations, neverInjectSelector, alwaysInjectSelector) and
`values`; the mesh config comes from ConfigMap `istio[-<rev>]` key `mesh`. Each file given
to kube-inject may be that key's text or the whole ConfigMap. Templates: meshpilot renders
its built-in `sidecar` and `gateway` templates; the Go text/template text of a template of
those names is not rendered (a warning says so), and any other template is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, ValidationError

from meshpilot.config.base import ApiModel
from meshpilot.config.loader import parse_mesh_config
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.yaml_load import YAMLInputError, load_yaml
from meshpilot.errors import InputError
from meshpilot.inject.policy import InjectionPolicy
from meshpilot.inject.selector import LabelSelector
from meshpilot.inject.values import InjectorValues

__all__ = [
    "BUILTIN_TEMPLATES",
    "InjectConfigError",
    "Injector",
    "InjectorConfig",
    "injector_from_config_map",
    "parse_injector",
]

BUILTIN_TEMPLATES = ("sidecar", "gateway")


class InjectConfigError(InputError):
    """The injector config, values or mesh config is invalid; the message names the field."""


class InjectorConfig(ApiModel):
    policy: InjectionPolicy = InjectionPolicy.ENABLED
    default_templates: list[str] = Field(default_factory=lambda: ["sidecar"])
    templates: dict[str, str] = Field(default_factory=dict)
    template: str = ""
    injected_annotations: dict[str, str] = Field(default_factory=dict)
    never_inject_selector: list[LabelSelector] = Field(default_factory=list)
    always_inject_selector: list[LabelSelector] = Field(default_factory=list)
    # a name in inject.istio.io/templates that stands for several templates
    aliases: dict[str, list[str]] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Injector:
    """Everything an injection reads besides the pod: one revision's injector."""

    config: InjectorConfig = field(default_factory=InjectorConfig)
    values: InjectorValues = field(default_factory=InjectorValues)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    revision: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def revision_name(self) -> str:
        return self.revision or "default"


def _errors(exc: ValidationError, where: str) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        path = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        elif err["type"] == "missing":
            message = "required field is missing"
        else:
            message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{where}.{path}: {message}" if path else f"{where}: {message}")
    return "; ".join(parts)


def _document(text: str, origin: str, key: str) -> Any:
    """The YAML/JSON of `text`; a ConfigMap gives its `data.<key>` text, parsed."""
    try:
        data = load_yaml(text, origin)
    except YAMLInputError as exc:
        raise InjectConfigError(f"{origin}: {exc.message}") from exc
    if isinstance(data, dict) and data.get("kind") == "ConfigMap":
        inner = (data.get("data") or {}).get(key)
        if not isinstance(inner, str):
            raise InjectConfigError(f"{origin}: the ConfigMap has no data.{key}")
        return _document(inner, f"{origin} data.{key}", key)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InjectConfigError(f"{origin}: {key} must be a mapping, got {type(data).__name__}")
    return data


def _config(data: Any, origin: str) -> tuple[InjectorConfig, list[str]]:
    try:
        config = InjectorConfig.model_validate(data)
    except ValidationError as exc:
        raise InjectConfigError(f"{origin}: {_errors(exc, 'config')}") from exc
    warnings = []
    for name in sorted(config.templates):
        if name not in BUILTIN_TEMPLATES:
            raise InjectConfigError(
                f"{origin}: config.templates.{name}: custom injection templates are not "
                f"supported (meshpilot renders only its built-in {', '.join(BUILTIN_TEMPLATES)} "
                "templates, not Go text/template)"
            )
        warnings.append(
            f"{origin}: config.templates.{name}: the Go template text is not rendered; "
            f"meshpilot's built-in {name!r} template is used"
        )
    for alias, names in config.aliases.items():
        for name in names:
            if name not in BUILTIN_TEMPLATES:
                raise InjectConfigError(
                    f"{origin}: config.aliases.{alias}: unknown template {name!r} "
                    f"(built-in: {', '.join(BUILTIN_TEMPLATES)})"
                )
    for name in config.default_templates:
        if name not in BUILTIN_TEMPLATES:
            raise InjectConfigError(
                f"{origin}: config.defaultTemplates: unknown template {name!r} "
                f"(built-in: {', '.join(BUILTIN_TEMPLATES)})"
            )
    return config, warnings


def parse_injector(
    config_text: str | None = None,
    values_text: str | None = None,
    mesh_text: str | None = None,
    revision: str = "",
    origins: tuple[str, str, str] = ("config", "values", "mesh"),
) -> Injector:
    """An injector from the texts of `config`, `values` and the mesh config (each may be
    a whole ConfigMap); a missing text takes Istio's defaults."""
    config, warnings = InjectorConfig(), list[str]()
    if config_text is not None:
        config, warnings = _config(_document(config_text, origins[0], "config"), origins[0])
    values = InjectorValues()
    if values_text is not None:
        try:
            values = InjectorValues.model_validate(_document(values_text, origins[1], "values"))
        except ValidationError as exc:
            raise InjectConfigError(f"{origins[1]}: {_errors(exc, 'values')}") from exc
    mesh = MeshConfig()
    if mesh_text is not None:
        parsed, problems = parse_mesh_config(_document(mesh_text, origins[2], "mesh"))
        errors = [f"{'.'.join(map(str, p)) or 'mesh'}: {m}" for p, m, s in problems if s == "error"]
        if parsed is None or errors:
            raise InjectConfigError(f"{origins[2]}: " + "; ".join(errors))
        mesh = parsed
    return Injector(config, values, mesh, revision or values.revision, tuple(warnings))


def injector_from_config_map(
    data: dict[str, str], mesh: MeshConfig, revision: str = "", name: str = ""
) -> Injector:
    """The injector of a ConfigMap `istio-sidecar-injector[-<rev>]`'s data (the store's)."""
    where = name or "istio-sidecar-injector"
    injector = parse_injector(
        data.get("config"), data.get("values"), None, revision, (where, where, where)
    )
    return Injector(injector.config, injector.values, mesh, injector.revision, injector.warnings)
