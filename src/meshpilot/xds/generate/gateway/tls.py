"""DownstreamTlsContext of a gateway server that terminates TLS (Istio's BuildListenerTLSContext).

| mode            | certificate                                   | client validation          |
|-----------------|-----------------------------------------------|----------------------------|
| SIMPLE          | credentialName -> `kubernetes://<name>` (ADS) | SANs only, if any          |
| MUTUAL          | same                                          | `<name>-cacert`, required  |
| OPTIONAL_MUTUAL | same                                          | `<name>-cacert`, optional  |
| ISTIO_MUTUAL    | workload cert `default` (sds-grpc)            | `ROOTCA`, required         |

Without a credentialName, certificate files are served by the agent as `file-cert:<cert>~<key>`
and `file-root:<ca>` over `sds-grpc`. ALPN is `h2,http/1.1`; a TCP server terminating
ISTIO_MUTUAL also offers `istio-peer-exchange`. SIMPLE/MUTUAL/OPTIONAL_MUTUAL map the
protocol versions and cipher suites (invalid or repeated suites dropped, as Istio does).
"""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.core.v3 import base_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2, tls_pb2
from envoy.type.matcher.v3 import string_pb2

from meshpilot.config.istio.gateway import ServerTLSSettings
from meshpilot.xds import names
from meshpilot.xds.generate.sds_config import agent_sds, credential_sds
from meshpilot.xds.protos import Filters, boolean, pack

__all__ = [
    "ALPN_DOWNSTREAM",
    "ALPN_DOWNSTREAM_WITH_MXC",
    "agent_sds",
    "credential_sds",
    "downstream_tls_context",
    "downstream_tls_socket",
    "filter_cipher_suites",
]

ALPN_DOWNSTREAM: tuple[str, ...] = ("h2", "http/1.1")
ALPN_DOWNSTREAM_WITH_MXC: tuple[str, ...] = ("istio-peer-exchange", "h2", "http/1.1")

# Gateway.server.tls.cipherSuites that BoringSSL knows (Istio's security.ValidCipherSuites).
VALID_CIPHER_SUITES = frozenset(
    {
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
        "ECDHE-ECDSA-AES128-SHA",
        "ECDHE-RSA-AES128-SHA",
        "ECDHE-ECDSA-AES256-SHA",
        "ECDHE-RSA-AES256-SHA",
        "AES128-GCM-SHA256",
        "AES256-GCM-SHA384",
        "AES128-SHA",
        "AES256-SHA",
        "DES-CBC3-SHA",
    }
)

_TLS_VERSIONS = {
    "TLS_AUTO": common_pb2.TlsParameters.TLS_AUTO,
    "TLSV1_0": common_pb2.TlsParameters.TLSv1_0,
    "TLSV1_1": common_pb2.TlsParameters.TLSv1_1,
    "TLSV1_2": common_pb2.TlsParameters.TLSv1_2,
    "TLSV1_3": common_pb2.TlsParameters.TLSv1_3,
}


def filter_cipher_suites(suites: Sequence[str]) -> list[str]:
    """Istio's FilterCipherSuites: keep known suites and operator expressions, once each."""
    out: list[str] = []
    for s in suites:
        valid = s in ("", "ALL") or not s[0].isalnum() or s in VALID_CIPHER_SUITES
        if valid and s not in out:
            out.append(s)
    return out


def _exact(values: Sequence[str]) -> list[string_pb2.StringMatcher]:
    return [string_pb2.StringMatcher(exact=v) for v in values]


def _combined(
    common: tls_pb2.CommonTlsContext,
    root: secret_pb2.SdsSecretConfig,
    default: common_pb2.CertificateValidationContext,
) -> None:
    combined = common.combined_validation_context
    combined.default_validation_context.CopyFrom(default)
    combined.validation_context_sds_secret_config.CopyFrom(root)


