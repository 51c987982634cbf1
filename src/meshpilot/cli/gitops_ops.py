"""`meshpilot gitops diff | sync | history | rollback` and `get --refresh`: they act directly
on the live store (`--store`) and the repositories (cloned into `--repo-cache`, default
`<store>/.gitops/repo-cache`). Age identities for SOPS files come from $SOPS_AGE_KEY_FILE
and $SOPS_AGE_KEY.

    meshpilot gitops diff APP                   exit 1 when out of sync (argocd app diff)
    meshpilot gitops sync APP [--dry-run] [--prune] [--revision R] [--resource G:K:NAME]...
    meshpilot gitops history APP
    meshpilot gitops rollback APP ID [--prune]

Each also takes `--server URL`: a running `gitops serve` does the work (gitops_remote.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from meshpilot.cli.gitops_remote import (
    client_for,
    remote_app,
    remote_diff,
    server_option,
    sync_body,
    to_outcome,
)
from meshpilot.cli.live import (
    caller_from,
    identity_options,
    open_directory,
    open_store,
    store_option,
    user_errors,
)
from meshpilot.config.objects import ConfigObject
from meshpilot.gitops.admission import Caller
from meshpilot.gitops.diff.keys import ResourceKey
from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.history import format_history, rollback
from meshpilot.gitops.model import Application
from meshpilot.gitops.rbac import app_objects
from meshpilot.gitops.refresh import AppState, RefreshDeps, refresh_app, save_status
from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.gitops.render.sops import load_identities
from meshpilot.gitops.repo import RepoService, repo_settings_from_store
from meshpilot.gitops.source import chart_detector
from meshpilot.gitops.sync.operation import SyncOutcome, SyncParams
from meshpilot.store.base import WatchedStore
from meshpilot.store.directory import DirectoryStore
from meshpilot.text_table import render_table

__all__ = ["build_deps", "refresh_and_save", "register_ops"]

repo_cache_option = click.option(
    "--repo-cache",
    metavar="DIR",
    help="Where repositories are cloned.  [default: <store>/.gitops/repo-cache]",
)


def build_deps(store: DirectoryStore, repo_cache: str | None) -> RefreshDeps:
    """Repo service, renderer (with age identities from the environment) and the store."""
    cache = Path(repo_cache) if repo_cache else store.root / ".gitops" / "repo-cache"
    access = repo_settings_from_store(store)  # repository Secrets, TLS certs, known hosts
    repos = RepoService(cache, access.credentials, trust=access.trust)
    key_file = os.environ.get("SOPS_AGE_KEY_FILE")
    identities = load_identities(
        Path(key_file) if key_file else None, os.environ.get("SOPS_AGE_KEY")
    )
    renderer = Renderer(repos, RendererConfig(age_identities=identities))
    return RefreshDeps(store=store, renderer=renderer, has_chart=chart_detector(repos))


def _app(store: WatchedStore, ref: str, caller: Caller, action: str) -> ConfigObject[Application]:
    from meshpilot.cli.gitops import find_application  # the group module imports this one

    obj = find_application(store.snapshot(), ref, caller)
    if action != "get":
        project = obj.model.spec.project_name
        caller.check("applications", action, app_objects(project, obj.namespace, obj.name))
    return obj


def refresh_and_save(
    store: DirectoryStore, obj: ConfigObject[Application], deps: RefreshDeps
) -> AppState:
    """Refresh the app and write its new status (argocd app get --refresh)."""
    state = refresh_app(obj.model, deps)
    save_status(store, obj.key, state.status(previous=obj.model.status))
    return state


def _resource(text: str) -> ResourceKey:
    """`GROUP:KIND:NAME` or `GROUP:KIND:NAMESPACE/NAME` (argocd app sync --resource)."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise click.BadParameter(f"{text!r}: expected GROUP:KIND:NAME", param_hint="--resource")
    namespace, _, name = parts[2].rpartition("/")
    return ResourceKey(parts[0], parts[1], namespace, name)


@click.command("diff")
@click.argument("app_ref", metavar="APP")
@store_option
@repo_cache_option
@server_option
@identity_options
@user_errors
def diff_app(
    app_ref: str, store_dir: str | None, repo_cache: str | None, server_url: str | None,
    as_user: str | None, groups: tuple[str, ...], rbac_file: str | None,
) -> None:  # fmt: skip
    """Show what Git would change in the store; exit 1 when out of sync (argocd app diff)."""
    if server_url:
        remote_diff(client_for(server_url, as_user, groups, rbac_file), app_ref)
        return
    store = open_directory(store_dir, create=False, command="gitops app diff")
    obj = _app(store, app_ref, caller_from(store, as_user, groups, rbac_file), "get")
    state = refresh_app(obj.model, build_deps(store, repo_cache))
    if state.comparison is None:
        raise GitopsError("; ".join(state.errors) or "comparison failed")
    text = state.comparison.diff_text()
    if text:
        click.echo(text, nl=False)
    if state.comparison.status.value != "Synced":
        sys.exit(1)


