"""`meshpilot gitops serve`: the application controller and its HTTP API in one process
(Argo CD's application-controller + argocd-server, trimmed).

    meshpilot gitops serve [--store DIR|etcd://...] [--listen 127.0.0.1:8080]
                           [--app-resync 180s] [--self-heal-timeout 5s] [--notifications FILE]
                           [--repo-cache DIR] [--state-dir DIR] [--lease-ttl 5]
                           [--discovery 127.0.0.1:15014]

On etcd, replicas elect one controller (gitops_elected.py); all serve the API.

Reconciles every Application in the store (resync interval, push webhooks at
/api/webhook, drift from the store's change feed), syncs automated apps, sends
notifications (from --notifications FILE, else the store's argocd-notifications-cm), and
serves the JSON API that `gitops ... --server URL` uses, to authenticated callers only
(gitops/auth: `gitops login`, API tokens; on first start the admin's generated password is
written to <state-dir>/initial-admin-password, 0600, and the path is printed). Webhook
secrets come from $MESHPILOT_WEBHOOK_{GITHUB_SECRET,GITLAB_SECRET,BITBUCKET_UUID,
BITBUCKETSERVER_SECRET}, else the store's `argocd-secret` (`webhook.github.secret`,
`webhook.gitlab.secret`, `webhook.bitbucket.uuid`, `webhook.bitbucketserver.secret`).
SIGTERM or SIGINT stop it cleanly: the running reconciles finish, queued notifications are
sent (5 s at most). The web UI is on the same port at `/` (meshpilot/ui: log in with the
same accounts); its mesh pages read the control plane's debug API given by --discovery.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
import signal
import socket
from dataclasses import dataclass
from pathlib import Path

import click

from meshpilot.cli.gitops_elected import run_elected
from meshpilot.cli.live import open_store, store_option, user_errors
from meshpilot.config.duration import parse_duration
from meshpilot.config.kinds import Kind
from meshpilot.gitops.auth import Authenticator, ServerState
from meshpilot.gitops.controller import CachingRepoService, Controller, ControllerSettings
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.gitops.notify import (
    CONFIGMAP_NAME,
    SECRET_NAME,
    NotificationConfig,
    Notifier,
    PullRequestIndex,
    Redactor,
    load_notifications_file,
    parse_notifications,
    secret_values,
)
from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.gitops.render.sops import load_identities
from meshpilot.gitops.repo import repo_settings_from_store
from meshpilot.gitops.server import GitopsServer, WebhookSecrets, default_state_dir
from meshpilot.gitops.source import ChartDetector, chart_detector
from meshpilot.store.base import WatchedStore
from meshpilot.store.directory import DirectoryStore
from meshpilot.store.etcd.backend import EtcdStore

__all__ = ["serve"]

log = logging.getLogger(__name__)


def _seconds(value: str, name: str) -> float:
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parse_duration(value) / 1e9
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=name) from None


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected HOST:PORT", param_hint="--listen") from None


def _store_data(store: WatchedStore, kind: Kind, name: str) -> dict[str, object] | None:
    for obj in store.snapshot().of_kind(kind):
        if obj.name == name:
            return store.manifest(obj.key)
    return None


def _notifications(store: WatchedStore, path: str | None) -> NotificationConfig:
    if path:
        return load_notifications_file(path)
    configmap = _store_data(store, Kind.CONFIG_MAP, CONFIGMAP_NAME)
    if configmap is None:
        return NotificationConfig()
    return parse_notifications(configmap, _store_data(store, Kind.SECRET, SECRET_NAME))


def _webhook_secrets(store: WatchedStore) -> WebhookSecrets:
    secret = _store_data(store, Kind.SECRET, "argocd-secret") or {}
    data = secret.get("data") if isinstance(secret.get("data"), dict) else {}

    def stored(key: str) -> str:
        value = (data or {}).get(key) if isinstance(data, dict) else None
        try:
            return base64.b64decode(str(value)).decode() if value else ""
        except (binascii.Error, UnicodeDecodeError):
            return ""

    def value(env: str, key: str) -> str:
        return os.environ.get(f"MESHPILOT_WEBHOOK_{env}") or stored(key)

    return WebhookSecrets(
        github=value("GITHUB_SECRET", "webhook.github.secret"),
        gitlab=value("GITLAB_SECRET", "webhook.gitlab.secret"),
        bitbucket_uuid=value("BITBUCKET_UUID", "webhook.bitbucket.uuid"),
        bitbucket_server=value("BITBUCKETSERVER_SECRET", "webhook.bitbucketserver.secret"),
    )


@click.command("serve")
@store_option
@click.option("--listen", default="127.0.0.1:8080", show_default=True, help="API address.")
@click.option(
    "--app-resync",
    default="180s",
    show_default=True,
    help="Reconcile interval of unchanged apps (Argo CD's timeout.reconciliation).",
)
@click.option(
    "--self-heal-timeout",
    default="5s",
    show_default=True,
    help="Wait after a sync before selfHeal undoes drift again.",
)
@click.option(
    "--notifications",
    "notifications_file",
    metavar="FILE",
    help="argocd-notifications-cm (+ Secret) YAML; default: the store's.",
)
@click.option(
    "--repo-cache",
    metavar="DIR",
    help="Where repositories are cloned.  [default: <store>/.gitops/repo-cache]",
)
@click.option(
    "--state-dir",
    metavar="DIR",
    help="The server's private directory (0700): token signing key, initial admin password. "
    " [default: <store>/.gitops/server]",
)
@click.option(
    "--lease-ttl",
    default=5,
    show_default=True,
    type=click.IntRange(1, 600),
    help="On etcd: seconds of the leader's lease; a standby takes over this long after the "
    "leader dies (at once when it is stopped).",
)
@click.option(
    "--discovery",
    metavar="ADDR",
    help="The control plane's debug API (its monitoring port, e.g. 127.0.0.1:15014) for "
    "the UI's mesh pages.  [default: no mesh pages]",
)
@user_errors
def serve(
    store_dir: str | None, listen: str, app_resync: str, self_heal_timeout: str,
    notifications_file: str | None, repo_cache: str | None, state_dir: str | None,
    lease_ttl: int,
    discovery: str | None,
) -> None:  # fmt: skip
    """Run the GitOps controller and API (argocd-application-controller + server). On an
    etcd store, any number of replicas: one leads the controller, the others serve the API
    and stand by (/debug/leaderz shows who leads)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    register_gitops_kinds()
    host, port = _listen(listen)
    settings = ControllerSettings(
        app_resync=_seconds(app_resync, "--app-resync"),
        self_heal_timeout=_seconds(self_heal_timeout, "--self-heal-timeout"),
    )
    store = open_store(store_dir, create=True)
    if isinstance(store, DirectoryStore):
        private = Path(state_dir) if state_dir else default_state_dir(store.root)
        locks: Path | None = None
        cache = Path(repo_cache) if repo_cache else store.root / ".gitops" / "repo-cache"
    else:
        if not state_dir:
            raise click.UsageError(
                "gitops serve on etcd needs --state-dir DIR: this replica's own directory "
                "(repository cache, operation locks, the API's token key)"
            )
        private = Path(state_dir) / "server"
        locks = Path(state_dir) / "locks"
        cache = Path(repo_cache) if repo_cache else Path(state_dir) / "repo-cache"
    store.refresh()
    access = repo_settings_from_store(store)  # repository Secrets, TLS certs, known hosts
    repos = CachingRepoService(cache, access.credentials, trust=access.trust)
    key_file = os.environ.get("SOPS_AGE_KEY_FILE")
    identities = load_identities(
        Path(key_file) if key_file else None, os.environ.get("SOPS_AGE_KEY")
    )
    renderer = Renderer(repos, RendererConfig(age_identities=identities))
    config = _notifications(store, notifications_file)
    auth = Authenticator(store, ServerState(private))
    serving = _Serving(
        store, renderer, settings, config, (host, port), chart_detector(repos), discovery
    )
    asyncio.run(_run(serving, auth, locks, lease_ttl))


