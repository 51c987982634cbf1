"""The gRPC side of the ADS server: the hand-registered AggregatedDiscoveryService (so a
response may be wire bytes assembled in xds/resources.py or a message) and binding.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import AsyncIterator
from typing import Any, Protocol

import grpc
from envoy.service.discovery.v3 import discovery_pb2

__all__ = [
    "ADS_SERVICE",
    "AdsStreams",
    "ads_handler",
    "bind",
    "remove_stale_socket",
    "serialize_response",
]


class AdsStreams(Protocol):
    """What serves one ADS stream (xds/server.py DiscoveryServer)."""

    def stream(
        self,
        requests: AsyncIterator[Any],
        context: grpc.aio.ServicerContext,
        delta: bool,
        wire: bool = False,
    ) -> AsyncIterator[Any]: ...


ADS_SERVICE = "envoy.service.discovery.v3.AggregatedDiscoveryService"


def serialize_response(response: Any) -> bytes:
    """gRPC response serializer for `stream(..., wire=True)`: bytes pass through."""
    return response if isinstance(response, bytes) else bytes(response.SerializeToString())


def ads_handler(server: AdsStreams) -> grpc.GenericRpcHandler:
    async def sotw(
        requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        async for response in server.stream(requests, context, delta=False, wire=True):
            yield response

    async def delta(
        requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        async for response in server.stream(requests, context, delta=True, wire=True):
            yield response

    return grpc.method_handlers_generic_handler(
        ADS_SERVICE,
        {
            "StreamAggregatedResources": grpc.stream_stream_rpc_method_handler(
                sotw,
                request_deserializer=discovery_pb2.DiscoveryRequest.FromString,
                response_serializer=serialize_response,
            ),
            "DeltaAggregatedResources": grpc.stream_stream_rpc_method_handler(
                delta,
                request_deserializer=discovery_pb2.DeltaDiscoveryRequest.FromString,
                response_serializer=serialize_response,
            ),
        },
    )


def bind(server: grpc.aio.Server, address: str) -> int:
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:  # grpc's way of saying the bind failed
        raise OSError(f"cannot listen on {address} (address in use?)") from exc
    if not port:
        raise OSError(f"cannot listen on {address}")
    return int(port)


def remove_stale_socket(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
