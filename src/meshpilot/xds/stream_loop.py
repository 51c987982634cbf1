"""One ADS stream's loop: its requests and the pushes handed to it, answered in arrival order.

Each stream has one task that handles its requests and its pushes in order (Istio's model),
so per-connection state needs no locks. The first request is answered, then every event of
`Connection.events` (a request, a `PushEvent`, or None at the end) in turn. Large responses
are built only once the stream has a turn of the send budget (xds/grpc_service.py); a push
or request answered by one small response (an EDS push is a few hundred bytes) is handed to
gRPC directly, and a request answered by nothing (an ACK) sends nothing: no generator
layer per event on the way, since an endpoint push reaches every stream. A Delta request is
recorded before its stream waits for a turn, and not held meanwhile (xds/delta.py
`accept_delta_request`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds import grpc_service
from meshpilot.xds.connection import Connection, PushEvent, Subscription
from meshpilot.xds.delta import (
    accept_delta_request,
    apply_prepared,
    on_delta_request,
    plain_delta_ack,
    push_delta_responses,
)
from meshpilot.xds.generation_errors import GenerationError
from meshpilot.xds.grpc_service import Outgoing, SendBudget, send_responses
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.node import proxy_for
from meshpilot.xds.prepared import PreparedPush, take_prepared
from meshpilot.xds.push_request import PushRequest
from meshpilot.xds.push_timeline import PushTimelines
from meshpilot.xds.request_shape import Malformed, MalformedRequest
from meshpilot.xds.resources import prewarm_step
from meshpilot.xds.sotw import on_request, push_responses

__all__ = ["StreamLoop", "stream_proxy"]

log = logging.getLogger(__name__)
_SOTW_PARSE = discovery_pb2.DiscoveryResponse.FromString
_DELTA_PARSE = discovery_pb2.DeltaDiscoveryResponse.FromString


@dataclass(frozen=True, slots=True)
class StreamLoop:
    """What every stream's loop shares: the send budget, the metrics, the push timelines."""

    budget: SendBudget
    metrics: Metrics
    timelines: PushTimelines

    async def serve(self, conn: Connection, first: Any, wire: bool) -> AsyncIterator[Any]:
        """Answer the first request, then requests and pushes in arrival order. With
        `wire`, responses are `Outgoing` shells around serialized bytes; else messages."""
        handle: Callable[..., list[Any]] = on_delta_request if conn.delta else on_request
        budget = self.budget
        reserve = await budget.turn() if wire else 0  # build only once there is room
        responses = handle(conn, first, self.metrics)
        async for out in self._send(conn, responses, wire, reserve):
            yield out
        _prewarm(conn)
        while True:
            conn.idle = True  # (the reader may record a plain ACK meanwhile: `take_ack`)
            event = await conn.events.get()
            conn.idle = False
            if event is None:
                break
            if isinstance(event, Malformed):
                raise MalformedRequest(event.reason)
            if isinstance(event, PushEvent):
                req = event.request
                prepared = take_prepared(req.push, conn, self.metrics.prepared)
                # EDS-only pushes are a few hundred bytes, and small answers worked out
                # ahead are built already: neither waits behind full answers.
                quick = not req.full or (prepared is not None and prepared.small)
                reserve = await budget.turn() if wire and not quick else 0
                try:
                    responses = self._push(conn, req, prepared)
                    del prepared
                    small = all(map(_small, responses))
                    if small:
                        # Built, and small: nothing left worth throttling (the next stream's
                        # push may go), as EDS-only pushes are never held back.
                        event.finish()
                    timeline = self.timelines.get(conn.push.version)
                    if timeline is not None:
                        timeline.record_handed()
                    if wire and not reserve and small:
                        # No budget to charge, no generator to go through.
                        for response in responses:
                            yield Outgoing(response)
                            if timeline is not None:
                                timeline.record_sent()
                        responses.clear()
                    else:
                        async for out in self._send(conn, responses, wire, reserve):
                            yield out
                            if timeline is not None:
                                timeline.record_sent()
                finally:  # also when the stream ends meanwhile: the next push may go
                    event.finish()
                conn.dependents.clear()  # a push sends the dependent types itself
                self.metrics.convergence.observe(time.monotonic() - req.start)
                del req
            elif conn.delta:
                self._record_ack(conn, event)
                answer = accept_delta_request(conn, event, self.metrics)
                event = None  # not held while waiting for a turn (xds/delta.py)
                if answer is not None:
                    reserve = await budget.turn() if wire else 0
                    async for out in self._send(conn, answer(), wire, reserve):
                        yield out
                    del answer
                _prewarm(conn)
            else:
                self._record_ack(conn, event)
                # An ACK answered by nothing waits for no turn (a thousand per endpoint push).
                reserve = await budget.turn() if wire and not _plain_ack(conn, event) else 0
                responses = handle(conn, event, self.metrics)
                if responses or reserve:
                    async for out in self._send(conn, responses, wire, reserve):
                        yield out
                _prewarm(conn)
            del event  # a request or push must not outlive its handling

    async def _send(
        self, conn: Connection, responses: list[Any], wire: bool, reserve: int
    ) -> AsyncIterator[Any]:
        if wire:
            self.budget.admit(responses, reserve)
            if len(responses) == 1 and _small(responses[0]):
                yield Outgoing(responses.pop())  # the common small answer: no budget
                return
        if responses:
            hold = conn.hold if wire else None
            parse = _DELTA_PARSE if conn.delta else _SOTW_PARSE  # (messages, without `wire`)
            async for out in send_responses(self.budget, responses, wire, hold, wire, parse):
                yield out

    def _push(self, conn: Connection, req: PushRequest, prepared: PreparedPush | None) -> list[Any]:
        assert req.push is not None
        if prepared is not None:  # worked out while the push was debounced
            conn.proxy = prepared.proxy
            responses: list[Any] = apply_prepared(conn, prepared, req.push, self.metrics)
            conn.push = req.push
            return responses
        conn.proxy = stream_proxy(conn, req)
        # conn.push is still the previous push: relevance compares the two.
        push_fn = push_delta_responses if conn.delta else push_responses
        responses = push_fn(conn, req, self.metrics)
        conn.push = req.push
        return responses

    def take_ack(self, conn: Connection, request: Any) -> bool:
        """Record a plain ACK (of the last response, changing no subscription, owed no
        answer) as the stream's loop would, from the stream's reader, while the loop waits
        with nothing queued before it (so the order of events is kept); False for anything
        else, which goes to the loop. Every proxy ACKs every push: each plain ACK then costs
        no queue hand-off and no task wake-up."""
        if not conn.idle or not conn.events.empty():
            return False
        if conn.delta:
            if not plain_delta_ack(conn.watched.get(request.type_url), request):
                return False
            self._record_ack(conn, request)
            accept_delta_request(conn, request, self.metrics)
        else:
            if not _plain_ack(conn, request):
                return False
            self._record_ack(conn, request)
            on_request(conn, request, self.metrics)
        _prewarm(conn)
        return True

    def _record_ack(self, conn: Connection, request: Any) -> None:
        """Count an ACK of the last response towards its push's timeline."""
        req = request.request if isinstance(request, Subscription) else request
        watched = conn.watched.get(req.type_url)
        if watched is None or not req.response_nonce or req.response_nonce != watched.nonce_sent:
            return  # not an answer to the last response (Delta ACKs name no version)
        timeline = self.timelines.get(watched.version_sent)
        if timeline is not None and not req.HasField("error_detail"):
            timeline.record_ack()


