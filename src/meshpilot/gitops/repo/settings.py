"""Everything the repo service needs from the Argo CD namespace's objects: repository and
repo-creds Secrets (credentials) and the TLS-certs / SSH-known-hosts ConfigMaps (trust)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.gitops.repo.credentials import RepoCredential, credential_from_secret
from meshpilot.gitops.repo.trust import RepoTrust, trust_from_configmaps

__all__ = ["RepoSettings", "repo_settings"]


@dataclass(frozen=True, slots=True)
class RepoSettings:
    credentials: tuple[RepoCredential, ...]
    trust: RepoTrust


def repo_settings(objects: Iterable[Mapping[str, Any]]) -> RepoSettings:
    """Credentials and trust from Secrets and ConfigMaps; other objects are ignored."""
    items = list(objects)
    creds = [credential_from_secret(obj) for obj in items if obj.get("kind", "Secret") == "Secret"]
    return RepoSettings(tuple(c for c in creds if c is not None), trust_from_configmaps(items))
