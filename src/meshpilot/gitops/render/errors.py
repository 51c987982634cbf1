"""Errors of manifest rendering.

    MeshpilotError
    └── RenderError                 rendering a source failed (names file, line, object, field)
        ├── ManifestParseError      a manifest file is not valid YAML/JSON (file and line)
        ├── HelmRenderError         helm-python-sdk refused the chart or its values
        ├── PluginError             a config management plugin failed or timed out
        └── SecretDecryptError      a SOPS file could not be decrypted (wrong key, tampered)

Messages never contain decrypted values, credentials or plugin environment values.
"""

from __future__ import annotations

from meshpilot.errors import MeshpilotError

__all__ = [
    "HelmRenderError",
    "ManifestParseError",
    "PluginError",
    "RenderError",
    "SecretDecryptError",
]


class RenderError(MeshpilotError):
    """A source could not be rendered into manifests."""


class ManifestParseError(RenderError):
    """A manifest file (or plugin output) is not valid YAML/JSON."""


class HelmRenderError(RenderError):
    """The Helm chart, its dependencies or its values could not be rendered."""


class PluginError(RenderError):
    """A config management plugin is unknown, failed, timed out or printed bad YAML."""


class SecretDecryptError(RenderError):
    """A SOPS-encrypted file could not be decrypted or failed its integrity check."""
