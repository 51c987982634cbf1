"""Objects as etcd keys and values: `<prefix><Kind>/<namespace>/<name>` (cluster-scoped:
`_cluster`) holding the manifest as JSON. The resourceVersion is not in the value: it is
the key's mod revision, set when the value is read, so it can never disagree with etcd.

Values are read through the translation engine's loader, as the directory store reads its
files: a value someone wrote behind the store's back that is not a valid object yields a
Diagnostic naming its key (as the file), line and field, and the key is skipped.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_documents
from meshpilot.config.yaml_source import RawDocument, ReadResult, read_text
from meshpilot.store.directory.object_files import LoadedFiles
from meshpilot.store.matching import matching_documents

__all__ = ["decode_values", "encode_value", "etcd_key", "key_of", "read_value", "source_of"]

CLUSTER = "_cluster"
Manifest = dict[str, Any]


def etcd_key(prefix: str, key: ConfigKey) -> bytes:
    return f"{prefix}{key.kind}/{key.namespace or CLUSTER}/{key.name}".encode()


def key_of(prefix: str, raw: bytes) -> ConfigKey | None:
    """The object key an etcd key names; None for a key of another shape."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None
    parts = text[len(prefix) :].split("/") if text.startswith(prefix) else []
    if len(parts) != 3 or not all(parts):
        return None
    try:
        kind = Kind(parts[0])
    except ValueError:
        return None
    return ConfigKey(kind, "" if parts[1] == CLUSTER else parts[1], parts[2])


def source_of(prefix: str, raw: bytes) -> str:
    """What a Diagnostic names as the file of the value at `raw`: the etcd key."""
    return f"etcd:{raw.decode(errors='replace')}"


def encode_value(manifest: Manifest) -> bytes:
    meta = {k: v for k, v in (manifest.get("metadata") or {}).items() if k != "resourceVersion"}
    return json.dumps({**manifest, "metadata": meta}, separators=(",", ":")).encode()


def read_value(value: bytes, source: str) -> ReadResult:
    """A value as the loader's documents: the store's own one-line JSON parsed directly (its
    every field is on line 1), anything else (YAML put by hand) by the loader's reader."""
    if value[:1] == b"{":
        try:
            data = json.loads(value)
        except ValueError:
            pass
        else:
            if isinstance(data, dict) and b"\n" not in value:
                return ReadResult([RawDocument(source, 1, data, {})])
    return read_text(value.decode(), source)


def decode_values(prefix: str, items: Iterable[tuple[bytes, bytes, int]]) -> LoadedFiles:
    """Load (etcd key, value, mod revision) items through the loader; an object whose key
    is not the one its etcd key names is refused."""
    out = LoadedFiles()
    documents: list[RawDocument] = []
    expected: dict[str, ConfigKey] = {}
    for raw_key, value, revision in items:
        source = source_of(prefix, raw_key)
        key = key_of(prefix, raw_key)
        if key is None:
            out.diagnostics.append(Diagnostic(source, 1, "not a <Kind>/<namespace>/<name> key"))
            continue
        try:
            read = read_value(value, source)
        except UnicodeDecodeError as exc:
            out.diagnostics.append(Diagnostic(source, 1, f"not UTF-8 text ({exc.reason})"))
            continue
        except Exception as exc:  # one bad value must not stop the store's watch
            message = f"cannot load: {type(exc).__name__}: {exc}"
            out.diagnostics.append(Diagnostic(source, 1, message))
            continue
        out.diagnostics.extend(read.diagnostics)
        if len(read.documents) != 1 or not isinstance(read.documents[0].data, dict):
            out.diagnostics.append(Diagnostic(source, 1, "the value is not one object"))
            continue
        doc = read.documents[0]
        data = copy.copy(doc.data)
        data["metadata"] = {**(data.get("metadata") or {}), "resourceVersion": str(revision)}
        documents.append(RawDocument(doc.file, doc.line, data, doc.positions))
        expected[source] = key
    result = load_documents(documents)
    out.diagnostics.extend(result.diagnostics)
    for obj in result.fail_closed:
        if expected.get(obj.origin.file) == obj.key:
            out.fail_closed[obj.key] = obj
    for obj, doc in zip(result.objects, matching_documents(documents, result), strict=True):
        if expected.get(doc.file) != obj.key:
            message = f"holds {obj.key}, not the object its key names"
            out.diagnostics.append(Diagnostic(doc.file, doc.line, message))
            continue
        out.objects[obj.key] = obj
        out.raw[obj.key] = doc.data
    return out
