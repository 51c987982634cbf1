"""The proxy agent: pilot-agent's life cycle around one Envoy.

Start: prepare the working directory (bootstrap `envoy-rev.json`, the SDS socket directory;
without --work-dir a private `meshpilot-proxy-<pod>-*` one in the temporary directory, where
the next agent to start removes those of agents killed with -9: meshpilot/owner.py),
with a CA configured serve the workload certificate over SDS and keep it renewed
(certs/service.py), with DNS capture start the DNS proxy on 15053 (dns_capture.py), start
the status server (15020), start Envoy (as the proxy UID/GID, 1337
unless told otherwise, for a capturing sidecar when the agent is root, so that iptables
capture excludes it) and keep it running. A proxy UID of its own per pod keeps one pod's
SDS socket (a 0700 directory owned by that UID) out of every other pod's reach.
SIGTERM or SIGINT: readiness turns 503, Envoy drains (drain.py), Envoy is stopped, the
status server closes and the agent exits 0. If Envoy keeps dying past its restart budget,
the agent stops and exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from meshpilot.agent.admin import EnvoyAdmin
from meshpilot.agent.bootstrap import build_bootstrap
from meshpilot.agent.bootstrap_file import bootstrap_json
from meshpilot.agent.bootstrap_patches import BootstrapPatch, checked, fetch_patches
from meshpilot.agent.certs.service import CertOptions, WorkloadSecrets
from meshpilot.agent.dns_capture import DnsCapture, running_dns_proxy
from meshpilot.agent.drain import drain_envoy
from meshpilot.agent.envoy_process import EnvoyLaunch, EnvoySupervisor
from meshpilot.agent.health import ReadinessProbe, StatusServer
from meshpilot.agent.merged_metrics import MergedMetrics
from meshpilot.agent.options import AgentOptions, InterceptionMode, sds_socket_path
from meshpilot.agent.wasm_fetch import WasmFetchServer
from meshpilot.envoy.binary import envoy_binary
from meshpilot.errors import EnvoyError, MeshpilotError
from meshpilot.model.proxy import ProxyType
from meshpilot.owner import owned_tempdir, remove_dead_tempdirs
from meshpilot.supervise import TaskSupervisor

__all__ = [
    "BOOTSTRAP_FILE",
    "ProxyAgent",
    "RuntimeOptions",
    "blocking_directory",
    "prepare_work_dir",
]

log = logging.getLogger(__name__)

BOOTSTRAP_FILE = "envoy-rev.json"  # pilot-agent's name, in its config path
WORK_DIR_PREFIX = "meshpilot-proxy-"  # without --work-dir: meshpilot-proxy-<pod>-<random>


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeOptions:
    """How the agent runs Envoy (what does not go into the bootstrap)."""

    work_dir: Path | None = None  # None: a private temporary directory, removed at exit
    # Istio's defaults: proxyLogLevel warning, proxyComponentLogLevel misc:error (Envoy warns
    # once per route carrying the deprecated max_grpc_timeout istiod sets, at every update)
    log_level: str = "warning,misc:error"
    parent_shutdown_time_s: int = 60
    base_id: int | None = None
    use_dynamic_base_id: bool = False
    run_as_proxy_uid: bool | None = None  # None: yes for a capturing sidecar
    max_restarts: int = 5
    restart_backoff: float = 0.5
    envoy_binary: Path | None = None
    status_host: str = "0.0.0.0"
    stop_timeout: float = 5.0  # after the drain, how long Envoy may take to exit
    certs: CertOptions | None = None  # None: no workload certificates (plaintext mesh)
    dns: DnsCapture | None = None  # ISTIO_META_DNS_CAPTURE: the DNS proxy on 15053


def prepare_work_dir(
    options: AgentOptions,
    work_dir: Path,
    owner: tuple[int, int] | None,
    patches: Sequence[BootstrapPatch] = (),
) -> Path:
    """Write the bootstrap (with the EnvoyFilter BOOTSTRAP `patches` Envoy accepts) into
    `work_dir` and return its path. The SDS socket's directory is created so the SDS server
    can bind there; with `owner`, Envoy's UID owns the tree."""
    work_dir.mkdir(parents=True, exist_ok=True)
    sds_dir = sds_socket_path(work_dir).parent
    sds_dir.mkdir(parents=True, exist_ok=True)
    config = work_dir / BOOTSTRAP_FILE
    config.write_text(bootstrap_json(checked(build_bootstrap(options), list(patches))))
    if owner is not None:
        for path in [work_dir, config, *_parents_below(sds_dir, work_dir)]:
            os.chown(path, *owner)
        blocked = blocking_directory(work_dir, *owner)
        if blocked is not None:
            raise MeshpilotError(
                f"Envoy runs as UID {owner[0]} and cannot reach its working directory "
                f"{work_dir}: {blocked} is mode {stat.S_IMODE(blocked.stat().st_mode):o}"
            )
    return config


def blocking_directory(path: Path, uid: int, gid: int) -> Path | None:
    """The first directory on the way to `path` that `uid`/`gid` cannot traverse, if any
    (the agent runs as root; Envoy runs as the proxy UID and must reach its bootstrap)."""
    for directory in [*reversed(path.resolve().parents), path.resolve()]:
        info = directory.stat()
        if info.st_uid == uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid == gid:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return directory
    return None


def _parents_below(path: Path, top: Path) -> list[Path]:
    out = []
    while path != top and top in path.parents:
        out.append(path)
        path = path.parent
    return out