@dataclass(frozen=True, slots=True)
class _Serving:
    store: WatchedStore
    renderer: Renderer
    settings: ControllerSettings
    config: NotificationConfig
    listen: tuple[str, int]
    has_chart: ChartDetector
    discovery: str | None  # the UI's mesh pages read this control plane's debug API


async def _run(serving: _Serving, auth: Authenticator, locks: Path | None, ttl: int) -> None:
    store, renderer, settings = serving.store, serving.renderer, serving.settings
    config, listen, has_chart = serving.config, serving.listen, serving.has_chart
    pull_requests = PullRequestIndex()

    def redactor() -> Redactor:
        secrets = [m for o in store.snapshot().of_kind(Kind.SECRET)
                   if (m := store.manifest(o.key)) is not None]  # fmt: skip
        return Redactor(secret_values(secrets))

    notifier = Notifier(config, redactor, pull_requests)
    controller = Controller(store, renderer, settings, notifier, has_chart, lock_dir=locks)
    server = GitopsServer(
        controller, _webhook_secrets(store), pull_requests, auth, discovery=serving.discovery
    )
    host = listen[0]
    bound = await server.start(*listen)
    click.echo(
        f"gitops serve: store {store!r}, API http://{host}:{bound}, "
        f"UI http://{host}:{bound}/, "
        f"resync {settings.app_resync:g}s, notifications "
        f"{'on' if notifier.enabled else 'off'}",
        err=True,
    )
    initial = await asyncio.to_thread(auth.ensure_admin_password)
    if initial is not None:  # the path only: the password never reaches a terminal or log
        click.echo(
            f"gitops serve: generated the initial password of 'admin' in {initial} (0600); "
            "log in with `meshpilot gitops login --server URL --username admin`, then "
            "change it (`meshpilot gitops account update-password`) and delete the file",
            err=True,
        )
    notifier.start(controller.tasks)  # a failed worker is restarted, shown on /healthz
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def stopping() -> None:
        stop.set()
        controller.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping)
    try:
        if isinstance(store, EtcdStore):
            identity = f"{socket.gethostname()}:{os.getpid()} (API http://{host}:{bound})"
            await run_elected(controller, store, identity, ttl, stop)
        else:
            await controller.run()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        log.info("gitops serve: shutting down")
        await server.stop()
        await notifier.stop()
        renderer.repos.close()  # the mirrors' object readers
