"""Running Envoy: its command line, the process, restarts with backoff, and stopping it.

Envoy's flags are pilot-agent's (`pkg/envoy/proxy.go`): `--drain-time-s`, `--drain-strategy
immediate`, `--local-address-ip-version`, `--file-flush-interval-msec 1000`,
`--allow-unknown-static-fields`, Istio's log format, `-l` plus `--component-log-level` split
from one `level,component:level` string, and `--concurrency`. Hot restart is disabled as in
Istio unless a base id is asked for (`--base-id N` or `--use-dynamic-base-id`), which is the
other way for several Envoys to share a host.

Where pilot-agent exits when Envoy dies (and the kubelet restarts the container), this agent
restarts Envoy itself, with exponential backoff and a bounded number of restarts; a run that
lasted `stable_after` seconds resets the count. Envoy runs in its own process group, so a
terminal's Ctrl-C reaches the agent (which drains) rather than Envoy, and it receives SIGKILL
if the agent dies, so no Envoy outlives its agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from meshpilot.agent.admin import EnvoyAdmin
from meshpilot.errors import EnvoyError

__all__ = [
    "ORPHAN_EXIT",
    "EnvoyLaunch",
    "EnvoySupervisor",
    "death_signal_prefix",
    "envoy_args",
    "split_log_level",
]

log = logging.getLogger(__name__)

# Istio's Envoy log format: `2020-04-07T16:52:30.471425Z  info  envoy config  ...message..`
LOG_FORMAT = "%Y-%m-%dT%T.%fZ\t%l\tenvoy %n %g:%#\t%v\tthread=%t"
_PR_SET_PDEATHSIG = 1
# The death signal is armed after the fork: a child whose parent is already gone exits with
# this code instead of becoming an Envoy nobody stops.
ORPHAN_EXIT = 111
# Run by setpriv once the death signal is armed: $0 is the agent's pid.
_ORPHAN_CHECK = f'[ "$PPID" = "$0" ] || exit {ORPHAN_EXIT}; exec "$@"'


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvoyLaunch:
    binary: Path
    config_path: Path
    work_dir: Path
    concurrency: int = 2
    drain_time_s: int = 45
    parent_shutdown_time_s: int = 60
    log_level: str = "warning,misc:error"  # Istio's proxy and component defaults
    base_id: int | None = None
    use_dynamic_base_id: bool = False
    ipv6: bool = False  # all node IPs are IPv6: Envoy's local address version v6
    run_as: tuple[int, int] | None = None  # (uid, gid): the proxy's 1337 when capturing


def split_log_level(level: str) -> tuple[str, list[str]]:
    """`warning,misc:error,upstream:debug` into Envoy's `-l` and `--component-log-level`."""
    main, components = "", []
    for part in filter(None, (p.strip() for p in level.split(","))):
        if ":" in part:
            components.append(part)
        else:
            main = part
    return main, components


def envoy_args(launch: EnvoyLaunch) -> list[str]:
    args = [
        str(launch.binary),
        "-c",
        str(launch.config_path),
        "--drain-time-s",
        str(launch.drain_time_s),
        "--drain-strategy",
        "immediate",
        "--parent-shutdown-time-s",
        str(launch.parent_shutdown_time_s),
        "--local-address-ip-version",
        "v6" if launch.ipv6 else "v4",
        "--file-flush-interval-msec",
        "1000",
        "--allow-unknown-static-fields",
        "--log-format",
        LOG_FORMAT,
    ]
    level, components = split_log_level(launch.log_level)
    if level:
        args += ["-l", level]
    if components:
        args += ["--component-log-level", ",".join(components)]
    if launch.concurrency > 0:
        args += ["--concurrency", str(launch.concurrency)]
    if launch.base_id is not None:
        args += ["--base-id", str(launch.base_id)]
    elif launch.use_dynamic_base_id:
        args += ["--use-dynamic-base-id"]
    else:
        args += ["--disable-hot-restart"]
    return args


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _die_with_parent(agent_pid: int) -> Callable[[], None]:
    """The child's preexec, after the UID change (which clears the setting): SIGKILL on agent
    death, and exit at once if the agent died before it was armed. `_libc()` is loaded in the
    parent before the fork."""

    def arm() -> None:
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != agent_pid:
            os._exit(ORPHAN_EXIT)

    return arm


