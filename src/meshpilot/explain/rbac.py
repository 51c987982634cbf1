"""Envoy RBAC evaluated for one request: which policy (hence which AuthorizationPolicy and
rule) matched, and what the action makes of it.

Metadata matchers (JWT claims) and filter state cannot be evaluated for a request without a
token: they count as not matching, and the verdict says so.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from envoy.config.core.v3 import address_pb2
from envoy.config.rbac.v3 import rbac_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.type.matcher.v3 import string_pb2

from meshpilot.explain.request import Request
from meshpilot.explain.route_match import route_mismatch

__all__ = ["Peer", "RbacVerdict", "evaluate_rbac"]


@dataclass(frozen=True, slots=True)
class Peer:
    """What the destination's Envoy knows of the caller and the connection."""

    principal: str  # the SPIFFE ID from the peer certificate; "" on plaintext
    source_ip: str
    dest_port: int
    request: Request | None  # None on a TCP connection


@dataclass(frozen=True, slots=True)
class RbacVerdict:
    allowed: bool
    action: str  # ALLOW, DENY or LOG
    policy: str  # the RBAC policy that matched ("" if none)
    reason: str
    unevaluated: bool = False  # a JWT-claim (metadata) matcher was met


def evaluate_rbac(rbac: rbac_pb2.RBAC, peer: Peer) -> RbacVerdict:
    action = rbac_pb2.RBAC.Action.Name(rbac.action)
    seen = _Seen()
    for name in sorted(rbac.policies):
        policy = rbac.policies[name]
        if any(_permission(p, peer, seen) for p in policy.permissions) and any(
            _principal(p, peer, seen) for p in policy.principals
        ):
            allowed = action != "DENY"
            return RbacVerdict(allowed, action, name, f"{action} policy {name} matches")
    if action == "ALLOW":
        why = "no ALLOW policy matches, so the request is denied"
        return RbacVerdict(False, action, "", why, seen.metadata)
    return RbacVerdict(True, action, "", f"no {action} policy matches", seen.metadata)


@dataclass(slots=True)
class _Seen:
    """Whether the walk met a matcher it cannot evaluate (JWT claims in metadata)."""

    metadata: bool = False


def _string(m: string_pb2.StringMatcher, value: str) -> bool:
    got, fold = (value.lower(), str.lower) if m.ignore_case else (value, str)
    which = m.WhichOneof("match_pattern")
    if which == "exact":
        return got == fold(m.exact)
    if which == "prefix":
        return got.startswith(fold(m.prefix))
    if which == "suffix":
        return got.endswith(fold(m.suffix))
    if which == "contains":
        return fold(m.contains) in got
    if which == "safe_regex":
        return re.fullmatch(m.safe_regex.regex, value) is not None
    return False


def _cidr(c: address_pb2.CidrRange, ip: str) -> bool:
    if not ip:
        return False
    net = ipaddress.ip_network(f"{c.address_prefix}/{c.prefix_len.value}", strict=False)
    return ipaddress.ip_address(ip) in net


def _permission(p: rbac_pb2.Permission, peer: Peer, seen: _Seen) -> bool:
    which = p.WhichOneof("rule")
    req = peer.request
    if which == "any":
        return bool(p.any)
    if which == "and_rules":
        return all(_permission(r, peer, seen) for r in p.and_rules.rules)
    if which == "or_rules":
        return any(_permission(r, peer, seen) for r in p.or_rules.rules)
    if which == "not_rule":
        return not _permission(p.not_rule, peer, seen)
    if which == "destination_port":
        return bool(p.destination_port == peer.dest_port)
    if which == "destination_port_range":
        return bool(p.destination_port_range.start <= peer.dest_port < p.destination_port_range.end)
    if which == "header":
        if req is None:
            return False
        return route_mismatch(rc.RouteMatch(prefix="/", headers=[p.header]), req) is None
    if which == "url_path":
        return req is not None and _string(p.url_path.path, req.path.split("?", 1)[0])
    if which == "metadata":
        seen.metadata = True
        return bool(p.metadata.invert)
    return False


def _principal(p: rbac_pb2.Principal, peer: Peer, seen: _Seen) -> bool:
    which = p.WhichOneof("identifier")
    if which == "any":
        return bool(p.any)
    if which == "and_ids":
        return all(_principal(i, peer, seen) for i in p.and_ids.ids)
    if which == "or_ids":
        return any(_principal(i, peer, seen) for i in p.or_ids.ids)
    if which == "not_id":
        return not _principal(p.not_id, peer, seen)
    if which == "authenticated":
        if not peer.principal:
            return False
        if not p.authenticated.HasField("principal_name"):
            return True
        return _string(p.authenticated.principal_name, peer.principal)
    if which in ("direct_remote_ip", "remote_ip", "source_ip"):
        return _cidr(getattr(p, which), peer.source_ip)
    if which == "header":
        req = peer.request
        if req is None:
            return False
        return route_mismatch(rc.RouteMatch(prefix="/", headers=[p.header]), req) is None
    if which == "url_path":
        return peer.request is not None and _string(p.url_path.path, peer.request.path)
    if which == "metadata":
        seen.metadata = True
        return bool(p.metadata.invert)
    return False