@click.command("sync")
@click.argument("app_ref", metavar="APP")
@click.option("--dry-run", is_flag=True, help="Plan and validate; write nothing.")
@click.option("--prune", is_flag=True, help="Delete resources of the app that Git no longer has.")
@click.option("--revision", default=None, metavar="R", help="Sync this revision instead.")
@click.option("--resource", "resources", multiple=True, metavar="GROUP:KIND:NAME",
              help="Sync only these resources (repeatable).")  # fmt: skip
@store_option
@repo_cache_option
@server_option
@identity_options
@user_errors
def sync_app(
    app_ref: str, dry_run: bool, prune: bool, revision: str | None, resources: tuple[str, ...],
    store_dir: str | None, repo_cache: str | None, server_url: str | None, as_user: str | None,
    groups: tuple[str, ...], rbac_file: str | None,
) -> None:  # fmt: skip
    """Sync an Application from Git into the store (argocd app sync)."""
    selected = frozenset(_resource(r) for r in resources) if resources else None
    if server_url:
        client = client_for(server_url, as_user, groups, rbac_file)
        remote, _ = remote_app(client, app_ref)
        body = sync_body(dry_run, prune, revision, selected)
        _print_outcome(remote, to_outcome(client.sync(remote.namespace, remote.name, body)))
        return
    store = open_directory(store_dir, create=False, command="gitops app sync")
    obj = _app(store, app_ref, caller_from(store, as_user, groups, rbac_file), "sync")
    from meshpilot.gitops.sync.execute import execute_sync

    params = SyncParams(
        prune=prune,
        dry_run=dry_run,
        revisions=(revision,) if revision else None,
        resources=selected,
        username=as_user or "",
    )
    outcome = execute_sync(obj.model, build_deps(store, repo_cache), params)
    _print_outcome(obj, outcome)


def _print_outcome(obj: ConfigObject[Application], outcome: SyncOutcome) -> None:
    rows = [("GROUP", "KIND", "NAMESPACE", "NAME", "STATUS", "MESSAGE")]
    rows += [
        (r["group"], r["kind"], r["namespace"], r["name"], r["status"], r["message"])
        for r in outcome.resources
    ]
    click.echo(f"{'Name:':<20}{obj.namespace}/{obj.name}")
    click.echo(f"{'Operation:':<20}Sync")
    click.echo(f"{'Sync Revision:':<20}{outcome.revision}")
    click.echo(f"{'Phase:':<20}{outcome.phase}")
    click.echo(f"{'Message:':<20}{outcome.message}")
    if len(rows) > 1:
        click.echo("")
        click.echo(render_table(rows))
    if not outcome.succeeded:
        raise GitopsError(f"sync of {obj.namespace}/{obj.name} failed: {outcome.message}")


@click.command("history")
@click.argument("app_ref", metavar="APP")
@store_option
@server_option
@identity_options
@user_errors
def history_app(
    app_ref: str, store_dir: str | None, server_url: str | None, as_user: str | None,
    groups: tuple[str, ...], rbac_file: str | None,
) -> None:  # fmt: skip
    """Show the app's deployment history (argocd app history)."""
    if server_url:
        remote, _ = remote_app(client_for(server_url, as_user, groups, rbac_file), app_ref)
        click.echo(format_history(remote.model))
        return
    store = open_store(store_dir, create=False)  # a read: any backend
    obj = _app(store, app_ref, caller_from(store, as_user, groups, rbac_file), "get")
    click.echo(format_history(obj.model))


@click.command("rollback")
@click.argument("app_ref", metavar="APP")
@click.argument("history_id", metavar="ID", type=int)
@click.option("--prune", is_flag=True, help="Delete resources the older revision does not have.")
@store_option
@repo_cache_option
@server_option
@identity_options
@user_errors
def rollback_app(
    app_ref: str, history_id: int, prune: bool, store_dir: str | None, repo_cache: str | None,
    server_url: str | None, as_user: str | None, groups: tuple[str, ...], rbac_file: str | None,
) -> None:  # fmt: skip
    """Sync the app to an earlier deployment from its history (argocd app rollback)."""
    if server_url:
        client = client_for(server_url, as_user, groups, rbac_file)
        remote, _ = remote_app(client, app_ref)
        answer = client.rollback(remote.namespace, remote.name, history_id, prune)
        _print_outcome(remote, to_outcome(answer))
        return
    store = open_directory(store_dir, create=False, command="gitops app rollback")
    obj = _app(store, app_ref, caller_from(store, as_user, groups, rbac_file), "sync")
    params = SyncParams(prune=prune, username=as_user or "")
    outcome = rollback(obj.model, history_id, build_deps(store, repo_cache), params)
    _print_outcome(obj, outcome)


def register_ops(group: click.Group) -> None:
    for command in (diff_app, sync_app, history_app, rollback_app):
        group.add_command(command)
