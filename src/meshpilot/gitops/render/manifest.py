"""A rendered manifest: one Kubernetes object with the file and line it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from meshpilot.config.yaml_build import Position
from meshpilot.config.yaml_source import read_text
from meshpilot.gitops.render.errors import ManifestParseError

__all__ = ["Manifest", "parse_manifests"]


@dataclass(frozen=True, slots=True)
class Manifest:
    """One object. `file` is relative to the source path (or a template name for Helm)."""

    data: dict[str, Any]
    file: str
    line: int
    # line of every field by path (as the loader records them), so that a sync's validation
    # error names the line of the bad field, not the object's first line
    positions: dict[Position, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def api_version(self) -> str:
        return str(self.data.get("apiVersion", ""))

    @property
    def kind(self) -> str:
        return str(self.data.get("kind", ""))

    @property
    def name(self) -> str:
        return str((self.data.get("metadata") or {}).get("name", ""))

    @property
    def namespace(self) -> str:
        return str((self.data.get("metadata") or {}).get("namespace", "") or "")

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


def parse_manifests(text: str, file: str) -> list[Manifest]:
    """Every object in a YAML/JSON stream; `kind: List` items become objects of their own.

    Invalid YAML raises ManifestParseError naming file and line; a document that is not a
    mapping with apiVersion and kind is an error naming its line.
    """
    read = read_text(text, file)
    for diag in read.diagnostics:
        if diag.message.startswith("invalid YAML"):
            raise ManifestParseError(f"{diag.file}:{diag.line}: {diag.message}")
    out: list[Manifest] = []
    for doc in read.documents:
        if not isinstance(doc.data, dict):
            raise ManifestParseError(f"{file}:{doc.line}: document is not a mapping")
        if not doc.data.get("apiVersion") or not doc.data.get("kind"):
            field = "apiVersion" if not doc.data.get("apiVersion") else "kind"
            raise ManifestParseError(f"{file}:{doc.line}: object has no {field}")
        out.append(Manifest(doc.data, file, doc.line, doc.positions))
    return out
