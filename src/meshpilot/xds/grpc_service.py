"""The gRPC side of the ADS server: the hand-registered AggregatedDiscoveryService (so a
response may be wire bytes assembled in xds/resources.py or a message), binding, reading
requests, and the bound on response bytes sent and not yet answered.

Memory (a thousand streams of megabytes of configuration each): a response leaves the stream as an
`Outgoing` that the serializer empties. gRPC's handler loop and every async generator between
it and the stream keep their last item alive until the stream's next response, which for an
idle stream is the next push: with bare bytes that pinned one response per stream (the 2 MB
route configs, 2 GB at 1000 streams). `SendBudget` bounds the bytes of large responses
sent and not yet answered by the client's next request (gRPC reports a message written once
it is in its own write buffers, not once the client has it), so that the initial sync of a
thousand proxies does not hold a thousand copies of their configuration at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import logging
import os
import stat
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import grpc
from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.model.proxy import VerifiedIdentity
from meshpilot.xds.connection import Connection, parse_request
from meshpilot.xds.request_shape import Malformed, parse_delta_request

__all__ = [
    "ADS_SERVICE",
    "LARGE_RESPONSE",
    "PEER_HEADER",
    "SEND_BUDGET",
    "SERVER_OPTIONS",
    "AdsStreams",
    "Authenticator",
    "Outgoing",
    "SendBudget",
    "ads_handler",
    "answered",
    "bind",
    "forwarded_peer",
    "map_large_buffers",
    "read_requests",
    "remove_stale_socket",
    "send_responses",
    "serialize_response",
]


log = logging.getLogger(__name__)


class Authenticator(Protocol):
    """The identities a stream's credential proves (security/ads_identity.py); none for a
    stream that proves nothing. `forwarded`: the stream came through the front Envoy."""

    def __call__(
        self, context: grpc.aio.ServicerContext, forwarded: bool
    ) -> tuple[VerifiedIdentity, ...]: ...


class AdsStreams(Protocol):
    """What serves one ADS stream (xds/server.py DiscoveryServer)."""

    def stream(
        self,
        requests: AsyncIterator[Any],
        context: grpc.aio.ServicerContext,
        delta: bool,
        wire: bool = False,
        forwarded: bool = False,
        authenticate: Authenticator | None = None,
    ) -> AsyncIterator[Any]: ...


ADS_SERVICE = "envoy.service.discovery.v3.AggregatedDiscoveryService"
# Set by the front Envoy (security/front_envoy.py): the caller's address and port.
PEER_HEADER = "x-meshpilot-peer"
# The gRPC server options of both ADS ports (plaintext 15010, TLS 15012).
SERVER_OPTIONS = [
    # Never share the port with another server (gRPC's default allows it).
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    # grpc.aio accepts one call per event-loop turn: when a thousand proxies connect at
    # once, calls wait their turn instead of being cancelled after gRPC's 30 s, which would
    # make each of those streams start its sync again.
    ("grpc.server_max_unrequested_time_in_server", 600),
]
# Responses from this size on wait for the SendBudget (CDS, LDS and RDS of a large mesh; an
# EDS push of one service is a few hundred bytes and never waits).
LARGE_RESPONSE = 64 * 1024
# Bytes of large responses sent and not yet answered, over all streams: enough to keep the
# writes going (a 1000-service mesh: 64 proxies' 2 MB route configs), few enough that a
# thousand proxies syncing at once stay within the control plane's memory target (1.5 GB,
# of which about 1 GB is the configuration itself).
SEND_BUDGET = 128 * 1024 * 1024


class Outgoing:
    """A response on its way to gRPC, handed over once: `serialize_response` takes the
    payload, so whoever still refers to this shell no longer holds the bytes."""

    __slots__ = ("payload",)

    def __init__(self, payload: Any) -> None:
        self.payload = payload

    def take(self) -> Any:
        payload, self.payload = self.payload, None
        return payload


def _wire_size(response: Any) -> int:
    return len(response) if isinstance(response, bytes) else int(response.ByteSize())


def serialize_response(response: Any) -> bytes:
    """gRPC response serializer for `stream(..., wire=True)`: bytes pass through, an
    `Outgoing` is emptied."""
    if isinstance(response, Outgoing):
        response = response.take()
    return response if isinstance(response, bytes) else bytes(response.SerializeToString())


class SendBudget:
    """At most `limit` bytes of large responses in flight (sent, not yet answered), over all
    streams (one response always goes, however large). Streams wait their turn in arrival
    order, for as long as responses keep going out (when a thousand proxies sync at once,
    that is tens of seconds for the last); only once nothing was released for `patience`
    seconds does a waiter go anyway: clients that stopped reading hold their share until
    their streams end, and must not stall every other stream."""

    def __init__(self, limit: int, patience: float = 10.0) -> None:
        self.limit = limit
        self.patience = patience
        self.in_flight = 0
        self.peak = 0  # the most bytes held at once (debug, tests)
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._released = 0.0  # loop time of the last release
        self.typical = LARGE_RESPONSE  # a moving average of large responses' sizes

    def _fits(self, size: int) -> bool:
        return not self.in_flight or self.in_flight + size <= self.limit

    def _take(self, size: int) -> None:
        self.in_flight += size
        self.peak = max(self.peak, self.in_flight)

    async def acquire(self, size: int) -> None:
        if not self._waiters and self._fits(size):
            self._take(size)
            return
        loop = asyncio.get_running_loop()
        entry = (size, loop.create_future())
        self._waiters.append(entry)
        since = loop.time()
        try:
            while not entry[1].done():
                try:
                    await asyncio.wait_for(asyncio.shield(entry[1]), self.patience)
                except TimeoutError:
                    progress = max(self._released, since)
                    if entry[1].done() or loop.time() - progress < self.patience:
                        continue  # others' responses are going out: keep the turn
                    self._waiters.remove(entry)  # stalled: go anyway
                    self._take(size)
                    return
        except BaseException:  # the stream ended while waiting
            if entry[1].done():
                self.release(size)
            else:
                self._waiters.remove(entry)
            raise

    async def turn(self) -> int:
        """Wait for room, in arrival order, before building responses whose size is not
        known yet (else a thousand streams would each build their answer, 4 MB of clusters,
        and hold it while waiting to send it); returns the room reserved, the typical size
        of a large response so far, for `admit` to give back."""
        reserve = self.typical
        await self.acquire(reserve)
        return reserve

    def admit(self, responses: list[Any], reserve: int) -> None:
        """Charge the large responses built after a `turn` (building is synchronous: nobody
        else was admitted meanwhile), then give back the turn's reservation."""
        sizes = [_wire_size(r) for r in responses]
        for size in sizes:
            if size >= LARGE_RESPONSE:
                self.typical = (3 * self.typical + size) // 4
                self._take(size)
        self.release(reserve)

    def release(self, size: int) -> None:
        self.in_flight -= size
        self._released = asyncio.get_running_loop().time()
        while self._waiters and self._fits(self._waiters[0][0]):
            size, granted = self._waiters.popleft()
            self._take(size)
            granted.set_result(None)


