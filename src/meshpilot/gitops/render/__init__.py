"""Rendering: a source at a commit → manifests (directory, Helm via helm-python-sdk,
config management plugins, the seed team's layered Helm + SOPS layout)."""

from __future__ import annotations

from meshpilot.gitops.render.errors import (
    HelmRenderError,
    ManifestParseError,
    PluginError,
    RenderError,
    SecretDecryptError,
)
from meshpilot.gitops.render.manifest import Manifest, parse_manifests
from meshpilot.gitops.render.request import (
    AppContext,
    DirectoryOptions,
    HelmOptions,
    HelmParameter,
    LayeredOptions,
    PluginCommand,
    PluginOptions,
    PluginSpec,
    RenderRequest,
    SourceType,
)
from meshpilot.gitops.render.service import Renderer, RendererConfig, RenderResult

__all__ = [
    "AppContext",
    "DirectoryOptions",
    "HelmOptions",
    "HelmParameter",
    "HelmRenderError",
    "LayeredOptions",
    "Manifest",
    "ManifestParseError",
    "PluginCommand",
    "PluginError",
    "PluginOptions",
    "PluginSpec",
    "RenderError",
    "RenderRequest",
    "RenderResult",
    "Renderer",
    "RendererConfig",
    "SecretDecryptError",
    "SourceType",
    "parse_manifests",
]
