"""Istio's traffic capture rules as data: `CaptureConfig` → ordered nat rules → restore text.

The rules, their order and their text follow current istio-iptables
(`tools/istio-iptables/pkg/capture/run.go`, REDIRECT mode, IPv4, no DNS capture), so that
`meshpilot iptables --dry-run` prints what `istio-iptables --dry-run` prints for the same
flags (the `* nat` ... `COMMIT` block of its golden files):

- ISTIO_INBOUND: PREROUTING jumps here for TCP; excluded ports and the HBONE tunnel port
  return, the rest goes to ISTIO_IN_REDIRECT (REDIRECT to the inbound capture port, 15006).
- ISTIO_OUTPUT: OUTPUT jumps here; traffic from 127.0.0.6 (Envoy's inbound passthrough bind
  address) and from the proxy's UID/GID returns, except that the proxy calling its own pod
  over lo goes to ISTIO_IN_REDIRECT; what remains goes to ISTIO_REDIRECT (REDIRECT to the
  outbound capture port, 15001) when its destination is in the captured ranges.

Pure: nothing here runs a command (see `capture.apply`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from ipaddress import IPv4Interface
from typing import Literal

from meshpilot.errors import MeshpilotError

__all__ = [
    "ALL",
    "BUILTIN_CHAINS",
    "ISTIO_CHAIN_PREFIX",
    "ISTIO_INBOUND",
    "ISTIO_IN_REDIRECT",
    "ISTIO_OUTPUT",
    "ISTIO_REDIRECT",
    "NAT",
    "CaptureConfig",
    "CaptureConfigError",
    "CaptureRules",
    "InterceptionMode",
    "Rule",
    "build_rules",
]

NAT = "nat"
ISTIO_INBOUND = "ISTIO_INBOUND"
ISTIO_REDIRECT = "ISTIO_REDIRECT"
ISTIO_IN_REDIRECT = "ISTIO_IN_REDIRECT"
ISTIO_OUTPUT = "ISTIO_OUTPUT"
ISTIO_CHAIN_PREFIX = "ISTIO_"
BUILTIN_CHAINS = frozenset({"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"})

ALL: Literal["*"] = "*"
INBOUND_PASSTHROUGH_SOURCE = "127.0.0.6/32"  # Envoy's bind address toward the app
HOST_LOOPBACK = "127.0.0.1/32"  # istio-iptables' HostIPv4LoopbackCidr default


class CaptureConfigError(MeshpilotError):
    """A capture flag has a value istio-iptables would refuse, or one we do not support."""


class InterceptionMode(StrEnum):
    REDIRECT = "REDIRECT"
    TPROXY = "TPROXY"


Ports = tuple[int, ...]
Cidrs = tuple[IPv4Interface, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureConfig:
    """istio-iptables' configuration; field comments name its flags. Defaults are its own
    (no inbound and no outbound capture until -b and -i say so)."""

    proxy_port: int = 15001  # -p
    inbound_capture_port: int = 15006  # -z
    inbound_tunnel_port: int = 15008  # -e (HBONE; only ever excluded here)
    proxy_uids: tuple[int, ...] = (1337,)  # -u
    proxy_gids: tuple[int, ...] = (1337,)  # -g
    mode: InterceptionMode = InterceptionMode.REDIRECT  # -m
    inbound_ports: Ports | Literal["*"] = ()  # -b
    inbound_ports_exclude: Ports = ()  # -d (only with -b '*')
    outbound_ranges: Cidrs | Literal["*"] = ()  # -i
    outbound_ranges_exclude: Cidrs = ()  # -x
    outbound_ports_include: Ports = ()  # -q
    outbound_ports_exclude: Ports = ()  # -o
    exclude_interfaces: tuple[str, ...] = ()  # -c
    reroute_interfaces: tuple[str, ...] = ()  # -k (kube-virt interfaces)

    def __post_init__(self) -> None:
        if self.mode is InterceptionMode.TPROXY:
            raise CaptureConfigError(
                "-m TPROXY is not supported yet (it needs mangle rules, a route table and "
                "Envoy's original_src); use -m REDIRECT"
            )
        for port in self._all_ports():
            if not 1 <= port <= 65535:
                raise CaptureConfigError(f"port {port} is outside 1-65535")
        for ident in (*self.proxy_uids, *self.proxy_gids):
            if ident < 0:
                raise CaptureConfigError(f"UID/GID {ident} is negative")

    def _all_ports(self) -> tuple[int, ...]:
        listed = () if self.inbound_ports == ALL else self.inbound_ports
        return (
            self.proxy_port,
            self.inbound_capture_port,
            self.inbound_tunnel_port,
            *listed,
            *self.inbound_ports_exclude,
            *self.outbound_ports_include,
            *self.outbound_ports_exclude,
        )


@dataclass(frozen=True, slots=True)
class Rule:
    """One nat-table rule: appended to `chain`, or inserted at `position` when set."""

    chain: str
    params: tuple[str, ...]
    position: int | None = None

    @property
    def target(self) -> str:
        """The chain or target after `-j` (iptables-restore's last two words)."""
        return self.params[-1] if len(self.params) >= 2 and self.params[-2] == "-j" else ""

    def text(self) -> str:
        head = (
            ["-A", self.chain] if self.position is None else ["-I", self.chain, str(self.position)]
        )
        return " ".join([*head, *self.params])


@dataclass(frozen=True, slots=True)
class CaptureRules:
    """The ordered rules for one `CaptureConfig` (nat table only in REDIRECT mode)."""

    rules: tuple[Rule, ...]
    chains: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "chains", _chains(self.rules))

    def restore_text(self) -> str:
        """iptables-restore input, exactly as istio-iptables writes it."""
        lines = ["* nat", *(f"-N {c}" for c in self.chains), *(r.text() for r in self.rules)]
        return "\n".join([*lines, "COMMIT"]) + "\n"

    def undo_text(self) -> str:
        """iptables-restore input that removes these rules (istio's cleanup, in one table):
        delete the rules in built-in chains, then flush and delete our chains."""
        deletes = [
            " ".join(["-D", r.chain, *r.params]) for r in reversed(self.rules) if _builtin(r)
        ]
        flushes = [f"-F {c}" for c in self.chains]
        removals = [f"-X {c}" for c in self.chains]
        return "\n".join(["* nat", *deletes, *flushes, *removals, "COMMIT"]) + "\n"

    def builtin_rules(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if _builtin(r))


