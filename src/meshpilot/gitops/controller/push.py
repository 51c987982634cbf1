"""Which Applications a git push concerns (Argo CD's webhook matching)."""

from __future__ import annotations

import functools
import posixpath
from dataclasses import dataclass

from meshpilot.gitops.model import Application

__all__ = [
    "MANIFEST_PATHS",
    "PushEvent",
    "path_filter",
    "paths_concern",
    "push_concerns",
    "revision_matches",
]


@dataclass(frozen=True, slots=True)
class PushEvent:
    """A git push as a webhook reports it: repo URLs (web, clone, ssh) and refs."""

    repo_urls: frozenset[str]
    branches: frozenset[str] = frozenset()  # branch and tag names pushed
    commit: str = ""
    default_branch: str = ""
    # Files the push changed (GitHub/GitLab list them); empty: unknown.
    changed_files: frozenset[str] = frozenset()


def push_concerns(app: Application, source_path: str, target: str, push: PushEvent) -> bool:
    return revision_matches(target, push) and paths_concern(path_filter(app, source_path), push)


MANIFEST_PATHS = "argocd.argoproj.io/manifest-generate-paths"


def path_filter(app: Application, source_path: str) -> tuple[str, ...] | None:
    """Argo CD's `manifest-generate-paths` annotation as paths from the repository root
    (`;`-separated, relative to the source path unless absolute); None: every push
    concerns the app (no annotation, or one naming the whole repository)."""
    value = app.metadata.annotations.get(MANIFEST_PATHS, "")
    if not value:
        return None
    prefixes = _prefixes(value, source_path)
    return None if "." in prefixes else prefixes


def paths_concern(prefixes: tuple[str, ...] | None, push: PushEvent) -> bool:
    """With a filter, a push concerns the app only when a changed file lies under one of its
    paths; a push that lists no files always does."""
    if prefixes is None or not push.changed_files:
        return True
    touched = _touched(push.changed_files)
    return any(prefix in touched for prefix in prefixes)


@functools.lru_cache(maxsize=4096)
def _prefixes(value: str, source_path: str) -> tuple[str, ...]:
    """The annotation's paths from the repository root, cleaned as Argo CD's filepath.Clean
    does (`../common` from `apps/shop` is `apps/common`); one app's, asked per push."""
    base = source_path.strip("/") or "."
    prefixes = []
    for item in value.split(";"):
        item = item.strip()
        if item:
            path = item.lstrip("/") if item.startswith("/") else f"{base}/{item}"
            prefixes.append(posixpath.normpath(path or "."))
    return tuple(prefixes)


@functools.lru_cache(maxsize=8)
def _touched(changed_files: frozenset[str]) -> frozenset[str]:
    """Every changed file and every directory above one: a path prefix matches a push when
    it is one of these (once per push, not once per app and file)."""
    out: set[str] = set()
    for changed in changed_files:
        parts = changed.split("/")
        out.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
    return frozenset(out)


def revision_matches(target: str, push: PushEvent) -> bool:
    """Argo CD's rule: HEAD follows the default branch; a branch or tag by name; a commit
    SHA never changes with a push."""
    target = target.strip().removeprefix("refs/heads/").removeprefix("refs/tags/")
    if target in ("", "HEAD"):
        return not push.default_branch or push.default_branch in push.branches
    return target in push.branches
