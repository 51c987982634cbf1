"""Upstream TLS (DestinationRule `tls`): DISABLE, SIMPLE, MUTUAL and ISTIO_MUTUAL contexts."""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.core.v3 import base_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2, tls_pb2
from envoy.type.matcher.v3 import string_pb2

from meshpilot.config.istio.destination_rule import ClientTLSSettings
from meshpilot.xds.generate.clusters.mtls import istio_mutual_context
from meshpilot.xds.generate.sds_config import agent_sds, credential_sds
from meshpilot.xds.names import CACERT_SUFFIX
from meshpilot.xds.protos import Filters, pack

__all__ = ["FILE_ROOT_SYSTEM", "upstream_tls_socket"]

# The agent serves these SDS names from local files (Istio's file-based SDS naming).
FILE_ROOT_SYSTEM = "file-root:system"


def _san_matchers(names: Sequence[str]) -> list[common_pb2.SubjectAltNameMatcher]:
    return [
        common_pb2.SubjectAltNameMatcher(
            san_type=common_pb2.SubjectAltNameMatcher.URI
            if n.startswith("spiffe://")
            else common_pb2.SubjectAltNameMatcher.DNS,
            matcher=string_pb2.StringMatcher(exact=n),
        )
        for n in names
    ]


def _validation(
    common: common_pb2.CommonTlsContext, root: secret_pb2.SdsSecretConfig, sans: Sequence[str]
) -> None:
    combined = common.combined_validation_context
    combined.default_validation_context.SetInParent()
    combined.default_validation_context.match_typed_subject_alt_names.extend(_san_matchers(sans))
    combined.validation_context_sds_secret_config.CopyFrom(root)


def upstream_tls_socket(
    tls: ClientTLSSettings,
    sni: str,
    sans: Sequence[str],
    http2: bool,
) -> base_pb2.TransportSocket | None:
    """The cluster's transport socket for a DestinationRule TLS mode (None for DISABLE)."""
    ctx = tls_pb2.UpstreamTlsContext()
    common = ctx.common_tls_context
    common.tls_params.tls_minimum_protocol_version = common_pb2.TlsParameters.TLSv1_2
    common.tls_params.tls_maximum_protocol_version = common_pb2.TlsParameters.TLSv1_3
    if tls.mode == "ISTIO_MUTUAL":
        ctx = istio_mutual_context(tls.sni or sni, tls.subject_alt_names or sans, http2)
    elif tls.mode in ("SIMPLE", "MUTUAL"):
        if tls.mode == "MUTUAL":
            if tls.credential_name:
                common.tls_certificate_sds_secret_configs.append(
                    credential_sds(tls.credential_name)
                )
            else:
                common.tls_certificate_sds_secret_configs.append(
                    agent_sds(f"file-cert:{tls.client_certificate}~{tls.private_key}")
                )
        if not tls.insecure_skip_verify:
            if tls.credential_name:
                root = credential_sds(tls.credential_name + CACERT_SUFFIX)
            elif tls.ca_certificates:
                root = agent_sds(f"file-root:{tls.ca_certificates}")
            else:
                root = agent_sds(FILE_ROOT_SYSTEM)
            _validation(common, root, tls.subject_alt_names)
        if http2:
            common.alpn_protocols.append("h2")
        if tls.sni:
            ctx.sni = tls.sni
    else:
        return None
    return base_pb2.TransportSocket(name=Filters.TLS_TRANSPORT, typed_config=pack(ctx))
