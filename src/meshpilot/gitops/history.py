"""Deployment history of an Application and rollback to one of its entries (argocd app
history / rollback).

Rollback syncs the revision and source recorded in the history entry. As in Argo CD it is
refused while automated sync is on (`rollback cannot be initiated when auto-sync is
enabled`): the controller would sync Git's revision straight back.
"""

from __future__ import annotations

from dataclasses import replace

from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.model import Application, RevisionHistory
from meshpilot.gitops.refresh import RefreshDeps
from meshpilot.gitops.sync.execute import execute_sync
from meshpilot.gitops.sync.operation import SyncOutcome, SyncParams
from meshpilot.text_table import render_table

__all__ = ["AUTO_SYNC_REFUSAL", "find_history", "format_history", "rollback"]

AUTO_SYNC_REFUSAL = "rollback cannot be initiated when auto-sync is enabled"


def find_history(app: Application, history_id: int) -> RevisionHistory:
    for entry in app.status.history:
        if entry.id == history_id:
            return entry
    raise GitopsError(f"application {app.name} does not have history id {history_id}")


def rollback(
    app: Application, history_id: int, deps: RefreshDeps, params: SyncParams | None = None
) -> SyncOutcome:
    """Sync `app` to history entry `history_id` (its revision(s) and source(s))."""
    policy = app.spec.sync_policy
    if policy is not None and policy.is_automated:
        raise GitopsError(AUTO_SYNC_REFUSAL)
    entry = find_history(app, history_id)
    if entry.sources:
        sources = tuple(entry.sources)
        revisions = tuple(entry.revisions)
    elif entry.source is not None:
        sources = (entry.source,)
        revisions = (entry.revision,)
    else:
        raise GitopsError(f"application {app.name}: history id {history_id} has no source")
    base = params or SyncParams()
    return execute_sync(
        app,
        deps,
        replace(base, revisions=revisions, sources=sources, rollback_id=history_id),
    )


def format_history(app: Application) -> str:
    """`argocd app history` columns: ID, DATE, REVISION, and the source."""
    rows = [("ID", "DATE", "REVISION", "SOURCE")]
    for entry in app.status.history:
        if entry.sources:
            revision = ",".join(r[:7] for r in entry.revisions)
            source = ",".join(_describe(s) for s in entry.sources)
        else:
            source_obj = entry.source or {}
            target = str(source_obj.get("targetRevision") or "HEAD")
            revision = f"{target} ({entry.revision[:7]})" if entry.revision else target
            source = _describe(source_obj)
        rows.append((str(entry.id), entry.deployed_at or "", revision, source))
    return render_table(rows)


def _describe(source: dict[str, object]) -> str:
    repo = str(source.get("repoURL") or "")
    path = str(source.get("path") or "")
    return f"{repo} {path}".strip()
