"""Network namespaces and the veth links that put them on the bridge (iproute2).

A pod namespace gets `lo` up, and `eth0`: one end of a veth pair whose other end lives in
the host namespace, attached to the bridge. Deleting the namespace destroys `eth0`, and
with it the host end.

Per-namespace `/etc` files live in `/etc/netns/<name>/` (iproute2's convention: `ip netns
exec` bind-mounts them over `/etc`). Pods get their own `hosts` and `resolv.conf` there:
the host's DNS servers are not reachable from the pod network, and a lookup that waits for
them stalls programs for seconds (Python's http.server resolves its bind address).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

from meshpilot.runtime.commands import run

__all__ = [
    "LinkInfo",
    "PodInterface",
    "add_netns",
    "attach_to_bridge",
    "delete_link",
    "delete_netns",
    "kill_netns_processes",
    "list_links",
    "list_netns",
    "list_netns_etc",
    "netns_pids",
    "write_netns_etc",
]

POD_INTERFACE = "eth0"
NETNS_ETC = Path("/etc/netns")


@dataclass(frozen=True, slots=True)
class PodInterface:
    """How a namespace is wired: host-side veth name, address, bridge and gateway."""

    host_link: str
    address: IPv4Address
    subnet: IPv4Network
    bridge: str
    gateway: IPv4Address


@dataclass(frozen=True, slots=True)
class LinkInfo:
    name: str
    kind: str  # "bridge", "veth", ... ("" when iproute2 does not say)
    master: str  # "" when not enslaved


def list_netns() -> list[str]:
    text = run(["ip", "-j", "netns", "list"]).stdout.strip()
    return [str(entry["name"]) for entry in json.loads(text)] if text else []


def add_netns(name: str) -> None:
    run(["ip", "netns", "add", name])
    run(["ip", "-n", name, "link", "set", "lo", "up"])


def attach_to_bridge(netns: str, wiring: PodInterface) -> None:
    """Create the veth pair straight into the namespace, address it and route via the
    bridge's gateway."""
    peer = ["peer", "name", POD_INTERFACE, "netns", netns]
    run(["ip", "link", "add", wiring.host_link, "type", "veth", *peer])
    run(["ip", "link", "set", wiring.host_link, "master", wiring.bridge, "up"])
    cidr = f"{wiring.address}/{wiring.subnet.prefixlen}"
    run(["ip", "-n", netns, "addr", "add", cidr, "dev", POD_INTERFACE])
    run(["ip", "-n", netns, "link", "set", POD_INTERFACE, "up"])
    run(["ip", "-n", netns, "route", "add", "default", "via", str(wiring.gateway)])


def netns_pids(name: str) -> list[int]:
    result = run(["ip", "netns", "pids", name], check=False)
    return [int(word) for word in result.stdout.split() if word.isdigit()]


def kill_netns_processes(name: str) -> None:
    """SIGKILL whatever still runs inside the namespace (processes we did not start
    directly, or that ignored SIGTERM)."""
    for pid in netns_pids(name):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def delete_netns(name: str) -> None:
    """Kill what runs inside and delete the namespace and its /etc files; an absent one is
    fine."""
    if name in list_netns():
        kill_netns_processes(name)
        run(["ip", "netns", "delete", name])
    shutil.rmtree(NETNS_ETC / name, ignore_errors=True)
    with contextlib.suppress(OSError):
        NETNS_ETC.rmdir()  # only when empty: we may have created it


def write_netns_etc(name: str, files: Mapping[str, str]) -> None:
    """Files `ip netns exec` shows to processes in the namespace in place of /etc/<file>."""
    directory = NETNS_ETC / name
    directory.mkdir(parents=True, exist_ok=True)
    for file_name, text in files.items():
        (directory / file_name).write_text(text)


def list_netns_etc() -> list[str]:
    """Namespaces that have a /etc/netns directory (they may be gone already)."""
    return sorted(p.name for p in NETNS_ETC.iterdir()) if NETNS_ETC.is_dir() else []


def list_links() -> list[LinkInfo]:
    links = json.loads(run(["ip", "-d", "-j", "link", "show"]).stdout or "[]")
    found = []
    for link in links:
        kind = str(link.get("linkinfo", {}).get("info_kind", ""))
        found.append(LinkInfo(str(link["ifname"]), kind, str(link.get("master", ""))))
    return found


def delete_link(name: str) -> None:
    """Delete a host link; an absent one is fine."""
    run(["ip", "link", "del", name], check=False)
