"""DiscoveryServer: the ADS server (grpc.aio), SotW and Delta, and the push pipeline.

    store change ──► Debouncer ──► build PushContext (worker thread; only the indexes whose
    kinds changed) ──► PushQueue ──► dispatcher (at most `push_concurrency` full pushes in
    flight) ──► each stream's task (relevance: only the affected types) ──► Envoy

While the debouncer waits, the build and every stream's resources are made ahead and the
push adopts them if nothing changed meanwhile (xds/speculation.py).

Each stream has one task that handles its requests and its pushes in order (Istio's model,
xds/stream_loop.py), so per-connection state needs no locks. Every push records when each of
its stages ended (xds/push_timeline.py) and logs that once its ACKs had a moment to come in
(bench/push.py reads it). The server reaches generators only through
GENERATORS (xds/resources.py). The ADS service is registered by hand (xds/grpc_service.py)
so that a response may be bytes already assembled on the wire (xds/resources.py
`sotw_response`) as well as a message, and so that SotW requests are read by
`xds/connection.py parse_request` (an ACK's thousands of EDS names are recognised, not
re-read). Responses leave a stream as emptied-on-serialization shells, large ones within one
byte budget over all streams (xds/grpc_service.py): no stream keeps its last response, and a
thousand proxies syncing at once do not hold a thousand configurations. Once an LDS answer
is on its way, the RDS answer Envoy will ask for next is built.

Heap: every new PushContext is settled (collected, then frozen: meshpilot.heap) a second
after its push has gone out, not on the way to the proxies or their ACKs; after an EDS-only
push the few new objects are only frozen, and automatic collection is off while such a push
goes out (on again once the push queue is idle, or at the next full push). A replaced push
is held until every stream has the new one and let go with the settle (xds/push_heap.py),
not in the middle of the next fan-out; it is freed by reference counting even while frozen,
because pushes hold no reference cycles (tests/unit/xds_server/test_push_acks.py keeps the
garbage a collection finds, and only the current push may be alive), so `gc.unfreeze()` is
not called per push; a guard against cycles creeping in thaws and collects it now and then
(meshpilot/heap.py `FrozenSet`).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import grpc

from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.model.relevance import UNREAD_KINDS
from meshpilot.settings import Settings
from meshpilot.store.base import ChangeEvent, ConfigStore, StoreSnapshot
from meshpilot.supervise import TaskSupervisor, report_task_failure
from meshpilot.xds.agent_services import agent_handlers
from meshpilot.xds.cache import carry_over
from meshpilot.xds.connection import Connection, PushEvent, Subscription
from meshpilot.xds.debounce import Debouncer
from meshpilot.xds.grpc_service import (
    SEND_BUDGET,
    SERVER_OPTIONS,
    Authenticator,
    SendBudget,
    ads_handler,
    answered,
    bind,
    forwarded_peer,
    map_large_buffers,
    read_requests,
    remove_stale_socket,
    serialize_response,
)
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.node import parse_node, proxy_for, verified_identity
from meshpilot.xds.push_heap import PushHeap
from meshpilot.xds.push_queue import PushQueue
from meshpilot.xds.push_request import (
    PushRequest,
    changed_keys,
    classify_endpoint_push,
    request_for_change,
)
from meshpilot.xds.push_timeline import PushTimeline, PushTimelines
from meshpilot.xds.request_shape import Malformed, MalformedRequest, refuse
from meshpilot.xds.resources import load_generators, prebuild_known
from meshpilot.xds.speculation import Built, Speculation
from meshpilot.xds.stream_loop import StreamLoop

__all__ = ["DiscoveryServer", "serialize_response"]

log = logging.getLogger(__name__)

SETTLE_AFTER = 1.0  # seconds after a push has gone out: its ACKs come in meanwhile
# A PushContext whose last build took less than this is built on the event loop: the hop to
# a worker thread and back (and the GIL's 5 ms switch interval while the loop runs Python)
# cost more than such a small build.
INLINE_BUILD_S = 0.002
INLINE_MAX_CHANGES = 8  # a larger change may take much longer than the last one


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
        self._last_build_s = float("inf")  # the first build runs in a thread
        self._counter = 0
        self._grpc: grpc.aio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # The long-lived tasks (debouncer, dispatcher; discovery adds the store's watch):
        # restarted when they fail, and not ready meanwhile.
        self.tasks = TaskSupervisor("discovery")
        self.heap = PushHeap()
        self.port = 0
        # The requests of the last pushes, latest last, without their push contexts (for
        # debug and tests).
        self.push_history: list[PushRequest] = []
        self.budget = SendBudget(SEND_BUDGET)
        self.timelines = PushTimelines()
        self.loop = StreamLoop(self.budget, self.metrics, self.timelines)
        self.speculation = Speculation(
            store,
            self.debouncer,
            self.queue,
            self.connections,
            lambda: self._push_context,
            self._build,
            self.metrics,
        )

    @property
    def push_context(self) -> PushContext:
        if self._push_context is None:
            raise RuntimeError("the discovery server has not built its first push yet")
        return self._push_context

    @property
    def ready(self) -> bool:
        return self._push_context is not None and self._grpc is not None and self.tasks.ready

    async def start(self, address: str | None = None, port: int | None = None) -> int:
        """Build the first push, then serve ADS; returns the bound port."""
        load_generators()  # not on the first proxy's clock
        map_large_buffers()
        await self._push(PushRequest(full=True, reasons=frozenset({"global"})))
        prebuild_known(self.push_context)  # known pods' clusters, before they connect
        self._seen = self.store.snapshot()
        self.store.subscribe(self.on_change)
        server = grpc.aio.server(options=SERVER_OPTIONS)
        server.add_generic_rpc_handlers((ads_handler(self), *agent_handlers(self)))
        host = address or self.settings.listen_address
        bind_port = self.settings.ports.xds_plaintext if port is None else port
        self.port = bind(server, f"{host}:{bind_port}")
        if self.settings.xds_uds:
            remove_stale_socket(self.settings.xds_uds)
            bind(server, f"unix:{self.settings.xds_uds}")
        await server.start()
        self._grpc = server
        self.tasks.start("debounce", self.debouncer.run)
        self.tasks.start("push-dispatch", self._dispatch)
        log.info("ADS listening on %s:%d", host, self.port)
        return self.port

    async def stop(self, grace: float = 1.0) -> None:
        """End every stream, stop serving, and cancel the push pipeline."""
        self.queue.close()
        for conn in list(self.connections.values()):
            conn.events.put_nowait(None)
        if self._grpc is not None:
            await self._grpc.stop(grace)
        self.speculation.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.tasks.stop()
        self.heap.resume_gc()

    def on_change(self, event: ChangeEvent) -> None:
        """Store change handler: count the events and hand a request to the debouncer."""
        snapshot = self.store.snapshot()
        for key in event.keys:
            before, after = key in self._seen.objects, key in snapshot.objects
            kind = "update" if before and after else ("add" if after else "delete")
            self.metrics.config_events.inc(str(key.kind), kind)
        self._seen = snapshot
        # GitOps status writes (Applications) must not restart the debounce of a change that
        # matters: a resync pass writes every app's status and would hold the push back.
        keys = frozenset(key for key in event.keys if key.kind not in UNREAD_KINDS)
        if keys:
            quiet = min(self.settings.debounce_after, self.settings.debounce_after_write)
            self.debouncer.enqueue(request_for_change(keys), quiet if event.whole_writes else None)
            self.speculation.changed()

    async def _build(self, snapshot: StoreSnapshot, forced: bool) -> Built:
        """The PushContext of `snapshot`, made from the current one (only the indexes whose
        kinds changed), with the route configs the change cannot alter carried over."""
        self._counter += 1
        started = time.perf_counter()
        prev, built_from = self._push_context, self._built_from
        changed = None if prev is None or forced else changed_keys(built_from, snapshot)
        build = functools.partial(
            build_push_context,
            list(snapshot.objects.values()),
            snapshot.mesh,
            self._counter,
            None,
            prev,
            changed,
            snapshot.objects,
        )
        if (
            changed is not None
            and len(changed) <= INLINE_MAX_CHANGES
            and (self._last_build_s < INLINE_BUILD_S)
        ):
            push = build()
        else:
            push = await asyncio.to_thread(build)
        self._last_build_s = time.perf_counter() - started
        # Out of the collector's sight at once (O(1), no collection): else its objects are
        # walked by every full collection that the fan-out's allocations set off, in the
        # middle of the push. The collection itself comes after the push.
        gc.freeze()
        if prev is not None:
            carry_over(prev, push, changed)  # route configs the change cannot alter
        return Built(snapshot, prev, push, time.perf_counter() - started)

    async def _push(self, req: PushRequest) -> None:
        """Build the next PushContext (or adopt the one made while the change was debounced:
        xds/speculation.py) and queue every connection for it."""
        debounced = time.monotonic()
        taken = await self.speculation.take(req)
        if taken is None:
            built = await self._build(self.store.snapshot(), req.forced)
            old = built.prev
            req = classify_endpoint_push(req, old, built.push) if old else req
        else:
            built, req = taken
        push = built.push
        self._built_from = built.snapshot
        self.metrics.push_context_init.observe(built.build_s)
        old, self._push_context = self._push_context, push
        req = replace(req, push=push) if old else replace(req, push=push, full=True)
        self.metrics.debounce_time.observe(time.monotonic() - req.start)
        for reason in sorted(req.reasons):
            self.metrics.push_triggers.inc(reason)
        # Without its push context: a kept request kept the whole push alive (its caches and
        # shared responses: 150 MB a VirtualService push at 1000 proxies, for 100 pushes).
        self.push_history.append(replace(req, push=None))
        del self.push_history[:-100]
        scope = "full" if req.full else "eds"
        log.info("push %s (%s) for %d proxies", push.version, scope, len(self.connections))
        timeline = PushTimeline(push.version, req.full, req.start, debounced, time.monotonic())
        self.timelines.add(timeline)
        self.heap.on_push(old, req.full, serving=self._grpc is not None)
        del old
        for conn in self.connections.values():
            self.queue.enqueue(conn, req)
        timeline.record_queued(len(self.connections))
        if self._grpc is None:
            self.heap.settle(True, 0)  # the first push, before serving
        else:
            self._spawn(self._settle_when_idle(push.version, req.full))

    async def _settle_when_idle(self, version: str, collect: bool) -> None:
        """Settle the heap once this push has gone out and the ACKs had a moment to come in
        (a full collection takes 0.3-1 s with a thousand proxies: not on the way to them or
        their ACKs), unless a newer push came meanwhile (it settles then). An EDS-only push
        adds few objects: they are frozen without a collection (endpoints may change every
        second). The pushes it replaced are let go first (xds/push_heap.py). It holds the
        push's version, not the push: a newer push frees this one."""
        try:
            while not self.queue.idle:
                await asyncio.sleep(0.05)
        finally:
            self.heap.resume_gc()
        await asyncio.sleep(SETTLE_AFTER)
        timeline = self.timelines.get(version)
        if timeline is not None:
            log.info("push timeline %s", timeline.to_json())
        current = self._push_context
        if current is None or not self.queue.idle:
            return
        self.heap.release(current, self.connections.values())
        if current.version == version:
            self.heap.settle(collect, len(self.connections))

    async def _dispatch(self) -> None:
        """At most `push_concurrency` full pushes in flight (Istio's PILOT_PUSH_THROTTLE);
        EDS-only pushes are a few hundred bytes each and are not held back, and a full push
        whose responses came out small leaves the count once built (xds/stream_loop.py),
        so that small VHDS pushes do not wait on hand-offs a few at a time. A push is handed
        to the stream's task with a callback, not a task per connection (no task made
        per proxy on every endpoint change)."""
        limit = asyncio.Semaphore(self.settings.push_concurrency)
        while (item := await self.queue.dequeue()) is not None:
            conn, req = item
            if req.full:
                await limit.acquire()
            self._hand_over(conn, req, limit if req.full else None)

    def _hand_over(
        self, conn: Connection, req: PushRequest, limit: asyncio.Semaphore | None
    ) -> None:
        def finished() -> None:
            if limit is not None:
                limit.release()
            self.queue.mark_done(conn)

        if conn.id not in self.connections:
            finished()
            return
        conn.events.put_nowait(PushEvent(req, finished))

    def _spawn(self, coro: Any) -> None:
        """A short task of the push pipeline (a heap settle); its failure is logged."""
        task = asyncio.create_task(coro, name=getattr(coro, "__qualname__", None))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(report_task_failure)

    async def stream(
        self,
        requests: AsyncIterator[Any],
        context: grpc.aio.ServicerContext,
        delta: bool,
        wire: bool = False,
        forwarded: bool = False,
        authenticate: Authenticator | None = None,
    ) -> AsyncIterator[Any]:
        """One ADS stream: its first request names the node; then requests and pushes
        (xds/stream_loop.py). With `wire`, responses are `Outgoing` shells around serialized
        bytes (the handler's serializer must be `serialize_response`); else they are
        response messages. `forwarded`: the stream came through the front Envoy, whose
        x-meshpilot-peer names the proxy's address. `authenticate`: what the stream's
        credential proves (TLS ports only); without it the proxy is unverified."""
        try:
            first = await anext(requests)
        except StopAsyncIteration:
            return
        try:  # (a first request has a node: never a Subscription, save from a bad client)
            if isinstance(first, Malformed):
                raise MalformedRequest(first.reason)
            node = parse_node((first.request if isinstance(first, Subscription) else first).node)
        except (ValueError, MalformedRequest) as exc:
            await refuse(context, str(exc))
            return
        if delta and self.settings.vhds:
            node = replace(node, vhds=True)
        peer = forwarded_peer(context) if forwarded else context.peer()
        if authenticate is not None:
            node = replace(node, verified=verified_identity(node, authenticate(context, forwarded)))
        push = self.push_context
        conn = Connection(node, proxy_for(push, node), push, delta=delta, peer=peer)
        del push  # the connection follows the pushes; this frame lives as long as the stream
        self._connect(conn)
        reader = asyncio.create_task(read_requests(requests, conn, self.budget, self.loop.take_ack))
        try:
            async for out in self.loop.serve(conn, first, wire):
                yield out
        except MalformedRequest as exc:
            await refuse(context, str(exc))
        except Exception:
            log.exception("ADS: stream of %s failed", conn.id)
            raise
        finally:
            reader.cancel()
            self._disconnect(conn)
            answered(conn, self.budget)

    def _connect(self, conn: Connection) -> None:
        self.connections[conn.id] = conn
        self._count_clients(conn, 1)
        protocol, verified = "delta" if conn.delta else "sotw", conn.node.verified or "unverified"
        log.info("ADS: %s connected (%s, %s, %s)", conn.id, protocol, conn.peer, verified)

    def _disconnect(self, conn: Connection) -> None:
        if self.connections.pop(conn.id, None) is not None:
            self._count_clients(conn, -1)
        self.queue.remove(conn)
        while not conn.events.empty():
            event = conn.events.get_nowait()
            if isinstance(event, PushEvent):
                event.finish()
        log.info("ADS: %s disconnected", conn.id)

    def _count_clients(self, conn: Connection, change: int) -> None:
        """pilot_xds by version, counted as streams come and go (a recount per connect is
        quadratic while a thousand proxies connect)."""
        gauge, version = self.metrics.xds_clients, conn.proxy.istio_version
        gauge.inc(version, amount=change)
        if gauge.get(version) <= 0:
            del gauge.values[(version,)]
