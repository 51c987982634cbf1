"""The front Envoy's process: started without fork handlers, restarted if it dies.

Why not the agent's EnvoySupervisor: it sets PDEATHSIG in a `preexec_fn`, which makes
Python fork() instead of vfork(), and a fork in a process serving gRPC runs gRPC's
post-fork handlers in the child; under load that child aborted (SIGABRT, "epoll_wait
error: Bad file descriptor", grpc/grpc#43055) before it could exec Envoy. Here the child is
made with vfork (no preexec_fn, no fork handlers) and util-linux `setpriv --pdeathsig KILL`
does the PDEATHSIG part, so no Envoy outlives the control plane; without `setpriv` Envoy is
still stopped on every normal exit.

The bootstrap holds the serving key: it is written (0600) before each start and removed as
soon as that Envoy listens, i.e. has read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from meshpilot.agent.envoy_process import EnvoyLaunch, envoy_args
from meshpilot.security.files import write_private

__all__ = ["FrontEnvoy"]

log = logging.getLogger(__name__)

_MAX_RESTARTS = 5
_HEALTHY_RUN_S = 60.0
_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)


class FrontEnvoy:
    def __init__(
        self,
        launch: EnvoyLaunch,
        bootstrap: bytes,
        addresses: Sequence[tuple[str, int] | str],  # (host, port), or a Unix socket's path
    ) -> None:
        self._launch = launch
        self._bootstrap = bootstrap
        self._addresses = tuple(addresses)
        self._proc: asyncio.subprocess.Process | None = None
        self._stopping = False
        self.listening = asyncio.Event()  # set once the first Envoy accepts connections

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    async def run(self) -> None:
        """Keep Envoy running until stop(); OSError once it keeps failing (an Envoy that
        served for a while before exiting starts the count of failures afresh)."""
        failures = 0
        while True:
            proc = await self._spawn()
            started = time.monotonic()
            watch = asyncio.create_task(self._until_listening(proc))
            code = await proc.wait()
            watch.cancel()
            Path(self._launch.config_path).unlink(missing_ok=True)
            if self._stopping:
                return
            if time.monotonic() - started > _HEALTHY_RUN_S:
                failures = 0
            if failures >= _MAX_RESTARTS:
                raise OSError(f"the front Envoy keeps exiting (last status {code})")
            delay = _BACKOFF_S[min(failures, len(_BACKOFF_S) - 1)]
            failures += 1
            log.warning("front Envoy exited (%s); restarting in %.1fs", code, delay)
            await asyncio.sleep(delay)

    async def _until_listening(self, proc: asyncio.subprocess.Process) -> None:
        for address in self._addresses:
            while True:
                if proc.returncode is not None:
                    return
                try:
                    if isinstance(address, str):
                        _, writer = await asyncio.open_unix_connection(address)
                    else:
                        _, writer = await asyncio.open_connection(*address)
                except OSError:
                    await asyncio.sleep(0.02)
                    continue
                writer.close()
                break
        Path(self._launch.config_path).unlink(missing_ok=True)
        self.listening.set()

    async def _spawn(self) -> asyncio.subprocess.Process:
        write_private(Path(self._launch.config_path), self._bootstrap)
        setpriv = shutil.which("setpriv")
        prefix = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
        args = envoy_args(self._launch)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *prefix, *args, cwd=self._launch.work_dir, stdin=asyncio.subprocess.DEVNULL
            )
        except OSError as exc:
            raise OSError(f"cannot start Envoy {args[0]}: {exc.strerror}") from exc
        if self._stopping:  # stop() ran while it was being started
            self._proc.send_signal(signal.SIGTERM)
        return self._proc

    async def stop(self, timeout: float = 5.0) -> None:
        self._stopping = True
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