def _apply_credentials(common: tls_pb2.CommonTlsContext, tls: ServerTLSSettings) -> None:
    """ApplyCredentialSDSToServerCommonTLSContext."""
    if tls.credential_names:
        common.tls_certificate_sds_secret_configs.extend(
            credential_sds(n) for n in tls.credential_names
        )
        ca = tls.credential_names[0] + names.CACERT_SUFFIX
    else:
        common.tls_certificate_sds_secret_configs.append(credential_sds(tls.credential_name))
        ca = tls.credential_name + names.CACERT_SUFFIX
    if tls.mode in ("MUTUAL", "OPTIONAL_MUTUAL"):
        default = common_pb2.CertificateValidationContext(
            match_subject_alt_names=_exact(tls.subject_alt_names),
            verify_certificate_spki=tls.verify_certificate_spki,
            verify_certificate_hash=tls.verify_certificate_hash,
        )
        _combined(common, credential_sds(ca), default)
    elif tls.subject_alt_names:
        common.validation_context.match_subject_alt_names.extend(_exact(tls.subject_alt_names))


def _apply_workload_certs(
    common: tls_pb2.CommonTlsContext,
    tls: ServerTLSSettings,
    validate_client: bool,
    cert: str = "",
    key: str = "",
    ca: str = "",
) -> None:
    """ApplyToCommonTLSContext: the workload certificate, or mounted files through the agent."""
    cert_name = names.file_cert_resource(cert, key) if cert and key else names.SDS_DEFAULT
    common.tls_certificate_sds_secret_configs.append(agent_sds(cert_name))
    if not validate_client:
        return
    default = common_pb2.CertificateValidationContext(
        match_subject_alt_names=_exact(tls.subject_alt_names)
    )
    if tls.ca_crl:
        default.crl.filename = tls.ca_crl
    root = names.file_root_resource(ca) if ca else names.SDS_ROOTCA
    _combined(common, agent_sds(root), default)


def _apply_tls_params(common: tls_pb2.CommonTlsContext, tls: ServerTLSSettings) -> None:
    params = common_pb2.TlsParameters()
    if tls.min_protocol_version and tls.min_protocol_version != "TLS_AUTO":
        params.tls_minimum_protocol_version = _TLS_VERSIONS.get(tls.min_protocol_version, 0)
    suites = filter_cipher_suites(tls.cipher_suites)
    if suites:
        params.cipher_suites.extend(suites)
    if tls.max_protocol_version and tls.max_protocol_version != "TLS_AUTO":
        params.tls_maximum_protocol_version = _TLS_VERSIONS.get(tls.max_protocol_version, 0)
    if params.ByteSize():
        common.tls_params.CopyFrom(params)


def downstream_tls_context(
    tls: ServerTLSSettings, tcp_termination: bool = False
) -> tls_pb2.DownstreamTlsContext:
    """The context of a terminated server; `tcp_termination` for non-HTTP (TLS/TCP) servers."""
    alpn = ALPN_DOWNSTREAM
    if tcp_termination and tls.mode == "ISTIO_MUTUAL":
        alpn = ALPN_DOWNSTREAM_WITH_MXC
    ctx = tls_pb2.DownstreamTlsContext(
        common_tls_context=tls_pb2.CommonTlsContext(alpn_protocols=alpn),
        require_client_certificate=boolean(tls.mode in ("MUTUAL", "ISTIO_MUTUAL")),
    )
    common = ctx.common_tls_context
    validate_client = tls.mode in ("MUTUAL", "ISTIO_MUTUAL", "OPTIONAL_MUTUAL")
    if tls.mode == "ISTIO_MUTUAL":
        _apply_workload_certs(common, tls, validate_client)
    elif tls.credential_name or tls.credential_names:
        _apply_credentials(common, tls)
    else:
        _apply_workload_certs(
            common,
            tls,
            validate_client,
            tls.server_certificate,
            tls.private_key,
            tls.ca_certificates,
        )
    if tls.mode in ("SIMPLE", "MUTUAL", "OPTIONAL_MUTUAL"):
        _apply_tls_params(common, tls)
    return ctx


def downstream_tls_socket(ctx: tls_pb2.DownstreamTlsContext) -> base_pb2.TransportSocket:
    return base_pb2.TransportSocket(name=Filters.TLS_TRANSPORT, typed_config=pack(ctx))
