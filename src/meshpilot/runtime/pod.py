"""A pod on one machine: a network namespace on the bridge, its capture rules, its app and
(optionally) its sidecar, each process started inside the namespace by `ip netns exec`.

Processes run as root unless a `RunAs` says otherwise (dropped with `setpriv`); the app must
not run as the proxy's UID, whose traffic capture lets through. `start_sidecar` runs as
UID/GID 1337 by default, as istio-proxy does.

Pods share the host's filesystem and process table, so a UID shared by every pod's proxy
lets one pod's proxy into another's SDS socket, /proc entries and signals. `Pod.proxy_user`
is a user of the pod's own: a proxy run as it (capture letting it through: `-u`/`-g`) is
kept out of every other pod's proxy files by the kernel's ordinary permission checks.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from pathlib import Path
from typing import IO

from meshpilot.capture.apply import IptablesTarget, apply_capture
from meshpilot.capture.build import build_rules
from meshpilot.capture.rules import CaptureConfig
from meshpilot.errors import MeshpilotError
from meshpilot.runtime.commands import in_netns, run
from meshpilot.runtime.netns import (
    PodInterface,
    add_netns,
    attach_to_bridge,
    delete_link,
    write_netns_etc,
)
from meshpilot.runtime.netns import delete_netns as _delete_netns

__all__ = [
    "PROXY_GID",
    "PROXY_USER",
    "Pod",
    "PodError",
    "PodProcess",
    "PodSpec",
    "RunAs",
    "pod_proxy_user",
    "spawn_logged",
]

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def spawn_logged(
    role: str,
    argv: Sequence[str],
    workdir: Path,
    cwd: Path | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> PodProcess:
    """Start a long-running process in its own process group (killed as a whole), output
    appended to `<workdir>/<role>.log`. Raises OSError if it cannot start."""
    log = workdir / f"{role}.log"
    log_file = log.open("ab")
    try:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=preexec_fn,
        )
    except OSError:
        log_file.close()
        raise
    return PodProcess(role, popen, log, log_file)


class PodError(MeshpilotError):
    """A pod spec is invalid, or a pod process did not come up."""


@dataclass(frozen=True, slots=True)
class RunAs:
    uid: int
    gid: int

    def argv(self) -> list[str]:
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--"]


PROXY_USER = RunAs(1337, 1337)
# Every proxy's group, shared: the control plane's Unix sockets are connectable by it.
PROXY_GID = 1337
_FIRST_POD_UID = 65536  # below: system and ordinary accounts, and nobody (65534)


def pod_proxy_user(address: IPv4Address) -> RunAs:
    """The proxy user of the pod at `address`: its UID is the address as a number (pod
    subnets never overlap on a host, so no two live pods share one), its GID `PROXY_GID`.
    An account holding that UID would share what the proxy owns: refused."""
    uid = int(address)
    if uid < _FIRST_POD_UID:
        raise PodError(f"pod address {address} gives no proxy UID of its own (below 0.1.0.0)")
    try:
        account = pwd.getpwuid(uid).pw_name
    except KeyError:
        return RunAs(uid, PROXY_GID)
    raise PodError(f"pod address {address} gives proxy UID {uid}, held by account {account!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PodSpec:
    """What to run: the app's argv (none for a bare namespace), its user and environment,
    the capture rules to install (None: no capture), and an IP (None: the next free one)."""

    name: str
    namespace: str = "default"
    ip: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    app: tuple[str, ...] = ()
    app_user: RunAs | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    capture: CaptureConfig | None = None

    def __post_init__(self) -> None:
        for what, value in (("name", self.name), ("namespace", self.namespace)):
            if len(value) > 63 or not DNS_LABEL.match(value):
                raise PodError(f"pod {what} {value!r} is not a DNS label (a-z, 0-9, '-')")
        if self.ip is not None:
            try:
                IPv4Address(self.ip)
            except ValueError:
                raise PodError(f"pod {self.key}: {self.ip!r} is not an IPv4 address") from None
        if self.capture and self.app_user and self.app_user.uid in self.capture.proxy_uids:
            raise PodError(
                f"pod {self.key}: the app runs as UID {self.app_user.uid}, which capture "
                "lets through; run it as another user"
            )

    @property
    def key(self) -> str:
        """`name.namespace`, as Istio names a pod in a node ID."""
        return f"{self.name}.{self.namespace}"

    @property
    def address(self) -> IPv4Address | None:
        return IPv4Address(self.ip) if self.ip is not None else None


@dataclass(slots=True)
class PodProcess:
    role: str
    popen: subprocess.Popen[bytes]
    log: Path
    log_file: IO[bytes]

    @property
    def running(self) -> bool:
        return self.popen.poll() is None


class Pod:
    """A started or startable pod; `Cluster.add_pod` creates and starts these."""

    def __init__(
        self, spec: PodSpec, *, netns: str, wiring: PodInterface, workdir: Path, grace: float
    ) -> None:
        self.spec = spec
        self.netns = netns
        self.wiring = wiring
        self.workdir = workdir
        self.grace = grace
        self.processes: list[PodProcess] = []

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def ip(self) -> IPv4Address:
        return self.wiring.address

    @property
    def proxy_user(self) -> RunAs:
        """The user this pod's proxy runs as, no other pod's (see `pod_proxy_user`)."""
        return pod_proxy_user(self.ip)

    def start(self) -> None:
        """Namespace, veth, capture rules, then the app; undone if any step fails."""
        try:
            pod_proxy_user(self.ip)  # an address without a proxy user of its own: refused
            self.workdir.mkdir(parents=True, exist_ok=True)
            add_netns(self.netns)
            write_netns_etc(self.netns, self._etc_files())
            attach_to_bridge(self.netns, self.wiring)
            if self.spec.capture is not None:
                apply_capture(build_rules(self.spec.capture), IptablesTarget(self.netns))
            if self.spec.app:
                self.spawn("app", self.spec.app, self.spec.app_user, self.spec.env)
        except BaseException:
            self.stop()
            raise

    def _etc_files(self) -> dict[str, str]:
        hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        hosts += f"{self.ip}\t{self.spec.name}.{self.spec.namespace} {self.spec.name}\n"
        # No DNS server is reachable from the pod network: fail lookups at once.
        resolv = "# meshpilot pod: no DNS server on the pod network\nnameserver 127.0.0.1\n"
        return {"hosts": hosts, "resolv.conf": resolv}

    def start_sidecar(
        self, argv: Sequence[str], run_as: RunAs = PROXY_USER, env: Mapping[str, str] | None = None
    ) -> PodProcess:
        """Start the proxy agent (e.g. `meshpilot proxy sidecar --pod name.ns ...`) inside
        the namespace; its working directory is this pod's workdir, owned by `run_as`.
        The default, Istio's 1337, is shared by every pod: `run_as=self.proxy_user` (with
        capture letting that user through) keeps other pods' proxies out."""
        os.chown(self.workdir, run_as.uid, run_as.gid)
        return self.spawn("sidecar", argv, run_as, env or {}, cwd=self.workdir)

    def command(
        self, argv: Sequence[str], run_as: RunAs | None = None, env: Mapping[str, str] | None = None
    ) -> list[str]:
        """The host argv that runs `argv` inside this pod (as `run_as`, with `env` added)."""
        prefix = run_as.argv() if run_as is not None else []
        assignments = ["env", *(f"{k}={v}" for k, v in sorted(env.items()))] if env else []
        return in_netns(self.netns, [*prefix, *assignments, *argv])

    def spawn(
        self,
        role: str,
        argv: Sequence[str],
        run_as: RunAs | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> PodProcess:
        """Start a long-running process in the pod; output goes to `<workdir>/<role>.log`."""
        try:
            process = spawn_logged(role, self.command(argv, run_as, env), self.workdir, cwd)
        except OSError as exc:
            raise PodError(f"pod {self.key}: cannot start {role}: {exc}") from exc
        self.processes.append(process)
        return process

    def exec(
        self,
        argv: Sequence[str],
        run_as: RunAs | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in the pod to completion; the caller reads its exit code."""
        return run(self.command(argv, run_as, env), check=False, timeout=timeout)

    def wait_listening(self, port: int, timeout: float = 5.0) -> None:
        """Wait until a TCP socket listens on `port` inside the pod (checked with `ss`,
        so capture rules play no part)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if port in self.listening_ports():
                return
            for process in self.processes:
                if not process.running:
                    raise PodError(
                        f"pod {self.key}: {process.role} exited with {process.popen.returncode}"
                        f": {process.log.read_text(errors='replace')[-2000:]}"
                    )
            time.sleep(0.02)
        raise PodError(f"pod {self.key}: nothing listens on port {port} after {timeout:g}s")

    def listening_ports(self) -> set[int]:
        out = run(in_netns(self.netns, ["ss", "-Htln"])).stdout
        return {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if line}

    def stop(self) -> None:
        """Stop the processes (SIGTERM, then SIGKILL after the grace period), then delete
        the namespace, which takes the veth pair with it."""
        for process in reversed(self.processes):
            _terminate(process, self.grace)
        self.processes.clear()
        _delete_netns(self.netns)
        delete_link(self.wiring.host_link)


def _terminate(process: PodProcess, grace: float) -> None:
    try:
        if process.running:
            _signal_group(process.popen.pid, signal.SIGTERM)
            try:
                process.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(process.popen.pid, signal.SIGKILL)
                process.popen.wait(timeout=grace)
    finally:
        process.log_file.close()


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)
