"""One outbound filter chain before it becomes a proto: its match and what it runs.

Mirrors Istio's filterChainOpts so that conflict resolution (merging the chains of several
services on one listener) can compare matches before anything is serialized.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from google.protobuf import struct_pb2

from meshpilot.xds.generate.listeners.filters import cidr_range
from meshpilot.xds.names import config_path

__all__ = [
    "ALL_ISTIO_MTLS_ALPNS",
    "MTLS_HTTP_ALPNS",
    "MTLS_TCP_WITH_MXC_ALPNS",
    "PLAINTEXT_HTTP_ALPNS",
    "RAW_BUFFER",
    "TLS",
    "ChainOpts",
    "config_metadata",
]

# transport_protocol values set by the TLS inspector (or left at Envoy's default).
TLS = "tls"
RAW_BUFFER = "raw_buffer"
# ALPN values the HTTP inspector sets for plaintext HTTP (HTTP/1.0 is not matched: Istio
# only matches it when PILOT_HTTP10 is on, otherwise it passes through as TCP).
PLAINTEXT_HTTP_ALPNS = ("http/1.1", "h2c")
# ALPN values a client sidecar sends over Istio mTLS (Istio's listener.go).
MTLS_HTTP_ALPNS = ("istio-http/1.0", "istio-http/1.1", "istio-h2")
MTLS_TCP_WITH_MXC_ALPNS = ("istio-peer-exchange", "istio")
ALL_ISTIO_MTLS_ALPNS = (
    "istio",
    "istio-peer-exchange",
    "istio-http/1.0",
    "istio-http/1.1",
    "istio-h2",
)


def config_metadata(kind: str, namespace: str, name: str) -> base_pb2.Metadata:
    """`istio.config` provenance, as Istio's BuildConfigInfoMetadata sets on chains."""
    meta = base_pb2.Metadata()
    meta.filter_metadata["istio"].CopyFrom(
        struct_pb2.Struct(
            fields={"config": struct_pb2.Value(string_value=config_path(kind, namespace, name))}
        )
    )
    return meta


@dataclass(frozen=True, slots=True)
class ChainOpts:
    sni_hosts: tuple[str, ...] = ()
    destination_cidrs: tuple[str, ...] = ()
    application_protocols: tuple[str, ...] = ()
    transport_protocol: str = ""
    # An HTTP chain: the HCM reads this route configuration by RDS.
    rds: str | None = None
    # A TCP chain: the network filters, tcp_proxy last.
    network_filters: tuple[lc_pb2.Filter, ...] = ()
    metadata: base_pb2.Metadata | None = field(default=None, compare=False)

    @property
    def is_http(self) -> bool:
        return self.rds is not None

    def is_match_all(self) -> bool:
        return (
            (not self.sni_hosts or "*" in self.sni_hosts)
            and not self.application_protocols
            and not self.transport_protocol
            and not self.destination_cidrs
        )

    def conflicts_with(self, other: ChainOpts) -> bool:
        """Would both chains get the same filter_chain_match (Envoy rejects duplicates)?"""
        return (
            self.transport_protocol == other.transport_protocol
            and self.application_protocols == other.application_protocols
            and _sni_set(self.sni_hosts) == _sni_set(other.sni_hosts)
            and _cidr_set(self.destination_cidrs) == _cidr_set(other.destination_cidrs)
        )

    def to_match(self) -> lc_pb2.FilterChainMatch | None:
        if self.is_match_all():
            return None
        match = lc_pb2.FilterChainMatch(
            application_protocols=self.application_protocols,
            transport_protocol=self.transport_protocol,
        )
        if self.sni_hosts and "*" not in self.sni_hosts:
            match.server_names.extend(sorted(self.sni_hosts))
        for text in sorted(self.destination_cidrs):
            cidr = cidr_range(text)
            if cidr is not None and cidr.address_prefix not in ("0.0.0.0", "::"):
                match.prefix_ranges.append(cidr)
        return match


def _sni_set(hosts: tuple[str, ...]) -> frozenset[str] | None:
    return frozenset(h for h in hosts if h != "*") if hosts else None


def _cidr_set(cidrs: tuple[str, ...]) -> frozenset[str] | None:
    """Masked networks: 1.2.3.4/8 and 1.5.6.7/8 overlap exactly, so they conflict."""
    if not cidrs:
        return None
    out = set()
    for text in cidrs:
        try:
            iface = ipaddress.ip_interface(text.strip())
        except ValueError:
            continue
        if str(iface.ip) not in ("0.0.0.0", "::"):
            out.add(str(iface.network))
    return frozenset(out)
