"""Delta (incremental) ADS: only resources whose bytes changed, and the names removed.

The connection remembers, per type, the version (a hash of the serialized bytes) of every
resource the client has. A response carries the resources whose version differs and, in
`removed_resources`, names the client has that are no longer generated (or that it
subscribed to and that do not exist). A NACKed response's resources are forgotten, so the
next push sends them again.

Warming: a cluster that changed is re-created by Envoy and waits for its endpoints, so a
CDS response makes the next EDS response resend those clusters' assignments; a first CDS
request is followed by all assignments (Istio's forceEDSPush, envoyproxy/envoy#33607).
"""

from __future__ import annotations

import time

from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.model.push_context import PushContext
from meshpilot.xds.connection import SHORT_TYPE, Connection
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.protocol import Action, should_respond_delta
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.push_request import PushRequest, push_plan
from meshpilot.xds.resources import CONTROL_PLANE, generate_resources, new_nonce, requested_names
from meshpilot.xds.sotw import record_decision

__all__ = ["on_delta_request", "push_delta_responses"]


_ABSENT = ""  # the version of a subscribed name the client was told does not exist


def on_delta_request(
    conn: Connection, request: discovery_pb2.DeltaDiscoveryRequest, metrics: Metrics
) -> list[discovery_pb2.DeltaDiscoveryResponse]:
    type_url = request.type_url
    decision = should_respond_delta(conn.watch(type_url), request)
    record_decision(type_url, decision.action, metrics)
    if decision.action is Action.NACK:
        _forget_in_flight(conn, type_url, request.response_nonce)
    if decision.action is Action.INIT:
        conn.known[type_url] = dict(request.initial_resource_versions)
    known = conn.known.get(type_url, {})
    for name in request.resource_names_unsubscribe:
        known.pop(name, None)
    conn.set_watch(type_url, decision.watched)
    conn.mark_always_respond(decision.warm)
    if not decision.respond or type_url not in SHORT_TYPE:
        return []
    out = _respond(conn, type_url, conn.push, metrics, always=True)
    if type_url == TypeUrl.CLUSTER and decision.action is Action.INIT:
        conn.known.pop(TypeUrl.ENDPOINT, None)
        out += _respond(conn, TypeUrl.ENDPOINT, conn.push, metrics, always=True)
    return out


def push_delta_responses(
    conn: Connection, req: PushRequest, metrics: Metrics
) -> list[discovery_pb2.DeltaDiscoveryResponse]:
    """The types the change can affect for this proxy (only the changed services'
    assignments for an EDS-only push); conn.push is still the previous push."""
    assert req.push is not None
    eds = conn.watched.get(TypeUrl.ENDPOINT)
    eds_names = None if eds is None or eds.wildcard else eds.names
    out: list[discovery_pb2.DeltaDiscoveryResponse] = []
    for type_url, names in push_plan(conn.push, req, conn.proxy, conn.watched, eds_names):
        if names is None or names:
            out += _respond(conn, type_url, req.push, metrics, always=False, only=names)
    return out


def _forget_in_flight(conn: Connection, type_url: str, nonce: str) -> None:
    sent = conn.in_flight.get(type_url)
    if sent and sent[0] == nonce:
        known = conn.known.get(type_url, {})
        for name in sent[1]:
            known.pop(name, None)


def _respond(
    conn: Connection,
    type_url: str,
    push: PushContext,
    metrics: Metrics,
    always: bool,
    only: frozenset[str] | None = None,
) -> list[discovery_pb2.DeltaDiscoveryResponse]:
    """The response for one type (limited to the names `only`, when given), or nothing when
    nothing changed (and none is owed)."""
    watched = conn.watched.get(type_url)
    if watched is None:
        return []
    started = time.perf_counter()
    wanted = requested_names(watched) if only is None else only
    resources = generate_resources(push, conn.proxy, type_url, wanted, conn.dependents)
    known = conn.known.setdefault(type_url, {})
    changed = [r for r in resources if known.get(r.name) != r.version]
    generated = {r.name for r in resources}
    scope = known.keys() if only is None else only & known.keys()
    gone = {n for n in scope if known[n] != _ABSENT and n not in generated}
    if not watched.wildcard:
        names = watched.names if only is None else only & watched.names
        gone |= {n for n in names if n not in known and n not in generated}
    removed = sorted(gone)
    if not (changed or removed or always):
        return []
    nonce = new_nonce()
    response = discovery_pb2.DeltaDiscoveryResponse(
        system_version_info=push.version, type_url=type_url, nonce=nonce
    )
    response.control_plane.identifier = CONTROL_PLANE
    for r in changed:
        response.resources.add(name=r.name, version=r.version, resource=r.packed(type_url))
        known[r.name] = r.version
    response.removed_resources.extend(removed)
    for name in removed:
        if not watched.wildcard and name in watched.names:
            known[name] = _ABSENT  # told once that a subscribed name does not exist
        else:
            known.pop(name, None)
    conn.in_flight[type_url] = (nonce, frozenset(r.name for r in changed))
    conn.record_sent(type_url, push.version, nonce)
    if type_url == TypeUrl.CLUSTER:
        eds_known = conn.known.get(TypeUrl.ENDPOINT, {})
        for r in changed:
            eds_known.pop(r.name, None)  # re-created clusters warm on their assignment
    short = SHORT_TYPE[type_url]
    metrics.pushes.inc(short)
    metrics.push_time.observe(time.perf_counter() - started, short)
    return [response]
