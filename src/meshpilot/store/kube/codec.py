"""Objects from the API server through the translation engine's loader, as the other
backends read theirs: one that someone wrote behind our back and that is not valid yields a
Diagnostic naming it (`kube:<resource>/<namespace>/<name>` as the file) and is skipped.

A list's items carry no apiVersion and kind on the wire for built-in kinds: they are set
from the resource listed. managedFields (the field managers' bookkeeping) is kept in the
raw manifest (`get -o yaml` shows it) but not given to the loader.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.config.loader import load_documents
from meshpilot.config.yaml_source import RawDocument
from meshpilot.store.directory.object_files import LoadedFiles
from meshpilot.store.kube.kinds import ApiResource
from meshpilot.store.matching import matching_documents

__all__ = ["decode_items", "item_key", "source_of"]

Manifest = dict[str, Any]


def item_key(resource: ApiResource, item: Manifest) -> ConfigKey:
    meta = item.get("metadata") or {}
    namespace = str(meta.get("namespace") or "") if resource.namespaced else ""
    return ConfigKey(resource.kind, namespace, str(meta.get("name") or ""))


def source_of(resource: ApiResource, key: ConfigKey) -> str:
    qualified = resource.plural
    group = resource.api_version.rpartition("/")[0]
    if group:
        qualified = f"{qualified}.{group}"
    return f"kube:{qualified}/{key.namespace or '_cluster'}/{key.name}"


def decode_items(items: Iterable[tuple[ApiResource, Manifest]]) -> LoadedFiles:
    """Load API objects; each keeps its raw manifest (with apiVersion and kind set)."""
    out = LoadedFiles()
    documents: list[RawDocument] = []
    raws: dict[str, Manifest] = {}
    expected: dict[str, ConfigKey] = {}
    for resource, item in items:
        key = item_key(resource, item)
        source = source_of(resource, key)
        raw = {"apiVersion": resource.api_version, "kind": str(resource.kind), **item}
        data = copy.copy(raw)
        data["metadata"] = {
            k: v for k, v in (raw.get("metadata") or {}).items() if k != "managedFields"
        }
        documents.append(RawDocument(source, 1, data, {}))
        raws[source], expected[source] = raw, key
    result = load_documents(documents)
    out.diagnostics.extend(result.diagnostics)
    for obj in result.fail_closed:
        if expected.get(obj.origin.file) == obj.key:
            out.fail_closed[obj.key] = obj
    for obj, doc in zip(result.objects, matching_documents(documents, result), strict=True):
        if expected.get(doc.file) != obj.key:
            message = f"holds {obj.key}, not the object its resource path names"
            out.diagnostics.append(Diagnostic(doc.file, doc.line, message))
            continue
        out.objects[obj.key] = obj
        out.raw[obj.key] = raws[doc.file]
    return out
