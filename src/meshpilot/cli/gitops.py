"""`meshpilot gitops`: Argo CD style delivery. This module holds the group and the verbs that
read the store (`list`, `get`); the verbs that render, diff and sync join it as they land.

    meshpilot gitops list [-o wide|json|yaml|name] [--store DIR] [--as USER --groups G]
    meshpilot gitops get APP [-o json|yaml] [--store DIR] [--as USER --groups G]

With `--server URL` every verb asks a running `gitops serve` instead (gitops_remote.py).

APP is `name` or `namespace/name` (Argo CD's apps-in-any-namespace form).
"""

from __future__ import annotations

import json
from typing import Any

import click
import yaml

from meshpilot.cli.gitops_remote import client_for, remote_app, remote_apps, server_option
from meshpilot.cli.live import (
    caller_from,
    identity_options,
    open_directory,
    open_store,
    store_option,
    user_errors,
)
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.gitops.admission import Caller
from meshpilot.gitops.errors import ApplicationNotFound, GitopsError
from meshpilot.gitops.model import Application
from meshpilot.gitops.projects import CONTROL_NAMESPACE
from meshpilot.gitops.rbac import app_objects
from meshpilot.store.base import StoreSnapshot
from meshpilot.text_table import render_table

__all__ = ["gitops"]


@click.group()
def gitops() -> None:
    """GitOps delivery of Applications from Git into the live store (Argo CD style)."""


def _apps(snapshot: StoreSnapshot, caller: Caller) -> list[ConfigObject[Application]]:
    out = []
    for obj in snapshot.of_kind(Kind.APPLICATION):
        app = obj.model
        if isinstance(app, Application) and caller.allows(
            "applications", "get", app_objects(app.spec.project_name, obj.namespace, obj.name)
        ):
            out.append(obj)
    return out


def find_application(
    snapshot: StoreSnapshot, ref: str, caller: Caller
) -> ConfigObject[Application]:
    """`ns/name`, or a name: the app in the control namespace, else the only one so named."""
    namespace, _, name = ref.rpartition("/")
    candidates = [
        o for o in snapshot.of_kind(Kind.APPLICATION)
        if o.name == name and (not namespace or o.namespace == namespace)
    ]  # fmt: skip
    if len(candidates) > 1:
        preferred = [o for o in candidates if o.namespace == CONTROL_NAMESPACE]
        if len(preferred) != 1:
            found = ", ".join(f"{o.namespace}/{o.name}" for o in candidates)
            raise GitopsError(f"application name {name!r} is ambiguous ({found}): use NS/NAME")
        candidates = preferred
    if not candidates or not isinstance(candidates[0].model, Application):
        raise ApplicationNotFound(name)
    obj: ConfigObject[Application] = candidates[0]
    project = obj.model.spec.project_name
    caller.check("applications", "get", app_objects(project, obj.namespace, obj.name))
    return obj


def _row(obj: ConfigObject[Application]) -> list[str]:
    app = obj.model
    spec, status = app.spec, app.status
    source = spec.all_sources[0] if spec.all_sources else None
    conditions = ",".join(sorted({str(c.type) for c in status.conditions})) or "<none>"
    return [
        f"{obj.namespace}/{obj.name}",
        spec.destination.server or spec.destination.name,
        spec.destination.namespace,
        spec.project_name,
        str(status.sync.status),
        str(status.health.status),
        "Auto-Prune" if spec.sync_policy and spec.sync_policy.automated and
        spec.sync_policy.automated.prune else
        ("Auto" if spec.sync_policy and spec.sync_policy.is_automated else "<none>"),
        conditions,
        source.repo_url if source else "",
        source.path if source else "",
        source.target_revision if source else "",
    ]  # fmt: skip


_HEADER = ["NAME", "CLUSTER", "NAMESPACE", "PROJECT", "STATUS", "HEALTH", "SYNCPOLICY",
           "CONDITIONS", "REPO", "PATH", "TARGET"]  # fmt: skip


