"""A CA client over real gRPC and TLS, as istio-agent calls the CA (tests only)."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

import grpc
import pytest

from meshpilot.security.ca_api import (
    CREATE_CERTIFICATE,
    IstioCertificateRequest,
    IstioCertificateResponse,
)

ISTIOD = "istiod.istio-system.svc"


def channel(
    port: int,
    root_pem: bytes,
    client: tuple[bytes, bytes] | None = None,
    server_name: str = ISTIOD,
) -> grpc.aio.Channel:
    """TLS to 127.0.0.1:port verifying the server against `root_pem` and `server_name`."""
    key, chain = client or (None, None)
    creds = grpc.ssl_channel_credentials(root_pem, key, chain)
    options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", creds, options=options)


async def create_certificate(
    chan: grpc.aio.Channel, csr: str, token: str | None = None, ttl: int = 0
) -> Sequence[str]:
    call = chan.unary_unary(
        CREATE_CERTIFICATE,
        request_serializer=IstioCertificateRequest.SerializeToString,
        response_deserializer=IstioCertificateResponse.FromString,
    )
    metadata = [("authorization", f"Bearer {token}")] if token else None
    response: Any = await call(
        IstioCertificateRequest(csr=csr, validity_duration=ttl), metadata=metadata, timeout=10
    )
    return list(response.cert_chain)


async def refused(call: Awaitable[Any]) -> tuple[grpc.StatusCode, str]:
    """The status code and message of a call that must fail."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), caught.value.details() or ""
