"""`CaptureConfig` → `CaptureRules`, in the order current istio-iptables adds its rules.

A rule added "for both" goes to IPv4 and, with dual stack, to IPv6; a "versioned" rule
carries an address that differs per family (the host loopback 127.0.0.1/32 or ::1/128,
Envoy's inbound passthrough source 127.0.0.6/32 or ::6/128).
"""

from __future__ import annotations

from ipaddress import IPv4Interface

from meshpilot.capture.rules import (
    ALL,
    DNS_PROXY_PORT,
    OUTBOUND_MARK,
    CaptureConfig,
    CaptureRules,
    Cidr,
    Family,
    Rule,
    TproxyRoute,
)

__all__ = ["build_rules"]

INBOUND = "ISTIO_INBOUND"
IN_REDIRECT = "ISTIO_IN_REDIRECT"
REDIRECT = "ISTIO_REDIRECT"
OUTPUT = "ISTIO_OUTPUT"
OUTPUT_DNS = "ISTIO_OUTPUT_DNS"
DIVERT = "ISTIO_DIVERT"
TPROXY = "ISTIO_TPROXY"
DROP = "ISTIO_DROP"
PASSTHROUGH = {Family.V4: "127.0.0.6/32", Family.V6: "::6/128"}
V6_LOOPBACK = "::1/128"
MANGLE, NAT, RAW = "mangle", "nat", "raw"


class _Builder:
    def __init__(self, config: CaptureConfig) -> None:
        self.config = config
        self.rules: dict[Family, list[Rule]] = {Family.V4: [], Family.V6: []}
        self.loopback = {Family.V4: config.host_loopback.with_prefixlen, Family.V6: V6_LOOPBACK}

    def families(self) -> tuple[Family, ...]:
        return (Family.V4, Family.V6) if self.config.ipv6 else (Family.V4,)

    def add(
        self, family: Family, table: str, chain: str, *params: str, at: int | None = None
    ) -> None:
        if family in self.families():
            self.rules[family].append(Rule(table, chain, params, at))

    def both(self, table: str, chain: str, *params: str, at: int | None = None) -> None:
        for family in self.families():
            self.add(family, table, chain, *params, at=at)

    def versioned(self, table: str, chain: str, address: dict[Family, str], *params: str) -> None:
        """`params` with "{}" standing for the family's address."""
        for family in self.families():
            filled = tuple(address[family] if p == "{}" else p for p in params)
            self.add(family, table, chain, *filled)


