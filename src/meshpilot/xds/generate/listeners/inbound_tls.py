"""The seam between inbound chains and mutual TLS (PeerAuthentication).

For one inbound port, `chain_variants` answers: which filter_chain_match variants does the
port get, and which of them terminate TLS (with which DownstreamTlsContext)? The tables are
Istio's filterchain_options.go, by listener protocol and mTLS mode.

Today no PeerAuthentication is read: every port is PERMISSIVE (Istio's default) but no TLS
context exists yet, so the TLS-terminating variants are left out and what remains is the
plaintext set (raw_buffer HTTP, raw_buffer TCP, and the app's own TLS passed through as
TCP). The PeerAuthentication builder only has to return contexts (and STRICT/DISABLE modes)
from `mtls_for_port` / `mtls_for_passthrough`: the chains it enables are added, nothing
else changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from meshpilot.xds.generate.listeners.chain_opts import (
    ALL_ISTIO_MTLS_ALPNS,
    MTLS_HTTP_ALPNS,
    MTLS_TCP_WITH_MXC_ALPNS,
    PLAINTEXT_HTTP_ALPNS,
    RAW_BUFFER,
    TLS,
)
from meshpilot.xds.generate.listeners.context import SidecarContext

__all__ = [
    "ChainProtocol",
    "ChainVariant",
    "MatchOption",
    "MtlsMode",
    "MtlsSettings",
    "chain_variants",
    "match_options",
    "mtls_for_passthrough",
    "mtls_for_port",
]


class MtlsMode(StrEnum):
    DISABLE = "DISABLE"
    PERMISSIVE = "PERMISSIVE"
    STRICT = "STRICT"


class ChainProtocol(StrEnum):
    """How a chain handles what it matched: an HCM or a tcp_proxy."""

    HTTP = "HTTP"
    TCP = "TCP"
    AUTO = "AUTO"  # a port's protocol only: sniffed, split into HTTP and TCP variants


@dataclass(frozen=True, slots=True)
class MtlsSettings:
    port: int  # target port; 0 for the passthrough chains
    mode: MtlsMode
    http: tls_pb2.DownstreamTlsContext | None = None  # terminates mTLS on HTTP chains
    tcp: tls_pb2.DownstreamTlsContext | None = None  # terminates mTLS on TCP chains


@dataclass(frozen=True, slots=True)
class MatchOption:
    protocol: ChainProtocol  # HTTP or TCP
    transport_protocol: str
    application_protocols: tuple[str, ...] = ()
    tls: bool = False  # the chain terminates TLS (needs a DownstreamTlsContext)


@dataclass(frozen=True, slots=True)
class ChainVariant:
    option: MatchOption
    tls_context: tls_pb2.DownstreamTlsContext | None


_H, _T = ChainProtocol.HTTP, ChainProtocol.TCP

_OPTIONS: dict[tuple[ChainProtocol, MtlsMode], tuple[MatchOption, ...]] = {
    (ChainProtocol.AUTO, MtlsMode.PERMISSIVE): (
        MatchOption(_H, TLS, MTLS_HTTP_ALPNS, tls=True),  # HTTP from a sidecar over mTLS
        MatchOption(_H, RAW_BUFFER, PLAINTEXT_HTTP_ALPNS),  # plaintext HTTP
        MatchOption(_T, TLS, MTLS_TCP_WITH_MXC_ALPNS, tls=True),  # TCP from a sidecar, mTLS
        MatchOption(_T, RAW_BUFFER),  # plaintext TCP
        MatchOption(_T, TLS),  # the app's own TLS, passed through
    ),
    (ChainProtocol.HTTP, MtlsMode.PERMISSIVE): (
        MatchOption(_H, TLS, ALL_ISTIO_MTLS_ALPNS, tls=True),
        MatchOption(_H, RAW_BUFFER),
    ),
    (ChainProtocol.TCP, MtlsMode.PERMISSIVE): (
        MatchOption(_T, TLS, ALL_ISTIO_MTLS_ALPNS, tls=True),
        MatchOption(_T, TLS),
        MatchOption(_T, RAW_BUFFER),
    ),
    (ChainProtocol.AUTO, MtlsMode.STRICT): (
        MatchOption(_H, TLS, MTLS_HTTP_ALPNS, tls=True),
        MatchOption(_T, TLS, tls=True),
    ),
    (ChainProtocol.HTTP, MtlsMode.STRICT): (MatchOption(_H, TLS, tls=True),),
    (ChainProtocol.TCP, MtlsMode.STRICT): (MatchOption(_T, TLS, tls=True),),
    (ChainProtocol.AUTO, MtlsMode.DISABLE): (
        MatchOption(_H, RAW_BUFFER, PLAINTEXT_HTTP_ALPNS),
        MatchOption(_T, RAW_BUFFER),
    ),
    (ChainProtocol.HTTP, MtlsMode.DISABLE): (MatchOption(_H, RAW_BUFFER),),
    (ChainProtocol.TCP, MtlsMode.DISABLE): (MatchOption(_T, RAW_BUFFER),),
}


def match_options(protocol: ChainProtocol, mode: MtlsMode) -> tuple[MatchOption, ...]:
    return _OPTIONS[(protocol, mode)]


def chain_variants(protocol: ChainProtocol, settings: MtlsSettings) -> list[ChainVariant]:
    """The chains one port gets, in Istio's order. A TLS-terminating option is kept only
    when `settings` carries a context for its protocol."""
    out = []
    for option in match_options(protocol, settings.mode):
        context = None
        if option.tls:
            context = settings.http if option.protocol is ChainProtocol.HTTP else settings.tcp
            if context is None:
                continue
        out.append(ChainVariant(option, context))
    return out


def mtls_for_port(ctx: SidecarContext, target_port: int) -> MtlsSettings:
    """PeerAuthentication for one port of this workload (Istio's authn ForPort). No policy
    is read yet: PERMISSIVE, with no TLS context."""
    del ctx
    return MtlsSettings(port=target_port, mode=MtlsMode.PERMISSIVE)


def mtls_for_passthrough(ctx: SidecarContext) -> list[MtlsSettings]:
    """Settings for the catch-all chains (Istio's ForPassthrough): one for port 0, plus one
    per port-level mTLS exception once PeerAuthentication is read."""
    return [mtls_for_port(ctx, 0)]