def _builtin(rule: Rule) -> bool:
    return rule.chain in BUILTIN_CHAINS


def _chains(rules: tuple[Rule, ...]) -> tuple[str, ...]:
    """Chains to create, in istio's order: chains with rules, then chains only jumped to."""
    seen: dict[str, None] = {}
    for chain in (r.chain for r in rules):
        if chain not in BUILTIN_CHAINS:
            seen.setdefault(chain)
    for target in (r.target for r in rules):
        if target.startswith(ISTIO_CHAIN_PREFIX):
            seen.setdefault(target)
    return tuple(seen)


class _Builder:
    def __init__(self) -> None:
        self.rules: list[Rule] = []

    def append(self, chain: str, *params: str) -> None:
        self.rules.append(Rule(chain, params))

    def insert(self, chain: str, *params: str) -> None:
        self.rules.append(Rule(chain, params, position=1))


def build_rules(config: CaptureConfig) -> CaptureRules:
    """The nat rules istio-iptables installs for `config`, in its order."""
    b = _Builder()
    for nic in config.exclude_interfaces:
        b.append("PREROUTING", "-i", nic, "-j", "RETURN")
        b.append("OUTPUT", "-o", nic, "-j", "RETURN")
    for nic in config.reroute_interfaces:
        b.insert("PREROUTING", "-i", nic, "-j", "RETURN")
    tunnel = str(config.inbound_tunnel_port)
    b.append(ISTIO_INBOUND, "-p", "tcp", "--dport", tunnel, "-j", "RETURN")
    b.append(ISTIO_REDIRECT, "-p", "tcp", "-j", "REDIRECT", "--to-ports", str(config.proxy_port))
    b.append(
        ISTIO_IN_REDIRECT,
        *("-p", "tcp", "-j", "REDIRECT", "--to-ports", str(config.inbound_capture_port)),
    )
    _inbound(b, config)
    b.append("OUTPUT", "-j", ISTIO_OUTPUT)
    for port in config.outbound_ports_exclude:
        b.append(ISTIO_OUTPUT, "-p", "tcp", "--dport", str(port), "-j", "RETURN")
        b.append(ISTIO_OUTPUT, "-p", "udp", "--dport", str(port), "-j", "RETURN")
    b.append(ISTIO_OUTPUT, "-o", "lo", "-s", INBOUND_PASSTHROUGH_SOURCE, "-j", "RETURN")
    _proxy_owner(b, config, "--uid-owner", config.proxy_uids)
    _proxy_owner(b, config, "--gid-owner", config.proxy_gids)
    b.append(ISTIO_OUTPUT, "-d", HOST_LOOPBACK, "-j", "RETURN")
    for cidr in config.outbound_ranges_exclude:
        b.append(ISTIO_OUTPUT, "-d", cidr.with_prefixlen, "-j", "RETURN")
    for port in config.outbound_ports_include:
        b.append(ISTIO_OUTPUT, "-p", "tcp", "--dport", str(port), "-j", ISTIO_REDIRECT)
    _outbound_include(b, config)
    return CaptureRules(tuple(b.rules))


