"""The control plane process (`meshpilot discovery`): file store, ADS server, monitoring.

    FileStore (polls the -f paths) ──change events──► DiscoveryServer (ADS on xds port)
    HttpServer (monitoring port): /debug/syncz, configz, registryz, config_dump, /ready, /metrics

SIGTERM and SIGINT stop it cleanly: streams end, both servers stop, `run()` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence
from pathlib import Path

from meshpilot.discovery.debug_api import debug_routes
from meshpilot.discovery.http import HttpServer
from meshpilot.settings import Settings
from meshpilot.store.files import FileStore
from meshpilot.xds.server import DiscoveryServer

__all__ = ["Discovery", "run_discovery"]

log = logging.getLogger(__name__)


class Discovery:
    def __init__(self, paths: Sequence[str | Path], settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.store = FileStore(paths, self.settings.file_poll_interval)
        self.server = DiscoveryServer(self.store, self.settings)
        self.http = HttpServer(debug_routes(self.server, self.store))
        self._watch: asyncio.Task[None] | None = None

    @property
    def xds_port(self) -> int:
        return self.server.port

    @property
    def monitoring_port(self) -> int:
        return self.http.port

    async def start(self) -> None:
        """Read the files (MeshpilotError if they cannot be read at all), then serve."""
        await asyncio.to_thread(self.store.load)
        host = self.settings.listen_address
        await self.server.start(host, self.settings.ports.xds_plaintext)
        try:
            await self.http.start(host, self.settings.ports.monitoring)
        except OSError:
            await self.server.stop(0)
            raise
        self._watch = asyncio.create_task(self.store.watch())
        log.info(
            "discovery: xDS on %s:%d, monitoring on http://%s:%d",
            host, self.xds_port, host, self.monitoring_port,
        )  # fmt: skip

    async def stop(self, grace: float = 1.0) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await self.server.stop(grace)
        await self.http.stop()


async def run_discovery(paths: Sequence[str | Path], settings: Settings | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then stop cleanly."""
    discovery = Discovery(paths, settings)
    await discovery.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        log.info("discovery: shutting down")
        await discovery.stop()
