"""The bootstrap's TLS to the control plane (xds-grpc on 15012), built on the workload identity.

The control plane's certificate must chain to the mesh root, which the agent copies to
`./var/run/secrets/istio/root-cert.pem` in Envoy's working directory, and must name
`istiod.istio-system.svc`; Envoy presents the workload certificate `default` from the agent's
SDS, so the control plane can tell which workload is asking.
"""

from __future__ import annotations

from envoy.config.core.v3 import config_source_pb2, grpc_service_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2, tls_pb2
from envoy.type.matcher.v3 import string_pb2

from meshpilot.agent.options import ROOT_CERT_PATH
from meshpilot.xds.names import SDS_CLUSTER, SDS_DEFAULT
from meshpilot.xds.protos import duration

__all__ = ["xds_tls_context"]


def xds_tls_context(server_name: str) -> tls_pb2.UpstreamTlsContext:
    workload = secret_pb2.SdsSecretConfig(
        name=SDS_DEFAULT,
        sds_config=config_source_pb2.ConfigSource(
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
        ),
    )
    san = common_pb2.SubjectAltNameMatcher(
        san_type=common_pb2.SubjectAltNameMatcher.DNS,
        matcher=string_pb2.StringMatcher(exact=server_name),
    )
    return tls_pb2.UpstreamTlsContext(
        sni=server_name,
        common_tls_context=tls_pb2.CommonTlsContext(
            alpn_protocols=["h2"],
            tls_certificate_sds_secret_configs=[workload],
            validation_context=common_pb2.CertificateValidationContext(
                trusted_ca={"filename": ROOT_CERT_PATH},
                match_typed_subject_alt_names=[san],
            ),
        ),
    )
