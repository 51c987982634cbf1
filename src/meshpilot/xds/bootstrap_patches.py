"""EnvoyFilter BOOTSTRAP patches for the agent, which applies them to the bootstrap it writes
before starting Envoy (agent/bootstrap_patches.py).

Istio's agent asks istiod for its bootstrap over the xDS stream it proxies; meshpilot's
agent makes one unary call on the xDS gRPC port or socket,
`/meshpilot.bootstrap.v1.BootstrapPatchService/Fetch`, its request the Envoy `Node` it will
start with (serialized), its answer JSON: `{"patches": [{"filter": "ns/name", "index": i,
"value": {...}}]}`, the values of the BOOTSTRAP patches that apply to that node (selector,
targetRefs, match.proxy, as for every EnvoyFilter patch), in Istio's order. Only MERGE
applies to a bootstrap (as Istio); other operations are reported and left out. A changed
patch takes effect when the proxy restarts, as in Istio.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import grpc
from envoy.config.core.v3 import base_pb2
from google.protobuf import message

from meshpilot.config.kinds import Kind
from meshpilot.model.push_context import PushContext
from meshpilot.xds.node import parse_node, proxy_for
from meshpilot.xds.output import message_to_dict
from meshpilot.xds.patch.reports import report
from meshpilot.xds.patch.selection import proxy_patches

if TYPE_CHECKING:
    from meshpilot.xds.server import DiscoveryServer

__all__ = ["BOOTSTRAP_PATCH_METHOD", "bootstrap_patch_handler", "bootstrap_patches"]

BOOTSTRAP_PATCH_SERVICE = "meshpilot.bootstrap.v1.BootstrapPatchService"
BOOTSTRAP_PATCH_METHOD = f"/{BOOTSTRAP_PATCH_SERVICE}/Fetch"


def bootstrap_patches(push: PushContext, node: base_pb2.Node) -> list[dict[str, Any]]:
    if not push.of_kind(Kind.ENVOY_FILTER):
        return []
    patches = proxy_patches(push, proxy_for(push, parse_node(node)))
    if patches is None:
        return []
    out = []
    for patch in patches.of("BOOTSTRAP"):
        if patch.operation != "MERGE":
            report(push, patch.problem("BOOTSTRAP patches support only operation MERGE"))
            continue
        if isinstance(patch.value, message.Message):
            value = message_to_dict(patch.value)
            out.append({"filter": f"{patch.namespace}/{patch.name}", "index": patch.index,
                        "value": value})  # fmt: skip
    return out


def bootstrap_patch_handler(server: DiscoveryServer) -> grpc.GenericRpcHandler:
    async def fetch(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        node = base_pb2.Node()
        try:
            node.ParseFromString(request)
        except message.DecodeError:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected an Envoy Node")
        if not node.id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the node has no id")
        try:
            found = bootstrap_patches(server.push_context, node)
        except ValueError as exc:  # a node id that names no proxy
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return json.dumps({"patches": found}).encode()

    return grpc.method_handlers_generic_handler(
        BOOTSTRAP_PATCH_SERVICE, {"Fetch": grpc.unary_unary_rpc_method_handler(fetch)}
    )