def _temporary_work_dir(pod_name: str) -> Path:
    """A private directory with an owner file; those of agents killed with -9 go first.
    The SDS socket's path below it must fit a Unix socket address (107 bytes): a gateway's
    pod name alone can take 36 of them."""
    remove_dead_tempdirs(WORK_DIR_PREFIX)
    return owned_tempdir(f"{WORK_DIR_PREFIX}{pod_name[:20]}-")


class ProxyAgent:
    def __init__(self, options: AgentOptions, runtime: RuntimeOptions | None = None) -> None:
        self.options = options
        self.runtime = runtime or RuntimeOptions()
        self.admin = EnvoyAdmin(options.ports.envoy_admin)
        # Background tasks (certificate rotation): restarted when they fail, reported on
        # /healthz/ready (503 meanwhile), /debug/tasks and /metrics of the status port.
        self.tasks = TaskSupervisor("agent")
        self.probe = ReadinessProbe(self.admin, self.tasks)
        self.work_dir: Path | None = None  # set by run(): bootstrap, SDS socket directory

    def run_as(self) -> tuple[int, int] | None:
        """(uid, gid) for Envoy. TPROXY: root with the proxy's group, as Istio runs it then
        (transparent listeners need CAP_NET_ADMIN; capture lets the group's traffic out)."""
        if self.options.interception_mode is InterceptionMode.TPROXY and os.geteuid() == 0:
            return 0, self.options.ports.proxy_gid
        wanted = self.runtime.run_as_proxy_uid
        if wanted is None:
            wanted = self.options.captures
        if not wanted:
            return None
        if os.geteuid() == self.options.ports.proxy_uid:
            return None  # already the proxy user: Envoy inherits it
        if os.geteuid() != 0:
            log.warning(
                "not running as root: Envoy runs as the current user, not UID %d",
                self.options.ports.proxy_uid,
            )
            return None
        return self.options.ports.proxy_uid, self.options.ports.proxy_gid

    async def run(self) -> int:
        """Run until SIGTERM/SIGINT (exit status 0) or until Envoy cannot be kept up (1)."""
        owner = self.run_as()
        work_dir = self.runtime.work_dir or _temporary_work_dir(self.options.pod_name)
        self.work_dir = work_dir
        if self.options.secure_xds and self.runtime.certs is None:
            raise MeshpilotError(
                f"xDS over TLS to {self.options.discovery_address} needs the mesh root "
                "certificate (--root-cert)"
            )
        secrets: WorkloadSecrets | None = None
        try:
            patches = await fetch_patches(self.options, build_bootstrap(self.options))
            config = prepare_work_dir(self.options, work_dir, owner, patches)
            if self.runtime.certs is not None:
                secrets = WorkloadSecrets(self.options, self.runtime.certs, work_dir, owner)
                await secrets.start(self.tasks)
            launch = EnvoyLaunch(
                binary=self.runtime.envoy_binary or envoy_binary(),
                config_path=config,
                work_dir=work_dir,
                concurrency=self.options.concurrency,
                drain_time_s=self.options.drain_duration_s,
                parent_shutdown_time_s=self.runtime.parent_shutdown_time_s,
                log_level=self.runtime.log_level,
                base_id=self.runtime.base_id,
                use_dynamic_base_id=self.runtime.use_dynamic_base_id,
                ipv6=all(":" in ip for ip in self.options.ip_addresses),
                run_as=owner,
            )
            async with contextlib.AsyncExitStack() as stack:
                modules = WasmFetchServer(work_dir, owner)  # http(s) WasmPlugin modules
                await modules.start()
                stack.push_async_callback(modules.close)
                if self.runtime.dns is not None:
                    dns = running_dns_proxy(self.options, self.runtime.dns, owner)
                    await stack.enter_async_context(dns)
                return await self._supervise(launch)
        finally:
            if secrets is not None:
                await secrets.stop()
            if self.runtime.work_dir is None:
                shutil.rmtree(work_dir, ignore_errors=True)

    async def _supervise(self, launch: EnvoyLaunch) -> int:
        metrics = MergedMetrics(self.admin, self.tasks, self.options.app_metrics)
        status = StatusServer(
            self.probe, self.options.ports.agent_status, self.runtime.status_host, metrics
        )
        await status.start()
        supervisor = EnvoySupervisor(
            launch,
            max_restarts=self.runtime.max_restarts,
            backoff_initial=self.runtime.restart_backoff,
            on_start=lambda _epoch, _pid: self.probe.reset(),
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        envoy_task = asyncio.create_task(supervisor.run(), name="envoy")
        stop_task = asyncio.create_task(stop.wait(), name="stop")
        try:
            await asyncio.wait({envoy_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
            if envoy_task.done():
                return _envoy_gave_up(envoy_task)
            log.info("termination signal received: draining")
            await self._terminate(supervisor)
            await envoy_task
            return 0
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            stop_task.cancel()
            await supervisor.stop(timeout=self.runtime.stop_timeout)
            envoy_task.cancel()
            await asyncio.gather(envoy_task, stop_task, return_exceptions=True)
            await status.close()

    async def _terminate(self, supervisor: EnvoySupervisor) -> None:
        self.probe.set_draining()
        if supervisor.pid is not None:
            await drain_envoy(
                self.admin,
                inbound_only=self.options.proxy_type is ProxyType.SIDECAR,
                duration=self.options.termination_drain_duration_s,
            )
        await supervisor.stop(self.admin, timeout=self.runtime.stop_timeout)
        log.info("agent terminated")


def _envoy_gave_up(task: asyncio.Task[None]) -> int:
    exc = task.exception()
    if isinstance(exc, EnvoyError | MeshpilotError):
        log.error("%s", exc)
        return 1
    if exc is not None:
        raise exc
    return 1