def build_rules(config: CaptureConfig) -> CaptureRules:
    """The rules istio-iptables installs for `config`, in its order."""
    b = _Builder(config)
    for nic in config.exclude_interfaces:
        b.both(NAT, "PREROUTING", "-i", nic, "-j", "RETURN")
        b.both(NAT, "OUTPUT", "-o", nic, "-j", "RETURN")
    if config.tproxy:
        for nic in config.exclude_interfaces:
            b.both(MANGLE, "PREROUTING", "-i", nic, "-j", "RETURN")
            b.both(MANGLE, "OUTPUT", "-o", nic, "-j", "RETURN")
    for nic in config.reroute_interfaces:
        b.both(NAT, "PREROUTING", "-i", nic, "-j", "RETURN", at=1)
    if config.drop_invalid:  # out-of-window packets dropped, not answered with a reset
        b.both(MANGLE, "PREROUTING", "-m", "conntrack", "--ctstate", "INVALID", "-j", DROP)
        b.both(MANGLE, DROP, "-j", "DROP")
    b.both(NAT, INBOUND, "-p", "tcp", "--dport", str(config.inbound_tunnel_port), "-j", "RETURN")
    b.both(NAT, REDIRECT, "-p", "tcp", "-j", "REDIRECT", "--to-ports", str(config.proxy_port))
    b.both(
        NAT,
        IN_REDIRECT,
        "-p",
        "tcp",
        "-j",
        "REDIRECT",
        "--to-ports",
        str(config.inbound_capture_port),
    )
    _inbound(b, config)
    b.both(NAT, "OUTPUT", "-j", OUTPUT)
    for port in config.outbound_ports_exclude:
        b.both(NAT, OUTPUT, "-p", "tcp", "--dport", str(port), "-j", "RETURN")
        b.both(NAT, OUTPUT, "-p", "udp", "--dport", str(port), "-j", "RETURN")
    b.versioned(NAT, OUTPUT, PASSTHROUGH, "-o", "lo", "-s", "{}", "-j", "RETURN")
    for uid in map(str, config.proxy_uids):
        _proxy_owner(b, config, "--uid-owner", uid)
    for gid in map(str, config.proxy_gids):
        _proxy_owner(b, config, "--gid-owner", gid)
    _owner_groups(b, config)
    if config.captures_dns:
        _dns(b, config)
    b.versioned(NAT, OUTPUT, b.loopback, "-d", "{}", "-j", "RETURN")
    for cidr in _of(config.outbound_ranges_exclude, Family.V4):
        b.add(Family.V4, NAT, OUTPUT, "-d", cidr.with_prefixlen, "-j", "RETURN")
    for cidr in _of(config.outbound_ranges_exclude, Family.V6):
        b.add(Family.V6, NAT, OUTPUT, "-d", cidr.with_prefixlen, "-j", "RETURN")
    for port in config.outbound_ports_include:
        b.both(NAT, OUTPUT, "-p", "tcp", "--dport", str(port), "-j", REDIRECT)
    for family in b.families():
        _outbound_include(b, config, family)
    if config.tproxy:
        _tproxy_marks(b, config)
    route = None
    if config.tproxy and config.inbound_ports:
        route = TproxyRoute(config.tproxy_mark, config.tproxy_route_table)
    return CaptureRules(tuple(b.rules[Family.V4]), tuple(b.rules[Family.V6]), route)


def _of(cidrs: tuple[Cidr, ...], family: Family) -> list[Cidr]:
    v4 = family is Family.V4
    return [c for c in cidrs if isinstance(c, IPv4Interface) == v4]


def _inbound(b: _Builder, config: CaptureConfig) -> None:
    if not config.inbound_ports:
        return
    mark = str(config.tproxy_mark)
    table = MANGLE if config.tproxy else NAT
    if config.tproxy:
        b.both(MANGLE, DIVERT, "-j", "MARK", "--set-mark", mark)
        b.both(MANGLE, DIVERT, "-j", "ACCEPT")
        b.versioned(
            MANGLE, TPROXY, b.loopback, "!", "-d", "{}", "-p", "tcp", "-j", "TPROXY",
            *("--tproxy-mark", f"{mark}/0xffffffff", "--on-port", str(config.inbound_capture_port)),
        )  # fmt: skip
    b.both(table, "PREROUTING", "-p", "tcp", "-j", INBOUND)
    established = ("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", DIVERT)
    if config.inbound_ports == ALL:
        for port in config.inbound_ports_exclude:
            b.both(table, INBOUND, "-p", "tcp", "--dport", str(port), "-j", "RETURN")
        if config.tproxy:
            b.both(MANGLE, INBOUND, "-p", "tcp", *established)
            b.both(MANGLE, INBOUND, "-p", "tcp", "-j", TPROXY)
        else:
            b.both(NAT, INBOUND, "-p", "tcp", "-j", IN_REDIRECT)
        return
    for listed in map(str, config.inbound_ports):
        if config.tproxy:
            b.both(MANGLE, INBOUND, "-p", "tcp", "--dport", listed, *established)
            b.both(MANGLE, INBOUND, "-p", "tcp", "--dport", listed, "-j", TPROXY)
        else:
            b.both(NAT, INBOUND, "-p", "tcp", "--dport", listed, "-j", IN_REDIRECT)