def _dump(data: Any, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(yaml.safe_dump(data, sort_keys=False), nl=False)


@gitops.command("list")
@click.option("-o", "--output", type=click.Choice(["wide", "json", "yaml", "name"]), default="wide")
@store_option
@server_option
@identity_options
@user_errors
def list_apps(
    output: str, store_dir: str | None, server_url: str | None, as_user: str | None,
    groups: tuple[str, ...], rbac_file: str | None,
) -> None:  # fmt: skip
    """List Applications (argocd app list)."""
    if server_url:
        apps, manifests = remote_apps(client_for(server_url, as_user, groups, rbac_file))
        _print_list(apps, [manifests[o.key] for o in apps], output)
        return
    store = open_store(store_dir, create=False)
    apps = _apps(store.snapshot(), caller_from(store, as_user, groups, rbac_file))
    _print_list(apps, [store.manifest(o.key) for o in apps], output)


def _print_list(apps: list[ConfigObject[Application]], manifests: list[Any], output: str) -> None:
    if output in ("json", "yaml"):
        _dump(manifests, output)
        return
    if output == "name":
        for obj in apps:
            click.echo(f"{obj.namespace}/{obj.name}")
        return
    click.echo(render_table([_HEADER, *(_row(o) for o in apps)]))


@gitops.command("get")
@click.argument("app_ref", metavar="APP")
@click.option("-o", "--output", type=click.Choice(["text", "json", "yaml"]), default="text")
@click.option("--refresh", is_flag=True, help="Fetch and compare first (argocd app get --refresh).")
@store_option
@server_option
@identity_options
@user_errors
def get_app(
    app_ref: str, output: str, refresh: bool, store_dir: str | None, server_url: str | None,
    as_user: str | None, groups: tuple[str, ...], rbac_file: str | None,
) -> None:  # fmt: skip
    """Show an Application with its status (argocd app get)."""
    if server_url:
        client = client_for(server_url, as_user, groups, rbac_file)
        obj, manifest = remote_app(client, app_ref, refresh=refresh)
        if output != "text":
            _dump(manifest, output)
            return
        click.echo(_describe(obj))
        return
    store = open_store(store_dir, create=False)
    obj = find_application(
        store.snapshot(), app_ref, caller_from(store, as_user, groups, rbac_file)
    )
    if refresh:  # render and compare now, then show the stored result
        from meshpilot.cli.gitops_ops import build_deps, refresh_and_save

        directory = open_directory(store_dir, create=False, command="gitops app get --refresh")
        refresh_and_save(directory, obj, build_deps(directory, None))
        obj = find_application(directory.snapshot(), app_ref, Caller())
        store = directory
    if output != "text":
        _dump(store.manifest(obj.key), output)
        return
    click.echo(_describe(obj))


def _describe(obj: ConfigObject[Application]) -> str:
    app = obj.model
    spec, status = app.spec, app.status
    source = spec.all_sources[0] if spec.all_sources else None
    revision = f" ({status.sync.revision[:7]})" if status.sync.revision else ""
    lines = [
        ("Name", f"{obj.namespace}/{obj.name}"),
        ("Project", spec.project_name),
        ("Server", spec.destination.server or spec.destination.name),
        ("Namespace", spec.destination.namespace),
        ("Repo", source.repo_url if source else ""),
        ("Target", source.target_revision if source else ""),
        ("Path", source.path if source else ""),
        ("Sync Policy", "Automated" if spec.sync_policy and spec.sync_policy.is_automated
         else "Manual"),
        ("Sync Status", f"{status.sync.status}{revision}"),
        ("Health Status", str(status.health.status)),
    ]  # fmt: skip
    out = [f"{label + ':':<20}{value}" for label, value in lines]
    if status.conditions:
        out += ["", "CONDITION  MESSAGE"]
        out += [f"{c.type}  {c.message}" for c in status.conditions]
    if status.operation_state is not None:
        op = status.operation_state
        out += ["", f"{'Operation:':<20}Sync", f"{'Phase:':<20}{op.phase}",
                f"{'Message:':<20}{op.message}"]  # fmt: skip
    if status.resources:
        rows = [("GROUP", "KIND", "NAMESPACE", "NAME", "STATUS", "HEALTH")]
        rows += [
            (r.group, r.kind, r.namespace, r.name, str(r.status),
             str(r.health.status) if r.health else "")
            for r in status.resources
        ]  # fmt: skip
        out += ["", render_table(rows)]
    return "\n".join(out)


from meshpilot.cli.gitops_preview import preview  # noqa: E402  (registered on the group)

gitops.add_command(preview)


from meshpilot.cli.gitops_ops import register_ops  # noqa: E402  (it uses find_application)

register_ops(gitops)


from meshpilot.cli.gitops_serve import serve  # noqa: E402  (controller + API)

gitops.add_command(serve)


from meshpilot.cli.gitops_auth import register_auth  # noqa: E402  (login, account, proj)

register_auth(gitops)
