"""Repo service: git fetch into a per-URL mirror cache, revision resolution, checkouts,
credentials from repo-creds Secrets, and the manifest cache."""

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
from meshpilot.gitops.repo.urls import normalize_url, scrub

__all__ = [
    "CacheKey",
    "GitCommandError",
    "ManifestCache",
    "RepoCredential",
    "RepoError",
    "RepoService",
    "RepoUnreachableError",
    "UnknownRevisionError",
    "credential_from_secret",
    "normalize_url",
    "scrub",
    "select_credential",
]
