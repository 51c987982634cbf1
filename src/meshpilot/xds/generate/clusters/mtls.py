"""Istio mutual TLS on outbound clusters: the ISTIO_MUTUAL context and automatic mTLS.

Istio's buildAutoMtlsSettings and applyUpstreamTLSSettings:

| DestinationRule tls | destination (PeerAuthentication)   | cluster gets                      |
|---------------------|------------------------------------|-----------------------------------|
| ISTIO_MUTUAL        | any                                | the ISTIO_MUTUAL socket, always   |
| DISABLE             | any                                | no TLS                            |
| SIMPLE / MUTUAL     | any                                | the DR's own context (tls.py)     |
| none                | PERMISSIVE / STRICT, auto-mTLS on  | socket matches: `tlsMode-istio`   |
|                     |                                    | for endpoints labelled tlsMode=   |
|                     |                                    | istio, else `tlsMode-disabled`    |
| none                | DISABLE, external, passthrough, or | no TLS                            |
|                     | auto-mTLS off                      |                                   |

The destination's mode is the namespace's (else the mesh's) PeerAuthentication, as Istio
infers it for a whole service; workload-level DISABLE is applied per endpoint (EDS drops
their tlsMode metadata, see endpoints.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.extensions.transport_sockets.raw_buffer.v3 import raw_buffer_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from envoy.type.matcher.v3 import string_pb2

from meshpilot.config.istio.destination_rule import ClientTLSSettings, TrafficPolicy
from meshpilot.config.istio.peer_authentication import MtlsMode
from meshpilot.config.mesh import MeshConfig
from meshpilot.model.indexes.authn import peer_authn
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Resolution, Service
from meshpilot.xds.generate.clusters.encoded import match_entries, socket_matches_field
from meshpilot.xds.generate.sds_config import agent_sds
from meshpilot.xds.names import SDS_DEFAULT, SDS_ROOTCA
from meshpilot.xds.protos import Filters
from meshpilot.xds.wire import field_number, length_delimited, tag, varint

__all__ = [
    "ALPN_IN_MESH_H2_WITH_MXC",
    "ALPN_IN_MESH_WITH_MXC",
    "MUTUAL_SDS_NAMES",
    "auto_mtls_context",
    "auto_mtls_matches",
    "auto_mtls_matches_field",
    "istio_mutual_context",
    "istio_mutual_socket",
    "mutual_context_bytes",
    "push_trust_domains",
    "service_mtls_mode",
    "uses_auto_mtls",
]

# What a client sidecar offers over Istio mTLS (Istio's ALPNInMeshWithMxc and
# ALPNInMeshH2WithMxc): the metadata-exchange protocol, "istio", and h2 for HTTP/2 clusters.
ALPN_IN_MESH_WITH_MXC = ("istio-peer-exchange", "istio")
ALPN_IN_MESH_H2_WITH_MXC = ("istio-peer-exchange", "istio", "h2")
TLS_MODE_KEY = "tlsMode"
ISTIO_TLS_MODE = "istio"
_MATCH_ISTIO = "tlsMode-istio"
_MATCH_DISABLED = "tlsMode-disabled"
_TEMPLATES = "clusters.istio_mutual"
_VALIDATIONS = "clusters.istio_mutual.validation"
_TRUST_DOMAINS = "clusters.trust_domains"
# The secrets an ISTIO_MUTUAL context refers to (istio_mutual_context).
MUTUAL_SDS_NAMES = frozenset((SDS_DEFAULT, SDS_ROOTCA))


def _san_matcher(name: str) -> common_pb2.SubjectAltNameMatcher:
    uri = name.startswith("spiffe://")
    return common_pb2.SubjectAltNameMatcher(
        san_type=common_pb2.SubjectAltNameMatcher.URI
        if uri
        else common_pb2.SubjectAltNameMatcher.DNS,
        matcher=string_pb2.StringMatcher(exact=name),
    )


def expand_trust_domains(sans: Sequence[str], mesh: MeshConfig) -> list[str]:
    """Istio's ExpandWithTrustDomains: a SPIFFE identity is also accepted under every
    trust domain alias."""
    out = list(dict.fromkeys(sans))
    if not mesh.trust_domain_aliases:
        return out  # the usual mesh: nothing to add
    for san in sans:
        prefix = f"spiffe://{mesh.trust_domain}/"
        if san.startswith(prefix):
            rest = san[len(prefix) :]
            out.extend(f"spiffe://{alias}/{rest}" for alias in mesh.trust_domain_aliases)
    return list(dict.fromkeys(out))


def push_trust_domains(push: PushContext, sans: Sequence[str]) -> tuple[str, ...]:
    """expand_trust_domains under the push's mesh config, once per identity set."""
    memo = push.memo.setdefault(_TRUST_DOMAINS, {})
    assert isinstance(memo, dict)
    key = tuple(sans)
    found: tuple[str, ...] | None = memo.get(key)
    if found is None:
        found = memo[key] = tuple(expand_trust_domains(key, push.mesh))
    return found


