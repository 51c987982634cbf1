"""Delta (incremental) ADS: only resources whose bytes changed, and the names removed.

The connection remembers, per type, the version (a hash of the serialized bytes) of every
resource the client has. A response carries the resources whose version differs and, in
`removed_resources`, names the client has that are no longer generated (or that it
subscribed to and that do not exist). A NACKed response's resources are forgotten, so the
next push sends them again.

Per stream as cheap as SotW (B3: 1000 streams): streams of one proxy class are mostly in the
same state, so that state (`Versions`, never changed once made) is shared, and the step
from it to the next one (what to send, what to remove, the state after) is worked out once
per push for all of them (`_step`); the response bytes are assembled on the wire and shared
too (xds/resources.py `delta_response`). A stream whose state becomes its own (a NACK, an
unsubscription, a reconnect naming what it has) gets a plain dict, changed in place. An ACK
that names only its nonce is recorded without touching the subscription (`plain_delta_ack`).

Warming: a cluster that changed is re-created by Envoy and waits for its endpoints, so a
CDS response makes the next EDS response resend those clusters' assignments; a first CDS
request is followed by all assignments (Istio's forceEDSPush, envoyproxy/envoy#33607).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence

from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.connection import SHORT_TYPE, Connection, WatchedResource
from meshpilot.xds.grpc_service import LARGE_RESPONSE
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.prepared import PreparedPush, PreparedResponse, keep_prepared
from meshpilot.xds.protocol import Action, should_respond_delta
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.push_request import PushRequest, push_plan
from meshpilot.xds.resources import (
    Resource,
    SharedResources,
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


_ABSENT = ""  # the version of a subscribed name the client was told does not exist


class Versions(dict[str, str]):
    """The versions of the resources of one type a client has, by name, shared by the
    streams in the same state and never changed once made: a stream moves to another one
    (`_step`), or, when its state becomes its own (a NACK, an unsubscription, a reconnect
    naming what it has), to a plain dict that is changed in place."""

    __slots__ = ("__weakref__",)


log = logging.getLogger(__name__)

_NOTHING = Versions()  # a stream that has nothing of a type yet
_STEPS = "xds.delta_steps"
_FORGET = "xds.delta_forget"


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
    as a message, and hundreds of streams wait for a turn during an initial sync (B3)."""
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
            _forget(conn, conn.push, type_url, sent[1])
    if decision.action is Action.INIT:
        initial = request.initial_resource_versions
        conn.known[type_url] = dict(initial) if initial else _NOTHING
    if request.resource_names_unsubscribe:
        known = _own(conn, type_url)
        for name in request.resource_names_unsubscribe:
            known.pop(name, None)
    conn.set_watch(type_url, decision.watched)
    conn.mark_always_respond(decision.warm)
    if not decision.respond or type_url not in SHORT_TYPE:
        return None
    first_cds = type_url == TypeUrl.CLUSTER and decision.action is Action.INIT
    then_vhds = type_url == TypeUrl.ROUTE and follows_route_answer(conn)

    def answer() -> list[bytes]:
        out = _respond(conn, type_url, conn.push, metrics, always=True)
        if first_cds:
            conn.known.pop(TypeUrl.ENDPOINT, None)
            out += _respond(conn, TypeUrl.ENDPOINT, conn.push, metrics, always=True)
        if then_vhds:  # new route configs' virtual hosts: Envoy asks for none (xds/vhds.py)
            out += _respond(conn, TypeUrl.VIRTUAL_HOST, conn.push, metrics, always=False)
        return out

    return answer


def plain_delta_ack(
    watched: WatchedResource | None, request: discovery_pb2.DeltaDiscoveryRequest
) -> bool:
    """An ACK of the last response that changes no subscription and is owed no answer: the
    ACK/NACK rules would only record it. Recorded without them, the watched names stay the
    very same set, never copied or compared (B3: an EDS subscription of 4000 names, a
    thousand ACKs per endpoint push, each copying and hashing it five times)."""
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
    for type_url, names in push_plan(conn.push, req, conn.proxy, conn.watched, eds_names):
        if names is None or names:
            out += _respond(conn, type_url, req.push, metrics, always=False, only=names, ahead=True)
    return out