def _loopback_included(config: CaptureConfig) -> bool:
    ranges = config.outbound_ranges
    return ranges != ALL and any(cidr.ip.is_loopback for cidr in ranges)


def _proxy_owner(b: _Builder, config: CaptureConfig, match: str, ident: str) -> None:
    tunnel = str(config.inbound_tunnel_port)
    dns = config.captures_dns
    # The proxy calling its own pod (not the host loopback) over lo: back in through inbound.
    # With DNS capture the agent's own TCP queries (port 53) stay out of it (uid rule only).
    if dns and match == "--uid-owner":
        ports: tuple[str, ...] = ("-m", "multiport", "!", "--dports", f"53,{tunnel}")
    else:
        ports = ("!", "--dport", tunnel)
    b.versioned(
        NAT, OUTPUT, b.loopback, "-o", "lo", "!", "-d", "{}", "-p", "tcp", *ports,
        *("-m", "owner", match, ident, "-j", IN_REDIRECT),
    )  # fmt: skip
    if not _loopback_included(config):  # the app calling itself over lo stays uncaptured
        if dns:  # ... except TCP DNS to a server on localhost, which DNS capture wants
            b.both(
                NAT, OUTPUT, "-o", "lo", "-p", "tcp", "!", "--dport", "53",
                *("-m", "owner", "!", match, ident, "-j", "RETURN"),
            )  # fmt: skip
        else:
            b.both(NAT, OUTPUT, "-o", "lo", "-m", "owner", "!", match, ident, "-j", "RETURN")
    b.both(NAT, OUTPUT, "-m", "owner", match, ident, "-j", "RETURN")


def _owner_groups(b: _Builder, config: CaptureConfig) -> None:
    """Only some groups captured: one rule returning traffic of every other group;
    all but some: one return per excluded group."""
    if config.owner_groups_include == ALL:
        for group in config.owner_groups_exclude:
            b.both(NAT, OUTPUT, "-m", "owner", "--gid-owner", group, "-j", "RETURN")
        return
    none_of = [
        w for g in config.owner_groups_include for w in ("-m", "owner", "!", "--gid-owner", g)
    ]
    b.both(NAT, OUTPUT, *none_of, "-j", "RETURN")


def _dns(b: _Builder, config: CaptureConfig) -> None:
    """Port 53 to the agent's DNS proxy; with a server list, only queries to those servers
    (so a local resolver's own upstream queries do not loop back to the agent)."""
    proxy = str(DNS_PROXY_PORT)
    servers = {
        f: [s for s in config.dns_servers if (s.version == 4) == (f is Family.V4)] for f in Family
    }
    prefix = {Family.V4: "/32", Family.V6: "/128"}
    b.both(RAW, "OUTPUT", "-j", OUTPUT_DNS)
    for family in Family:
        if config.capture_all_dns or servers[family]:
            b.add(family, NAT, OUTPUT, "-j", OUTPUT_DNS)
    for proto, to_ports in (("tcp", "--to-ports"), ("udp", "--to-port")):
        if config.capture_all_dns:
            b.both(NAT, OUTPUT_DNS, "-p", proto, "--dport", "53", "-j", "REDIRECT", to_ports, proxy)
            continue
        for family in Family:
            for s in servers[family]:
                b.add(
                    family, NAT, OUTPUT_DNS, "-p", proto, "--dport", "53",
                    *("-d", f"{s}{prefix[family]}", "-j", "REDIRECT", to_ports, proxy),
                )  # fmt: skip
    # Conntrack zones: agent ↔ upstream in zone 1, app ↔ agent in zone 2, so the NATed and
    # the agent's own UDP flows with the same ports never share a conntrack entry.
    owners = [("--uid-owner", str(u)) for u in config.proxy_uids]
    owners += [("--gid-owner", str(g)) for g in config.proxy_gids]
    for match, ident in owners:
        owner = ("-m", "owner", match, ident)
        b.both(RAW, OUTPUT_DNS, "-p", "udp", "--dport", "53", *owner, "-j", "CT", "--zone", "1")
        b.both(RAW, OUTPUT_DNS, "-p", "udp", "--sport", proxy, *owner, "-j", "CT", "--zone", "2")
    if config.capture_all_dns:
        b.both(RAW, "PREROUTING", "-j", INBOUND)
        b.both(RAW, OUTPUT_DNS, "-p", "udp", "--dport", "53", "-j", "CT", "--zone", "2")
        b.both(RAW, INBOUND, "-p", "udp", "--sport", "53", "-j", "CT", "--zone", "1")
        return
    for family in Family:
        if servers[family]:
            b.add(family, RAW, "PREROUTING", "-j", INBOUND)
        for s in servers[family]:
            server = f"{s}{prefix[family]}"
            b.add(
                family, RAW, OUTPUT_DNS, "-p", "udp", "--dport", "53", "-d", server,
                *("-j", "CT", "--zone", "2"),
            )  # fmt: skip
            b.add(
                family, RAW, INBOUND, "-p", "udp", "--sport", "53", "-s", server,
                *("-j", "CT", "--zone", "1"),
            )  # fmt: skip


