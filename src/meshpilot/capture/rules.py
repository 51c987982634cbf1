"""Istio's traffic capture as data: `CaptureConfig` → ordered rules per IP family → restore text.

The rules, their order and their text follow current istio-iptables
(`tools/istio-iptables/pkg/capture/run.go`), so that `meshpilot iptables --dry-run` prints
what `istio-iptables --dry-run` prints for the same flags: the iptables-restore input for
IPv4, then (dual stack) the one for IPv6, each table (filter, mangle, nat, raw, in that
order) as `* <table>`, its new chains, its rules, `COMMIT`.

- nat ISTIO_INBOUND / ISTIO_IN_REDIRECT: inbound TCP to the inbound capture port (15006);
  in TPROXY mode mangle ISTIO_INBOUND / ISTIO_TPROXY / ISTIO_DIVERT mark it instead and a
  policy route (fwmark → table 133 → local via lo) delivers it to Envoy's transparent listener.
- nat ISTIO_OUTPUT / ISTIO_REDIRECT: outbound TCP to 15001, except the proxy's own UIDs/GIDs,
  Envoy's inbound passthrough source (127.0.0.6, ::6) and the host loopback.
- nat+raw ISTIO_OUTPUT_DNS (DNS capture): UDP and TCP port 53 to the agent's DNS proxy on
  15053; the proxy's UIDs/GIDs pass (its upstream queries), conntrack zones keep the two legs
  of a redirected UDP exchange apart.

Pure: nothing here runs a command (see `capture.apply`); `capture.build` builds the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Interface, IPv6Address, IPv6Interface
from typing import Literal

from meshpilot.errors import MeshpilotError

__all__ = [
    "ALL",
    "BUILTIN_CHAINS",
    "DNS_PROXY_PORT",
    "HOST_LOOPBACK",
    "ISTIO_CHAIN_PREFIX",
    "NAT",
    "OUTBOUND_MARK",
    "TABLES",
    "CaptureConfig",
    "CaptureConfigError",
    "CaptureRules",
    "Cidr",
    "Family",
    "InterceptionMode",
    "Rule",
    "TproxyRoute",
]

NAT = "nat"
TABLES = ("filter", "mangle", "nat", "raw")  # istio-iptables writes them in this order
ISTIO_CHAIN_PREFIX = "ISTIO_"
BUILTIN_CHAINS = frozenset({"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"})

ALL: Literal["*"] = "*"
HOST_LOOPBACK = IPv4Interface("127.0.0.1/32")  # ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR's default
DNS_PROXY_PORT = 15053  # the agent's DNS proxy (istio-agent's DNS listener port)
MAX_OWNER_GROUPS = 64  # istio's limit: included groups become one rule with a match each


class CaptureConfigError(MeshpilotError):
    """A capture flag has a value istio-iptables would refuse, or one we do not support."""


class InterceptionMode(StrEnum):
    REDIRECT = "REDIRECT"
    TPROXY = "TPROXY"


class Family(StrEnum):
    V4 = "ipv4"
    V6 = "ipv6"


Ports = tuple[int, ...]
Cidr = IPv4Interface | IPv6Interface
Cidrs = tuple[Cidr, ...]
DnsServer = IPv4Address | IPv6Address


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureConfig:
    """istio-iptables' configuration; field comments name its flags (or environment
    variables). Defaults are its own (no inbound and no outbound capture until -b and -i)."""

    proxy_port: int = 15001  # -p
    inbound_capture_port: int = 15006  # -z
    inbound_tunnel_port: int = 15008  # -e (HBONE; only ever excluded here)
    proxy_uids: tuple[int, ...] = (1337,)  # -u
    proxy_gids: tuple[int, ...] = (1337,)  # -g
    mode: InterceptionMode = InterceptionMode.REDIRECT  # -m
    tproxy_mark: int = 1337  # -t
    tproxy_route_table: int = 133  # -r
    inbound_ports: Ports | Literal["*"] = ()  # -b
    inbound_ports_exclude: Ports = ()  # -d (only with -b '*')
    outbound_ranges: Cidrs | Literal["*"] = ()  # -i
    outbound_ranges_exclude: Cidrs = ()  # -x
    outbound_ports_include: Ports = ()  # -q
    outbound_ports_exclude: Ports = ()  # -o
    exclude_interfaces: tuple[str, ...] = ()  # -c
    reroute_interfaces: tuple[str, ...] = ()  # -k (kube-virt interfaces)
    ipv6: bool = False  # --dual-stack: ip6tables rules beside the IPv4 ones
    redirect_dns: bool = False  # --redirect-dns (ISTIO_META_DNS_CAPTURE)
    capture_all_dns: bool = False  # --capture-all-dns: port 53 to any server, not resolv.conf's
    dns_servers: tuple[DnsServer, ...] = ()  # resolv.conf's nameservers
    drop_invalid: bool = False  # --drop-invalid (INVALID_DROP)
    owner_groups_include: tuple[str, ...] | Literal["*"] = ALL  # ISTIO_OUTBOUND_OWNER_GROUPS
    owner_groups_exclude: tuple[str, ...] = ()  # ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE
    host_loopback: IPv4Interface = HOST_LOOPBACK  # ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR

    def __post_init__(self) -> None:
        for port in self._all_ports():
            if not 1 <= port <= 65535:
                raise CaptureConfigError(f"port {port} is outside 1-65535")
        for ident in (*self.proxy_uids, *self.proxy_gids, self.tproxy_mark):
            if not 0 <= ident <= 0xFFFFFFFF:
                raise CaptureConfigError(f"UID/GID/mark {ident} is not 0-4294967295")
        if not 1 <= self.tproxy_route_table <= 0xFFFFFFFF:
            raise CaptureConfigError(f"route table {self.tproxy_route_table} is not 1-4294967295")
        if self.tproxy_mark == OUTBOUND_MARK:
            raise CaptureConfigError(f"mark {OUTBOUND_MARK} is reserved for Envoy's own calls")
        if not self.host_loopback.ip.is_loopback:
            raise CaptureConfigError(f"{self.host_loopback} is not an IPv4 loopback range")
        if self.owner_groups_include != ALL and len(self.owner_groups_include) > MAX_OWNER_GROUPS:
            raise CaptureConfigError(
                f"at most {MAX_OWNER_GROUPS} owner groups can be captured, got "
                f"{len(self.owner_groups_include)}"
            )

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

    @property
    def tproxy(self) -> bool:
        return self.mode is InterceptionMode.TPROXY

    @property
    def captures_dns(self) -> bool:
        """istio-iptables turns DNS capture off when it has no server to capture."""
        return self.redirect_dns and (self.capture_all_dns or bool(self.dns_servers))


OUTBOUND_MARK = 1338  # TPROXY: Envoy calling its own pod (istio's OutboundMark)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: appended to `table`'s `chain`, or inserted at `position` when set."""

    table: str
    chain: str
    params: tuple[str, ...]
    position: int | None = None

    @property
    def target(self) -> str:
        """The chain or target after `-j` (iptables-restore's last two words)."""
        return self.params[-1] if len(self.params) >= 2 and self.params[-2] == "-j" else ""

    @property
    def builtin(self) -> bool:
        return self.chain in BUILTIN_CHAINS

    def text(self) -> str:
        head = (
            ["-A", self.chain] if self.position is None else ["-I", self.chain, str(self.position)]
        )
        return " ".join([*head, *self.params])


