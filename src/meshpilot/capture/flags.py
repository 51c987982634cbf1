"""istio-iptables' flag values (comma-separated strings, `*` wildcards) → `CaptureConfig`.

Lists are split as istio's `config.Split` does: on commas, blanks trimmed, empty items
dropped; order and duplicates are kept, as istio keeps them. Where istio-iptables silently
ignores a bad value (an unparsable CIDR), we refuse it with a message naming the flag: a
capture rule that is quietly missing is a security hole.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import AddressValueError, IPv4Interface, IPv6Interface, NetmaskValueError
from typing import Literal

from meshpilot.capture.rules import (
    ALL,
    CaptureConfig,
    CaptureConfigError,
    InterceptionMode,
)

__all__ = ["CaptureFlags", "config_from_flags", "split"]


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
    )


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


def _cidrs(text: str, flag: str) -> tuple[IPv4Interface, ...] | Literal["*"]:
    if text.strip() == ALL:
        return ALL
    cidrs: list[IPv4Interface] = []
    for item in split(text):
        if "/" not in item:
            raise CaptureConfigError(f"{flag}: {item!r} needs a prefix length (e.g. {item}/32)")
        try:
            cidrs.append(IPv4Interface(item))
        except (AddressValueError, NetmaskValueError, ValueError):
            raise CaptureConfigError(_cidr_problem(item, flag)) from None
    return tuple(cidrs)


def _cidr_problem(item: str, flag: str) -> str:
    try:
        IPv6Interface(item)
    except ValueError:
        return f"{flag}: {item!r} is not a CIDR"
    return f"{flag}: {item!r} is IPv6; only IPv4 capture is supported yet"
