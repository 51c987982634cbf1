"""Writes to the Kubernetes API: server-side apply (PATCH application/apply-patch+yaml)
with the field manager `meshpilot`, forcing conflicts with other managers as Argo CD's
ServerSideApply sync does; a resourceVersion in the manifest is sent as the server's
precondition, and its 409 is the store's ConflictError."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_documents
from meshpilot.config.yaml_source import RawDocument
from meshpilot.store.admission import refuse_unstorable
from meshpilot.store.kube.client import FIELD_MANAGER, api_error
from meshpilot.store.kube.kinds import API_RESOURCES, ApiResource
from meshpilot.store.matching import matching_documents
from meshpilot.store.writes import (
    ApplyAction,
    ApplyResult,
    ConflictError,
    DeleteResult,
    StoreWriteError,
)

if TYPE_CHECKING:
    from meshpilot.store.kube.backend import KubeStore

__all__ = ["apply_documents", "delete_keys"]

Manifest = dict[str, Any]
_APPLY = "application/apply-patch+yaml"  # JSON is YAML: the body is sent as JSON
_SERVER_FIELDS = ("uid", "creationTimestamp", "generation", "managedFields", "selfLink")


def apply_documents(
    store: KubeStore, documents: Sequence[RawDocument], *, dry_run: bool
) -> list[ApplyResult]:
    loaded = load_documents(documents)
    refuse_unstorable(loaded)
    planned = [
        (obj.key, _body(_resource(obj.key), obj.key, doc.data))
        for obj, doc in zip(loaded.objects, matching_documents(documents, loaded), strict=True)
    ]
    before = {key: _get(store, key) for key, _ in planned}
    # Every object through the server's admission first: a refusal leaves nothing written.
    # An object in a namespace this write creates cannot be dry-run (no namespace yet).
    creates = {k.name for k, _ in planned if k.kind is Kind.NAMESPACE and before[k] is None}
    results = [
        _apply(store, key, body, before[key], dry_run=True)
        if key.namespace not in creates
        else (ApplyResult(key, ApplyAction.CREATED, ""), body)
        for key, body in planned
    ]
    if dry_run:
        return [result for result, _ in results]
    out = []
    for key, body in planned:
        result, stored = _apply(store, key, body, before[key], dry_run=False)
        if result.action is not ApplyAction.UNCHANGED:
            with store.lock:
                if store.loaded:
                    store.take_in([(_resource(key), stored)], (), written_here=True)
        out.append(result)
    return out


def delete_keys(
    store: KubeStore, keys: Sequence[ConfigKey], *, dry_run: bool
) -> list[DeleteResult]:
    out = []
    for key in dict.fromkeys(keys):
        query = [("dryRun", "All")] if dry_run else []
        path = _resource(key).item(key.namespace, key.name)
        status, data = store.client.request("DELETE", path, query)
        if status == 404:
            out.append(DeleteResult(key, False))
            continue
        if status not in (200, 202):
            raise StoreWriteError(str(api_error(status, data, f"delete {key}")))
        if not dry_run:
            with store.lock:
                if store.loaded:
                    store.take_in((), [key], written_here=True)
        out.append(DeleteResult(key, True))
    return out


def _resource(key: ConfigKey) -> ApiResource:
    resource = API_RESOURCES.get(key.kind)
    if resource is None:
        raise StoreWriteError(f"{key}: the Kubernetes store cannot hold kind {key.kind}")
    return resource


def _body(resource: ApiResource, key: ConfigKey, data: Manifest) -> Manifest:
    """The apply configuration: the manifest at the served version, server fields dropped
    (a resourceVersion the user gave stays: the server's precondition)."""
    body = copy.deepcopy(data)
    body["apiVersion"], body["kind"] = resource.api_version, str(resource.kind)
    meta = body.setdefault("metadata", {})
    for name in _SERVER_FIELDS:
        meta.pop(name, None)
    if key.namespace:
        meta["namespace"] = key.namespace
    return body


def _get(store: KubeStore, key: ConfigKey) -> Manifest | None:
    status, data = store.client.request("GET", _resource(key).item(key.namespace, key.name))
    if status == 404:
        return None
    if status != 200:
        raise StoreWriteError(str(api_error(status, data, f"get {key}")))
    return data


def _apply(
    store: KubeStore, key: ConfigKey, body: Manifest, before: Manifest | None, *, dry_run: bool
) -> tuple[ApplyResult, Manifest]:
    query = [("fieldManager", FIELD_MANAGER), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    path = _resource(key).item(key.namespace, key.name)
    status, data = store.client.request("PATCH", path, query, body, _APPLY)
    if status == 409:
        raise ConflictError(key, str(data.get("message") or "the object has been modified"))
    if status not in (200, 201):
        raise StoreWriteError(str(api_error(status, data, f"apply {key}")))
    version = str((data.get("metadata") or {}).get("resourceVersion") or "")
    old = str(((before or {}).get("metadata") or {}).get("resourceVersion") or "")
    if before is None:
        action = ApplyAction.CREATED
    elif old == version:
        action = ApplyAction.UNCHANGED
    else:
        action = ApplyAction.CONFIGURED
    return ApplyResult(key, action, version), data
