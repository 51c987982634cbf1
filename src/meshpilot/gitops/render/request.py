"""What to render: small frozen inputs the controller maps Application.source onto.

They are hashable and have a stable `fingerprint()`, which (with the commit) keys the
manifest cache, so an unchanged commit with unchanged parameters renders once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "AppContext",
    "DirectoryOptions",
    "HelmOptions",
    "HelmParameter",
    "LayeredOptions",
    "PluginCommand",
    "PluginOptions",
    "PluginSpec",
    "RenderRequest",
    "SourceType",
]


class SourceType(StrEnum):
    DIRECTORY = "directory"
    HELM = "helm"
    PLUGIN = "plugin"
    LAYERED = "layered"  # the seed team's chart + common/cluster (+ SOPS) values layout


@dataclass(frozen=True, slots=True)
class DirectoryOptions:
    recurse: bool = False
    include: str = ""  # Argo CD glob, e.g. '*.yaml' or '{a.yaml,dir/*}'
    exclude: str = ""


@dataclass(frozen=True, slots=True)
class HelmParameter:
    name: str
    value: str
    force_string: bool = False


@dataclass(frozen=True, slots=True)
class HelmOptions:
    value_files: tuple[str, ...] = ()  # relative to the chart path, applied in order
    values: str = ""  # inline YAML (Argo CD `values`, or `valuesObject` dumped as JSON)
    parameters: tuple[HelmParameter, ...] = ()  # --set semantics, applied last
    release_name: str = ""  # default: the Application name
    namespace: str = ""  # default: the destination namespace
    skip_crds: bool = False  # Argo CD passes --include-crds unless skipCrds is set
    ignore_missing_value_files: bool = False

    @staticmethod
    def values_object(values: dict[str, Any]) -> str:
        """Argo CD `valuesObject` as the `values` string (JSON is YAML)."""
        return json.dumps(values, sort_keys=True)


@dataclass(frozen=True, slots=True)
class PluginCommand:
    command: tuple[str, ...]
    args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """A ConfigManagementPlugin (metadata.name, spec.init, spec.generate)."""

    name: str
    generate: PluginCommand
    init: PluginCommand | None = None
    timeout_seconds: float = 90.0


@dataclass(frozen=True, slots=True)
class PluginOptions:
    name: str
    env: tuple[tuple[str, str], ...] = ()  # plugin.env → ARGOCD_ENV_<name>


@dataclass(frozen=True, slots=True)
class LayeredOptions:
    """The seed team's monorepo (spec §10.1): chart in namespaces/<namespace>/, overrides
    in clusters/<cluster>/<namespace>/. See gitops/render/layered.py for the file rules."""

    cluster: str
    namespace: str


@dataclass(frozen=True, slots=True)
class AppContext:
    """Facts about the Application that renderers and plugins see."""

    name: str
    namespace: str  # destination namespace
    kube_version: str = ""


@dataclass(frozen=True, slots=True)
class RenderRequest:
    repo_url: str
    revision: str = "HEAD"
    path: str = "."
    source_type: SourceType = SourceType.DIRECTORY
    app: AppContext = field(default_factory=lambda: AppContext(name="", namespace=""))
    directory: DirectoryOptions = field(default_factory=DirectoryOptions)
    helm: HelmOptions = field(default_factory=HelmOptions)
    plugin: PluginOptions | None = None
    layered: LayeredOptions | None = None

    def fingerprint(self) -> str:
        """Hash of everything but repo and revision: the render parameters."""
        params = asdict(self)
        params.pop("repo_url")
        params.pop("revision")
        blob = json.dumps(params, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()
