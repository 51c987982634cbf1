"""Generators: pure functions (PushContext, Proxy) -> Envoy protobuf messages, one per xDS type.

`GENERATORS` maps (type URL, proxy type) to the builder; the ADS server and `translate` reach
generators only through it. Differences between sidecars and gateways live in separate
modules chosen here, never in `if proxy.type` chains inside a builder.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.xds.output import ProxyConfig
from meshpilot.xds.protos import TypeUrl

__all__ = ["GENERATORS", "PUSH_ORDER", "Generator", "generate_proxy_config"]

# names: the resource names the proxy subscribed to (RDS, EDS, SDS); None means all.
Generator = Callable[[PushContext, Proxy, Collection[str] | None], list[Any]]

# VirtualHost (VHDS, opt-in) right after the route configs that name it; extension configs
# (ECDS) last: Envoy asks for them once a listener names them.
PUSH_ORDER = (
    TypeUrl.CLUSTER,
    TypeUrl.ENDPOINT,
    TypeUrl.LISTENER,
    TypeUrl.ROUTE,
    TypeUrl.VIRTUAL_HOST,
    TypeUrl.SECRET,
    TypeUrl.EXTENSION_CONFIG,
)


def _table() -> dict[tuple[str, ProxyType], Generator]:
    from meshpilot.xds.generate import clusters, endpoints, extensions, gateway, listeners, secrets
    from meshpilot.xds.generate.routes import vhds

    return {
        (TypeUrl.CLUSTER, ProxyType.SIDECAR): clusters.generate_sidecar_clusters,
        (TypeUrl.CLUSTER, ProxyType.ROUTER): clusters.generate_gateway_clusters,
        (TypeUrl.ENDPOINT, ProxyType.SIDECAR): endpoints.generate_endpoints,
        (TypeUrl.ENDPOINT, ProxyType.ROUTER): endpoints.generate_endpoints,
        (TypeUrl.LISTENER, ProxyType.SIDECAR): listeners.generate_sidecar_listeners,
        (TypeUrl.LISTENER, ProxyType.ROUTER): gateway.generate_gateway_listeners,
        (TypeUrl.ROUTE, ProxyType.SIDECAR): vhds.generate_sidecar_route_configs,
        (TypeUrl.ROUTE, ProxyType.ROUTER): gateway.generate_gateway_routes,
        (TypeUrl.VIRTUAL_HOST, ProxyType.SIDECAR): vhds.generate_sidecar_virtual_hosts,
        (TypeUrl.VIRTUAL_HOST, ProxyType.ROUTER): vhds.no_virtual_hosts,
        (TypeUrl.SECRET, ProxyType.SIDECAR): secrets.generate_secrets,
        (TypeUrl.SECRET, ProxyType.ROUTER): secrets.generate_secrets,
        (TypeUrl.EXTENSION_CONFIG, ProxyType.SIDECAR): extensions.generate_extension_configs,
        (TypeUrl.EXTENSION_CONFIG, ProxyType.ROUTER): extensions.generate_extension_configs,
    }


GENERATORS: dict[tuple[str, ProxyType], Generator] = {}


def _patched(type_url: str, build: Generator) -> Generator:
    """`build` with the proxy's EnvoyFilter patches applied to what it returns."""
    from meshpilot.xds.patch import apply_patches

    def run(push: PushContext, proxy: Proxy, names: Collection[str] | None) -> list[Any]:
        return apply_patches(push, proxy, type_url, build(push, proxy, names))

    return run


def generator(type_url: str, proxy_type: ProxyType) -> Generator:
    if not GENERATORS:
        from meshpilot.xds.patch import PATCHED_TYPES

        GENERATORS.update(
            {
                key: _patched(key[0], build) if key[0] in PATCHED_TYPES else build
                for key, build in _table().items()
            }
        )
    return GENERATORS[(type_url, proxy_type)]


def generate_proxy_config(push: PushContext, proxy: Proxy) -> ProxyConfig:
    """Everything one proxy would receive, in push order; RDS/EDS/SDS names are those the
    generated listeners and clusters refer to, as Envoy would subscribe to them. Route
    configs are whole (for a proxy served by VHDS too: the table Envoy assembles)."""
    proxy = replace(proxy, vhds=False) if proxy.vhds else proxy
    from meshpilot.xds.generate.references import cluster_references
    from meshpilot.xds.references import rds_names, sds_names

    clusters = generator(TypeUrl.CLUSTER, proxy.type)(push, proxy, None)
    eds_names, cluster_sds = cluster_references(push, clusters)
    endpoints = generator(TypeUrl.ENDPOINT, proxy.type)(push, proxy, eds_names)
    listeners = generator(TypeUrl.LISTENER, proxy.type)(push, proxy, None)
    routes = generator(TypeUrl.ROUTE, proxy.type)(push, proxy, rds_names(listeners))
    secret_names = sds_names(listeners, ()) | cluster_sds
    secrets = generator(TypeUrl.SECRET, proxy.type)(push, proxy, secret_names)
    extensions = generator(TypeUrl.EXTENSION_CONFIG, proxy.type)(push, proxy, None)
    return ProxyConfig(
        listeners=listeners,
        routes=routes,
        clusters=clusters,
        endpoints=endpoints,
        secrets=secrets,
        extension_configs=extensions,
    )