def _outbound_include(b: _Builder, config: CaptureConfig, family: Family) -> None:
    if config.outbound_ranges == ALL:
        b.add(family, NAT, OUTPUT, "-j", REDIRECT)
        for nic in config.reroute_interfaces:
            b.add(family, NAT, "PREROUTING", "-i", nic, "-j", REDIRECT, at=1)
        return
    for cidr in _of(config.outbound_ranges, family):
        for nic in config.reroute_interfaces:
            b.add(
                family,
                NAT,
                "PREROUTING",
                "-i",
                nic,
                "-d",
                cidr.with_prefixlen,
                "-j",
                REDIRECT,
                at=1,
            )
        b.add(family, NAT, OUTPUT, "-d", cidr.with_prefixlen, "-j", REDIRECT)


def _tproxy_marks(b: _Builder, config: CaptureConfig) -> None:
    """Envoy's replies keep the connection's mark (so they route back over lo); Envoy
    calling its own pod is marked 1338 so inbound capture takes it."""
    mark, outbound = str(config.tproxy_mark), str(OUTBOUND_MARK)
    b.both(
        MANGLE,
        "PREROUTING",
        "-p",
        "tcp",
        "-m",
        "mark",
        "--mark",
        mark,
        "-j",
        "CONNMARK",
        "--save-mark",
    )
    b.both(MANGLE, "OUTPUT", "-p", "tcp", "-o", "lo", "-m", "mark", "--mark", mark, "-j", "RETURN")
    owners = [("--uid-owner", str(u)) for u in config.proxy_uids]
    owners += [("--gid-owner", str(g)) for g in config.proxy_gids]
    for match, ident in owners:
        b.versioned(
            MANGLE, "OUTPUT", b.loopback, "!", "-d", "{}", "-p", "tcp", "-o", "lo",
            *("-m", "owner", match, ident, "-j", "MARK", "--set-mark", outbound),
        )  # fmt: skip
    b.both(
        MANGLE, "OUTPUT", "-p", "tcp", "-m", "connmark", "--mark", mark,
        *("-j", "CONNMARK", "--restore-mark"),
    )  # fmt: skip
    b.both(MANGLE, INBOUND, "-p", "tcp", "-m", "mark", "--mark", mark, "-j", "RETURN", at=1)
    for family in b.families():
        source = PASSTHROUGH[family]
        b.add(family, MANGLE, INBOUND, "-p", "tcp", "-s", source, "-i", "lo", "-j", "RETURN", at=2)
    b.both(
        MANGLE, INBOUND, "-p", "tcp", "-i", "lo", "-m", "mark", "!", "--mark", outbound,
        *("-j", "RETURN"), at=3,
    )  # fmt: skip
