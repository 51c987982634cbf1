"""Upstream TLS (DestinationRule `tls`): DISABLE, SIMPLE, MUTUAL and ISTIO_MUTUAL contexts."""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.core.v3 import base_pb2, config_source_pb2, grpc_service_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2, tls_pb2
from envoy.type.matcher.v3 import string_pb2

from meshpilot.config.istio.destination_rule import ClientTLSSettings
from meshpilot.xds.names import SDS_CLUSTER, SDS_DEFAULT, SDS_ROOTCA, credential_resource
from meshpilot.xds.protos import Filters, duration, pack

__all__ = [
    "ALPN_IN_MESH",
    "ALPN_IN_MESH_H2",
    "FILE_ROOT_SYSTEM",
    "agent_sds",
    "upstream_tls_socket",
]

ALPN_IN_MESH = ("istio",)
ALPN_IN_MESH_H2 = ("istio", "h2")
# The agent serves these SDS names from local files (Istio's file-based SDS naming).
FILE_ROOT_SYSTEM = "file-root:system"


def agent_sds(name: str) -> secret_pb2.SdsSecretConfig:
    """An SDS secret served by the proxy agent over the `sds-grpc` cluster (a Unix socket)."""
    source = config_source_pb2.ConfigSource(
        api_config_source=config_source_pb2.ApiConfigSource(
            api_type=config_source_pb2.ApiConfigSource.GRPC,
            set_node_on_first_message_only=True,
            transport_api_version=config_source_pb2.V3,
            grpc_services=[
                grpc_service_pb2.GrpcService(
                    envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=SDS_CLUSTER)
                )
            ],
        ),
        initial_fetch_timeout=duration(0),
        resource_api_version=config_source_pb2.V3,
    )
    return secret_pb2.SdsSecretConfig(name=name, sds_config=source)


def _ads_sds(name: str) -> secret_pb2.SdsSecretConfig:
    """A credentialName secret from the control plane (Istio sets no fetch timeout here)."""
    source = config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(), resource_api_version=config_source_pb2.V3
    )
    return secret_pb2.SdsSecretConfig(name=name, sds_config=source)


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
        common.tls_certificate_sds_secret_configs.append(agent_sds(SDS_DEFAULT))
        _validation(common, agent_sds(SDS_ROOTCA), tls.subject_alt_names or sans)
        common.alpn_protocols.extend(ALPN_IN_MESH_H2 if http2 else ALPN_IN_MESH)
        ctx.sni = tls.sni or sni
    elif tls.mode in ("SIMPLE", "MUTUAL"):
        if tls.mode == "MUTUAL":
            if tls.credential_name:
                common.tls_certificate_sds_secret_configs.append(
                    _ads_sds(credential_resource(tls.credential_name))
                )
            else:
                common.tls_certificate_sds_secret_configs.append(
                    agent_sds(f"file-cert:{tls.client_certificate}~{tls.private_key}")
                )
        if not tls.insecure_skip_verify:
            if tls.credential_name:
                root = _ads_sds(credential_resource(tls.credential_name, cacert=True))
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
