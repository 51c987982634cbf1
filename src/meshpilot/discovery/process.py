"""The control plane process (`meshpilot discovery`): file store, ADS server, monitoring.

    FileStore (polls the -f paths) ──change events──► DiscoveryServer (ADS on xds port)
    HttpServer (monitoring port): /debug/syncz, configz, registryz, config_dump, tasks,
    /ready, /metrics
    InjectionWebhook (15017, HTTPS, with the CA): POST /inject, the store's injector config

The store's watch and the front Envoy's run under the server's TaskSupervisor
(meshpilot/supervise.py) with the debouncer and the push dispatcher: if one fails it is
restarted, and /ready says so meanwhile.

SIGTERM and SIGINT stop it cleanly: streams end, both servers stop, `run()` returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import signal
import socket
from collections.abc import Sequence
from pathlib import Path

import yaml

from meshpilot.discovery.debug_api import debug_routes
from meshpilot.discovery.http import HttpRequest, HttpResponse, HttpServer, Route
from meshpilot.discovery.revision_view import RevisionView
from meshpilot.discovery.unsupported import UnsupportedFieldLog
from meshpilot.errors import MeshpilotError
from meshpilot.inject.store_injector import StoreInjector
from meshpilot.inject.webhook import InjectionWebhook
from meshpilot.inject.webhook_config import mutating_webhook_configuration
from meshpilot.inject.webhook_leader import WebhookWriter
from meshpilot.inject.webhook_store import publish_webhook
from meshpilot.model.relevance import UNREAD_KINDS
from meshpilot.security.control_plane_record import (
    ControlPlaneRecord,
    record_key,
    remove_record,
    root_cert_path,
    write_record,
)
from meshpilot.security.files import write_public
from meshpilot.security.secure_server import SecureServer, start_secure_server
from meshpilot.settings import Settings
from meshpilot.store.base import WatchedStore
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.files import FileStore
from meshpilot.store.open import open_store
from meshpilot.xds.generate.telemetry.tracing import configure_default_sampling
from meshpilot.xds.server import DiscoveryServer

__all__ = ["Discovery", "run_discovery"]

log = logging.getLogger(__name__)


class Discovery:
    def __init__(
        self,
        paths: Sequence[str | Path],
        settings: Settings | None = None,
        store: FileStore | WatchedStore | None = None,
    ) -> None:
        self.settings = settings or Settings()
        # A live store (`--store DIR`) or the watched -f files.
        self.store = store or FileStore(paths, self.settings.file_poll_interval)
        self.server = DiscoveryServer(self.store, self.settings)
        UnsupportedFieldLog(self.store)  # warns about fields parsed and ignored, once each
        routes = debug_routes(self.server, self.store)
        routes["/metrics"] = self._with_ca_metrics(routes["/metrics"])
        self.http = HttpServer(routes)
        self.secure: SecureServer | None = None  # 15012: ADS + CA over TLS (with ca_dir)
        self.webhook: InjectionWebhook | None = None  # 15017: injection (with the CA)
        self._record: Path | None = None  # <CA dir>/<record key> of this process's record
        self._webhook_writer: WebhookWriter | None = None  # on etcd: the elected writer

    @property
    def xds_port(self) -> int:
        return self.server.port

    @property
    def monitoring_port(self) -> int:
        return self.http.port

    def _with_ca_metrics(self, inner: Route) -> Route:
        """/metrics plus the CA's citadel_server_* counters once the CA runs."""

        async def metrics(request: HttpRequest) -> HttpResponse:
            response = await inner(request)
            if self.secure is None:
                return response
            extra = self.secure.csr.metrics.render().encode()
            return dataclasses.replace(response, body=response.body + extra)

        return metrics

    async def start(self) -> None:
        """Read the files (MeshpilotError if they cannot be read at all), then serve."""
        configure_default_sampling(self.settings.trace_sampling)
        await asyncio.to_thread(self.store.load)
        host = self.settings.listen_address
        await self.server.start(host, self.settings.ports.xds_plaintext)
        try:
            if self.settings.ca_dir:
                self.secure = await start_secure_server(self.settings, self.server)
                await self._start_webhook(self.secure)
            await self.http.start(host, self.settings.ports.monitoring)
        except BaseException:
            if self.webhook is not None:
                await self.webhook.stop()
            if self.secure is not None:
                await self.secure.stop(0)
            await self.server.stop(0)
            raise
        # Supervised: a failure is logged, counted, shown on /debug/tasks and /ready, and
        # the watch starts again (a dead watch would silently stop every later edit).
        self.server.tasks.start("config-watch", self.store.watch)
        if self._webhook_writer is not None:
            self.server.tasks.start("webhook-writer", self._webhook_writer.run)
        if self.secure is not None:
            self.server.tasks.start("front-envoy", self.secure.keep_front_running)
            self._record = await asyncio.to_thread(self._write_record, self.secure)
        log.info(
            "discovery: xDS on %s:%d, monitoring on http://%s:%d",
            host, self.xds_port, host, self.monitoring_port,
        )  # fmt: skip

    async def _start_webhook(self, secure: SecureServer) -> None:
        port, revision = self.settings.ports.webhook, self.settings.revision
        if port is None:
            return
        injector = StoreInjector(self.store, revision)
        self.webhook = InjectionWebhook(secure.ca, injector, revision)
        await self.webhook.start(self.settings.listen_address, port)
        url = f"https://{_url_host(self.settings.listen_address)}:{self.webhook.port}/inject"
        if self.settings.webhook_config_out:
            config = mutating_webhook_configuration(secure.ca.root_pem, revision, url=url)
            out = Path(self.settings.webhook_config_out).expanduser()
            await asyncio.to_thread(_write_yaml, out, config)
        if revision and not isinstance(self.store, FileStore):
            # a revision's control plane on a live store keeps its webhook configuration
            # (and its tags') there, as istiod patches its caBundle in a cluster; on etcd
            # only the replica holding the revision's webhook lease writes it
            live: WatchedStore = self.store
            etcd = getattr(live, "inner", live)
            if isinstance(etcd, EtcdStore):
                identity = f"{socket.gethostname()}:{os.getpid()} ({url})"
                self._webhook_writer = WebhookWriter(
                    etcd, revision, identity,
                    functools.partial(publish_webhook, live, secure.ca.root_pem, revision, url),
                    ttl=self.settings.lease_ttl,
                )  # fmt: skip
                return
            try:
                await asyncio.to_thread(
                    publish_webhook, self.store, secure.ca.root_pem, revision, url
                )
            except MeshpilotError as exc:  # injection still works for whoever knows the url
                log.error("discovery: webhook configuration not written to the store: %s", exc)

    def _write_record(self, secure: SecureServer) -> Path:
        """Where proxy agents on this machine find this control plane, its root and its
        TLS port (security/control_plane_record.py); returns the CA dir it went into."""
        ca_dir = Path(self.settings.ca_dir).expanduser().absolute()
        record = ControlPlaneRecord(
            pid=os.getpid(),
            listen_address=self.settings.listen_address,
            xds_port=self.xds_port,
            secure_port=secure.port,
            root_cert=str(root_cert_path(ca_dir, record_key(os.getpid(), self.xds_port))),
            xds_uds=self.settings.xds_uds,
            secure_uds=self.settings.secure_uds,
            revision=self.settings.revision,
            monitoring_port=self.monitoring_port,
            webhook_port=self.webhook.port if self.webhook is not None else 0,
        )
        write_record(ca_dir, record, secure.ca.root_pem)
        return ca_dir / record_key(os.getpid(), self.xds_port)

    async def stop(self, grace: float = 1.0) -> None:
        if self._record is not None:
            remove_record(self._record.parent, self._record.name)
            self._record = None
        await self.server.stop(grace)  # (with its tasks, the store's watch among them)
        if self.webhook is not None:
            await self.webhook.stop()
        if self.secure is not None:
            await self.secure.stop(grace)
        await self.http.stop()


