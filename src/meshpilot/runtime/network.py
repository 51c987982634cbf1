"""The pods' network: one Linux bridge in the host namespace, a subnet, IP allocation.

Pods on one bridge talk to each other at layer 2, and to the host through the bridge's
gateway address (where a control plane on the host can listen). Nothing is routed through
the host, so IP forwarding stays off and no NAT rule is added: pods cannot reach beyond
their subnet.

One host firewall change, and only where needed: with `br_netfilter` loaded and
`net.bridge.bridge-nf-call-iptables = 1`, bridged packets cross the host's filter FORWARD
chain, whose policy is often DROP (Docker sets it so). Then we insert one rule,
`-A FORWARD -i <bridge> -o <bridge> -j ACCEPT` tagged with the comment `meshpilot:<bridge>`,
and delete it with the bridge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, ip_network
from pathlib import Path

from meshpilot.errors import MeshpilotError
from meshpilot.runtime.commands import run

__all__ = [
    "DEFAULT_SUBNETS",
    "Bridge",
    "IpPool",
    "NetworkError",
    "choose_subnet",
    "create_bridge",
    "delete_bridge",
    "forward_rule_comment",
    "used_networks",
]

# Kubernetes' usual pod range first, then neighbours; the first that no route overlaps wins.
DEFAULT_SUBNETS: tuple[str, ...] = (
    *(f"10.{n}.0.0/16" for n in range(244, 256)),
    *(f"172.{n}.0.0/16" for n in range(24, 32)),
)
BRIDGE_NF_SYSCTL = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
FORWARD_COMMENT_PREFIX = "meshpilot:"


class NetworkError(MeshpilotError):
    """No free subnet, or no free address left in the pods' subnet."""


@dataclass(frozen=True, slots=True)
class Bridge:
    name: str
    subnet: IPv4Network
    gateway: IPv4Address
    forward_rule: bool = False  # whether we added the FORWARD accept rule


@dataclass(slots=True)
class IpPool:
    """Addresses of one subnet: the first host is the gateway, pods get the next free ones
    after the last one given, wrapping around (host-local IPAM's order): a released address
    is not given again at once, while peers may still hold its old MAC in their ARP cache."""

    subnet: IPv4Network
    used: set[IPv4Address] = field(default_factory=set)
    last: IPv4Address | None = None

    @property
    def gateway(self) -> IPv4Address:
        return next(self.subnet.hosts())

    def allocate(self, wanted: IPv4Address | None = None) -> IPv4Address:
        if wanted is not None:
            if wanted not in self.subnet or wanted == self.gateway:
                raise NetworkError(f"{wanted} is not a pod address of {self.subnet}")
            if wanted in self.used:
                raise NetworkError(f"{wanted} is already taken")
            self.used.add(wanted)
            return wanted
        hosts = [a for a in self.subnet.hosts() if a != self.gateway]
        start = hosts.index(self.last) + 1 if self.last in hosts else 0
        for address in hosts[start:] + hosts[:start]:
            if address not in self.used:
                self.used.add(address)
                self.last = address
                return address
        raise NetworkError(f"no free address left in {self.subnet}")

    def release(self, address: IPv4Address) -> None:
        self.used.discard(address)


def used_networks() -> list[IPv4Network]:
    """Every IPv4 destination in the host's routing tables (addresses included)."""
    routes = json.loads(run(["ip", "-4", "-j", "route", "show", "table", "all"]).stdout or "[]")
    networks = []
    for route in routes:
        dst = str(route.get("dst", ""))
        if dst and dst != "default":
            network = ip_network(dst, strict=False)
            if isinstance(network, IPv4Network):
                networks.append(network)
    return networks


def choose_subnet(candidates: Iterable[str], taken: Iterable[IPv4Network]) -> IPv4Network:
    """The first candidate that overlaps no network in use."""
    taken = list(taken)
    for text in candidates:
        candidate = IPv4Network(text)
        if not any(candidate.overlaps(network) for network in taken):
            return candidate
    raise NetworkError("every candidate pod subnet overlaps a route of this machine")


def create_bridge(name: str, subnet: IPv4Network) -> Bridge:
    """Create the bridge with the gateway address (replacing a stale one of that name)."""
    gateway = next(subnet.hosts())
    run(["ip", "link", "add", name, "type", "bridge"])
    try:
        run(["ip", "addr", "add", f"{gateway}/{subnet.prefixlen}", "dev", name])
        run(["ip", "link", "set", name, "up"])
        forward = _bridge_netfilter_active()
        if forward:
            run(["iptables", "--wait", "-I", "FORWARD", *_forward_rule(name)])
    except MeshpilotError:
        run(["ip", "link", "del", name], check=False)
        raise
    return Bridge(name, subnet, gateway, forward_rule=forward)


def delete_bridge(name: str) -> None:
    """Delete the bridge and our FORWARD rule for it; absent parts are fine."""
    delete_forward_rules(name)
    run(["ip", "link", "del", name], check=False)


def delete_forward_rules(name: str) -> None:
    for _ in range(8):  # every copy, should a crash have left several
        if run(
            ["iptables", "--wait", "-D", "FORWARD", *_forward_rule(name)], check=False
        ).returncode:
            return


def forward_rule_comment(name: str) -> str:
    return FORWARD_COMMENT_PREFIX + name


def _forward_rule(name: str) -> list[str]:
    comment = forward_rule_comment(name)
    return ["-i", name, "-o", name, "-m", "comment", "--comment", comment, "-j", "ACCEPT"]


def _bridge_netfilter_active() -> bool:
    try:
        return BRIDGE_NF_SYSCTL.read_text().strip() == "1"
    except OSError:
        return False
