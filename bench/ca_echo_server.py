"""B7's gRPC floor: the CA's RPC over the same TLS to a handler that signs nothing.

    python bench/ca_echo_server.py PORT KEY CHAIN LEAF     (run by bench/ca_sign.py)

Answers every call with a fixed chain (LEAF, CHAIN) of a real response's size.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import grpc

from meshpilot.security.ca_api import IstioCertificateRequest, IstioCertificateResponse


async def serve(port: str, key: bytes, chain: bytes, leaf: bytes) -> None:
    response = IstioCertificateResponse(cert_chain=[leaf.decode(), chain.decode()])

    async def create(request: Any, context: grpc.aio.ServicerContext) -> Any:
        return response

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(
        create,
        request_deserializer=IstioCertificateRequest.FromString,
        response_serializer=IstioCertificateResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("bench.Echo", {"Create": handler})]
    )
    server.add_secure_port(f"127.0.0.1:{port}", grpc.ssl_server_credentials([(key, chain)]))
    await server.start()
    await server.wait_for_termination()


if __name__ == "__main__":
    files = (Path(name).read_bytes() for name in sys.argv[2:5])
    asyncio.run(serve(sys.argv[1], *files))