def stream_proxy(conn: Connection, req: PushRequest) -> Proxy:
    """The Proxy a stream pushes `req` with: its own, unless the push is full for it and
    would make another (its pod changed)."""
    assert req.push is not None
    if req.full_for(conn.proxy) and not _same_proxy(conn, req.push):
        return proxy_for(req.push, conn.node)
    return conn.proxy


def _same_proxy(conn: Connection, push: PushContext) -> bool:
    """Would `proxy_for(push, conn.node)` make a Proxy equal to the stream's? It reads only
    the node, the node's Pod and the domain suffix: the very Pod object in both pushes (a
    change of other objects keeps it) makes the same Proxy, so a VirtualService change
    does not make every stream's Proxy again."""
    old, node = conn.push, conn.node
    if old.domain_suffix != push.domain_suffix:
        return False
    return old.pod(node.namespace, node.pod_name) is push.pod(node.namespace, node.pod_name)


def _prewarm(conn: Connection, after: float = 0.01) -> None:
    """Build what Envoy will ask for next (assignments and listeners after CDS, route
    configs after LDS) while it applies what was just sent, a moment later so
    that gRPC gets the answer out first (without it, Envoy sits idle while a
    thousand-host route config is built)."""
    if not conn.dependents:
        return
    pending, conn.dependents = conn.dependents, []
    loop = asyncio.get_running_loop()
    loop.call_later(after, _prewarm_next, conn, pending, conn.push, loop)


def _prewarm_next(
    conn: Connection,
    pending: list[tuple[str, frozenset[str]]],
    push: PushContext,
    loop: asyncio.AbstractEventLoop,
) -> None:
    """One type per turn of the event loop (seconds each at 5k). A module function, not a
    closure that schedules itself: that would be a reference cycle, keeping its push alive
    (frozen, past the next pushes) until a full collection."""
    if conn.push is not push:
        return  # a push came: it sent these types itself
    if not conn.events.empty():  # a request goes first; the rest after it
        conn.dependents[:0] = pending
        return
    try:
        pending.extend(prewarm_step(push, conn.proxy, *pending.pop(0)))
    except GenerationError:  # reported when the proxy asks for it (xds/generation_errors.py)
        log.debug("ADS: building ahead for %s failed", conn.id, exc_info=True)
    if pending:
        loop.call_soon(_prewarm_next, conn, pending, push, loop)


def _plain_ack(conn: Connection, event: Any) -> bool:
    """An ACK of the last response repeating the very subscription watched (recognised from
    its bytes, xds/connection.py): the ACK/NACK rules answer it with nothing."""
    if not isinstance(event, Subscription):
        return False
    watched = conn.watched.get(event.request.type_url)
    return (
        watched is not None
        and event.names is watched.names
        and event.request.response_nonce != ""
        and event.request.response_nonce == watched.nonce_sent
        and not watched.always_respond
    )


def _small(response: Any) -> bool:
    return isinstance(response, bytes) and len(response) < grpc_service.LARGE_RESPONSE
