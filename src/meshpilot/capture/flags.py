"""istio-iptables' flag values (comma-separated strings, `*` wildcards) → `CaptureConfig`.

Lists are split as istio's `config.Split` does: on commas, blanks trimmed, empty items
dropped; order and duplicates are kept, as istio keeps them. Where istio-iptables silently
ignores a bad value (an unparsable CIDR), we refuse it with a message naming the flag: a
capture rule that is quietly missing is a security hole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import IPv4Interface, ip_address, ip_interface
from pathlib import Path
from typing import Literal

from meshpilot.capture.rules import (
    ALL,
    HOST_LOOPBACK,
    CaptureConfig,
    CaptureConfigError,
    Cidr,
    DnsServer,
    InterceptionMode,
)

__all__ = ["CaptureFlags", "config_from_flags", "resolv_conf_servers", "split"]

GROUP = re.compile(r"^(\d+|[A-Za-z_][A-Za-z0-9_.-]*\$?)$")  # a GID or a group name


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureFlags:
    """The raw flag strings, named as istio-iptables' long flags."""

    envoy_port: str = "15001"
    inbound_capture_port: str = "15006"
    inbound_tunnel_port: str = "15008"
    proxy_uid: str = "1337"
    proxy_gid: str = ""  # empty: same as proxy_uid
    istio_inbound_interception_mode: str = ""  # empty: REDIRECT
    istio_inbound_ports: str = ""
    istio_local_exclude_ports: str = ""
    istio_service_cidr: str = ""
    istio_service_exclude_cidr: str = ""
    istio_outbound_ports: str = ""
    istio_local_outbound_ports_exclude: str = ""
    istio_exclude_interfaces: str = ""
    kube_virt_interfaces: str = ""
    istio_inbound_tproxy_mark: str = "1337"
    istio_inbound_tproxy_route_table: str = "133"
    dual_stack: bool = False
    redirect_dns: bool = False
    capture_all_dns: bool = False
    dns_servers: str = ""  # resolv.conf's nameservers, comma-separated
    drop_invalid: bool = False
    outbound_owner_groups: str = "*"  # ISTIO_OUTBOUND_OWNER_GROUPS
    outbound_owner_groups_exclude: str = ""  # ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE
    outbound_ipv4_loopback_cidr: str = str(HOST_LOOPBACK)  # ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR


def split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def config_from_flags(flags: CaptureFlags) -> CaptureConfig:
    """Parse and validate; raises `CaptureConfigError` naming the flag at fault."""
    uids = _ids(flags.proxy_uid, "-u/--proxy-uid")
    gids = _ids(flags.proxy_gid, "-g/--proxy-gid") if flags.proxy_gid.strip() else uids
    exclude = _cidrs(flags.istio_service_exclude_cidr, "-x/--istio-service-exclude-cidr")
    if exclude == ALL:
        raise CaptureConfigError("-x/--istio-service-exclude-cidr: '*' is not allowed")
    return CaptureConfig(
        proxy_port=_port(flags.envoy_port, "-p/--envoy-port"),
        inbound_capture_port=_port(flags.inbound_capture_port, "-z/--inbound-capture-port"),
        inbound_tunnel_port=_port(flags.inbound_tunnel_port, "-e/--inbound-tunnel-port"),
        proxy_uids=uids,
        proxy_gids=gids,
        mode=_mode(flags.istio_inbound_interception_mode),
        inbound_ports=_ports_or_all(flags.istio_inbound_ports, "-b/--istio-inbound-ports"),
        inbound_ports_exclude=_ports(
            flags.istio_local_exclude_ports, "-d/--istio-local-exclude-ports"
        ),
        outbound_ranges=_cidrs(flags.istio_service_cidr, "-i/--istio-service-cidr"),
        outbound_ranges_exclude=exclude,
        outbound_ports_include=_ports(flags.istio_outbound_ports, "-q/--istio-outbound-ports"),
        outbound_ports_exclude=_ports(
            flags.istio_local_outbound_ports_exclude, "-o/--istio-local-outbound-ports-exclude"
        ),
        exclude_interfaces=tuple(split(flags.istio_exclude_interfaces)),
        reroute_interfaces=tuple(split(flags.kube_virt_interfaces)),
        tproxy_mark=_number(flags.istio_inbound_tproxy_mark, "-t/--istio-inbound-tproxy-mark"),
        tproxy_route_table=_number(
            flags.istio_inbound_tproxy_route_table, "-r/--istio-inbound-tproxy-route-table"
        ),
        ipv6=flags.dual_stack,
        redirect_dns=flags.redirect_dns,
        capture_all_dns=flags.capture_all_dns,
        dns_servers=_servers(flags.dns_servers),
        drop_invalid=flags.drop_invalid,
        owner_groups_include=_groups_or_all(
            flags.outbound_owner_groups, "ISTIO_OUTBOUND_OWNER_GROUPS"
        ),
        owner_groups_exclude=_groups(
            flags.outbound_owner_groups_exclude, "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE"
        ),
        host_loopback=_loopback(flags.outbound_ipv4_loopback_cidr),
    )


