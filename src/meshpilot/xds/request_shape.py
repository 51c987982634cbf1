"""Requests the ADS server refuses: bytes that are not a (Delta)DiscoveryRequest, a type URL
it does not serve, resource names no Envoy would send.

The request deserializers never raise (an exception there is gRPC's traceback per stream
and an UNKNOWN status): a bad request becomes a `Malformed` value, and the stream that
receives one ends with INVALID_ARGUMENT and the reason, logged in one line (at most
`_BURST` lines per `_WINDOW_S`, then a count of the rest).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

import grpc
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf.message import DecodeError

from meshpilot.xds.protos import TypeUrl

__all__ = [
    "MAX_NAME",
    "PARSE_ERRORS",
    "SERVED_TYPES",
    "Malformed",
    "MalformedRequest",
    "check_names",
    "check_type_url",
    "log_refusal",
    "parse_delta_request",
    "refuse",
]

log = logging.getLogger(__name__)

SERVED_TYPES = frozenset(
    {
        TypeUrl.LISTENER,
        TypeUrl.ROUTE,
        TypeUrl.CLUSTER,
        TypeUrl.ENDPOINT,
        TypeUrl.SECRET,
        TypeUrl.VIRTUAL_HOST,
        TypeUrl.EXTENSION_CONFIG,
    }
)
# Envoy resource names are cluster, listener, route and secret names (at most a few hundred
# characters); file paths in SDS names stay far below this.
MAX_NAME = 4096
_WINDOW_S = 10.0
_BURST = 5

# What a bad request's bytes raise when parsed.
PARSE_ERRORS = (DecodeError, UnicodeDecodeError, RecursionError, ValueError)


class MalformedRequest(Exception):
    """Raised in a stream that received a `Malformed` request; the stream ends with
    INVALID_ARGUMENT and this message."""


@dataclass(frozen=True, slots=True)
class Malformed:
    """A request the server cannot serve, in place of the request (the deserializer's
    result), with the reason the client is told."""

    reason: str


def check_type_url(type_url: str) -> None:
    if type_url not in SERVED_TYPES:
        shown = repr(type_url[:200]) if type_url else "empty"
        raise MalformedRequest(f"type_url {shown} is not a type this server serves")


def check_names(names: Iterable[str], field: str = "resource_names") -> None:
    """Names are printable and at most MAX_NAME characters. (One pass in C over the
    joined names: an EDS subscription has thousands.)"""
    listed = names if isinstance(names, list | tuple) else list(names)
    if not listed:
        return
    longest = max(map(len, listed))
    if longest > MAX_NAME:
        raise MalformedRequest(f"{field}: a name of {longest} characters (at most {MAX_NAME})")
    if not "".join(listed).isprintable():
        bad = next(name for name in listed if not name.isprintable())
        raise MalformedRequest(f"{field}: name {bad[:100]!r} has control characters")


def parse_delta_request(raw: bytes) -> discovery_pb2.DeltaDiscoveryRequest | Malformed:
    """gRPC request deserializer for Delta ADS: never raises."""
    try:
        request = discovery_pb2.DeltaDiscoveryRequest.FromString(raw)
        check_type_url(request.type_url)
        check_names(request.resource_names_subscribe, "resource_names_subscribe")
        check_names(request.resource_names_unsubscribe, "resource_names_unsubscribe")
        check_names(request.initial_resource_versions, "initial_resource_versions")
    except MalformedRequest as exc:
        return Malformed(str(exc))
    except PARSE_ERRORS as exc:
        return Malformed(f"not a DeltaDiscoveryRequest: {exc}")
    return request


class _Throttle:
    """At most `burst` lines per `window` seconds; the rest are counted and reported."""

    def __init__(self, window: float, burst: int) -> None:
        self.window, self.burst = window, burst
        self.start = float("-inf")
        self.count = self.suppressed = 0

    def allow(self) -> bool:
        now = time.monotonic()
        if now - self.start >= self.window:
            if self.suppressed:
                log.warning(
                    "ADS: %d more malformed requests refused in %.0fs (not logged)",
                    self.suppressed, self.window,
                )  # fmt: skip
            self.start, self.count, self.suppressed = now, 0, 0
        if self.count < self.burst:
            self.count += 1
            return True
        self.suppressed += 1
        return False


_THROTTLE = _Throttle(_WINDOW_S, _BURST)


def log_refusal(peer: str, reason: str) -> None:
    if _THROTTLE.allow():
        log.warning("ADS: refused a malformed request from %s: %s", peer, reason)


async def refuse(context: grpc.aio.ServicerContext, reason: str) -> None:
    """End a stream whose request the server cannot serve: INVALID_ARGUMENT, one log line."""
    log_refusal(str(context.peer()), reason)
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, reason)
