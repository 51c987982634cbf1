"""Which Applications a change affects: those from the store and those defined in the
repository itself at head (app-of-apps style) whose sources come from the repository under
review and read a changed file, or whose own manifest changed; `--app` forces more (an app
whose values come from elsewhere)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_text
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.errors import ApplicationNotFound
from meshpilot.gitops.model import Application
from meshpilot.gitops.preview.changes import ChangeSet, files_mentioning, read_blob
from meshpilot.gitops.preview.sources import requests_at, touches, uses_repo, watched_paths
from meshpilot.gitops.projects import CONTROL_NAMESPACE
from meshpilot.gitops.repo.fetch import RepoService
from meshpilot.store.base import StoreSnapshot

__all__ = ["AffectedApp", "affected_apps"]

_SHOWN_FILES = 3


@dataclass(frozen=True, slots=True)
class AffectedApp:
    ref: str  # namespace/name
    app: Application
    reason: str


def _ref(app: Application) -> str:
    return f"{app.namespace or CONTROL_NAMESPACE}/{app.name}"


def _apps_in_repo(
    repos: RepoService, url: str, changes: ChangeSet
) -> list[tuple[Application, str]]:
    """Applications defined in the repository itself at head (app-of-apps), with their file."""
    out = []
    for path in files_mentioning(repos, url, changes.head_commit, "kind: Application"):
        text = read_blob(repos, url, changes.head_commit, path)
        for obj in load_text(text or "", path).objects:
            if obj.key.kind is Kind.APPLICATION and isinstance(obj.model, Application):
                out.append((obj.model, path))
    return out


def _reason(repos: RepoService, url: str, app: Application, changes: ChangeSet) -> str | None:
    try:
        requests = requests_at(app, repos, url, changes.head_commit)
    except MeshpilotError:
        return None  # a spec that maps to no render does not depend on this change
    paths = tuple(p for r in requests if uses_repo(app, r.repo_url) for p in watched_paths(r))
    hits = [f for f in changes.files if touches(paths, f)]
    if not hits:
        return None
    more = f" and {len(hits) - _SHOWN_FILES} more" if len(hits) > _SHOWN_FILES else ""
    return "changes " + ", ".join(hits[:_SHOWN_FILES]) + more


def affected_apps(
    snapshot: StoreSnapshot | None,
    repos: RepoService,
    url: str,
    changes: ChangeSet,
    forced: Sequence[str] = (),
) -> list[AffectedApp]:
    stored = [
        o.model
        for o in (snapshot.of_kind(Kind.APPLICATION) if snapshot is not None else ())
        if isinstance(o.model, Application)
    ]
    in_repo = _apps_in_repo(repos, url, changes)
    by_ref: dict[str, tuple[Application, str]] = {}
    for app, path in in_repo:
        if uses_repo(app, url) and path in changes.files:
            by_ref[_ref(app)] = (app, f"changes its Application manifest {path}")
    # the repository's definition of an app wins over the store's: it is what will sync
    for app in [a for a, _ in in_repo] + stored:
        ref = _ref(app)
        if ref in by_ref or not uses_repo(app, url):
            continue
        reason = _reason(repos, url, app, changes)
        if reason is not None:
            by_ref[ref] = (app, reason)
    for name in forced:
        app = _find(name, [*(a for a, _ in in_repo), *stored])
        by_ref.setdefault(_ref(app), (app, "was named with --app"))
    return [AffectedApp(ref, app, reason) for ref, (app, reason) in sorted(by_ref.items())]


def _find(name: str, apps: Iterable[Application]) -> Application:
    namespace, _, plain_name = name.rpartition("/")
    for app in apps:
        if app.name == plain_name and (not namespace or _ref(app).startswith(namespace + "/")):
            return app
    raise ApplicationNotFound(plain_name)