async def send_responses(
    budget: SendBudget,
    responses: list[Any],
    wire: bool,
    hold: Callable[[int], None] | None = None,
    admitted: bool = False,
    parse: Callable[[bytes], Any] = discovery_pb2.DiscoveryResponse.FromString,
) -> AsyncIterator[Any]:
    """Hand one stream's responses over one at a time, each dropped here once gRPC has taken
    it: with `wire`, as `Outgoing` bytes, large ones within `budget`; else as messages. Once
    gRPC asks for the next response the bytes are out of Python, but not out of the process:
    gRPC reports a message written once it is in its own write buffers, where it stays until
    the client reads it. So with `hold`, the bytes stay charged (`hold(size)`) until the
    stream's next request (xds/server.py); without, they are released then. `admitted`:
    the responses were built after a `budget.turn()` and charged by `budget.admit`."""
    responses.reverse()
    try:
        while responses:
            response = responses.pop()
            if not wire:
                if isinstance(response, bytes):
                    response = parse(response)  # (wire bytes of either variant)
                yield response
                continue
            if not isinstance(response, bytes):
                response = response.SerializeToString()
            size = len(response)
            out = Outgoing(response)
            del response
            if size < LARGE_RESPONSE:
                yield out
                continue
            if not admitted:  # else charged by `SendBudget.admit`
                await budget.acquire(size)
            written = False
            try:
                yield out
                written = True
            finally:
                if written and hold is not None:
                    hold(size)
                else:
                    budget.release(size)
            del out
    finally:  # the stream ended: what was admitted and not sent leaves the budget
        left = [size for size in map(_wire_size, responses) if size >= LARGE_RESPONSE]
        if admitted and left:
            budget.release(sum(left))