def death_signal_prefix(agent_pid: int) -> list[str]:
    """The command prefix that arms SIGKILL-on-agent-death before Envoy execs, and refuses to
    exec if the agent is already gone; empty without util-linux setpriv."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return []
    return [setpriv, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", _ORPHAN_CHECK, str(agent_pid)]


class EnvoySupervisor:
    def __init__(
        self,
        launch: EnvoyLaunch,
        *,
        max_restarts: int = 5,
        backoff_initial: float = 0.5,
        backoff_max: float = 10.0,
        stable_after: float = 30.0,
        on_start: Callable[[int, int], None] | None = None,
    ) -> None:
        self.launch = launch
        self.max_restarts = max_restarts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.stable_after = stable_after
        self._on_start = on_start
        self._proc: asyncio.subprocess.Process | None = None
        self._stopping = asyncio.Event()
        self.epoch = -1

    @property
    def pid(self) -> int | None:
        if self._proc is None or self._proc.returncode is not None:
            return None
        return self._proc.pid

    async def run(self) -> None:
        """Run Envoy until `stop()`; raise EnvoyError once restarts are exhausted."""
        loop = asyncio.get_running_loop()
        restarts = 0
        while not self._stopping.is_set():
            started = loop.time()
            proc = await self._spawn()
            code = await proc.wait()
            if self._stopping.is_set():
                return
            if loop.time() - started >= self.stable_after:
                restarts = 0
            restarts += 1
            if restarts > self.max_restarts:
                raise EnvoyError(
                    f"Envoy exited with {_describe(code)}; "
                    f"gave up after {self.max_restarts} restarts"
                )
            delay = min(self.backoff_max, self.backoff_initial * 2 ** (restarts - 1))
            log.warning(
                "Envoy (epoch %d) exited with %s; restarting in %.1fs (%d/%d)",
                self.epoch,
                _describe(code),
                delay,
                restarts,
                self.max_restarts,
            )
            try:
                await asyncio.wait_for(self._stopping.wait(), timeout=delay)
            except TimeoutError:
                continue

    async def _spawn(self) -> asyncio.subprocess.Process:
        _libc()
        args = envoy_args(self.launch)
        # util-linux setpriv sets PDEATHSIG and execs Envoy: no preexec_fn, so no Python
        # fork handlers (gRPC's, the agent serves SDS) run in the child, which could abort
        # before its exec (grpc/grpc#43055, seen once under load); else the preexec_fn.
        prefix = death_signal_prefix(os.getpid())
        credentials: dict[str, object] = {}
        if self.launch.run_as is not None:
            uid, gid = self.launch.run_as
            credentials = {"user": uid, "group": gid, "extra_groups": []}
        self.epoch += 1
        try:
            proc = await asyncio.create_subprocess_exec(
                *prefix,
                *args,
                cwd=self.launch.work_dir,
                process_group=0,
                preexec_fn=None if prefix else _die_with_parent(os.getpid()),
                **credentials,  # type: ignore[arg-type]
            )
        except OSError as exc:
            raise EnvoyError(f"cannot start Envoy {args[0]}: {exc.strerror}") from exc
        self._proc = proc
        if self._stopping.is_set():  # stop() ran while this Envoy was being started
            _signal(proc, signal.SIGTERM)
        log.info("Envoy epoch %d started, pid %d: %s", self.epoch, proc.pid, " ".join(args))
        if self._on_start is not None:
            self._on_start(self.epoch, proc.pid)
        return proc

    async def stop(self, admin: EnvoyAdmin | None = None, timeout: float = 5.0) -> None:
        """Stop Envoy for good: /quitquitquit (else SIGTERM), then SIGKILL after `timeout`."""
        self._stopping.set()
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        asked = False
        if admin is not None:
            try:
                asked = (await admin.post("/quitquitquit")).status == 200
            except EnvoyError:
                asked = False
        if not asked:
            _signal(proc, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout=timeout)
        except TimeoutError:
            log.warning("Envoy pid %d did not exit in %.1fs; killing it", proc.pid, timeout)
            _signal(proc, signal.SIGKILL)
            await proc.wait()
        log.info("Envoy pid %d stopped (%s)", proc.pid, _describe(proc.returncode))


def _signal(proc: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)


def _describe(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"