def istio_mutual_context(sni: str, sans: Sequence[str], http2: bool) -> tls_pb2.UpstreamTlsContext:
    """The workload certificate `default`, the mesh root `ROOTCA`, the destination's SPIFFE
    identities, Istio's SNI and ALPN, TLS 1.2 to 1.3."""
    ctx = tls_pb2.UpstreamTlsContext()
    ctx.CopyFrom(_MUTUAL_BASE)  # the parts every such context shares
    ctx.sni = sni
    common = ctx.common_tls_context
    common.combined_validation_context.default_validation_context.match_typed_subject_alt_names.extend(
        _san_matcher(n) for n in sans
    )
    common.alpn_protocols.extend(ALPN_IN_MESH_H2_WITH_MXC if http2 else ALPN_IN_MESH_WITH_MXC)
    return ctx


def _mutual_base() -> tls_pb2.UpstreamTlsContext:
    ctx = tls_pb2.UpstreamTlsContext()
    common = ctx.common_tls_context
    common.tls_params.tls_minimum_protocol_version = common_pb2.TlsParameters.TLSv1_2
    common.tls_params.tls_maximum_protocol_version = common_pb2.TlsParameters.TLSv1_3
    common.tls_certificate_sds_secret_configs.append(agent_sds(SDS_DEFAULT))
    combined = common.combined_validation_context
    combined.default_validation_context.SetInParent()
    combined.validation_context_sds_secret_config.CopyFrom(agent_sds(SDS_ROOTCA))
    return ctx


_MUTUAL_BASE = _mutual_base()


def _common_head(http2: bool) -> bytes:
    """The common context's fields before its validation context (numbers 1 to 7)."""
    common = tls_pb2.CommonTlsContext()
    common.CopyFrom(_MUTUAL_BASE.common_tls_context)
    common.ClearField("combined_validation_context")
    common.alpn_protocols.extend(ALPN_IN_MESH_H2_WITH_MXC if http2 else ALPN_IN_MESH_WITH_MXC)
    head: bytes = common.SerializeToString()
    return head


_COMMON_HEAD = {flag: _common_head(flag) for flag in (False, True)}
_CTX = tls_pb2.UpstreamTlsContext.DESCRIPTOR
_COMMON = field_number(_CTX, "common_tls_context")
_COMBINED = field_number(tls_pb2.CommonTlsContext.DESCRIPTOR, "combined_validation_context")
_COMBINED_DESC = tls_pb2.CommonTlsContext.CombinedCertificateValidationContext.DESCRIPTOR
_DEFAULT_VALIDATION = field_number(_COMBINED_DESC, "default_validation_context")
_ROOTCA_PART = tls_pb2.CommonTlsContext.CombinedCertificateValidationContext(
    validation_context_sds_secret_config=agent_sds(SDS_ROOTCA)
).SerializeToString()
_SANS = field_number(
    common_pb2.CertificateValidationContext.DESCRIPTOR, "match_typed_subject_alt_names"
)
_SAN = common_pb2.SubjectAltNameMatcher
_SAN_URI = _SAN(san_type=_SAN.URI).SerializeToString()
_SAN_DNS = _SAN(san_type=_SAN.DNS).SerializeToString()
_SANS_MATCHER = field_number(common_pb2.SubjectAltNameMatcher.DESCRIPTOR, "matcher")
_EXACT = field_number(string_pb2.StringMatcher.DESCRIPTOR, "exact")


def istio_mutual_socket(
    push: PushContext, sni: str, sans: Sequence[str], http2: bool
) -> base_pb2.TransportSocket:
    """The ISTIO_MUTUAL transport socket."""
    socket = base_pb2.TransportSocket(name=Filters.TLS_TRANSPORT)
    socket.typed_config.type_url = _UPSTREAM_TLS_URL
    socket.typed_config.value = _context_bytes(push, sans, http2) + _sni_bytes(sni)
    return socket


def _context_bytes(push: PushContext, sans: Sequence[str], http2: bool) -> bytes:
    """The serialized context without SNI, built once per push for each (identities,
    HTTP/2): SNI (field 2) is the last field set, so appending it gives the same bytes as
    serializing the full message. The validation part, which depends on the identities
    alone, is shared by both HTTP/2 variants."""
    by_alpn = push.memo.get(_TEMPLATES)
    if by_alpn is None:  # by HTTP/2, then identities: no key tuple per lookup
        by_alpn = push.memo[_TEMPLATES] = ({}, {})
    assert isinstance(by_alpn, tuple)
    templates: dict[tuple[str, ...], bytes] = by_alpn[http2]
    identities = tuple(sans)
    found = templates.get(identities)
    if found is None:
        validations = push.memo.setdefault(_VALIDATIONS, {})
        assert isinstance(validations, dict)
        combined = validations.get(identities)
        if combined is None:
            combined = validations[identities] = _combined_field(identities)
        found = templates[identities] = _with_common_head(combined, http2)
    return found


def mutual_context_bytes(sans: Sequence[str], http2: bool) -> bytes:
    """`istio_mutual_context("", sans, http2).SerializeToString()`, concatenated from
    serialized parts in field-number order (the same bytes; a test holds them equal): one
    per destination identity, so thousands per push."""
    return _with_common_head(_combined_field(sans), http2)


