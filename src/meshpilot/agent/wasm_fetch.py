"""The agent fetches the http(s) modules of WasmPlugins for its Envoy, as Istio's agent does.

The control plane serves such a plugin's config with its code as a remote data source whose
cluster is `wasm-fetch` (xds/generate/extensions/wasm_config.py): a bootstrap cluster on
this Unix socket in the agent's working directory, so only Envoy (and whoever can reach the
directory) can ask, never the network. `GET /fetch?url=<module>&sha256=<hex>` downloads the
module (http or https, bounded in size and time), checks its sha256 when one is given, keeps
it for the agent's life and answers it; Envoy checks the checksum again itself. A module that
cannot be had (unreachable, refused, wrong checksum) is answered 502 with the reason, logged
once per URL and reason; Envoy counts the failed load (`wasm.remote_load_fetch_failures`)
and holds the plugin's config without its module: a FAIL_CLOSE plugin then answers every
request 503, a FAIL_OPEN one lets them through.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from meshpilot import http1

__all__ = ["MAX_MODULE", "WASM_SOCKET_PATH", "ModuleFetcher", "WasmFetchServer"]

log = logging.getLogger(__name__)

# Relative to Envoy's working directory (the agent's), as the SDS socket.
WASM_SOCKET_PATH = "./var/run/wasm/socket"
MAX_MODULE = 64 * 1024 * 1024
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class FetchError(Exception):
    pass


class ModuleFetcher:
    def __init__(self, timeout: float = 20.0, max_size: int = MAX_MODULE) -> None:
        self._timeout = timeout
        self._max = max_size
        self._modules: dict[tuple[str, str], bytes] = {}
        self._reported: set[tuple[str, str]] = set()

    async def module(self, url: str, sha256: str) -> bytes:
        """The module at `url`, checked against `sha256` (hex; empty: not checked)."""
        key = (url, sha256.lower())
        found = self._modules.get(key)
        if found is None:
            found = await asyncio.to_thread(self._download, url)
            digest = hashlib.sha256(found).hexdigest()
            if sha256 and digest != sha256.lower():
                raise FetchError(f"sha256 mismatch: the module has {digest}, {sha256} expected")
            self._modules[key] = found
            log.info("fetched Wasm module %s (%d bytes, sha256 %s)", url, len(found), digest)
        return found

    def _download(self, url: str) -> bytes:
        if urlsplit(url).scheme.lower() not in ("http", "https"):
            raise FetchError("only http and https modules are fetched")
        try:
            with _OPENER.open(url, timeout=self._timeout) as reply:
                body: bytes = reply.read(self._max + 1)
        except urllib.error.HTTPError as exc:
            raise FetchError(f"the server answered {exc.code}") from None
        except (OSError, urllib.error.URLError, ValueError) as exc:
            raise FetchError(f"unreachable: {getattr(exc, 'reason', exc)}") from None
        if len(body) > self._max:
            raise FetchError(f"larger than {self._max} bytes")
        return body

    async def answer(self, request: http1.Request) -> http1.Response:
        if request.path != "/fetch" or request.method not in ("GET", "HEAD"):
            return http1.Response.text("not found\n", 404)
        url, sha256 = request.param("url") or "", request.param("sha256") or ""
        try:
            module = await self.module(url, sha256)
        except FetchError as exc:
            if (url, str(exc)) not in self._reported:
                self._reported.add((url, str(exc)))
                log.warning("Wasm module %s not fetched: %s", url, exc)
            return http1.Response.text(f"Wasm module {url} not fetched: {exc}\n", 502)
        return http1.Response(200, module, "application/wasm")


class WasmFetchServer:
    """The fetcher on its Unix socket under `work_dir`, owned by Envoy's user (`owner`) as the
    SDS socket is: private to it and the agent."""

    def __init__(
        self,
        work_dir: Path,
        owner: tuple[int, int] | None = None,
        fetcher: ModuleFetcher | None = None,
    ) -> None:
        self.path = work_dir / WASM_SOCKET_PATH
        self.owner = owner
        self.fetcher = fetcher or ModuleFetcher()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        self.path.unlink(missing_ok=True)
        self._server = await http1.serve(self.fetcher.answer, "", 0, unix_path=str(self.path))
        if self.owner is not None:
            os.chown(directory, *self.owner)
            os.chown(self.path, *self.owner)
        self.path.chmod(0o600)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
