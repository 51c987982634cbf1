"""The ACK/NACK rules of the xDS protocol as pure functions (Istio's ShouldRespond).

`should_respond(watched, request)` takes what a connection knows of one type and the
request Envoy sent for it, and returns a `Decision`: whether to answer, why, and the next
`WatchedResource` (None: no longer watched). Table-tested in tests/unit/xds_server.

SotW rules, in order:
- error_detail set: a NACK of the response with that nonce. Record the error; don't answer.
- no names for a type that is not a wildcard type (EDS, RDS, SDS): unsubscribe.
- no nonce, or nothing known of the type: a first request (or a reconnect). Answer.
- nonce other than the last one sent: stale (a newer response is on its way). Ignore.
- otherwise an ACK: record it; answer only if the names grew (non-wildcard types) or
  changed (wildcard types), or if a dependent type asked to be answered (EDS after CDS).
Delta differs: subscriptions change by difference and come with or without a nonce.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from enum import StrEnum

from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.xds.connection import WatchedResource
from meshpilot.xds.protos import TypeUrl

__all__ = [
    "WILDCARD_TYPES",
    "Action",
    "Decision",
    "should_respond",
    "should_respond_delta",
]

WILDCARD_TYPES = frozenset({TypeUrl.LISTENER, TypeUrl.CLUSTER})
# A first request for a type makes these types answer their next request even if it
# looks like an ACK: clusters warm on EDS (envoyproxy/envoy#13009).
WARMING_DEPENDENCIES = {TypeUrl.CLUSTER: frozenset({TypeUrl.ENDPOINT})}
WILDCARD = "*"


class Action(StrEnum):
    INIT = "init"
    ACK = "ack"
    NACK = "nack"
    STALE = "stale"
    RESOURCE_CHANGE = "resource_change"
    UNSUBSCRIBE = "unsubscribe"
    FORCED = "forced"  # an ACK answered because a dependent type is warming


@dataclass(frozen=True, slots=True)
class Decision:
    respond: bool
    action: Action
    watched: WatchedResource | None
    # Types whose next request must be answered (see WARMING_DEPENDENCIES).
    warm: frozenset[str] = frozenset()
    # Names newly subscribed by this request (answer with these at least).
    added: frozenset[str] = frozenset()


def _wildcard(type_url: str, names: frozenset[str]) -> bool:
    return type_url in WILDCARD_TYPES and (not names or WILDCARD in names)


def _nack(
    watched: WatchedResource | None, type_url: str, names: frozenset[str], nonce: str, error: str
) -> Decision:
    if watched is None:  # a NACK on a fresh stream: start over with current config
        fresh = WatchedResource(
            type_url, names - {WILDCARD}, _wildcard(type_url, names), last_error=error
        )
        return Decision(True, Action.INIT, fresh)
    return Decision(False, Action.NACK, replace(watched, last_error=error, nonce_nacked=nonce))


def should_respond(
    watched: WatchedResource | None,
    request: discovery_pb2.DiscoveryRequest,
    names: frozenset[str] | None = None,  # the request's names, if already at hand
) -> Decision:
    type_url = request.type_url
    names = frozenset(request.resource_names) if names is None else names
    if request.HasField("error_detail"):
        error = request.error_detail.message
        return _nack(watched, type_url, names, request.response_nonce, error)
    if not names and type_url not in WILDCARD_TYPES:
        return Decision(False, Action.UNSUBSCRIBE, None)
    if not request.response_nonce or watched is None:
        fresh = WatchedResource(type_url, names - {WILDCARD}, _wildcard(type_url, names))
        return Decision(True, Action.INIT, fresh, WARMING_DEPENDENCIES.get(type_url, frozenset()))
    if request.response_nonce != watched.nonce_sent:
        return Decision(False, Action.STALE, watched)
    acked = replace(
        watched,
        names=names - {WILDCARD} if WILDCARD in names else names,
        wildcard=_wildcard(type_url, names),
        nonce_acked=request.response_nonce,
        version_acked=request.version_info,
        last_error="",
        always_respond=False,
        acked_at=time.time(),
    )
    same = acked.names is watched.names or acked.names == watched.names  # ACKs: identical
    added = frozenset() if same else acked.names - watched.names
    if watched.always_respond:
        return Decision(True, Action.FORCED, acked)
    if same:
        return Decision(False, Action.ACK, acked)
    if type_url not in WILDCARD_TYPES and not added:
        return Decision(False, Action.ACK, acked)  # only removals: nothing to send
    return Decision(True, Action.RESOURCE_CHANGE, acked, added=added)


def should_respond_delta(
    watched: WatchedResource | None, request: discovery_pb2.DeltaDiscoveryRequest
) -> Decision:
    type_url = request.type_url
    subscribe = frozenset(request.resource_names_subscribe)
    if request.HasField("error_detail"):
        error = request.error_detail.message
        return _nack(watched, type_url, subscribe, request.response_nonce, error)
    initial = frozenset(request.initial_resource_versions)
    unsubscribe = frozenset(request.resource_names_unsubscribe)
    if watched is None:
        names = (subscribe | initial) - unsubscribe
        wildcard = WILDCARD in names or (not subscribe and type_url in WILDCARD_TYPES)
        fresh = WatchedResource(type_url, names - {WILDCARD}, wildcard)
        return Decision(True, Action.INIT, fresh, WARMING_DEPENDENCIES.get(type_url, frozenset()))
    nonce = request.response_nonce
    if nonce and nonce != watched.nonce_sent:
        return Decision(False, Action.STALE, watched)
    names = (watched.names | subscribe | initial) - unsubscribe
    wildcard = (watched.wildcard or WILDCARD in subscribe) and WILDCARD not in unsubscribe
    current = replace(watched, names=names - {WILDCARD}, wildcard=wildcard, always_respond=False)
    if nonce:  # an ACK (possibly carrying subscription changes too)
        current = replace(
            current,
            nonce_acked=nonce,
            version_acked=watched.version_sent,
            last_error="",
            acked_at=time.time(),
        )
    added = current.names - watched.names
    if added or (current.wildcard and not watched.wildcard):
        return Decision(True, Action.RESOURCE_CHANGE, current, added=added)
    if watched.always_respond:
        return Decision(True, Action.FORCED, current)
    if current.names != watched.names:
        return Decision(False, Action.UNSUBSCRIBE, current)  # removals need no answer
    return Decision(False, Action.ACK, current)