def resolv_conf_servers(path: Path) -> str:
    """The nameservers of a resolv.conf, comma-separated (istio-iptables reads them to
    capture only DNS sent to them); a missing file has none."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise CaptureConfigError(f"{path}: cannot read: {exc.strerror}") from None
    servers = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            servers.append(words[1].split("%")[0])  # a zone index is not part of the rule
    return ",".join(servers)


def _servers(text: str) -> tuple[DnsServer, ...]:
    try:
        return tuple(ip_address(item) for item in split(text))
    except ValueError as exc:
        raise CaptureConfigError(f"DNS servers: {exc}") from None


def _number(text: str, flag: str) -> int:
    if not text.strip().isdigit():
        raise CaptureConfigError(f"{flag}: {text!r} is not a number")
    return int(text)


def _groups(text: str, name: str) -> tuple[str, ...]:
    groups = tuple(split(text))
    for group in groups:
        if not GROUP.match(group):
            raise CaptureConfigError(f"{name}: {group!r} is neither a GID nor a group name")
    return groups


def _groups_or_all(text: str, name: str) -> tuple[str, ...] | Literal["*"]:
    return ALL if text.strip() == ALL else _groups(text, name)


def _loopback(text: str) -> IPv4Interface:
    flag = "ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR"
    try:
        cidr = IPv4Interface(text.strip())
    except ValueError:
        raise CaptureConfigError(f"{flag}: {text!r} is not an IPv4 CIDR") from None
    if not cidr.ip.is_loopback:
        raise CaptureConfigError(f"{flag}: {text!r} is not in 127.0.0.0/8")
    return cidr


def _mode(text: str) -> InterceptionMode:
    value = text.strip().upper() or InterceptionMode.REDIRECT.value
    try:
        return InterceptionMode(value)
    except ValueError:
        raise CaptureConfigError(
            f"-m/--istio-inbound-interception-mode: {text!r} is neither REDIRECT nor TPROXY"
        ) from None


def _port(text: str, flag: str) -> int:
    try:
        port = int(text.strip())
    except ValueError:
        raise CaptureConfigError(f"{flag}: {text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise CaptureConfigError(f"{flag}: {port} is outside 1-65535")
    return port


def _ports(text: str, flag: str) -> tuple[int, ...]:
    return tuple(_port(item, flag) for item in split(text))


def _ports_or_all(text: str, flag: str) -> tuple[int, ...] | Literal["*"]:
    return ALL if text.strip() == ALL else _ports(text, flag)


def _ids(text: str, flag: str) -> tuple[int, ...]:
    items = split(text)
    if not items:
        raise CaptureConfigError(f"{flag}: needs at least one numeric ID")
    if not all(item.isdigit() for item in items):
        raise CaptureConfigError(f"{flag}: {text!r} is not a list of numeric IDs")
    return tuple(int(item) for item in items)


def _cidrs(text: str, flag: str) -> tuple[Cidr, ...] | Literal["*"]:
    """IPv4 and IPv6 ranges; IPv6 ones only act with --dual-stack, as in istio-iptables."""
    if text.strip() == ALL:
        return ALL
    cidrs: list[Cidr] = []
    for item in split(text):
        if "/" not in item:
            raise CaptureConfigError(f"{flag}: {item!r} needs a prefix length (e.g. {item}/32)")
        try:
            cidrs.append(ip_interface(item))
        except ValueError:
            raise CaptureConfigError(f"{flag}: {item!r} is not a CIDR") from None
    return tuple(cidrs)
