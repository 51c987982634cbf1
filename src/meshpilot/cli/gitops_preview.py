"""`meshpilot gitops preview`: what a branch does, before it is merged, to every affected
app's manifests and to every proxy's Envoy configuration.

    meshpilot gitops preview --repo PATH|URL --base main --head my-branch [--store DIR]
        [--app A ...] [-o markdown|text|json] [--repo-cache DIR]

Exit status: 0 when every affected app renders and passes the mesh's checks (changes or
not), 1 when one does not or a revision cannot be resolved, 2 on usage errors. Age keys
for SOPS files come from $SOPS_AGE_KEY_FILE / $SOPS_AGE_KEY.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

from meshpilot.errors import MeshpilotError
from meshpilot.gitops.errors import ApplicationNotFound
from meshpilot.gitops.preview import (
    PreviewDeps,
    PreviewRequest,
    render_json,
    render_markdown,
    render_text,
    run_preview,
)
from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.gitops.render.sops import load_identities
from meshpilot.gitops.repo import RepoService, RepoSettings, repo_settings_from_store
from meshpilot.settings import STORE_ENV
from meshpilot.store.open import open_store

__all__ = ["preview"]

_RENDERERS = {"markdown": render_markdown, "text": render_text, "json": render_json}


def _repo_url(repo: str) -> str:
    """A path on disk becomes absolute (relative paths are not URLs to git)."""
    if "://" not in repo and "@" not in repo.partition("/")[0] and Path(repo).exists():
        return str(Path(repo).resolve())
    return repo


def _renderer(cache: str | None, access: RepoSettings | None) -> Renderer:
    key_file = os.environ.get("SOPS_AGE_KEY_FILE")
    identities = load_identities(
        Path(key_file) if key_file else None, os.environ.get("SOPS_AGE_KEY")
    )
    root = Path(cache) if cache else Path(tempfile.gettempdir()) / f"meshpilot-repos-{os.getuid()}"
    config = RendererConfig(age_identities=identities, chart_cache_dir=root / "charts")
    if access is None:
        return Renderer(RepoService(root / "git"), config)
    repos = RepoService(root / "git", access.credentials, trust=access.trust)
    return Renderer(repos, config)


@click.command("preview")
@click.option("--repo", required=True, metavar="PATH|URL", help="The repository of the change.")
@click.option("--base", required=True, metavar="REV", help="The branch the change merges into.")
@click.option("--head", required=True, metavar="REV", help="The branch (or commit) of the change.")
@click.option(
    "--store",
    "store_dir",
    metavar="DIR",
    help=f"Live store: Applications and the mesh the change lands in  [default: ${STORE_ENV}; "
    "none: only the rendered objects and Applications defined in the repo]",
)
@click.option("--app", "apps", multiple=True, metavar="APP", help="Also preview APP (repeatable).")
@click.option(
    "-o", "--output", type=click.Choice(sorted(_RENDERERS)), default="markdown", show_default=True
)
@click.option("--repo-cache", metavar="DIR", help="Git mirror and chart cache directory.")
def preview(
    repo: str,
    base: str,
    head: str,
    store_dir: str | None,
    apps: tuple[str, ...],
    output: str,
    repo_cache: str | None,
) -> None:
    """Rendered manifest diff and Envoy configuration diff of a change, per app and proxy."""
    store_dir = store_dir or os.environ.get(STORE_ENV)
    try:
        store = open_store(store_dir, create=False) if store_dir else None
        snapshot = store.snapshot() if store else None
        # Repository Secrets, TLS certs and known hosts come from the store, as in Argo CD.
        access = repo_settings_from_store(store) if store else None
        request = PreviewRequest(_repo_url(repo), base, head, apps)
        report = run_preview(request, PreviewDeps(_renderer(repo_cache, access), snapshot))
    except ApplicationNotFound as exc:
        raise click.UsageError(f"--app: {exc}") from exc
    except MeshpilotError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    click.echo(_RENDERERS[output](report), nl=False)
    if report.failed:
        sys.exit(1)
