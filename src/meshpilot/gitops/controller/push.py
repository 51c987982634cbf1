"""Which Applications a git push concerns (Argo CD's webhook matching)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from meshpilot.gitops.model import Application

__all__ = ["MANIFEST_PATHS", "PushEvent", "push_concerns"]


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
    return _revision_matches(target, push) and _paths_match(app, source_path, push)


MANIFEST_PATHS = "argocd.argoproj.io/manifest-generate-paths"


def _paths_match(app: Application, source_path: str, push: PushEvent) -> bool:
    """Argo CD's `manifest-generate-paths` annotation: with it, a push refreshes the app only
    when a changed file lies under one of its paths (`;`-separated, relative to the source
    path unless absolute); without it, or when the push lists no files, always."""
    value = app.metadata.annotations.get(MANIFEST_PATHS, "")
    if not value or not push.changed_files:
        return True
    base = PurePosixPath(source_path.strip("/") or ".")
    prefixes = []
    for item in value.split(";"):
        item = item.strip()
        if item:
            path = PurePosixPath(item.lstrip("/")) if item.startswith("/") else base / item
            prefixes.append(str(path).strip("/").removeprefix("./").replace("/./", "/"))
    for changed in push.changed_files:
        for prefix in prefixes:
            if prefix in ("", ".") or changed == prefix or changed.startswith(prefix + "/"):
                return True
    return False


def _revision_matches(target: str, push: PushEvent) -> bool:
    """Argo CD's rule: HEAD follows the default branch; a branch or tag by name; a commit
    SHA never changes with a push."""
    target = target.strip().removeprefix("refs/heads/").removeprefix("refs/tags/")
    if target in ("", "HEAD"):
        return not push.default_branch or push.default_branch in push.branches
    return target in push.branches
