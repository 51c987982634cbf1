"""DiscoveryServer: the ADS server (grpc.aio), SotW and Delta, and the push pipeline.

    store change ──► Debouncer ──► build PushContext (worker thread) ──► PushQueue ──►
    dispatcher (at most `push_concurrency` pushes in flight) ──► each stream's task ──► Envoy

Each stream has one task that handles its requests and its pushes in order (Istio's model),
so per-connection state needs no locks. The server reaches generators only through
GENERATORS (xds/resources.py); this is the only module that imports `*_pb2_grpc`.

Heap: every new PushContext is settled (collected, then frozen: meshpilot.heap). Dropping
an old push frees it by reference counting even while frozen, because pushes hold no
reference cycles (measured on bookinfo and the golden inputs: the frozen count stays flat
push after push), so `gc.unfreeze()` is not called per push. As a guard against cycles
creeping in, the frozen set is thawed and collected once it has doubled since the last thaw.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import stat
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import grpc
from envoy.service.discovery.v3 import ads_pb2_grpc

from meshpilot.heap import settle_long_lived_objects
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.settings import Settings
from meshpilot.store.base import ChangeEvent, ConfigStore, StoreSnapshot
from meshpilot.xds.connection import Connection, PushEvent
from meshpilot.xds.debounce import Debouncer
from meshpilot.xds.delta import on_delta_request, push_delta_responses
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.node import parse_node, proxy_for
from meshpilot.xds.push_queue import PushQueue
from meshpilot.xds.push_request import PushRequest, classify_endpoint_push, request_for_change
from meshpilot.xds.sotw import on_request, push_responses

__all__ = ["DiscoveryServer"]

log = logging.getLogger(__name__)


class DiscoveryServer:
    def __init__(self, store: ConfigStore, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings or Settings()
        self.metrics = Metrics()
        self.connections: dict[str, Connection] = {}
        self.queue: PushQueue[Connection] = PushQueue()
        self.debouncer = Debouncer(
            self._push, self.settings.debounce_after, self.settings.debounce_max
        )
        self._push_context: PushContext | None = None
        self._seen = StoreSnapshot(version=0)
        self._counter = 0
        self._grpc: grpc.aio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._thawed_at = 0
        self.port = 0
        # The requests of the pushes made so far, latest last (for debug and tests).
        self.push_history: list[PushRequest] = []

    @property
    def push_context(self) -> PushContext:
        if self._push_context is None:
            raise RuntimeError("the discovery server has not built its first push yet")
        return self._push_context

    @property
    def ready(self) -> bool:
        return self._push_context is not None and self._grpc is not None

    async def start(self, address: str | None = None, port: int | None = None) -> int:
        """Build the first push, then serve ADS; returns the bound port."""
        await self._push(PushRequest(full=True, reasons=frozenset({"global"})))
        self._seen = self.store.snapshot()
        self.store.subscribe(self.on_change)
        server = grpc.aio.server(
            options=[
                # Never share the port with another server (gRPC's default allows it).
                ("grpc.so_reuseport", 0),
                ("grpc.keepalive_time_ms", 30_000),
                ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ]
        )
        ads_pb2_grpc.add_AggregatedDiscoveryServiceServicer_to_server(_AdsServicer(self), server)
        host = address or self.settings.listen_address
        bind_port = self.settings.ports.xds_plaintext if port is None else port
        self.port = _bind(server, f"{host}:{bind_port}")
        if self.settings.xds_uds:
            _remove_stale_socket(self.settings.xds_uds)
            _bind(server, f"unix:{self.settings.xds_uds}")
        await server.start()
        self._grpc = server
        for coro in (self.debouncer.run(), self._dispatch()):
            self._spawn(coro)
        log.info("ADS listening on %s:%d", host, self.port)
        return self.port

    async def stop(self, grace: float = 1.0) -> None:
        """End every stream, stop serving, and cancel the push pipeline."""
        self.queue.close()
        for conn in list(self.connections.values()):
            conn.events.put_nowait(None)
        if self._grpc is not None:
            await self._grpc.stop(grace)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def on_change(self, event: ChangeEvent) -> None:
        """Store change handler: count the events and hand a request to the debouncer."""
        snapshot = self.store.snapshot()
        for key in event.keys:
            before, after = key in self._seen.objects, key in snapshot.objects
            kind = "update" if before and after else ("add" if after else "delete")
            self.metrics.config_events.inc(str(key.kind), kind)
        self._seen = snapshot
        self.debouncer.enqueue(request_for_change(event.keys))

    async def _push(self, req: PushRequest) -> None:
        """Build the next PushContext and queue every connection for it."""
        snapshot = self.store.snapshot()
        self._counter += 1
        started = time.perf_counter()
        push = await asyncio.to_thread(
            build_push_context, list(snapshot.objects.values()), snapshot.mesh, self._counter
        )
        self.metrics.push_context_init.observe(time.perf_counter() - started)
        self._settle_heap()
        old, self._push_context = self._push_context, push
        req = classify_endpoint_push(req, old, push) if old else replace(req, push=push, full=True)
        self.metrics.debounce_time.observe(time.monotonic() - req.start)
        for reason in sorted(req.reasons):
            self.metrics.push_triggers.inc(reason)
        self.push_history.append(req)
        del self.push_history[:-100]
        log.info("push %s (%s) for %d proxies", push.version, _scope(req), len(self.connections))
        for conn in self.connections.values():
            self.queue.enqueue(conn, req)

    def _settle_heap(self) -> None:
        if self._thawed_at and gc.get_freeze_count() > 2 * self._thawed_at:
            gc.unfreeze()
            self._thawed_at = 0
        settle_long_lived_objects()
        if not self._thawed_at:
            self._thawed_at = max(gc.get_freeze_count(), 1)

    async def _dispatch(self) -> None:
        limit = asyncio.Semaphore(self.settings.push_concurrency)
        while (item := await self.queue.dequeue()) is not None:
            await limit.acquire()
            self._spawn(self._deliver(*item, limit))

    async def _deliver(self, conn: Connection, req: PushRequest, limit: asyncio.Semaphore) -> None:
        try:
            if conn.id in self.connections:
                done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                conn.events.put_nowait(PushEvent(req, done))
                await done
        finally:
            limit.release()
            self.queue.mark_done(conn)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext, delta: bool
    ) -> AsyncIterator[Any]:
        """One ADS stream: its first request names the node; then requests and pushes."""
        try:
            first = await anext(requests)
        except StopAsyncIteration:
            return
        try:
            node = parse_node(first.node)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            return
        push = self.push_context
        conn = Connection(node, proxy_for(push, node), push, delta=delta, peer=context.peer())
        self._connect(conn)
        reader = asyncio.create_task(_read(requests, conn))
        try:
            async for response in self._serve(conn, first):
                yield response
        except Exception:
            log.exception("ADS: stream of %s failed", conn.id)
            raise
        finally:
            reader.cancel()
            self._disconnect(conn)

    async def _serve(self, conn: Connection, first: Any) -> AsyncIterator[Any]:
        """Answer the first request, then requests and pushes in arrival order."""
        handle = on_delta_request if conn.delta else on_request
        push_fn = push_delta_responses if conn.delta else push_responses
        for response in handle(conn, first, self.metrics):
            yield response
        while (event := await conn.events.get()) is not None:
            if isinstance(event, PushEvent):
                for response in self._push_responses(conn, event.request, push_fn):
                    yield response
                _resolve(event.done)
                self.metrics.convergence.observe(time.monotonic() - event.request.start)
            else:
                for response in handle(conn, event, self.metrics):
                    yield response

    def _push_responses(self, conn: Connection, req: PushRequest, push_fn: Any) -> list[Any]:
        assert req.push is not None
        conn.proxy = proxy_for(req.push, conn.node)
        conn.push = req.push
        responses: list[Any] = push_fn(conn, req, self.metrics)
        return responses

    def _connect(self, conn: Connection) -> None:
        self.connections[conn.id] = conn
        self._count_clients()
        log.info(
            "ADS: %s connected (%s, %s)", conn.id, "delta" if conn.delta else "sotw", conn.peer
        )

    def _disconnect(self, conn: Connection) -> None:
        self.connections.pop(conn.id, None)
        self.queue.remove(conn)
        while not conn.events.empty():
            event = conn.events.get_nowait()
            if isinstance(event, PushEvent):
                _resolve(event.done)
        self._count_clients()
        log.info("ADS: %s disconnected", conn.id)

    def _count_clients(self) -> None:
        self.metrics.xds_clients.values.clear()
        for conn in self.connections.values():
            self.metrics.xds_clients.inc(conn.proxy.istio_version)


async def _read(requests: AsyncIterator[Any], conn: Connection) -> None:
    """Move requests to the stream task; the end of the stream (or an error) ends it."""
    try:
        async for request in requests:
            conn.events.put_nowait(request)
    except (grpc.aio.AioRpcError, asyncio.CancelledError):
        pass
    except Exception:
        log.exception("ADS: reading from %s failed", conn.id)
    finally:
        conn.events.put_nowait(None)


def _bind(server: grpc.aio.Server, address: str) -> int:
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:  # grpc's way of saying the bind failed
        raise OSError(f"cannot listen on {address} (address in use?)") from exc
    if not port:
        raise OSError(f"cannot listen on {address}")
    return int(port)


def _remove_stale_socket(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)


def _resolve(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _scope(req: PushRequest) -> str:
    return "full" if req.full else "eds"


class _AdsServicer(ads_pb2_grpc.AggregatedDiscoveryServiceServicer):  # type: ignore[misc]
    def __init__(self, server: DiscoveryServer) -> None:
        self._server = server

    async def StreamAggregatedResources(
        self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        async for response in self._server.stream(request_iterator, context, delta=False):
            yield response

    async def DeltaAggregatedResources(
        self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        async for response in self._server.stream(request_iterator, context, delta=True):
            yield response
