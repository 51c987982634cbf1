"""State-of-the-world ADS: answers to requests and pushes, one DiscoveryResponse per type.

Every response carries all resources of its type the proxy watches (all of them for LDS and
CDS, the subscribed names for EDS, RDS and SDS), `version_info` = the push version and a
fresh nonce. A full push sends, in PUSH_ORDER (CDS, EDS, LDS, RDS, SDS: make before break),
the watched types the change can affect for this proxy (model/relevance.py); an EDS-only
push sends only the assignments of the services whose endpoints changed: EDS and RDS are not
state-of-the-world types, so resources left out of a response stay as they are in Envoy
(only LDS and CDS responses must be complete).
Responses are assembled on the wire (xds/resources.py) and handed to gRPC as bytes.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.connection import SHORT_TYPE, Connection, Subscription, request_names
from meshpilot.xds.generation_errors import GenerationError, generation_failed, with_retries
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.protocol import Action, should_respond
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.push_request import PushRequest, push_plan
from meshpilot.xds.resources import (
    CONTROL_PLANE,
    Resource,
    generate_resources,
    new_nonce,
    requested_names,
    sotw_response,
)
from meshpilot.xds.warmed import keep_warmed, warmed

__all__ = ["CONTROL_PLANE", "on_request", "push_responses", "record_decision", "warm_sotw_push"]


def record_decision(type_url: str, action: Action, metrics: Metrics) -> None:
    short = SHORT_TYPE.get(type_url, type_url)
    if action is Action.NACK:
        metrics.rejects.inc(short)
    elif action is Action.STALE:
        metrics.expired_nonce.inc(short)


def on_request(
    conn: Connection, request: discovery_pb2.DiscoveryRequest | Subscription, metrics: Metrics
) -> list[bytes]:
    if isinstance(request, Subscription):  # names recognised from the bytes
        names, request = request.names, request.request
    else:
        names = request_names(request)
    type_url = request.type_url
    previous = conn.watch(type_url)
    decision = should_respond(previous, request, names)
    record_decision(type_url, decision.action, metrics)
    conn.set_watch(type_url, decision.watched)
    conn.mark_always_respond(decision.warm)
    if not decision.respond or type_url not in SHORT_TYPE:
        return []
    last_nonce = previous.nonce_sent if previous else ""  # a first request resets the watch
    try:
        return [respond(conn, type_url, conn.push, metrics, last_nonce=last_nonce)]
    except GenerationError as err:
        generation_failed(conn, err, metrics)
        return []


def push_responses(conn: Connection, req: PushRequest, metrics: Metrics) -> list[bytes]:
    """The responses of one push to this connection (conn.push is still the previous one)."""
    assert req.push is not None
    out = []
    eds = conn.watched.get(TypeUrl.ENDPOINT)
    eds_names = None if eds is None or eds.wildcard else eds.names
    plan = push_plan(conn.push, req, conn.proxy, conn.watched, eds_names)
    for type_url, names in with_retries(plan, conn):
        if names is None or names:
            try:
                out.append(respond(conn, type_url, req.push, metrics, names, ahead=True))
            except GenerationError as err:  # the other types still go
                generation_failed(conn, err, metrics)
    return out


def warm_sotw_push(conn: Connection, req: PushRequest, proxy: Proxy) -> None:
    """Generate into the push's caches the resources `push_responses` will send this stream,
    without touching it (xds/speculation.py). `proxy`: the one the stream will push with."""
    assert req.push is not None
    eds = conn.watched.get(TypeUrl.ENDPOINT)
    eds_names = None if eds is None or eds.wildcard else eds.names
    for type_url, names in push_plan(conn.push, req, proxy, conn.watched, eds_names):
        if names is None or names:
            wanted = requested_names(conn.watched[type_url]) if names is None else names
            resources = generate_resources(req.push, proxy, type_url, wanted)
            keep_warmed(req.push, id(conn), type_url, proxy, wanted, resources)


def respond(
    conn: Connection,
    type_url: str,
    push: PushContext,
    metrics: Metrics,
    names: Collection[str] | None = None,
    last_nonce: str | None = None,
    ahead: bool = False,
) -> bytes:
    """A response with the watched resources of a type (or only `names` of them). `ahead`:
    a push, whose resources may have been generated while it was debounced."""
    started = time.perf_counter()
    watched = conn.watched[type_url]
    wanted = requested_names(watched) if names is None else names
    resources = warmed(push, id(conn), type_url, conn.proxy, wanted) if ahead else None
    if resources is None:
        resources = generate_resources(push, conn.proxy, type_url, wanted, conn.dependents)
    last = watched.nonce_sent if last_nonce is None else last_nonce
    nonce, response = _assemble(push, type_url, resources, last)
    conn.record_sent(type_url, push.version, nonce)
    short = SHORT_TYPE[type_url]
    metrics.pushes.inc(short)
    metrics.push_time.observe(time.perf_counter() - started, short)
    return response


_SHARED = "sotw.shared_responses"


def _assemble(
    push: PushContext, type_url: str, resources: list[Resource], last_nonce: str
) -> tuple[str, bytes]:
    """A fresh nonce and the response bytes, or those already assembled for the same
    resources. Proxies of one class get the very same resources from the push's caches (all
    their route configs and assignments; clusters and listeners differ by the inbound side):
    from the second such proxy on they share one response, nonce included, instead of a
    copy each of megabytes of route configs. A nonce needs to be
    unique within a stream only: a stream about to get the nonce it got last gets a new one.
    The first of a kind is only counted, so responses unique to a proxy are never kept."""
    ids = tuple(map(id, resources))
    memo = push.memo.setdefault(_SHARED, {})
    assert isinstance(memo, dict)
    key = (type_url, hash(ids))
    found = memo.get(key)
    if found is not None and found[0] == ids and found[1] != last_nonce:
        return found[1], found[2]
    nonce = new_nonce()
    response = sotw_response(push.version, type_url, nonce, resources)
    if key in memo and found is None:  # the second of a kind: keep it for the others
        memo[key] = (ids, nonce, response)
    elif key not in memo:
        memo[key] = None
    return nonce, response
