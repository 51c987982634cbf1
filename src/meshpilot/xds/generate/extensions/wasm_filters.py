"""Put the proxy's WasmPlugins into its HCMs, as HTTP filters whose config comes by ECDS.

Runs after the listener generators and telemetry, on copies (the generated listeners are
shared by a class of proxies; plugins depend on the workload's labels). Each filter is named
like its ECDS resource and carries `config_discovery` from ADS, at its phase's place, as
Istio's listener builder puts them: AUTHN before the JWT filter, AUTHZ after authentication
and before RBAC, STATS and unset phases after the security filters (before grpc_stats,
fault, CORS, the metrics filters and the router). A sidecar's inbound listeners are SERVER
traffic, its outbound ones and every gateway listener CLIENT; the port matched is the filter
chain's destination port, else the listener's.
"""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.core.v3 import base_pb2, config_source_pb2
from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.extensions.wasm_plugins import SelectedPlugin, plugins_for
from meshpilot.xds.protos import Filters, ads_source, pack

__all__ = ["ECDS_TYPE_URLS", "apply_wasm_plugins"]

# What the served config may be: the module, or the RBAC stand-in of one that cannot load.
ECDS_TYPE_URLS = (
    "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
    "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC",
)
_JWT = "envoy.filters.http.jwt_authn"
_SECURITY = frozenset({_JWT, "envoy.filters.http.rbac", "envoy.filters.http.ext_authz"})


def _discovered(plugin: SelectedPlugin) -> hcm_pb2.HttpFilter:
    source = config_source_pb2.ExtensionConfigSource(
        config_source=ads_source(), type_urls=list(ECDS_TYPE_URLS)
    )
    return hcm_pb2.HttpFilter(name=plugin.name, config_discovery=source)


def _positions(names: Sequence[str]) -> tuple[int, int, int]:
    """Where AUTHN, AUTHZ and the later phases go in a chain of these filter names."""
    jwt = [i for i, n in enumerate(names) if n == _JWT]
    security = [i for i, n in enumerate(names) if n in _SECURITY]
    authn = jwt[0] if jwt else (security[0] if security else 0)
    authz = jwt[-1] + 1 if jwt else authn
    later = max(authz, security[-1] + 1) if security else authz
    return authn, authz, later


def _with_plugins(
    filters: Sequence[hcm_pb2.HttpFilter], plugins: Sequence[SelectedPlugin]
) -> list[hcm_pb2.HttpFilter]:
    authn, authz, later = _positions([f.name for f in filters])

    def phase(*names: str) -> list[hcm_pb2.HttpFilter]:
        return [_discovered(p) for p in plugins if p.phase in names]

    return [
        *filters[:authn],
        *phase("AUTHN"),
        *filters[authn:authz],
        *phase("AUTHZ"),
        *filters[authz:later],
        *phase("STATS"),
        *phase("UNSPECIFIED_PHASE"),
        *filters[later:],
    ]


def _chain(
    chain: lc_pb2.FilterChain, plugins: Sequence[SelectedPlugin], mode: str, port: int
) -> None:
    port = chain.filter_chain_match.destination_port.value or port
    chosen = [p for p in plugins if p.applies_to(mode, port)]
    if not chosen:
        return
    for item in chain.filters:
        if item.name != Filters.HCM:
            continue
        hcm = hcm_pb2.HttpConnectionManager()
        item.typed_config.Unpack(hcm)
        filters = _with_plugins(list(hcm.http_filters), chosen)
        del hcm.http_filters[:]
        hcm.http_filters.extend(filters)
        item.typed_config.CopyFrom(pack(hcm))


def apply_wasm_plugins(
    push: PushContext, proxy: Proxy, listeners: list[listener_pb2.Listener]
) -> list[listener_pb2.Listener]:
    """`listeners` with the proxy's WasmPlugin filters (copies; the input is kept)."""
    plugins = plugins_for(push, proxy)
    if not plugins:
        return listeners
    out = []
    for listener in listeners:
        inbound = proxy.type is ProxyType.SIDECAR and listener.traffic_direction == base_pb2.INBOUND
        mode = "SERVER" if inbound else "CLIENT"
        copy = listener_pb2.Listener()
        copy.CopyFrom(listener)
        port = listener.address.socket_address.port_value
        for chain in copy.filter_chains:
            _chain(chain, plugins, mode, port)
        if copy.HasField("default_filter_chain"):
            _chain(copy.default_filter_chain, plugins, mode, port)
        out.append(copy)
    return out