@dataclass(frozen=True, slots=True)
class TproxyRoute:
    """TPROXY's policy routing: packets marked `mark` look up `table`, whose only route
    delivers everything locally over lo (`ip rule add fwmark M lookup T`,
    `ip route add local default dev lo table T`)."""

    mark: int
    table: int


@dataclass(frozen=True, slots=True)
class CaptureRules:
    """The ordered rules for one `CaptureConfig`, per IP family, and what besides iptables
    the capture needs: the policy route (TPROXY) and `::6` on lo (IPv6: Envoy's inbound
    passthrough source, which IPv6's /128 loopback does not provide)."""

    v4: tuple[Rule, ...]
    v6: tuple[Rule, ...] = ()
    route: TproxyRoute | None = None
    families: tuple[Family, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "families", (Family.V4, Family.V6) if self.v6 else (Family.V4,))

    def of(self, family: Family) -> tuple[Rule, ...]:
        return self.v4 if family is Family.V4 else self.v6

    def restore_text(self, family: Family | None = None) -> str:
        """iptables-restore input, exactly as istio-iptables writes it; without `family`,
        IPv4's then IPv6's (what `--dry-run` prints)."""
        if family is None:
            return "".join(self.restore_text(f) for f in self.families)
        blocks: list[str] = []
        for table in TABLES:
            rules = [r for r in self.of(family) if r.table == table]
            if rules:
                chains = [f"-N {c}" for c in _chains(rules)]
                blocks += [f"* {table}", *chains, *(r.text() for r in rules), "COMMIT"]
        return "".join(line + "\n" for line in blocks)

    def undo_text(self, family: Family | None = None) -> str:
        """iptables-restore input that removes these rules (istio's cleanup): per table,
        delete the rules in built-in chains, then flush and delete our chains."""
        if family is None:
            return "".join(self.undo_text(f) for f in self.families)
        blocks: list[str] = []
        for table in TABLES:
            rules = [r for r in self.of(family) if r.table == table]
            if not rules:
                continue
            deletes = [" ".join(["-D", r.chain, *r.params]) for r in reversed(rules) if r.builtin]
            chains = _chains(rules)
            blocks += [f"* {table}", *deletes, *(f"-F {c}" for c in chains)]
            blocks += [*(f"-X {c}" for c in chains), "COMMIT"]
        return "".join(line + "\n" for line in blocks)

    def builtin_rules(self, family: Family = Family.V4) -> tuple[Rule, ...]:
        return tuple(r for r in self.of(family) if r.builtin)


def _chains(rules: list[Rule]) -> tuple[str, ...]:
    """Chains to create in one table, in istio's order: chains with rules, then chains
    only jumped to."""
    seen: dict[str, None] = {}
    for chain in (r.chain for r in rules):
        if chain not in BUILTIN_CHAINS:
            seen.setdefault(chain)
    for target in (r.target for r in rules):
        if target.startswith(ISTIO_CHAIN_PREFIX):
            seen.setdefault(target)
    return tuple(seen)
