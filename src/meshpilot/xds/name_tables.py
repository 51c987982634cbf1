"""The name table a sidecar's agent answers DNS from (Istio's NDS), served by discovery.

Istio's agent receives its `NameTable` over the xDS stream it proxies for Envoy; meshpilot's
agent does not proxy Envoy's stream, so it asks on the same gRPC server for the table with a
unary call, `/meshpilot.nds.v1.NameTableService/Fetch`, JSON both ways:
request `{"proxyID": "pod.ns", "autoAllocate": true}`, response NDS's NameTable as JSON
(`model/name_table.py`), built from what the proxy sees (its Sidecar scope). The agent
polls it (agent/name_table_client.py). `/debug/ndsz?proxyID=` shows the same table.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import grpc

from meshpilot.model.name_table import build_name_table, name_table_json
from meshpilot.model.proxy import Proxy, ProxyType, proxy_from_pod

if TYPE_CHECKING:
    from meshpilot.xds.server import DiscoveryServer

__all__ = ["NAME_TABLE_METHOD", "NAME_TABLE_SERVICE", "name_table_for", "name_table_handler"]

NAME_TABLE_SERVICE = "meshpilot.nds.v1.NameTableService"
NAME_TABLE_METHOD = f"/{NAME_TABLE_SERVICE}/Fetch"


def name_table_for(server: DiscoveryServer, proxy_id: str, auto_allocate: bool) -> dict[str, Any]:
    """The JSON name table for `proxy_id` (pod.namespace); LookupError when discovery knows
    neither a connected proxy nor a Pod of that name."""
    proxy = _proxy(server, proxy_id)
    if proxy is None:
        raise LookupError(f"no connected proxy and no Pod {proxy_id!r}")
    push = server.push_context
    services = push.sidecar_scope(proxy).services
    return name_table_json(build_name_table(services, auto_allocate=auto_allocate))


def _proxy(server: DiscoveryServer, proxy_id: str) -> Proxy | None:
    connected = [c.proxy for c in server.connections.values() if c.proxy.id == proxy_id]
    if connected:
        return connected[-1]
    name, _, namespace = proxy_id.partition(".")
    pod = server.push_context.pod(namespace or "default", name)
    if pod is None:
        return None
    return proxy_from_pod(pod, ProxyType.SIDECAR, server.push_context.domain_suffix)


def name_table_handler(server: DiscoveryServer) -> grpc.GenericRpcHandler:
    async def fetch(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        try:
            body = json.loads(request)
            proxy_id = body["proxyID"]
            auto_allocate = bool(body.get("autoAllocate", False))
        except (ValueError, KeyError, TypeError):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, 'expected {"proxyID": "pod.ns"}')
        try:
            table = name_table_for(server, str(proxy_id), auto_allocate)
        except LookupError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        return json.dumps(table).encode()

    return grpc.method_handlers_generic_handler(
        NAME_TABLE_SERVICE, {"Fetch": grpc.unary_unary_rpc_method_handler(fetch)}
    )
