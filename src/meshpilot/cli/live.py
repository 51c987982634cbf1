"""`meshpilot apply`, `get` and `delete`: kubectl's verbs on the live store.

    meshpilot apply -f FILE|DIR [--store DIR|URL] [--dry-run] [--strict]
    meshpilot get KIND [NAME] [-n NS | -A] [-o yaml|json|wide|name]
    meshpilot delete KIND NAME... [-n NS]  |  meshpilot delete -f FILE

The store is `--store DIR|URL` (a directory, or etcd://host:port[,host:port]/prefix), else
$MESHPILOT_STORE, else ~/.meshpilot/store. Writes are all or nothing: one invalid object
(reported with file, line, object and field) and nothing is written. What is applied is
checked as `meshpilot analyze` checks it, against the store's content: findings are printed
as `Warning: FILE:LINE: ...` lines and, with `--strict`, an error among them writes nothing.
Reads (`get`, `delete` of a missing store) never create a store. `--as USER [--groups G]`
applies Argo CD RBAC to Application and AppProject objects (policy from `--rbac FILE` or the
store's argocd-rbac-cm); without `--as` the local operator is trusted, as kubectl's admin
context is.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import tempfile
from collections.abc import Callable
from typing import Any, TypeVar

import click

from meshpilot.cli.common import print_diagnostics
from meshpilot.cli.live_output import print_objects
from meshpilot.config.diagnostics import Severity
from meshpilot.config.keys import ConfigKey
from meshpilot.config.loader import load_documents
from meshpilot.config.yaml_source import read_paths
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.admission import Caller, check_deletes, check_writes, policy_from_store
from meshpilot.gitops.rbac import Enforcer, load_policy_file
from meshpilot.settings import default_store_dir
from meshpilot.store.admission import refusals
from meshpilot.store.base import WatchedStore
from meshpilot.store.directory import DirectoryStore
from meshpilot.store.open import NoStoreError, is_etcd_url, open_directory_store
from meshpilot.store.open import open_store as open_store_url
from meshpilot.store.resources import resolve_resource

__all__ = [
    "apply",
    "caller_from",
    "delete",
    "get",
    "identity_options",
    "open_directory",
    "open_store",
    "store_option",
]

F = TypeVar("F", bound=Callable[..., Any])

store_option = click.option(
    "--store",
    "store_dir",
    metavar="URL",
    help="Live store: a directory (or file:///DIR), etcd://HOST:PORT[,HOST:PORT]/PREFIX "
    "(TLS: etcd+https://...?cacert=FILE&cert=FILE&key=FILE), or the Kubernetes API "
    "kube://[CONTEXT][?kubeconfig=FILE].  "
    "[default: $MESHPILOT_STORE, else ~/.meshpilot/store]",
)


def identity_options(func: F) -> F:
    """`--as USER --groups G --rbac FILE`: act as a user under Argo CD RBAC."""
    func = click.option(
        "--rbac",
        "rbac_file",
        metavar="FILE",
        help="RBAC policy (policy CSV or an argocd-rbac-cm ConfigMap); default: the store's "
        "argocd-rbac-cm.",
    )(func)
    func = click.option(
        "--groups",
        "groups",
        multiple=True,
        metavar="G[,G...]",
        help="Groups of the --as user (repeatable or comma separated).",
    )(func)
    return click.option("--as", "as_user", metavar="USER", help="Act as this user (RBAC).")(func)


def user_errors(func: F) -> F:
    """Library errors become one `Error: ...` line and exit status 1, also under CliRunner."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except MeshpilotError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def open_store(store_dir: str | None, *, create: bool) -> WatchedStore:
    """The `--store` (else $MESHPILOT_STORE, else ~/.meshpilot/store) through the one
    factory; readers pass `create=False` and get an error, not a new store, where none is."""
    try:
        return open_store_url(store_dir or default_store_dir(), create=create)
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc


