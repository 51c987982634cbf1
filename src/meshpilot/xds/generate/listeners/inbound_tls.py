"""The seam between inbound chains and mutual TLS (PeerAuthentication).

For one inbound port, `chain_variants` answers: which filter_chain_match variants does the
port get, and which of them terminate TLS (with which DownstreamTlsContext)? The tables are
Istio's filterchain_options.go, by listener protocol and mTLS mode.

`mtls_for_port` reads the workload's effective PeerAuthentication mode for the port
(model/indexes/authn.py) and, unless it is DISABLE, the contexts that terminate Istio mTLS:
the workload certificate `default` and the root `ROOTCA` from the agent (`sds-grpc`), client
certificates required and checked against the mesh's trust domains (Istio's
BuildInboundTLS). `mtls_for_passthrough` gives the catch-all chains' settings, plus one per
port-level exception on ports no service declares.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from envoy.type.matcher.v3 import string_pb2

from meshpilot.config.istio.peer_authentication import MtlsMode as PolicyMode
from meshpilot.config.mesh import MeshConfig
from meshpilot.model.indexes.authn import peer_authn
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.listeners.chain_opts import (
    ALL_ISTIO_MTLS_ALPNS,
    MTLS_HTTP_ALPNS,
    MTLS_TCP_WITH_MXC_ALPNS,
    PLAINTEXT_HTTP_ALPNS,
    RAW_BUFFER,
    TLS,
)
from meshpilot.xds.generate.listeners.context import SidecarContext
from meshpilot.xds.generate.sds_config import agent_sds
from meshpilot.xds.names import SDS_DEFAULT, SDS_ROOTCA
from meshpilot.xds.protos import boolean

__all__ = [
    "ChainProtocol",
    "ChainVariant",
    "MatchOption",
    "MtlsMode",
    "MtlsSettings",
    "chain_variants",
    "inbound_tls_context",
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
    # DISABLE terminates nothing; whatever is not plaintext HTTP reaches the app as TCP,
    # the app's own TLS included. Envoy never falls back from the exact `raw_buffer` match
    # of the HTTP chain, so plaintext TCP needs a `raw_buffer` chain of its own.
    (ChainProtocol.AUTO, MtlsMode.DISABLE): (
        MatchOption(_H, RAW_BUFFER, PLAINTEXT_HTTP_ALPNS),
        MatchOption(_T, RAW_BUFFER),
        MatchOption(_T, ""),
    ),
    (ChainProtocol.HTTP, MtlsMode.DISABLE): (MatchOption(_H, ""),),
    (ChainProtocol.TCP, MtlsMode.DISABLE): (MatchOption(_T, ""),),
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


# Istio's SupportedCiphers for sidecar servers (strong AEAD suites only, for TLS 1.2).
SUPPORTED_CIPHERS = (
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-GCM-SHA256",
)
# The server's own ALPN: HTTP chains negotiate the app protocol; TCP chains also accept the
# metadata-exchange protocol (Istio's ALPNHttp and ALPNDownstreamWithMxc). "istio" is only
# matched in filter_chain_match, never offered, so that it cannot displace h2.
ALPN_HTTP = ("h2", "http/1.1")
ALPN_DOWNSTREAM_WITH_MXC = ("istio-peer-exchange", "h2", "http/1.1")
_CONTEXTS = "listeners.inbound_tls_contexts"


def _trust_domains(mesh: MeshConfig) -> list[str]:
    """Istio's TrustDomainsForValidation: the mesh's trust domain and its aliases, once each."""
    return list(dict.fromkeys([mesh.trust_domain, *mesh.trust_domain_aliases]))


def inbound_tls_context(mesh: MeshConfig, tcp: bool) -> tls_pb2.DownstreamTlsContext:
    """Istio mTLS termination on a sidecar's inbound chain (BuildInboundTLS)."""
    common = tls_pb2.CommonTlsContext(
        alpn_protocols=ALPN_DOWNSTREAM_WITH_MXC if tcp else ALPN_HTTP,
        tls_params=common_pb2.TlsParameters(
            tls_minimum_protocol_version=common_pb2.TlsParameters.TLSv1_2,
            tls_maximum_protocol_version=common_pb2.TlsParameters.TLSv1_3,
            cipher_suites=SUPPORTED_CIPHERS,
        ),
        tls_certificate_sds_secret_configs=[agent_sds(SDS_DEFAULT)],
    )
    combined = common.combined_validation_context
    # Any workload of the mesh's trust domains; authorization narrows it down later.
    combined.default_validation_context.match_typed_subject_alt_names.extend(
        common_pb2.SubjectAltNameMatcher(
            san_type=common_pb2.SubjectAltNameMatcher.URI,
            matcher=string_pb2.StringMatcher(prefix=f"spiffe://{domain}/"),
        )
        for domain in _trust_domains(mesh)
    )
    combined.validation_context_sds_secret_config.CopyFrom(agent_sds(SDS_ROOTCA))
    return tls_pb2.DownstreamTlsContext(
        common_tls_context=common, require_client_certificate=boolean(True)
    )


def _contexts(push: PushContext) -> tuple[tls_pb2.DownstreamTlsContext, ...]:
    """(HTTP, TCP) contexts; the same for every port and proxy of a push."""
    found = push.memo.get(_CONTEXTS)
    if found is None:
        found = push.memo[_CONTEXTS] = (
            inbound_tls_context(push.mesh, tcp=False),
            inbound_tls_context(push.mesh, tcp=True),
        )
    assert isinstance(found, tuple)
    return found


def settings_for_mode(push: PushContext, port: int, mode: PolicyMode) -> MtlsSettings:
    if mode is PolicyMode.DISABLE:
        return MtlsSettings(port=port, mode=MtlsMode.DISABLE)
    http, tcp = _contexts(push)
    chain_mode = MtlsMode.STRICT if mode is PolicyMode.STRICT else MtlsMode.PERMISSIVE
    return MtlsSettings(port=port, mode=chain_mode, http=http, tcp=tcp)


def mtls_for_port(ctx: SidecarContext, target_port: int) -> MtlsSettings:
    """PeerAuthentication for one port of this workload (Istio's authn ForPort)."""
    effective = peer_authn(ctx.push).for_workload(ctx.proxy.namespace, ctx.proxy.labels)
    return settings_for_mode(ctx.push, target_port, effective.for_port(target_port))


def mtls_for_passthrough(
    ctx: SidecarContext, served_ports: frozenset[int] = frozenset()
) -> list[MtlsSettings]:
    """Settings for the catch-all chains (Istio's ForPassthrough): one for port 0, plus one
    per port-level exception on a port no service declares (a served port's own chains
    already apply its mode; a second chain with the same match would be refused)."""
    effective = peer_authn(ctx.push).for_workload(ctx.proxy.namespace, ctx.proxy.labels)
    out = [settings_for_mode(ctx.push, 0, effective.mode)]
    for port in sorted(effective.per_port):
        if port not in served_ports:
            out.append(settings_for_mode(ctx.push, port, effective.per_port[port]))
    return out
