"""PushRequest: what a push is for, merged while debouncing and while queued per connection.

A request is *full* (every xDS type is regenerated) unless every changed object is an
endpoint source (Pods, Endpoints, EndpointSlices, WorkloadEntries) and, once the new
PushContext is built, the services themselves are unchanged and only services whose
endpoints travel by EDS gained or lost endpoints. Then only EDS is pushed (Istio's
incremental EDS), except to a proxy whose own pod or addresses changed: it gets a full push.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Endpoint, Resolution

__all__ = [
    "ENDPOINT_KINDS",
    "PushRequest",
    "classify_endpoint_push",
    "request_for_change",
    "trigger_reasons",
]

# Kinds whose changes can be served by EDS alone (Istio: endpoint events, not config events).
ENDPOINT_KINDS: frozenset[Kind] = frozenset(
    {Kind.POD, Kind.ENDPOINTS, Kind.ENDPOINT_SLICE, Kind.WORKLOAD_ENTRY}
)

# Istio's push trigger names (pilot_push_triggers{type=...}) by kind; others are "config".
_REASON_BY_KIND: Mapping[Kind, str] = {
    Kind.POD: "endpoint",
    Kind.ENDPOINTS: "endpoint",
    Kind.ENDPOINT_SLICE: "endpoint",
    Kind.WORKLOAD_ENTRY: "endpoint",
    Kind.SECRET: "secret",
    Kind.NAMESPACE: "namespace",
    Kind.SERVICE: "service",
    Kind.MESH_CONFIG: "global",
}


@dataclass(frozen=True, slots=True)
class PushRequest:
    full: bool = True
    configs_updated: frozenset[ConfigKey] = frozenset()
    reasons: frozenset[str] = frozenset()
    forced: bool = False
    # When the first change behind this request happened (time.monotonic()).
    start: float = field(default_factory=time.monotonic)
    # The push context to send; set once it is built.
    push: PushContext | None = None
    # EDS-only requests: endpoint addresses that appeared, left or changed.
    changed_addresses: frozenset[str] = frozenset()

    def merge(self, other: PushRequest) -> PushRequest:
        """Both requests in one: full wins, the later push context wins, the earliest start."""
        return PushRequest(
            full=self.full or other.full,
            configs_updated=self.configs_updated | other.configs_updated,
            reasons=self.reasons | other.reasons,
            forced=self.forced or other.forced,
            start=min(self.start, other.start),
            push=other.push or self.push,
            changed_addresses=self.changed_addresses | other.changed_addresses,
        )

    def full_for(self, proxy: Proxy) -> bool:
        """A full push for this proxy: the request is full, or it names the proxy's own pod
        or one of its addresses (its identity or inbound side may have changed)."""
        if self.full:
            return True
        own = ConfigKey(Kind.POD, proxy.namespace, proxy.pod_name)
        return own in self.configs_updated or not self.changed_addresses.isdisjoint(
            proxy.ip_addresses
        )


def trigger_reasons(keys: Iterable[ConfigKey]) -> frozenset[str]:
    return frozenset(_REASON_BY_KIND.get(key.kind, "config") for key in keys)


def request_for_change(keys: frozenset[ConfigKey], start: float | None = None) -> PushRequest:
    return PushRequest(
        full=not all(key.kind in ENDPOINT_KINDS for key in keys),
        configs_updated=keys,
        reasons=trigger_reasons(keys),
        start=time.monotonic() if start is None else start,
    )


def classify_endpoint_push(req: PushRequest, old: PushContext, new: PushContext) -> PushRequest:
    """Decide, with both push contexts at hand, whether an endpoint-only request stays
    EDS-only; returns the request with `push`, `full` and `changed_addresses` set."""
    req = replace(req, push=new)
    if req.full:
        return req
    if old.registry.services != new.registry.services or old.mesh != new.mesh:
        return replace(req, full=True)
    changed: set[str] = set()
    by_key = {(s.hostname, s.namespace): s for s in new.registry.services}
    for key in old.registry.endpoints.keys() | new.registry.endpoints.keys():
        before = old.registry.endpoints.get(key, {})
        after = new.registry.endpoints.get(key, {})
        if before == after:
            continue
        svc = by_key.get(key)
        if svc is None or svc.resolution is not Resolution.CLIENT_SIDE_LB:
            return replace(req, full=True)  # endpoints inline in CDS, or per-endpoint listeners
        for port in before.keys() | after.keys():
            changed |= _changed_addresses(before.get(port, ()), after.get(port, ()))
    return replace(req, changed_addresses=frozenset(changed))


def _changed_addresses(before: Iterable[Endpoint], after: Iterable[Endpoint]) -> set[str]:
    def index(eps: Iterable[Endpoint]) -> dict[tuple[str, int, int], Endpoint]:
        return {(ep.address, ep.port, ep.service_port): ep for ep in eps}

    old, new = index(before), index(after)
    return {key[0] for key in old.keys() | new.keys() if old.get(key) != new.get(key)}
