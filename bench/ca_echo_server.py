"""B7's gRPC floor: the CA's RPC over the same TLS to a handler that signs nothing.

    python bench/ca_echo_server.py MODE PORT KEY CHAIN LEAF     (run by bench/ca_sign.py)

Answers every call with a fixed chain (LEAF, CHAIN) of a real response's size. MODE is the
server flavour whose per-call cost is measured:

    aio        grpc.aio server, protobuf handler (what the ADS port is)
    sync       grpc's thread-pool server, raw-bytes handler (no protobuf objects); measured
               for the CA and not kept: with the real handler its threads contend for the GIL
               and it cost as much CPU per CSR as grpc.aio (README B7)
"""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from meshpilot.security.ca_api import IstioCertificateRequest, IstioCertificateResponse


async def serve_aio(port: str, key: bytes, chain: bytes, leaf: bytes) -> None:
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


def serve_sync(port: str, key: bytes, chain: bytes, leaf: bytes) -> None:
    response = IstioCertificateResponse(cert_chain=[leaf.decode(), chain.decode()])
    wire = bytes(response.SerializeToString())

    def create(request: bytes, context: grpc.ServicerContext) -> bytes:
        return wire

    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    handler = grpc.unary_unary_rpc_method_handler(create)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("bench.Echo", {"Create": handler})]
    )
    server.add_secure_port(f"127.0.0.1:{port}", grpc.ssl_server_credentials([(key, chain)]))
    server.start()
    server.wait_for_termination()


if __name__ == "__main__":
    mode, port = sys.argv[1], sys.argv[2]
    files = [Path(name).read_bytes() for name in sys.argv[3:6]]
    if mode == "sync":
        serve_sync(port, *files)
    else:
        asyncio.run(serve_aio(port, *files))