async def run_discovery(
    paths: Sequence[str | Path], settings: Settings | None = None, store_dir: str | None = None
) -> None:
    """Serve until SIGTERM or SIGINT, then stop cleanly."""
    # GitOps Applications are not mesh config: discovery never reads them, and a resync
    # pass rewriting every app's status must not cost it a parse per app. A server waiting
    # for writes creates the store if none is there yet.
    store = open_store(store_dir, create=True, skip_kinds=UNREAD_KINDS) if store_dir else None
    revision = settings.revision if settings is not None else ""
    if store is not None and revision:
        store = RevisionView(store, revision)  # Istio's istio.io/rev rule for config
    discovery = Discovery(paths, settings, store)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Before starting: a signal while the servers (and the CA port's Envoy) come up stops
    # them once they are up, instead of ending the process with its children left running.
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await discovery.start()  # (cleans up after itself if it fails)
    except BaseException:
        _remove_handlers(loop)
        raise
    try:
        await stop.wait()
    finally:
        _remove_handlers(loop)
        log.info("discovery: shutting down")
        await discovery.stop()


def _url_host(address: str) -> str:
    if address in ("0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{address}]" if ":" in address else address


def _write_yaml(path: Path, document: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_public(path, yaml.safe_dump(document, sort_keys=False).encode())


def _remove_handlers(loop: asyncio.AbstractEventLoop) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)