def warm_delta_push(conn: Connection, req: PushRequest, proxy: Proxy) -> None:
    """Work out what `push_delta_responses` will for this stream without touching it: done
    while the push waits out its debounce (xds/speculation.py). Its whole outcome, responses
    included, when the stream's state allows (xds/prepared.py); else its resources (and
    the step from its state when that is shared), leaving it only its responses to
    assemble. `proxy`: the one the stream will push with."""
    assert req.push is not None
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
        known = conn.known.get(type_url, _NOTHING)
        if not isinstance(known, Versions) or knowns is None:
            knowns = None  # its own versions: not prepared
            continue
        knowns.append((type_url, conn.known.get(type_url)))
        changed, removed, after = _step(push, type_url, known, resources, watched, only)
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
        prepared = PreparedPush(
            conn.push, conn.proxy, proxy, watching, tuple(knowns), tuple(responses), small
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
    known = conn.known.get(type_url, _NOTHING)
    if isinstance(known, Versions):
        changed, removed, after = _step(push, type_url, known, resources, watched, only)
    else:
        changed, removed = _diff(known, resources, watched, only)
        after = None
    if not (changed or removed or always):
        return []
    nonce, response = delta_response(push, type_url, changed, removed, last_nonce)
    if after is not None:
        conn.known[type_url] = after
    else:
        _apply(known, changed, removed, watched)
    conn.in_flight[type_url] = (nonce, changed)
    conn.record_sent(type_url, push.version, nonce)
    if type_url == TypeUrl.CLUSTER and changed:
        _forget(conn, push, TypeUrl.ENDPOINT, changed)  # re-created clusters warm on EDS
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


def _diff(
    known: Mapping[str, str],
    resources: Sequence[Resource],
    watched: WatchedResource,
    only: frozenset[str] | None,
) -> tuple[list[Resource], list[str]]:
    """The resources whose version the client does not have, and the names to remove: those
    it has that are no longer generated, and subscribed ones that do not exist."""
    changed = [r for r in resources if known.get(r.name) != r.version]
    generated = {r.name for r in resources}
    scope = known.keys() if only is None else only & known.keys()
    gone = {n for n in scope if known[n] != _ABSENT and n not in generated}
    if not watched.wildcard:
        names = watched.names if only is None else only & watched.names
        gone |= {n for n in names if n not in known and n not in generated}
    return changed, sorted(gone)


def _apply(
    known: dict[str, str], changed: Sequence[Resource], removed: Sequence[str], w: WatchedResource
) -> None:
    for r in changed:
        known[r.name] = r.version
    for name in removed:
        if not w.wildcard and name in w.names:
            known[name] = _ABSENT  # told once that a subscribed name does not exist
        else:
            known.pop(name, None)


def _step(
    push: PushContext,
    type_url: str,
    known: Versions,
    resources: list[Resource],
    watched: WatchedResource,
    only: frozenset[str] | None,
) -> tuple[list[Resource], list[str], Versions]:
    """`_diff` and `_apply` for a stream in a shared state, done once per push for all the
    streams in that state with the same resources and subscription (a proxy class: the
    initial sync's 4000 assignments, an endpoint push's one) and shared by them: no
    per-stream dict of thousands of versions, no per-stream diff. The source state is held
    weakly (a state left by every stream is freed), and checked by identity."""
    memo = push.memo.setdefault(_STEPS, {})
    assert isinstance(memo, dict)
    # A class's shared list (VHDS: ~2000 virtual hosts) is known by its identity: no walk
    # over its items per stream (B3: 1000 streams per VirtualService change).
    shared = isinstance(resources, SharedResources)
    ids = () if shared else tuple(map(id, resources))
    names = watched.names  # large subscriptions are one shared set per class (connection.py)
    which = id(resources) if shared else hash(ids)
    key = (type_url, id(known), which, names if len(names) < 64 else id(names), only)
    found = memo.get(key)
    if (
        found is None
        or found[0]() is not known
        or not (found[1] is names or (len(names) < 64 and found[1] == names))
        or found[2] != watched.wildcard
        or not (found[3] is resources if shared else tuple(map(id, found[3])) == ids)
    ):
        changed, removed = _diff(known, resources, watched, only)
        if len(changed) == len(resources):
            changed = resources  # all of them (a first answer): one list kept, not two
        after = known
        if changed or removed:
            after = Versions(known)
            _apply(after, changed, removed, watched)
        found = (weakref.ref(known), names, watched.wildcard, resources, changed, removed, after)
        memo[key] = found
    return found[4], found[5], found[6]


def _own(conn: Connection, type_url: str) -> dict[str, str]:
    """The stream's own, changeable copy of its versions of a type."""
    known = conn.known.get(type_url)
    if known is None or isinstance(known, Versions):
        known = conn.known[type_url] = dict(known or {})
    return known


def _forget(
    conn: Connection, push: PushContext, type_url: str, resources: Sequence[Resource]
) -> None:
    """The client no longer has these resources at their version (they were NACKed, or
    their clusters are re-created and warm on their assignments): the next response of
    the type sends them. Shared states move to a shared state, once per push."""
    known = conn.known.get(type_url)
    if not known:
        return
    if not isinstance(known, Versions):
        for r in resources:
            known.pop(r.name, None)
        return
    memo = push.memo.setdefault(_FORGET, {})
    assert isinstance(memo, dict)
    key = (type_url, id(known), id(resources))
    found = memo.get(key)
    if found is None or found[0]() is not known or found[1] is not resources:
        after = known
        if any(r.name in known for r in resources):
            after = Versions(known)
            for r in resources:
                after.pop(r.name, None)
        found = memo[key] = (weakref.ref(known), resources, after)
    conn.known[type_url] = found[2]