async def read_requests(
    requests: AsyncIterator[Any],
    conn: Connection,
    budget: SendBudget,
    take: Callable[[Connection, Any], bool] | None = None,
) -> None:
    """Move requests to the stream task (unless `take` handles one at once: a plain ACK,
    xds/stream_loop.py); the end of the stream (or an error) ends it, and so does a
    `Malformed` request (the stream task ends the stream with its reason). A request shows
    that the client read what it was sent: its bytes leave the budget."""
    try:
        async for request in requests:
            answered(conn, budget)
            if isinstance(request, Malformed):
                conn.events.put_nowait(request)
                return
            if take is None or not take(conn, request):
                conn.events.put_nowait(request)
    except (grpc.aio.AioRpcError, asyncio.CancelledError):
        pass
    except Exception:
        log.exception("ADS: reading from %s failed", conn.id)
    finally:
        conn.events.put_nowait(None)


def answered(conn: Connection, budget: SendBudget) -> None:
    if conn.charged:
        budget.release(conn.charged)
        conn.charged = 0


def ads_handler(
    server: AdsStreams, forwarded: bool = False, authenticate: Authenticator | None = None
) -> grpc.GenericRpcHandler:
    """`forwarded`: for the front Envoy's private socket (security/front_server.py).
    `authenticate`: the TLS ports' (a stream on a port without one proves nothing)."""
    # The stream's own generator, bound by partial (grpc.aio asks whether a handler is an
    # async generator function, and looks through partials): no layer re-yielding every
    # response.
    sotw, delta = (
        functools.partial(
            server.stream, delta=is_delta, wire=True, forwarded=forwarded, authenticate=authenticate
        )
        for is_delta in (False, True)
    )
    return grpc.method_handlers_generic_handler(
        ADS_SERVICE,
        {
            "StreamAggregatedResources": grpc.stream_stream_rpc_method_handler(
                sotw,
                request_deserializer=parse_request,
                response_serializer=serialize_response,
            ),
            "DeltaAggregatedResources": grpc.stream_stream_rpc_method_handler(
                delta,
                request_deserializer=parse_delta_request,
                response_serializer=serialize_response,
            ),
        },
    )


def forwarded_peer(context: grpc.aio.ServicerContext) -> str:
    """The proxy's address as the front Envoy saw it (its `x-meshpilot-peer`, which it
    always overwrites); only the front reaches the socket these streams come from."""
    for key, value in context.invocation_metadata() or ():
        if key == PEER_HEADER:
            text = value.decode("latin-1") if isinstance(value, bytes) else value
            if text.startswith("/"):  # the front's Unix socket (--secure-uds)
                return f"unix:{text}"
            return f"ipv6:{text}" if text.startswith("[") else f"ipv4:{text}"
    return str(context.peer())


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


# glibc mallopt parameters: allocations from this size on are mmap()ed (and unmapped on
# free); free memory at the top of the heap beyond this much is given back to the OS.
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 4 * 1024 * 1024
_M_TRIM_THRESHOLD = -1
_TRIM_THRESHOLD = 64 * 1024 * 1024


def map_large_buffers() -> bool:
    """Give the largest buffers back to the OS as soon as they are freed, and keep the
    heap's smaller ones (glibc only).

    glibc raises its mmap threshold to the size of the largest block freed so far (up to
    32 MB): once the largest responses were freed, they all came from the heap, whose freed
    middle stays resident; when every stream held its own copies, the process kept its
    peak (gigabytes) for good. A fixed threshold turns that off.

    The threshold is above a route config of 1000 services (2 MB): such responses, and the
    copy gRPC makes of each as it is sent, come from the heap's free chunks, at most the
    send budget's worth at once. Below that size every copy would be a fresh mapping faulted
    in page by page (docs/benchmarks.md, "Figures behind design choices").

    Fixing it would also keep glibc's trim threshold at 128 kB: each SotW EDS ACK (thousands
    of names, read as one bytes object per proxy per push) freed at the top of the heap
    would give those pages back for the next ACK to fault in again. Up to 64 MB of free
    heap top stays instead."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mapped = bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD))
        return mapped and bool(libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    except (OSError, AttributeError, TypeError):
        return False  # not glibc: its own allocator's policy applies
