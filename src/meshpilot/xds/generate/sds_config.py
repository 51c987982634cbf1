"""SDS secret configs: secrets the proxy agent serves over `sds-grpc` (workload certificates,
files) and gateway credentials the control plane serves over ADS."""

from __future__ import annotations

from envoy.config.core.v3 import config_source_pb2, grpc_service_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2

from meshpilot.xds import names
from meshpilot.xds.protos import duration

__all__ = ["agent_sds", "credential_sds"]


def agent_sds(name: str) -> secret_pb2.SdsSecretConfig:
    """A secret the proxy agent serves over `sds-grpc`. Only `default` and `ROOTCA` carry
    `initial_fetch_timeout: 0s` (Istio's preconfigured configs). A fresh copy of a message
    built once for `default` and `ROOTCA`, which every mTLS context asks for."""
    found = _AGENT_SDS.get(name)
    if found is None:
        return _build_agent_sds(name)
    out = secret_pb2.SdsSecretConfig()
    out.CopyFrom(found)
    return out


def _build_agent_sds(name: str) -> secret_pb2.SdsSecretConfig:
    source = config_source_pb2.ConfigSource(
        api_config_source=config_source_pb2.ApiConfigSource(
            api_type=config_source_pb2.ApiConfigSource.GRPC,
            set_node_on_first_message_only=True,
            transport_api_version=config_source_pb2.V3,
            grpc_services=[
                grpc_service_pb2.GrpcService(
                    envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(
                        cluster_name=names.SDS_CLUSTER
                    )
                )
            ],
        ),
        resource_api_version=config_source_pb2.V3,
    )
    if name in (names.SDS_DEFAULT, names.SDS_ROOTCA):
        source.initial_fetch_timeout.CopyFrom(duration(0))
    return secret_pb2.SdsSecretConfig(name=name, sds_config=source)


def credential_sds(credential_name: str) -> secret_pb2.SdsSecretConfig:
    """A credentialName served by the control plane over ADS. No initial_fetch_timeout: a
    missing Secret must not hold the listener back (Istio's SDSAdsConfig)."""
    if credential_name == names.BUILTIN_CREDENTIAL_PREFIX:
        return agent_sds(names.SDS_DEFAULT)
    if credential_name == names.BUILTIN_CREDENTIAL_PREFIX + names.CACERT_SUFFIX:
        return agent_sds(names.SDS_ROOTCA)
    resource = names.credential_sds_name(credential_name)
    source = config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(),
        resource_api_version=config_source_pb2.V3,
    )
    return secret_pb2.SdsSecretConfig(name=resource, sds_config=source)


# Only the two workload secrets: other names come from user config and need no cache.
_AGENT_SDS = {n: _build_agent_sds(n) for n in (names.SDS_DEFAULT, names.SDS_ROOTCA)}
