"""Everything the repo service needs from the Argo CD namespace's objects: repository and
repo-creds Secrets (credentials) and the TLS-certs / SSH-known-hosts ConfigMaps (trust)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.repo.credentials import RepoCredential, credential_from_secret
from meshpilot.gitops.repo.trust import RepoTrust, trust_from_configmaps
from meshpilot.store.base import StoreSnapshot

__all__ = ["ManifestSource", "RepoSettings", "repo_settings", "repo_settings_from_store"]


class ManifestSource(Protocol):
    """What is read of the live store (DirectoryStore has both)."""

    def snapshot(self) -> StoreSnapshot: ...

    def manifest(self, key: ConfigKey) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class RepoSettings:
    credentials: tuple[RepoCredential, ...]
    trust: RepoTrust


def repo_settings(objects: Iterable[Mapping[str, Any]]) -> RepoSettings:
    """Credentials and trust from Secrets and ConfigMaps; other objects are ignored."""
    items = list(objects)
    creds = [credential_from_secret(obj) for obj in items if obj.get("kind", "Secret") == "Secret"]
    return RepoSettings(tuple(c for c in creds if c is not None), trust_from_configmaps(items))


def repo_settings_from_store(store: ManifestSource) -> RepoSettings:
    """The same, read from the live store: repository Secrets and the trust ConfigMaps, as
    Argo CD reads them from its namespace (any namespace here: the store is the tenant's)."""
    snapshot = store.snapshot()
    wanted = (Kind.SECRET, Kind.CONFIG_MAP)
    manifests = (store.manifest(key) for key in snapshot.objects if key.kind in wanted)
    return repo_settings(m for m in manifests if m is not None)
