"""The IstioOperator `install.istio.io/v1alpha1` model, checked field by field.

`parse_operator` turns a merged spec tree into an `IstioOperator`, or raises
`IstioOperatorError` whose message names every bad field by its path
(`spec.components.pilot.k8s.replicaCount: ...`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from meshpilot.config.base import ApiModel, ObjectMeta, TopLevel
from meshpilot.config.mesh import MeshConfig
from meshpilot.errors import InputError
from meshpilot.install.k8s_overlay import K8sOverlay
from meshpilot.install.values import OperatorValues

__all__ = [
    "API_VERSION",
    "MAX_REVISION_LENGTH",
    "Component",
    "Components",
    "GatewayComponent",
    "IstioOperator",
    "IstioOperatorError",
    "OperatorSpec",
    "check_revision",
    "parse_operator",
]

API_VERSION = "install.istio.io/v1alpha1"
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# Service names are DNS-1035 labels: a letter first
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
# the Service `istiod-<rev>` must stay a 63-character label
MAX_REVISION_LENGTH = 63 - len("istiod-")


class IstioOperatorError(InputError):
    """An IstioOperator, profile or --set that cannot be installed; names the field."""


def check_revision(revision: str) -> str:
    """Revisions suffix object names and are label values: a DNS-1123 label (Istio's rule)."""
    if revision and not _DNS1123_LABEL.match(revision):
        hint = f" (use {revision.replace('.', '-')!r})" if "." in revision else ""
        raise ValueError(
            f"revision {revision!r} is not a DNS-1123 label: lower case letters, digits and "
            f"'-', starting and ending with a letter or digit, at most 63 characters{hint}"
        )
    if len(revision) > MAX_REVISION_LENGTH:
        raise ValueError(
            f"revision {revision!r} is longer than {MAX_REVISION_LENGTH} characters: the "
            "Service istiod-<revision> would not be a valid name"
        )
    return revision


class Component(ApiModel):
    enabled: bool | None = None
    namespace: str = ""
    label: dict[str, str] = Field(default_factory=dict)
    hub: str = ""
    tag: str | int = ""
    k8s: K8sOverlay = K8sOverlay()


class CniComponent(Component):
    @field_validator("enabled")
    @classmethod
    def _refused(cls, value: bool | None) -> bool | None:
        if value:
            raise ValueError(
                "the Istio CNI plugin is not supported: meshpilot sets up traffic capture "
                "with `meshpilot iptables` (istio-init) in each pod; set enabled: false"
            )
        return value


class GatewayComponent(Component):
    name: str = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _dns_name(cls, value: str) -> str:
        if not _DNS1035_LABEL.match(value):
            raise ValueError(
                f"gateway name {value!r} is not a valid Service name (a DNS-1035 label: lower "
                "case letters, digits and '-', starting with a letter, at most 63 characters)"
            )
        return value


class Components(ApiModel):
    base: Component = Component()
    pilot: Component = Component()
    cni: CniComponent = CniComponent()
    istiod_remote: Component = Component()
    ingress_gateways: list[GatewayComponent] = Field(default_factory=list)
    egress_gateways: list[GatewayComponent] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_gateways(self) -> Components:
        names = [g.name for g in (*self.ingress_gateways, *self.egress_gateways)]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"gateway names must be unique; repeated: {', '.join(repeated)}")
        return self


class OperatorSpec(ApiModel):
    profile: str = "default"
    hub: str = ""
    tag: str | int = ""
    revision: str = ""
    namespace: str = "istio-system"
    mesh_config: MeshConfig = MeshConfig()
    values: OperatorValues = OperatorValues()
    components: Components = Components()

    @field_validator("revision")
    @classmethod
    def _revision(cls, value: str) -> str:
        return check_revision(value)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS1123_LABEL.match(value):
            raise ValueError(f"namespace {value!r} is not a DNS-1123 label")
        return value


class IstioOperator(TopLevel):
    """Also a store kind: the installed state and the objects `meshpilot operator` reconciles."""

    api_version: Literal["install.istio.io/v1alpha1"] = "install.istio.io/v1alpha1"
    kind: Literal["IstioOperator"] = "IstioOperator"
    metadata: ObjectMeta = ObjectMeta()
    spec: OperatorSpec = OperatorSpec()
    # written by the operator (Istio's IstioOperatorStatus); never read back as input
    status: dict[str, Any] | None = None

    @property
    def revision(self) -> str:
        return self.spec.revision or (self.spec.values.revision or "")


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown field"
    if err["type"] == "missing":
        return "required field is missing"
    if err["type"] == "literal_error":
        return f"must be one of {err['ctx']['expected']}"
    return str(err["msg"]).removeprefix("Value error, ")


def _path(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(part, str) and part.startswith("[name:"):
            text += part
        else:
            text += f".{part}" if text else str(part)
    return text


def _named(loc: tuple[Any, ...], tree: dict[str, Any]) -> tuple[Any, ...]:
    """`components.ingressGateways[0]` → `components.ingressGateways[name:x]` when x is known,
    the selector a user can also pass to --set."""
    if len(loc) > 3 and loc[:2] == ("spec", "components") and isinstance(loc[3], int):
        gateways = ((tree.get("spec") or {}).get("components") or {}).get(loc[2])
        if isinstance(gateways, list) and loc[3] < len(gateways):
            name = gateways[loc[3]].get("name") if isinstance(gateways[loc[3]], dict) else None
            if isinstance(name, str) and name:
                return (*loc[:3], f"[name:{name}]", *loc[4:])
    return loc


def format_errors(
    exc: ValidationError, origin: str = "", tree: dict[str, Any] | None = None
) -> str:
    lines = [
        f"{_path(_named(tuple(e['loc']), tree or {}))}: {_message(e)}"
        for e in exc.errors(include_url=False, include_input=False)
    ]
    prefix = f"{origin}: " if origin else ""
    return prefix + ("; ".join(lines) if len(lines) < 2 else "\n  " + "\n  ".join(lines))


def parse_operator(tree: dict[str, Any], origin: str = "") -> IstioOperator:
    """The typed IstioOperator of a merged tree; every bad field named by its path."""
    try:
        return IstioOperator.model_validate(tree)
    except ValidationError as exc:
        raise IstioOperatorError(format_errors(exc, origin, tree)) from exc
