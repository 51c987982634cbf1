"""The mesh as it would be after a sync: the live store's objects, minus what the app
rendered at base (a sync with prune replaces them), plus what it renders on this side.
Rendered manifests go through the same loader and validation as `meshpilot analyze`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from meshpilot.analysis import analyze
from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import LoadResult, load_documents
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument, read_text
from meshpilot.gitops.diff.keys import is_namespaced
from meshpilot.gitops.diff.normalize import plain
from meshpilot.gitops.render.manifest import Manifest
from meshpilot.model.push_context import PushContext, build_push_context

__all__ = [
    "LiveMesh",
    "MeshSide",
    "analyze_side",
    "build_side",
    "load_app",
    "mesh_findings",
    "same_mesh_objects",
]

# Kinds the mesh does not read (Deployment, ...) are not the preview's business.
_IGNORED_WARNING = "unknown kind"


@dataclass(frozen=True, slots=True)
class LiveMesh:
    """The live store's mesh objects (empty without a store)."""

    objects: Mapping[ConfigKey, ConfigObject[Any]]
    mesh: MeshConfig

    @staticmethod
    def default_mesh() -> MeshConfig:
        return MeshConfig()


@dataclass(frozen=True, slots=True)
class MeshSide:
    loaded: LoadResult  # the app's rendered objects and their diagnostics
    push: PushContext


def _document(manifest: Manifest, namespace: str, text: str | None) -> RawDocument:
    """A loader document for a rendered manifest; when the file's text is at hand, with
    the line of every field so that an error names the exact line."""
    data = plain(manifest.data)
    meta = data.get("metadata")
    if is_namespaced(manifest.kind) and isinstance(meta, dict) and not meta.get("namespace"):
        meta["namespace"] = namespace
    if text is not None:
        for doc in read_text(text, manifest.file).documents:
            if doc.line == manifest.line and isinstance(doc.data, dict):
                return RawDocument(manifest.file, manifest.line, data, doc.positions)
    return RawDocument(manifest.file, manifest.line, data, {})


def load_app(
    manifests: Iterable[Manifest], namespace: str, texts: Mapping[str, str] | None = None
) -> LoadResult:
    """Typed objects of the mesh kinds among `manifests`; `texts` (file → source text)
    gives field lines. Warnings about kinds the mesh ignores are dropped."""
    texts = texts or {}
    docs = [_document(m, namespace, texts.get(m.file)) for m in manifests]
    loaded = load_documents(docs)
    loaded.diagnostics = [d for d in loaded.diagnostics if _IGNORED_WARNING not in d.message]
    return loaded


def build_side(live: LiveMesh, removed: Iterable[ConfigKey], loaded: LoadResult) -> MeshSide:
    objects = dict(live.objects)
    for key in removed:
        objects.pop(key, None)
    objects.update({o.key: o for o in loaded.objects})
    mesh = loaded.mesh if loaded.mesh_origin is not None else live.mesh
    push = build_push_context([objects[k] for k in sorted(objects)], mesh)
    return MeshSide(loaded, push)


def analyze_side(side: MeshSide) -> list[Diagnostic]:
    return analyze(side.push)


def mesh_findings(loaded: LoadResult, analyzed: Sequence[Diagnostic]) -> list[Diagnostic]:
    """The loader's diagnostics for an app's objects and the analyzer's findings about
    them (a VirtualService routing to a host that does not exist, ...)."""
    own = {(str(o.key.kind), o.key.namespace, o.key.name) for o in loaded.objects}
    found = list(loaded.diagnostics)
    for diag in analyzed:
        if (diag.kind, diag.namespace, diag.name) in own and diag.severity is not Severity.INFO:
            found.append(diag)
    return sorted(dict.fromkeys(found), key=Diagnostic.sort_key)


def same_mesh_objects(a: LoadResult, b: LoadResult) -> bool:
    """Whether two renders give the mesh the same objects (then no proxy can change)."""
    if (a.mesh_origin is None) != (b.mesh_origin is None) or a.mesh != b.mesh:
        return False
    return _models(a.objects) == _models(b.objects)


def _models(objects: Sequence[ConfigObject[Any]]) -> dict[ConfigKey, Any]:
    return {o.key: o.model for o in objects if o.key.kind is not Kind.APPLICATION}
