"""Pairing loaded objects with the documents they came from, and the helpers the directory
store uses to build a snapshot (mesh settings, which keys changed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import CLUSTER_SCOPED, Kind
from meshpilot.config.loader import LoadResult, load_documents
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument

__all__ = ["changed_keys", "document_key", "matching_documents", "mesh_of", "mesh_source"]

Manifest = dict[str, Any]


def matching_documents(documents: Sequence[RawDocument], result: LoadResult) -> list[RawDocument]:
    """The document each loaded object came from, found by the object's key: documents of
    one apply may share a file and line (rendered by one Helm template, or made in code)."""
    by_key = {document_key(d): d for d in documents}
    return [by_key[o.key] for o in result.objects]


def document_key(doc: RawDocument) -> ConfigKey | None:
    """The key the loader gives the document's object (its namespace defaulting included)."""
    meta = doc.data.get("metadata") if isinstance(doc.data, dict) else None
    if not isinstance(meta, dict):
        return None
    try:
        kind = Kind(str(doc.data.get("kind", "")))
    except ValueError:
        return None
    namespace = "" if kind in CLUSTER_SCOPED else str(meta.get("namespace") or "default")
    return ConfigKey(kind, namespace, str(meta.get("name") or ""))


def mesh_source(key: ConfigKey) -> bool:
    """Whether the object at `key` can change the mesh settings."""
    return key.kind is Kind.CONFIG_MAP and key.name.startswith("istio")


def mesh_of(
    objects: Mapping[ConfigKey, ConfigObject[Any]], raw: Mapping[ConfigKey, Manifest]
) -> MeshConfig:
    """Mesh settings come from the `istio` ConfigMap, read as the loader reads it."""
    docs = [
        RawDocument(obj.origin.file, obj.origin.line, raw[key], {})
        for key, obj in sorted(objects.items())
        if mesh_source(key) and key in raw
    ]
    return load_documents(docs).mesh if docs else MeshConfig()


def changed_keys(
    old: Mapping[ConfigKey, ConfigObject[Any]],
    new: Mapping[ConfigKey, ConfigObject[Any]],
    keys: Sequence[ConfigKey] | None = None,
) -> set[ConfigKey]:
    candidates = set(keys) if keys is not None else set(old) | set(new)
    out = set()
    for key in candidates:
        a, b = old.get(key), new.get(key)
        if (a is None) != (b is None) or (a is not None and b is not None and a.model != b.model):
            out.add(key)
    return out
