"""The server's writes of account and token records into the live store, as Argo CD writes
them into Kubernetes: argocd-secret's `data` (passwords, account tokens) and the AppProject's
`spec.roles[].jwtTokens` (project role tokens). Retried on a concurrent write."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Mapping
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.auth.accounts import SECRET, TokenRecord
from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.projects import CONTROL_NAMESPACE
from meshpilot.store.base import LiveStore
from meshpilot.store.writes import ConflictError

__all__ = ["set_role_tokens", "set_secret_values"]

Manifest = dict[str, Any]


def _update(
    store: LiveStore, key: ConfigKey, change: Callable[[Manifest | None], Manifest]
) -> None:
    for _attempt in range(5):
        stored = store.manifest(key)
        manifest = change(copy.deepcopy(stored) if stored is not None else None)
        try:
            store.apply([RawDocument(f"<{key}>", 1, manifest, {})])
            return
        except ConflictError:
            continue
    raise GitopsError(
        f"{key.kind} {key.namespace}/{key.name}: could not be written (kept changing)"
    )


def set_secret_values(store: LiveStore, values: Mapping[str, str | None]) -> None:
    """Set (or, for None, remove) keys of argocd-secret, creating it if needed."""

    def change(manifest: Manifest | None) -> Manifest:
        manifest = manifest or {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": CONTROL_NAMESPACE},
            "type": "Opaque",
        }
        data = dict(manifest.get("data") or {})
        string_data = dict(manifest.get("stringData") or {})
        for name, value in values.items():
            string_data.pop(name, None)  # stringData wins on read: it must not shadow us
            if value is None:
                data.pop(name, None)
            else:
                data[name] = base64.b64encode(value.encode()).decode()
        manifest["data"] = data
        if string_data:
            manifest["stringData"] = string_data
        else:
            manifest.pop("stringData", None)
        return manifest

    _update(store, ConfigKey(Kind.SECRET, CONTROL_NAMESPACE, SECRET), change)


def set_role_tokens(
    store: LiveStore,
    project: str,
    role: str,
    edit: Callable[[list[TokenRecord]], list[TokenRecord]],
) -> None:
    """Rewrite the jwtTokens of `role` in AppProject `project` (control namespace)."""

    def change(manifest: Manifest | None) -> Manifest:
        if manifest is None:
            raise GitopsError(f'appprojects.argoproj.io "{project}" not found')
        for item in (manifest.get("spec") or {}).get("roles") or []:
            if isinstance(item, dict) and item.get("name") == role:
                current = [
                    TokenRecord(str(t.get("id") or ""), int(t.get("iat") or 0), t.get("exp"))
                    for t in item.get("jwtTokens") or []
                    if isinstance(t, dict)
                ]
                item["jwtTokens"] = [t.to_json() for t in edit(current)]
                return manifest
        raise GitopsError(f"project {project!r} has no role {role!r}")

    _update(store, ConfigKey(Kind.APP_PROJECT, CONTROL_NAMESPACE, project), change)