def open_directory(store_dir: str | None, *, create: bool, command: str) -> DirectoryStore:
    """The `--store` of a command that needs the directory store (the GitOps controller
    keeps its locks, repo cache and state beside it); another backend is a clear error."""
    url = store_dir or default_store_dir()
    if is_etcd_url(url):
        raise click.ClickException(
            f"{command} needs a directory store (it keeps its locks and state beside it); "
            f"{url} is etcd: run `meshpilot gitops serve --store {url}` (replicas elect "
            "the one that syncs) and give --server URL"
        )
    try:
        return open_directory_store(url, create=create)
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc


def caller_from(
    store: WatchedStore, as_user: str | None, groups: tuple[str, ...], rbac_file: str | None
) -> Caller:
    if as_user is None:
        return Caller()
    names = tuple(g.strip() for item in groups for g in item.split(",") if g.strip())
    policy = load_policy_file(rbac_file) if rbac_file else policy_from_store(store.snapshot())
    enforcer = Enforcer(policy) if policy is not None else Enforcer.builtin()
    return Caller(user=as_user, groups=names, enforcer=enforcer)


@click.command()
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    required=True,
    metavar="PATH",
    help="YAML/JSON file or directory (repeatable; directories are read recursively).",
)
@store_option
@click.option("--dry-run", is_flag=True, help="Check and report, write nothing.")
@click.option(
    "--strict",
    is_flag=True,
    help="Write nothing when the analyzer finds an error in what is applied (a reference "
    "to a missing host, subset or gateway, ...); without it such findings are warnings.",
)
@identity_options
@user_errors
def apply(
    filenames: tuple[str, ...],
    store_dir: str | None,
    dry_run: bool,
    strict: bool,
    as_user: str | None,
    groups: tuple[str, ...],
    rbac_file: str | None,
) -> None:
    """Create or update objects in the live store (kubectl apply)."""
    read = read_paths(filenames)
    loaded = load_documents(read.documents)
    loaded.diagnostics[:0] = read.diagnostics
    problems = refusals(loaded)
    print_diagnostics([d for d in loaded.diagnostics if d not in problems] + problems)
    if problems:
        raise click.ClickException("nothing applied: fix the errors above")
    with contextlib.ExitStack() as stack:
        store = _store_or_empty(store_dir, stack)
        snapshot = store.snapshot()
        check_writes(loaded.objects, snapshot, caller_from(store, as_user, groups, rbac_file))
        from meshpilot.analysis.applied import findings_for_write  # (heavy: apply only)

        mesh = loaded.mesh if loaded.mesh_origin is not None else None
        findings = findings_for_write(snapshot, loaded.objects, mesh)
        for finding in findings:  # kubectl prints the API server's warnings this way
            click.echo(f"Warning: {finding}", err=True)
        errors = sum(f.severity is Severity.ERROR for f in findings)
        if strict and errors:
            raise click.ClickException(
                f"nothing applied (--strict): {errors} error{'s' if errors != 1 else ''} above"
            )
        if not dry_run and snapshot.version == 0:  # checked against none: create it now
            store = open_store(store_dir, create=True)
        suffix = " (dry run)" if dry_run else ""
        for result in store.apply(read.documents, dry_run=dry_run):
            click.echo(result.message + suffix)


def _store_or_empty(store_dir: str | None, stack: contextlib.ExitStack) -> WatchedStore:
    """The store to check a write against; where there is none, an empty one in a temporary
    directory, so that a dry run, or a write refused, creates nothing."""
    try:
        return open_store_url(store_dir or default_store_dir(), create=False)
    except NoStoreError:
        return open_store_url(stack.enter_context(tempfile.TemporaryDirectory()), create=True)


