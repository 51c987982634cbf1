"""The gitops verbs with `--server URL`: the same output and exit codes as acting on the
store directly, but the work is done by a running `meshpilot gitops serve` through its JSON
API (gitops/server/api.py), as the account of `meshpilot gitops login` (or the API token of
`--auth-token` / $MESHPILOT_AUTH_TOKEN). `--as/--groups`, `--store`, `--repo-cache` and
`--rbac` belong to the direct mode: the server judges who the token says, nothing else.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from meshpilot.cli.gitops_config import auth_options, token_for
from meshpilot.config.keys import ConfigKey
from meshpilot.config.loader import load_documents
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.admission import Caller
from meshpilot.gitops.diff.keys import ResourceKey
from meshpilot.gitops.errors import ApplicationNotFound, GitopsError
from meshpilot.gitops.model import Application, OperationPhase
from meshpilot.gitops.projects import CONTROL_NAMESPACE
from meshpilot.gitops.server.client import ApiClient
from meshpilot.gitops.sync.operation import SyncOutcome
from meshpilot.store.base import StoreSnapshot

__all__ = [
    "client_for",
    "remote_app",
    "remote_apps",
    "remote_diff",
    "server_option",
    "sync_body",
    "to_outcome",
]

F = TypeVar("F", bound=Callable[..., Any])


def server_option(func: F) -> F:
    func = auth_options(func)
    return click.option(
        "--server",
        "server_url",
        metavar="URL",
        help="Talk to a running `meshpilot gitops serve` (e.g. http://127.0.0.1:8080) "
        "instead of acting on the store and the repositories directly.",
    )(func)


def client_for(
    url: str, as_user: str | None, groups: tuple[str, ...], rbac_file: str | None = None
) -> ApiClient:
    if rbac_file:
        raise click.UsageError("--rbac applies to the local store; the server uses its own policy")
    if as_user or groups:
        raise click.UsageError(
            "--as/--groups apply to the local store; with --server you act as the account you "
            "logged in as (`meshpilot gitops login`) or the one of --auth-token"
        )
    client = ApiClient(url)
    return ApiClient(url, token_for(client.base))


def _objects(manifests: list[dict[str, Any]]) -> list[ConfigObject[Application]]:
    """Applications as the store would hold them (the same loader, so the same output)."""
    docs = [RawDocument("<server>", n, m, {}) for n, m in enumerate(manifests, start=1)]
    loaded = load_documents(docs)
    apps = [o for o in loaded.objects if isinstance(o.model, Application)]
    return cast(list[ConfigObject[Application]], apps)


def remote_apps(client: ApiClient) -> tuple[list[ConfigObject[Application]], dict[ConfigKey, Any]]:
    """The apps the caller may see, and their manifests by key."""
    manifests = client.list_apps()
    objects = _objects(manifests)
    by_key = {o.key: m for o, m in zip(objects, _matching(manifests, objects), strict=True)}
    return objects, by_key


def _matching(manifests: list[dict[str, Any]], objects: list[Any]) -> list[dict[str, Any]]:
    def key(m: dict[str, Any]) -> tuple[str, str]:
        meta = m.get("metadata") or {}
        return str(meta.get("namespace") or "default"), str(meta.get("name") or "")

    index = {key(m): m for m in manifests}
    return [index[(o.namespace, o.name)] for o in objects]


def remote_app(
    client: ApiClient, ref: str, refresh: bool = False
) -> tuple[ConfigObject[Application], dict[str, Any]]:
    """`ns/name` or a name (as the direct mode resolves it), fetched from the server; the
    server answers not-found and permission-denied with the direct mode's messages."""
    from meshpilot.cli.gitops import find_application

    namespace, _, name = ref.rpartition("/")
    if not namespace:
        objects, _ = remote_apps(client)
        snapshot = StoreSnapshot(version=0, objects={o.key: o for o in objects})
        try:
            namespace = find_application(snapshot, ref, Caller()).namespace
        except ApplicationNotFound:
            namespace = CONTROL_NAMESPACE  # maybe hidden from the list: let the server say
    manifest = client.get(namespace, name, refresh=refresh)
    found = _objects([manifest])
    if not found:
        raise ApplicationNotFound(name)
    return found[0], manifest


def remote_diff(client: ApiClient, ref: str) -> None:
    obj, _ = remote_app(client, ref)
    answer = client.diff(obj.namespace, obj.name)
    text = str(answer.get("diff") or "")
    if text:
        click.echo(text, nl=False)
    if answer.get("outOfSync"):
        sys.exit(1)


def sync_body(
    dry_run: bool, prune: bool, revision: str | None, resources: frozenset[ResourceKey] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"prune": prune, "dryRun": dry_run}
    if revision:
        body["revision"] = revision
    if resources:
        body["resources"] = [dataclasses.asdict(r) for r in sorted(resources)]
    return body


def to_outcome(answer: dict[str, Any]) -> SyncOutcome:
    try:
        phase = OperationPhase(str(answer.get("phase")))
    except ValueError:
        raise GitopsError(f"unexpected sync answer from the server: {answer!r}") from None
    return SyncOutcome(
        phase=phase,
        message=str(answer.get("message") or ""),
        revision=str(answer.get("revision") or ""),
        revisions=tuple(answer.get("revisions") or ()),
        resources=tuple(r for r in answer.get("resources") or () if isinstance(r, dict)),
        dry_run=bool(answer.get("dryRun")),
    )
