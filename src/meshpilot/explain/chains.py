"""Which listener and filter chain a connection lands on, as Envoy picks them.

Envoy narrows the chains criterion by criterion (destination port, destination IP, server
name, transport protocol, application protocols, source): at each step the chains naming the
connection's value win over those leaving it empty; if none is left, the default chain.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from envoy.config.listener.v3 import listener_components_pb2 as lc
from envoy.config.listener.v3 import listener_pb2

__all__ = ["ChainChoice", "Connection", "find_listener", "match_chain"]


@dataclass(frozen=True, slots=True)
class Connection:
    """What Envoy sees of a connection before any filter: addresses and sniffed protocols."""

    dest_ip: str
    dest_port: int
    sni: str = ""
    transport: str = "raw_buffer"  # or "tls" (the TLS inspector)
    alpn: tuple[str, ...] = ()  # TLS ALPN, or "http/1.1" from the HTTP inspector
    source_ip: str = ""


@dataclass(frozen=True, slots=True)
class ChainChoice:
    chain: lc.FilterChain | None  # None: no chain matched and there is no default
    reasons: tuple[str, ...]
    is_default: bool = False

    @property
    def name(self) -> str:
        return self.chain.name if self.chain is not None else ""


def find_listener(
    listeners: Sequence[listener_pb2.Listener], ip: str, port: int
) -> listener_pb2.Listener | None:
    """The listener bound to ip:port, else to 0.0.0.0:port (Envoy's original-destination
    hand-off from the virtual listener, and a gateway's bound ports)."""
    by_addr = {
        (ln.address.socket_address.address, ln.address.socket_address.port_value): ln
        for ln in listeners
    }
    return by_addr.get((ip, port)) or by_addr.get(("0.0.0.0", port))


def _in_ranges(ip: str, ranges: Sequence[object]) -> bool:
    addr = ipaddress.ip_address(ip) if ip else None
    for cidr in ranges:
        net = ipaddress.ip_network(
            f"{cidr.address_prefix}/{cidr.prefix_len.value}",  # type: ignore[attr-defined]
            strict=False,
        )
        if addr is not None and addr in net:
            return True
    return False


def _sni_matches(names: Sequence[str], sni: str) -> bool:
    return any(n == sni or (n.startswith("*.") and sni.endswith(n[1:])) for n in names)


Criterion = tuple[str, Callable[[lc.FilterChainMatch], bool], Callable[[lc.FilterChainMatch], bool]]


def _criteria(conn: Connection) -> list[Criterion]:
    """(name, the chain names a value, the value is the connection's) in Envoy's order."""
    return [
        (
            f"destination port {conn.dest_port}",
            lambda m: m.HasField("destination_port"),
            lambda m: m.destination_port.value == conn.dest_port,
        ),
        (
            f"destination IP {conn.dest_ip}",
            lambda m: len(m.prefix_ranges) > 0,
            lambda m: _in_ranges(conn.dest_ip, m.prefix_ranges),
        ),
        (
            f"server name (SNI) {conn.sni or '(none)'}",
            lambda m: len(m.server_names) > 0,
            lambda m: bool(conn.sni) and _sni_matches(m.server_names, conn.sni),
        ),
        (
            f"transport {conn.transport}",
            lambda m: bool(m.transport_protocol),
            lambda m: m.transport_protocol == conn.transport,
        ),
        (
            f"application protocol {', '.join(conn.alpn) or '(none)'}",
            lambda m: len(m.application_protocols) > 0,
            lambda m: any(p in m.application_protocols for p in conn.alpn),
        ),
        (
            f"source IP {conn.source_ip or '(unknown)'}",
            lambda m: len(m.source_prefix_ranges) > 0,
            lambda m: _in_ranges(conn.source_ip, m.source_prefix_ranges),
        ),
    ]


def match_chain(listener: listener_pb2.Listener, conn: Connection) -> ChainChoice:
    chains = list(listener.filter_chains)
    reasons: list[str] = []
    for label, names, equals in _criteria(conn):
        specific = [
            c for c in chains if names(c.filter_chain_match) and equals(c.filter_chain_match)
        ]
        if specific:
            reasons.append(f"{label}: matches")
            chains = specific
            continue
        chains = [c for c in chains if not names(c.filter_chain_match)]
        if not chains:
            reasons.append(f"{label}: no chain matches")
            break
    if chains:
        return ChainChoice(chains[0], tuple(reasons))
    if listener.HasField("default_filter_chain"):
        reasons.append("the listener's default chain takes it")
        return ChainChoice(listener.default_filter_chain, tuple(reasons), is_default=True)
    return ChainChoice(None, tuple(reasons))