@click.command()
@click.argument("resource", metavar="KIND")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-A", "--all-namespaces", is_flag=True, help="List across all namespaces.")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "wide", "yaml", "json", "name"]),
    default="table",
    show_default=True,
)
@store_option
@identity_options
@user_errors
def get(
    resource: str,
    names: tuple[str, ...],
    namespace: str,
    all_namespaces: bool,
    output: str,
    store_dir: str | None,
    as_user: str | None,
    groups: tuple[str, ...],
    rbac_file: str | None,
) -> None:
    """Show objects of the live store (kubectl get), e.g. `get vs -n default`."""
    rtype = resolve_resource(resource)
    store = open_store(store_dir, create=False)
    caller = caller_from(store, as_user, groups, rbac_file)
    ns = "" if not rtype.namespaced else (None if all_namespaces and not names else namespace)
    snapshot = store.snapshot()
    keys = sorted(
        k for k in snapshot.objects
        if k.kind is rtype.kind and (ns is None or k.namespace == ns)
        and (not names or k.name in names)
    )  # fmt: skip
    missing = [n for n in names if all(k.name != n for k in keys)]
    manifests = [m for k in keys if (m := store.manifest(k)) is not None and _visible(caller, k, m)]
    if manifests or not missing:
        print_objects(
            rtype, manifests, output, all_namespaces and not names, single=len(names) == 1
        )
    if not manifests and not names:
        where = f" in {namespace} namespace" if rtype.namespaced and not all_namespaces else ""
        click.echo(f"No resources found{where}.", err=True)
    for name in missing:
        click.echo(f'Error from server (NotFound): {rtype.qualified_plural} "{name}" not found',
                   err=True)  # fmt: skip
    if missing:
        sys.exit(1)


def _visible(caller: Caller, key: ConfigKey, manifest: dict[str, Any]) -> bool:
    """Argo CD lists only the apps and projects the caller may `get`."""
    if str(key.kind) == "Application":
        project = (manifest.get("spec") or {}).get("project") or "default"
        objects = (f"{project}/{key.name}", f"{project}/{key.namespace}/{key.name}")
        return caller.allows("applications", "get", objects)
    if str(key.kind) == "AppProject":
        return caller.allows("projects", "get", key.name)
    return True


@click.command()
@click.argument("resource", metavar="[KIND]", required=False)
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    metavar="PATH",
    help="Delete the objects these files define.",
)
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("--ignore-not-found", is_flag=True, help="A missing object is not an error.")
@click.option("--dry-run", is_flag=True, help="Report, delete nothing.")
@store_option
@identity_options
@user_errors
def delete(
    resource: str | None,
    names: tuple[str, ...],
    filenames: tuple[str, ...],
    namespace: str,
    ignore_not_found: bool,
    dry_run: bool,
    store_dir: str | None,
    as_user: str | None,
    groups: tuple[str, ...],
    rbac_file: str | None,
) -> None:
    """Delete objects from the live store (kubectl delete KIND NAME, or -f FILE)."""
    keys = _keys_to_delete(resource, names, filenames, namespace)
    store = open_store(store_dir, create=False)
    check_deletes(keys, store.snapshot(), caller_from(store, as_user, groups, rbac_file))
    suffix = " (dry run)" if dry_run else ""
    failed = False
    for result in store.delete(keys, dry_run=dry_run):
        if result.deleted:
            click.echo(result.message + suffix)
        elif not ignore_not_found:
            click.echo(f"Error from server (NotFound): {result.message}", err=True)
            failed = True
    if failed:
        sys.exit(1)


def _keys_to_delete(
    resource: str | None, names: tuple[str, ...], filenames: tuple[str, ...], namespace: str
) -> list[ConfigKey]:
    if filenames:
        if resource:
            raise click.UsageError("give either KIND NAME or -f FILE, not both")
        loaded = load_documents(read_paths(filenames).documents)
        problems = [d for d in refusals(loaded) if d.kind]  # keys need kind and name only
        print_diagnostics(problems)
        return [obj.key for obj in loaded.objects]
    if not resource or not names:
        raise click.UsageError("give KIND and NAME, or -f FILE")
    rtype = resolve_resource(resource)
    return [ConfigKey(rtype.kind, namespace if rtype.namespaced else "", n) for n in names]
