"""Delta (incremental) ADS: only resources whose bytes changed, and the names removed.

The connection remembers, per type, the version (a hash of the serialized bytes) of every
resource the client has. A response carries the resources whose version differs and, in
`removed_resources`, names the client has that are no longer generated (or that it
subscribed to and that do not exist). A NACKed response's resources are forgotten, so the
next push sends them again.

Per stream as cheap as SotW, for a thousand streams: what a client has is a shared state, and
the step to the next one is worked out once per push and proxy class (xds/delta_versions.py);
the response bytes are assembled on the wire and shared too (xds/resources.py
`delta_response`). An ACK that names only its nonce is recorded without touching the
subscription (`plain_delta_ack`).

Warming: a cluster that changed is re-created by Envoy and waits for its endpoints, so a
CDS response makes the next EDS response resend those clusters' assignments; a first CDS
request is followed by all assignments (Istio's forceEDSPush, envoyproxy/envoy#33607).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence

from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.connection import SHORT_TYPE, Connection, WatchedResource
from meshpilot.xds.delta_versions import (
    NOTHING,
    Versions,
    apply_diff,
    diff,
    forget,
    own_versions,
    step,
)
from meshpilot.xds.generation_errors import GenerationError, generation_failed, with_retries
from meshpilot.xds.grpc_service import LARGE_RESPONSE
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.prepared import PreparedPush, PreparedResponse, keep_prepared
from meshpilot.xds.protocol import Action, should_respond_delta
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.push_request import PushRequest, push_plan
from meshpilot.xds.resources import (
    Resource,
    delta_response,
    generate_resources,
    requested_names,
)
from meshpilot.xds.sotw import record_decision
from meshpilot.xds.vhds import follows_route_answer, vhds_scope
from meshpilot.xds.warmed import keep_warmed, warmed

__all__ = [
    "Versions",
    "accept_delta_request",
    "apply_prepared",
    "on_delta_request",
    "plain_delta_ack",
    "push_delta_responses",
    "warm_delta_push",
]


log = logging.getLogger(__name__)


def on_delta_request(
    conn: Connection, request: discovery_pb2.DeltaDiscoveryRequest, metrics: Metrics
) -> list[bytes]:
    answer = accept_delta_request(conn, request, metrics)
    return [] if answer is None else answer()


def accept_delta_request(
    conn: Connection, request: discovery_pb2.DeltaDiscoveryRequest, metrics: Metrics
) -> Callable[[], list[bytes]] | None:
    """Record a request (ACK or NACK, subscription changes); returns what builds its answer,
    or None when it is owed none. The stream loop calls that once it has a turn of the send
    budget and no longer holds the request: a subscription to 4000 assignments is ~300 kB
    as a message, and hundreds of streams wait for a turn during an initial sync."""
    type_url = request.type_url
    watched = conn.watch(type_url)
    if plain_delta_ack(watched, request):
        assert watched is not None
        conn.watched[type_url] = watched.acked()  # (its nonce is the one sent: a plain ACK)
        conn.in_flight.pop(type_url, None)  # (only a NACK of it needs what was sent)
        return None
    decision = should_respond_delta(watched, request)
    record_decision(type_url, decision.action, metrics)
    sent = conn.in_flight.get(type_url)
    if sent is not None and sent[0] == request.response_nonce:
        del conn.in_flight[type_url]  # answered: ACKed, or NACKed and forgotten here
        if decision.action is Action.NACK:
            forget(conn, conn.push, type_url, sent[1])
    if decision.action is Action.INIT:
        initial = request.initial_resource_versions
        conn.known[type_url] = dict(initial) if initial else NOTHING
    if request.resource_names_unsubscribe:
        known = own_versions(conn, type_url)
        for name in request.resource_names_unsubscribe:
            known.pop(name, None)
    conn.set_watch(type_url, decision.watched)
    conn.mark_always_respond(decision.warm)
    if not decision.respond or type_url not in SHORT_TYPE:
        return None
    first_cds = type_url == TypeUrl.CLUSTER and decision.action is Action.INIT
    then_vhds = type_url == TypeUrl.ROUTE and follows_route_answer(conn)

    def answer() -> list[bytes]:
        out = _contained(conn, type_url, conn.push, metrics, always=True)
        if first_cds:
            conn.known.pop(TypeUrl.ENDPOINT, None)
            out += _contained(conn, TypeUrl.ENDPOINT, conn.push, metrics, always=True)
        if then_vhds:  # new route configs' virtual hosts: Envoy asks for none (xds/vhds.py)
            out += _contained(conn, TypeUrl.VIRTUAL_HOST, conn.push, metrics, always=False)
        return out

    return answer


def plain_delta_ack(
    watched: WatchedResource | None, request: discovery_pb2.DeltaDiscoveryRequest
) -> bool:
    """An ACK of the last response that changes no subscription and is owed no answer: the
    ACK/NACK rules would only record it. Recorded without them, the watched names stay the
    very same set, never copied or compared (an EDS subscription holds thousands of
    names, and every proxy ACKs every endpoint push)."""
    return (
        watched is not None
        and not watched.always_respond
        and request.response_nonce != ""
        and request.response_nonce == watched.nonce_sent
        and not request.resource_names_subscribe
        and not request.resource_names_unsubscribe
        and not request.initial_resource_versions
        and not request.HasField("error_detail")
    )


def push_delta_responses(conn: Connection, req: PushRequest, metrics: Metrics) -> list[bytes]:
    """The types the change can affect for this proxy (only the changed services'
    assignments for an EDS-only push); conn.push is still the previous push."""
    assert req.push is not None
    eds = conn.watched.get(TypeUrl.ENDPOINT)
    eds_names = None if eds is None or eds.wildcard else eds.names
    out: list[bytes] = []
    plan = push_plan(conn.push, req, conn.proxy, conn.watched, eds_names)
    for type_url, names in with_retries(plan, conn):
        if names is None or names:
            out += _contained(conn, type_url, req.push, metrics, False, names, ahead=True)
    return out


def _contained(
    conn: Connection,
    type_url: str,
    push: PushContext,
    metrics: Metrics,
    always: bool,
    only: frozenset[str] | None = None,
    ahead: bool = False,
) -> list[bytes]:
    """`_respond`, with a failed generation reported and nothing sent for the type."""
    try:
        return _respond(conn, type_url, push, metrics, always, only, ahead)
    except GenerationError as err:
        generation_failed(conn, err, metrics)
        return []


def warm_delta_push(conn: Connection, req: PushRequest, proxy: Proxy) -> None:
    """Work out what `push_delta_responses` will for this stream without touching it: done
    while the push waits out its debounce (xds/speculation.py). Its whole outcome, responses
    included, when the stream's state allows (xds/prepared.py); else its resources (and
    the step from its state when that is shared), leaving it only its responses to
    assemble. `proxy`: the one the stream will push with."""
    assert req.push is not None
    if conn.generation_errors:
        return  # its own push retries the failed types (xds/generation_errors.py)
    push = req.push
    eds = conn.watched.get(TypeUrl.ENDPOINT)
    eds_names = None if eds is None or eds.wildcard else eds.names
    warm: list[tuple[str, Collection[str] | None, list[Resource]]] = []
    knowns: list[tuple[str, object]] | None = []
    responses: list[PreparedResponse] = []
    for type_url, only in push_plan(conn.push, req, proxy, conn.watched, eds_names):
        started = time.perf_counter()
        watched = conn.watched.get(type_url)
        if watched is None or (only is not None and not only):
            continue
        last_nonce = watched.nonce_sent
        wanted = requested_names(watched) if only is None else only
        if type_url == TypeUrl.VIRTUAL_HOST:
            wanted, watched = vhds_scope(conn, watched, only)
        resources = generate_resources(push, proxy, type_url, wanted)
        warm.append((type_url, wanted, resources))
        known = conn.known.get(type_url, NOTHING)
        if not isinstance(known, Versions):
            knowns = None  # its own versions: not prepared
            continue
        changed, removed, after = step(push, type_url, known, resources, watched, only)
        if knowns is None:
            continue  # not prepared; the shared step is worked out for the push all the same
        knowns.append((type_url, conn.known.get(type_url)))
        if not (changed or removed):
            continue
        if type_url == TypeUrl.CLUSTER:
            knowns = None  # re-created clusters: the EDS step depends on this one's
            continue
        nonce, response = delta_response(push, type_url, changed, removed, last_nonce)
        build_s = time.perf_counter() - started
        responses.append(
            PreparedResponse(type_url, after, changed, removed, nonce, response, build_s)
        )
    if knowns is not None:
        watching = tuple(conn.watched.values())
        small = all(len(r.response) < LARGE_RESPONSE for r in responses)
        prev = (id(conn.push), conn.push.version)
        prepared = PreparedPush(
            prev, conn.proxy, proxy, watching, tuple(knowns), tuple(responses), small
        )
        keep_prepared(push, id(conn), prepared)
        return
    for type_url, wanted, resources in warm:
        keep_warmed(push, id(conn), type_url, proxy, wanted, resources)


def apply_prepared(
    conn: Connection, prepared: PreparedPush, push: PushContext, metrics: Metrics
) -> list[bytes]:
    """The responses of `push` worked out ahead (xds/prepared.py), recorded as `_respond`
    records its own; the caller checked that they still hold."""
    out: list[bytes] = []
    for r in prepared.responses:
        conn.known[r.type_url] = r.after
        conn.in_flight[r.type_url] = (r.nonce, r.changed)
        conn.record_sent(r.type_url, push.version, r.nonce)
        short = SHORT_TYPE[r.type_url]
        if log.isEnabledFor(logging.DEBUG):
            _log_sent(conn, short, r.changed, r.removed)
        metrics.pushes.inc(short)
        metrics.push_time.observe(r.build_s, short)
        out.append(r.response)
    return out


def _respond(
    conn: Connection,
    type_url: str,
    push: PushContext,
    metrics: Metrics,
    always: bool,
    only: frozenset[str] | None = None,
    ahead: bool = False,
) -> list[bytes]:
    """The response for one type (limited to the names `only`, when given), or nothing when
    nothing changed (and none is owed). `ahead`: a push, whose resources may have been
    generated while it was debounced (xds/warmed.py)."""
    watched = conn.watched.get(type_url)
    if watched is None:
        return []
    started = time.perf_counter()
    last_nonce = watched.nonce_sent
    wanted = requested_names(watched) if only is None else only
    if type_url == TypeUrl.VIRTUAL_HOST:
        wanted, watched = vhds_scope(conn, watched, only)  # route configs' virtual hosts
    resources = warmed(push, id(conn), type_url, conn.proxy, wanted) if ahead else None
    if resources is None:
        resources = generate_resources(push, conn.proxy, type_url, wanted, conn.dependents)
    known = conn.known.get(type_url, NOTHING)
    if isinstance(known, Versions):
        changed, removed, after = step(push, type_url, known, resources, watched, only)
    else:
        changed, removed = diff(known, resources, watched, only)
        after = None
    if not (changed or removed or always):
        return []
    nonce, response = delta_response(push, type_url, changed, removed, last_nonce)
    if after is not None:
        conn.known[type_url] = after
    else:
        apply_diff(known, changed, removed, watched)
    conn.in_flight[type_url] = (nonce, changed)
    conn.record_sent(type_url, push.version, nonce)
    if type_url == TypeUrl.CLUSTER and changed:
        forget(conn, push, TypeUrl.ENDPOINT, changed)  # re-created clusters warm on EDS
    short = SHORT_TYPE[type_url]
    if log.isEnabledFor(logging.DEBUG):
        _log_sent(conn, short, changed, removed)
    metrics.pushes.inc(short)
    metrics.push_time.observe(time.perf_counter() - started, short)
    return [response]


def _log_sent(
    conn: Connection, short: str, changed: Sequence[Resource], removed: Sequence[str]
) -> None:
    """What a response carries (names when few), for tests and debugging."""
    sent: object = [r.name for r in changed] if len(changed) <= 20 else f"{len(changed)} resources"
    log.debug("ADS: %s %s sent %s removed %s", conn.id, short, sent, list(removed))