def _combined_field(sans: Sequence[str]) -> bytes:
    """CommonTlsContext.combined_validation_context: the identities, then ROOTCA."""
    matchers = b"".join(
        [
            length_delimited(
                _SANS,
                (_SAN_URI if n.startswith("spiffe://") else _SAN_DNS)
                + length_delimited(_SANS_MATCHER, length_delimited(_EXACT, n.encode())),
            )
            for n in sans
        ]
    )
    # default_validation_context is always present (SetInParent), so framed even when empty.
    combined = length_delimited(_DEFAULT_VALIDATION, matchers) + _ROOTCA_PART
    return length_delimited(_COMBINED, combined)


def _with_common_head(combined: bytes, http2: bool) -> bytes:
    """UpstreamTlsContext.common_tls_context: the fields before the validation part (ALPN
    by HTTP/2), then it."""
    return length_delimited(_COMMON, _COMMON_HEAD[http2] + combined)


def _sni_bytes(sni: str) -> bytes:
    if not sni:
        return b""
    encoded = sni.encode()
    if len(encoded) < 0x80:  # SNI names are short: no generic call per cluster
        return _SNI_TAG + _ONE_BYTE[len(encoded)] + encoded
    return length_delimited(_SNI_FIELD, encoded)


_UPSTREAM_TLS_URL = "type.googleapis.com/" + tls_pb2.UpstreamTlsContext.DESCRIPTOR.full_name
_SNI_FIELD = field_number(tls_pb2.UpstreamTlsContext.DESCRIPTOR, "sni")
_SNI_TAG = tag(_SNI_FIELD)
_ONE_BYTE = tuple(varint(n) for n in range(0x80))


def _matches_template() -> cluster_pb2.Cluster:
    """Both socket matches, the mTLS one with an empty context to fill in per cluster."""
    holder = cluster_pb2.Cluster()
    istio = holder.transport_socket_matches.add(name=_MATCH_ISTIO)
    istio.match.fields[TLS_MODE_KEY].string_value = ISTIO_TLS_MODE
    istio.transport_socket.name = Filters.TLS_TRANSPORT
    istio.transport_socket.typed_config.type_url = _UPSTREAM_TLS_URL
    disabled = holder.transport_socket_matches.add(name=_MATCH_DISABLED)
    disabled.match.SetInParent()
    disabled.transport_socket.name = Filters.RAW_BUFFER
    disabled.transport_socket.typed_config.Pack(raw_buffer_pb2.RawBuffer())
    return holder


_MATCHES = _matches_template()


_FIRST_MATCH = _MATCHES.transport_socket_matches[0].SerializeToString()
_OTHER_MATCHES = match_entries(m.SerializeToString() for m in _MATCHES.transport_socket_matches[1:])


def auto_mtls_matches_field(push: PushContext, sni: str, sans: Sequence[str], http2: bool) -> bytes:
    """mTLS to endpoints whose metadata says `tlsMode: istio`, plaintext to the rest: the two
    `transport_socket_matches` of a cluster, serialized, the mTLS context from cached bytes."""
    return auto_mtls_matches(auto_mtls_context(push, sans, http2), sni)


def auto_mtls_context(push: PushContext, sans: Sequence[str], http2: bool) -> bytes:
    """The serialized mTLS context of `auto_mtls_matches_field`, without SNI (once per push
    for each identity set; a service's clusters may keep it to skip the lookup)."""
    return _context_bytes(push, sans, http2)


def auto_mtls_matches(context: bytes, sni: str) -> bytes:
    """`auto_mtls_matches_field` from the `auto_mtls_context` bytes (once per cluster)."""
    sni_field = _sni_bytes(sni)
    return _matches_head(len(context) + len(sni_field)) + context + sni_field + _OTHER_MATCHES


@lru_cache(maxsize=1024)
def _matches_head(n: int) -> bytes:
    """The first socket match up to its mTLS context of `n` bytes: its four nested headers
    depend on `n` alone (socket_matches_field works them out)."""
    field = socket_matches_field(_FIRST_MATCH, b"\0" * n, b"")
    return field[: len(field) - n]


def service_mtls_mode(
    push: PushContext, svc: Service, policy: TrafficPolicy | None
) -> MtlsMode | None:
    """What a client may assume the service's workloads accept (Istio's
    BestEffortInferServiceMTLSMode); None when unknown (external or passthrough)."""
    if svc.mesh_external or svc.resolution is Resolution.PASSTHROUGH:
        return None
    lb = policy.load_balancer if policy else None
    if lb is not None and lb.simple == "PASSTHROUGH":
        return None
    return peer_authn(push).service_mode(svc.namespace)


def uses_auto_mtls(
    push: PushContext,
    svc: Service,
    policy: TrafficPolicy | None,
    tls: ClientTLSSettings | None,
) -> bool:
    """No DestinationRule TLS, auto-mTLS on, and a destination that may accept mTLS."""
    if tls is not None or not push.mesh.enable_auto_mtls:
        return False
    mode = service_mtls_mode(push, svc, policy)
    return mode is not None and mode is not MtlsMode.DISABLE
