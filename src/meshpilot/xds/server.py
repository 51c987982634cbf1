"""DiscoveryServer: the ADS server (grpc.aio), SotW and Delta, and the push pipeline.

    store change ──► Debouncer ──► build PushContext (worker thread; only the indexes whose
    kinds changed) ──► PushQueue ──► dispatcher (at most `push_concurrency` full pushes in
    flight) ──► each stream's task (relevance: only the affected types) ──► Envoy

Each stream has one task that handles its requests and its pushes in order (Istio's model),
so per-connection state needs no locks. The server reaches generators only through
GENERATORS (xds/resources.py). The ADS service is registered by hand (xds/grpc_service.py)
so that a response may be bytes already assembled on the wire (xds/resources.py
`sotw_response`) as well as a message. Once an LDS answer is on its way, the RDS answer
Envoy will ask for next is built.

Heap: every new PushContext is settled (collected, then frozen: meshpilot.heap) once its
push has gone out, not on the way to the proxies. Dropping an old push frees it by reference
counting even while frozen, because pushes hold no reference cycles (measured on bookinfo and
the golden inputs: the frozen count stays flat push after push), so `gc.unfreeze()` is not
called per push. As a guard against cycles creeping in, the frozen set is thawed and
collected once it has doubled since the last thaw.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import grpc
from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.config.keys import ConfigKey
from meshpilot.heap import settle_long_lived_objects
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.settings import Settings
from meshpilot.store.base import ChangeEvent, ConfigStore, StoreSnapshot
from meshpilot.xds.cache import carry_over
from meshpilot.xds.connection import Connection, PushEvent
from meshpilot.xds.debounce import Debouncer
from meshpilot.xds.delta import on_delta_request, push_delta_responses
from meshpilot.xds.grpc_service import ads_handler, bind, remove_stale_socket, serialize_response
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.node import parse_node, proxy_for
from meshpilot.xds.push_queue import PushQueue
from meshpilot.xds.push_request import PushRequest, classify_endpoint_push, request_for_change
from meshpilot.xds.resources import prewarm
from meshpilot.xds.sotw import on_request, push_responses

__all__ = ["DiscoveryServer", "serialize_response"]

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
        self._built_from = StoreSnapshot(version=0)  # what the current push was built from
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
        server.add_generic_rpc_handlers((ads_handler(self),))
        host = address or self.settings.listen_address
        bind_port = self.settings.ports.xds_plaintext if port is None else port
        self.port = bind(server, f"{host}:{bind_port}")
        if self.settings.xds_uds:
            remove_stale_socket(self.settings.xds_uds)
            bind(server, f"unix:{self.settings.xds_uds}")
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
        prev, built_from = self._push_context, self._built_from
        changed = None if prev is None or req.forced else _changed_keys(built_from, snapshot)
        push = await asyncio.to_thread(
            build_push_context,
            list(snapshot.objects.values()),
            snapshot.mesh,
            self._counter,
            None,
            prev,
            changed,
        )
        self._built_from = snapshot
        if prev is not None:
            carry_over(prev, push, changed)  # route configs the change cannot alter
        self.metrics.push_context_init.observe(time.perf_counter() - started)
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
        if self._grpc is None:
            self._settle_heap()  # the first push, before serving
        else:
            self._spawn(self._settle_when_idle(push))

    async def _settle_when_idle(self, push: PushContext) -> None:
        """Settle the heap once this push has gone out (a full collection takes a few
        hundred ms with a thousand proxies: not on the way to them), unless a newer push
        came meanwhile (it settles then)."""
        while not self.queue.idle:
            await asyncio.sleep(0.05)
        if push is self._push_context:
            self._settle_heap()

    def _settle_heap(self) -> None:
        if self._thawed_at and gc.get_freeze_count() > 2 * self._thawed_at:
            gc.unfreeze()
            self._thawed_at = 0
        settle_long_lived_objects()
        if not self._thawed_at:
            self._thawed_at = max(gc.get_freeze_count(), 1)

    async def _dispatch(self) -> None:
        """At most `push_concurrency` full pushes in flight (Istio's PILOT_PUSH_THROTTLE);
        EDS-only pushes are a few hundred bytes each and are not held back."""
        limit = asyncio.Semaphore(self.settings.push_concurrency)
        while (item := await self.queue.dequeue()) is not None:
            held = item[1].full
            if held:
                await limit.acquire()
            self._spawn(self._deliver(*item, limit if held else None))

    async def _deliver(
        self, conn: Connection, req: PushRequest, limit: asyncio.Semaphore | None
    ) -> None:
        try:
            if conn.id in self.connections:
                done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                conn.events.put_nowait(PushEvent(req, done))
                await done
        finally:
            if limit is not None:
                limit.release()
            self.queue.mark_done(conn)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stream(
        self,
        requests: AsyncIterator[Any],
        context: grpc.aio.ServicerContext,
        delta: bool,
        wire: bool = False,
    ) -> AsyncIterator[Any]:
        """One ADS stream: its first request names the node; then requests and pushes.
        With `wire`, SotW responses are the serialized bytes (the handler must pass bytes
        through: `serialize_response`); else they are DiscoveryResponse messages."""
        async for response in self._stream(requests, context, delta):
            if not wire and isinstance(response, bytes):
                response = discovery_pb2.DiscoveryResponse.FromString(response)
            yield response

    async def _stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext, delta: bool
    ) -> AsyncIterator[Any]:
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
        _prewarm(conn)
        while (event := await conn.events.get()) is not None:
            if isinstance(event, PushEvent):
                for response in self._push_responses(conn, event.request, push_fn):
                    yield response
                conn.dependents.clear()  # a push sends the dependent types itself
                _resolve(event.done)
                self.metrics.convergence.observe(time.monotonic() - event.request.start)
            else:
                for response in handle(conn, event, self.metrics):
                    yield response
                _prewarm(conn)

    def _push_responses(self, conn: Connection, req: PushRequest, push_fn: Any) -> list[Any]:
        assert req.push is not None
        conn.proxy = proxy_for(req.push, conn.node)
        # conn.push is still the previous push: relevance compares the two.
        responses: list[Any] = push_fn(conn, req, self.metrics)
        conn.push = req.push
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


def _prewarm(conn: Connection, after: float = 0.01) -> None:
    """Build the route configs Envoy will ask for next while it applies the listeners just
    sent, a moment later so that gRPC gets the (small) LDS answer out first (B4: without
    it, Envoy sits idle while a thousand-host route config is built)."""
    if not conn.dependents:
        return
    dependents, conn.dependents = conn.dependents, []

    def build() -> None:
        if conn.events.empty():  # else a request is waiting: it goes first
            prewarm(conn.push, conn.proxy, dependents)

    asyncio.get_running_loop().call_later(after, build)


def _changed_keys(old: StoreSnapshot, new: StoreSnapshot) -> set[ConfigKey]:
    """Keys whose objects differ between two snapshots: the store keeps the very objects of
    what it did not read again, so identity settles it."""
    before, after = old.objects, new.objects
    changed = {k for k in before.keys() ^ after.keys()}
    changed.update(k for k, obj in after.items() if k in before and before[k] is not obj)
    return changed


def _resolve(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _scope(req: PushRequest) -> str:
    return "full" if req.full else "eds"
