"""Repo service: git fetch into a per-URL mirror cache, revision resolution, checkouts,
credentials from repo-creds Secrets, server trust (TLS CAs, SSH known hosts) from
Argo CD's ConfigMaps, and the manifest cache."""

from __future__ import annotations

from meshpilot.gitops.repo.cache import CacheKey, ManifestCache
from meshpilot.gitops.repo.credentials import (
    RepoCredential,
    credential_from_secret,
    select_credential,
)
from meshpilot.gitops.repo.errors import (
    GitCommandError,
    RepoError,
    RepoUnreachableError,
    UnknownRevisionError,
)
from meshpilot.gitops.repo.fetch import RepoService
from meshpilot.gitops.repo.settings import RepoSettings, repo_settings, repo_settings_from_store
from meshpilot.gitops.repo.trust import RepoTrust, trust_from_configmaps
from meshpilot.gitops.repo.urls import normalize_url, scrub

__all__ = [
    "CacheKey",
    "GitCommandError",
    "ManifestCache",
    "RepoCredential",
    "RepoError",
    "RepoService",
    "RepoSettings",
    "RepoTrust",
    "RepoUnreachableError",
    "UnknownRevisionError",
    "credential_from_secret",
    "normalize_url",
    "repo_settings",
    "repo_settings_from_store",
    "scrub",
    "select_credential",
    "trust_from_configmaps",
]