def _inbound(b: _Builder, config: CaptureConfig) -> None:
    if not config.inbound_ports:
        return
    b.append("PREROUTING", "-p", "tcp", "-j", ISTIO_INBOUND)
    if config.inbound_ports == ALL:
        for port in config.inbound_ports_exclude:
            b.append(ISTIO_INBOUND, "-p", "tcp", "--dport", str(port), "-j", "RETURN")
        b.append(ISTIO_INBOUND, "-p", "tcp", "-j", ISTIO_IN_REDIRECT)
        return
    for port in config.inbound_ports:
        b.append(ISTIO_INBOUND, "-p", "tcp", "--dport", str(port), "-j", ISTIO_IN_REDIRECT)


def _proxy_owner(b: _Builder, config: CaptureConfig, match: str, ids: tuple[int, ...]) -> None:
    tunnel = str(config.inbound_tunnel_port)
    loopback_included = config.outbound_ranges != ALL and any(
        cidr.ip.is_loopback for cidr in config.outbound_ranges
    )
    for ident in map(str, ids):
        # The proxy calling its own pod (not 127.0.0.1) over lo: back in through inbound.
        b.append(
            ISTIO_OUTPUT,
            *("-o", "lo", "!", "-d", HOST_LOOPBACK, "-p", "tcp", "!", "--dport", tunnel),
            *("-m", "owner", match, ident, "-j", ISTIO_IN_REDIRECT),
        )
        if not loopback_included:  # the app calling itself over lo stays uncaptured
            b.append(ISTIO_OUTPUT, "-o", "lo", "-m", "owner", "!", match, ident, "-j", "RETURN")
        b.append(ISTIO_OUTPUT, "-m", "owner", match, ident, "-j", "RETURN")


def _outbound_include(b: _Builder, config: CaptureConfig) -> None:
    if config.outbound_ranges == ALL:
        b.append(ISTIO_OUTPUT, "-j", ISTIO_REDIRECT)
        for nic in config.reroute_interfaces:
            b.insert("PREROUTING", "-i", nic, "-j", ISTIO_REDIRECT)
        return
    for cidr in config.outbound_ranges:
        for nic in config.reroute_interfaces:
            b.insert("PREROUTING", "-i", nic, "-d", cidr.with_prefixlen, "-j", ISTIO_REDIRECT)
        b.append(ISTIO_OUTPUT, "-d", cidr.with_prefixlen, "-j", ISTIO_REDIRECT)
