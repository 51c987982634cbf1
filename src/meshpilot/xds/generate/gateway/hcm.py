"""The HTTP connection manager of a gateway filter chain (Istio's buildGatewayConnectionManager
plus the shared buildHTTPConnectionManager settings).

Gateways trust the client address (`use_remote_address`), sanitize and set XFCC, call
themselves `istio-envoy`, let websockets upgrade, never time out idle streams, and get their
routes over RDS from ADS. Istio's own filters (metadata exchange, stats) are left out: stock
Envoy does not have them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envoy.config.core.v3 import protocol_pb2
from envoy.config.listener.v3 import listener_components_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.request_id.uuid.v3 import uuid_pb2

from meshpilot.config.mesh import MeshConfig
from meshpilot.xds.generate.http_filters import outbound_http_filters
from meshpilot.xds.protos import Filters, ads_source, boolean, duration, pack

__all__ = ["ENVOY_SERVER_NAME", "gateway_hcm_filter"]

ENVOY_SERVER_NAME = "istio-envoy"
_HCM = hcm_pb2.HttpConnectionManager
_XFCC = {
    "SANITIZE": _HCM.SANITIZE,
    "FORWARD_ONLY": _HCM.FORWARD_ONLY,
    "APPEND_FORWARD": _HCM.APPEND_FORWARD,
    "SANITIZE_SET": _HCM.SANITIZE_SET,
    "ALWAYS_FORWARD_ONLY": _HCM.ALWAYS_FORWARD_ONLY,
}


def _extra(model: Any, key: str) -> Mapping[str, Any]:
    """A MeshConfig/ProxyConfig field meshpilot does not model, as written in YAML."""
    extra = getattr(model, "model_extra", None) or {}
    value = extra.get(key)
    return value if isinstance(value, Mapping) else {}


def _topology(mesh: MeshConfig) -> tuple[int, int]:
    """(xff_num_trusted_hops, forward_client_cert_details) from proxyConfig.gatewayTopology."""
    topology = _extra(mesh.default_config, "gatewayTopology")
    hops = int(topology.get("numTrustedProxies", 0) or 0)
    xfcc = _XFCC.get(str(topology.get("forwardClientCertDetails", "")), _HCM.SANITIZE_SET)
    return hops, xfcc


def _apply_path_normalization(hcm: hcm_pb2.HttpConnectionManager, mesh: MeshConfig) -> None:
    mode = str(_extra(mesh, "pathNormalization").get("normalization", "DEFAULT"))
    hcm.path_with_escaped_slashes_action = _HCM.KEEP_UNCHANGED
    hcm.normalize_path.CopyFrom(boolean(mode != "NONE"))
    if mode in ("MERGE_SLASHES", "DECODE_AND_MERGE_SLASHES"):
        hcm.merge_slashes = True
    if mode == "DECODE_AND_MERGE_SLASHES":
        hcm.path_with_escaped_slashes_action = _HCM.UNESCAPE_AND_FORWARD


def gateway_hcm(rds_name: str, stat_prefix: str, mesh: MeshConfig) -> hcm_pb2.HttpConnectionManager:
    hops, xfcc = _topology(mesh)
    hcm = hcm_pb2.HttpConnectionManager(
        codec_type=_HCM.AUTO,
        stat_prefix=stat_prefix,
        rds=hcm_pb2.Rds(config_source=ads_source(), route_config_name=rds_name),
        http_filters=outbound_http_filters(),
        xff_num_trusted_hops=hops,
        forward_client_cert_details=xfcc,
        server_name=ENVOY_SERVER_NAME,
        http_protocol_options=protocol_pb2.Http1ProtocolOptions(),
        use_remote_address=boolean(True),
        upgrade_configs=[_HCM.UpgradeConfig(upgrade_type="websocket")],
        stream_idle_timeout=duration(0),
        request_id_extension=hcm_pb2.RequestIDExtension(
            typed_config=pack(
                uuid_pb2.UuidRequestIdConfig(use_request_id_for_trace_sampling=boolean(True))
            )
        ),
        proxy_100_continue=True,
    )
    if xfcc in (_HCM.APPEND_FORWARD, _HCM.SANITIZE_SET):
        hcm.set_current_client_cert_details.CopyFrom(
            _HCM.SetCurrentClientCertDetails(subject=boolean(True), cert=True, dns=True, uri=True)
        )
    _apply_path_normalization(hcm, mesh)
    return hcm


def gateway_hcm_filter(
    rds_name: str, stat_prefix: str, mesh: MeshConfig
) -> listener_components_pb2.Filter:
    return listener_components_pb2.Filter(
        name=Filters.HCM, typed_config=pack(gateway_hcm(rds_name, stat_prefix, mesh))
    )
