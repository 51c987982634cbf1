"""The meshpilot commands the demo runs, as argument lists, and the control plane process.

Each command runs with this interpreter (`python -c "from meshpilot.cli... import ..."`),
so the demo works from a checkout without the `meshpilot` script on PATH; `shown()` gives
the same command as a user would type it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshpilot.errors import MeshpilotError

__all__ = [
    "ControlPlane",
    "DemoError",
    "die_with_parent",
    "http_get",
    "meshpilot_argv",
    "shown",
]

_ENTRY = {
    "discovery": "from meshpilot.cli.discovery import discovery as c",
    "proxy": "from meshpilot.cli.proxy import proxy as c",
    "iptables": "from meshpilot.cli.iptables import iptables as c",
}
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class DemoError(MeshpilotError):
    """The demo mesh could not be set up (the message says which part and why)."""


def meshpilot_argv(command: str, *args: str) -> list[str]:
    """`meshpilot <command> <args>` run by this interpreter."""
    code = f"{_ENTRY[command]}; c(prog_name='meshpilot {command}')"
    return [sys.executable, "-c", code, *args]


def shown(argv: Sequence[str]) -> str:
    """A command line for people: `meshpilot ...` in place of `python -c ...`."""
    args = list(argv)
    if len(args) > 2 and args[0] == sys.executable and args[1] == "-c":
        command = next((c for c, entry in _ENTRY.items() if args[2].startswith(entry)), "")
        args = ["meshpilot", command, *args[3:]]
    return shlex.join(args)


def http_get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    """(status, body); status 0 with the error when nothing answers."""
    try:
        with _OPENER.open(url, timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:
        return 0, str(exc)


_PR_SET_PDEATHSIG = 1
PROXY_GID = 1337


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here, never in a forked child


def die_with_parent() -> None:
    """`preexec_fn`: the child gets SIGTERM when the demo dies, even by SIGKILL (a process
    in a session of its own would otherwise outlive it)."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@dataclass
class ControlPlane:
    """`meshpilot discovery` on loopback (debug API and TCP xDS) plus Unix sockets that
    proxies in pod namespaces reach (made connectable by the proxy UID): plaintext xDS,
    and the TLS port with xDS and the CA (istiod's 15012), whose root it writes to
    `root_cert` for the proxies to verify it with."""

    config: Path
    socket: Path
    log: Path
    xds_port: int
    monitoring_port: int
    ca_dir: Path
    root_cert: Path
    secure_socket: Path
    debounce: str = "100ms"
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def argv(self) -> list[str]:
        return meshpilot_argv(
            "discovery", "-f", str(self.config),
            "--listen-address", "127.0.0.1",
            "--xds-port", str(self.xds_port),
            "--monitoring-port", str(self.monitoring_port),
            "--xds-uds", str(self.socket),
            "--ca-dir", str(self.ca_dir),
            "--root-cert-out", str(self.root_cert),
            "--secure-uds", str(self.secure_socket),
            "--debounce", self.debounce,
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.monitoring_port}"

    def start(self, timeout: float = 30.0) -> None:
        with self.log.open("ab") as log:
            # Its own session: a terminal's Ctrl-C reaches the demo, which stops it last.
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + timeout
        sockets = (self.socket, self.secure_socket, self.root_cert)
        while self.get("/ready")[0] != 200 or not all(s.exists() for s in sockets):
            if self.proc.poll() is not None:
                raise DemoError(f"meshpilot discovery exited: {tail(self.log)}")
            if time.monotonic() > deadline:
                raise DemoError(f"meshpilot discovery not ready after {timeout:g}s")
            time.sleep(0.05)
        if os.geteuid() == 0:  # every pod's Envoy runs as a UID of its own in group 1337
            for sock in (self.socket, self.secure_socket):
                os.chown(sock, 0, PROXY_GID)
                sock.chmod(0o660)

    def get(self, path: str) -> tuple[int, str]:
        return http_get(self.url + path)

    def json(self, path: str) -> Any:
        status, body = self.get(path)
        if status != 200:
            raise DemoError(f"GET {self.url}{path}: {status} {body[:300]}")
        return json.loads(body)

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for line in self.get("/metrics")[1].splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[name] = float(value)
        return out

    def nacks(self) -> list[str]:
        """Every NACK the control plane has seen, per proxy and type (empty: none)."""
        found = []
        for entry in self.json("/debug/syncz"):
            for short, watched in entry["types"].items():
                if watched["status"] == "NACKED" or watched["nonce_nacked"]:
                    found.append(f"{entry['proxy']} {short}: {watched['last_error']}")
        return found

    def stop(self, timeout: float = 10.0) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        return proc.wait()
