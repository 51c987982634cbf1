"""PushRequest: what a push is for, merged while debouncing and while queued per connection.

A request is *full* (every xDS type is regenerated) unless every changed object is an
endpoint source (Pods, Endpoints, EndpointSlices, WorkloadEntries) and, once the new
PushContext is built, the services themselves are unchanged and only services whose
endpoints travel by EDS gained or lost endpoints. Then only EDS is pushed (Istio's
incremental EDS), and only the assignments of the services whose endpoints changed
(`eds_hosts`), except to a proxy whose own pod or addresses changed: it gets a full push.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import ENDPOINT_KINDS, Kind
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.model.relevance import affected_types, named_hosts, sees_hosts
from meshpilot.registry.model import Endpoint, Resolution
from meshpilot.store.base import StoreSnapshot
from meshpilot.xds.generate import PUSH_ORDER
from meshpilot.xds.protos import TypeUrl

__all__ = [
    "ENDPOINT_KINDS",
    "PushRequest",
    "changed_keys",
    "classify_endpoint_push",
    "push_plan",
    "request_for_change",
    "trigger_reasons",
]

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
    # EDS-only requests: hostnames of the services whose endpoints changed.
    eds_hosts: frozenset[str] = frozenset()

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
            eds_hosts=self.eds_hosts | other.eds_hosts,
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


# What one push sends to a connection: per type, the names (None: all it watches).
PushPlan = list[tuple[str, frozenset[str] | None]]
_SHORT = {
    TypeUrl.CLUSTER: "cds",
    TypeUrl.ENDPOINT: "eds",
    TypeUrl.LISTENER: "lds",
    TypeUrl.ROUTE: "rds",
    TypeUrl.SECRET: "sds",
    TypeUrl.VIRTUAL_HOST: "rds",  # VHDS: the virtual hosts of route configs change with them
    TypeUrl.EXTENSION_CONFIG: "ecds",
}


def push_plan(
    previous: PushContext,
    req: PushRequest,
    proxy: Proxy,
    watched: Collection[str],
    eds_names: frozenset[str] | None,
) -> PushPlan:
    """The types (and names) a push sends to a proxy that was last sent `previous`, given
    the types it watches and its EDS subscription (None: wildcard)."""
    assert req.push is not None
    if req.full_for(proxy):
        types = _affected(previous, req, proxy)
        if "cds" in types:  # re-created clusters warm on their assignments
            types |= {"eds"}
        return [(t, None) for t in PUSH_ORDER if t in watched and _SHORT[t] in types]
    if TypeUrl.ENDPOINT not in watched:
        return []
    if eds_names is None:
        return [(TypeUrl.ENDPOINT, None)]
    return [(TypeUrl.ENDPOINT, _eds_subset(req.push, eds_names, req.eds_hosts))]


def _affected(previous: PushContext, req: PushRequest, proxy: Proxy) -> frozenset[str]:
    assert req.push is not None
    if not _in_scope(previous, req, proxy):
        return frozenset()
    memo = req.push.memo.setdefault("relevance.affected", {})
    assert isinstance(memo, dict)
    key = (proxy.type, previous.version, req.configs_updated)
    found = memo.get(key)
    if found is None:
        found = memo[key] = affected_types(
            proxy.type, req.configs_updated, previous.by_key, req.push.by_key
        )
    assert isinstance(found, frozenset)
    return found


def _in_scope(previous: PushContext, req: PushRequest, proxy: Proxy) -> bool:
    """Does the change name a host this proxy can see (model/relevance.py `sees_hosts`)?
    Memoised per proxy class (and labels, for gateways): they see the same hosts."""
    assert req.push is not None
    memo = req.push.memo.setdefault("relevance.scope", {})
    assert isinstance(memo, dict)
    hosts_key = ("hosts", previous.version, req.configs_updated)
    if hosts_key not in memo:
        memo[hosts_key] = named_hosts(
            req.configs_updated, previous.by_key, req.push.by_key, req.push.domain_suffix
        )
    hosts = memo[hosts_key]
    if hosts is None:
        return True
    # Gateways are selected by labels, which the proxy class leaves out.
    labels = tuple(sorted(proxy.labels.items())) if proxy.type is not ProxyType.SIDECAR else ()
    key = (req.push.proxy_class(proxy), proxy.namespace, labels, hosts_key)
    found = memo.get(key)
    if found is None:
        found = memo[key] = sees_hosts(req.push, proxy, hosts)
    return bool(found)


def _eds_subset(push: PushContext, names: frozenset[str], hosts: frozenset[str]) -> frozenset[str]:
    """The subscribed cluster names of the changed hosts (memoised: a class of proxies
    subscribes to equal sets)."""
    memo = push.memo.setdefault("eds.changed_names", {})
    assert isinstance(memo, dict)
    found = memo.get((names, hosts))
    if found is None:
        # A name's host ends it (`|<host>`, `_.<host>`, or the name is the host): the C
        # `endswith` sifts thousands of names before any is parsed, once per proxy class.
        ends = tuple(hosts)
        found = frozenset(n for n in names if n.endswith(ends) and _host_of(n) in hosts)
        memo[(names, hosts)] = found
    assert isinstance(found, frozenset)
    return found


def _host_of(cluster_name: str) -> str:
    """The host of `outbound|<port>|<subset>|<host>` or of `outbound_.<port>_.<subset>_.<host>`."""
    if "|" in cluster_name:
        return cluster_name.rsplit("|", 1)[-1]
    return cluster_name.split("_.", 3)[-1]


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
    hosts: set[str] = set()
    by_key = {(s.hostname, s.namespace): s for s in new.registry.services}
    for key in old.registry.endpoints.keys() | new.registry.endpoints.keys():
        before = old.registry.endpoints.get(key, {})
        after = new.registry.endpoints.get(key, {})
        if before == after:
            continue
        svc = by_key.get(key)
        if svc is None or svc.resolution is not Resolution.CLIENT_SIDE_LB:
            return replace(req, full=True)  # endpoints inline in CDS, or per-endpoint listeners
        hosts.add(svc.hostname)
        for port in before.keys() | after.keys():
            changed |= _changed_addresses(before.get(port, ()), after.get(port, ()))
    return replace(req, changed_addresses=frozenset(changed), eds_hosts=frozenset(hosts))


def _changed_addresses(before: Iterable[Endpoint], after: Iterable[Endpoint]) -> set[str]:
    def index(eps: Iterable[Endpoint]) -> dict[tuple[str, int, int], Endpoint]:
        return {(ep.address, ep.port, ep.service_port): ep for ep in eps}

    old, new = index(before), index(after)
    return {key[0] for key in old.keys() | new.keys() if old.get(key) != new.get(key)}


def changed_keys(old: StoreSnapshot, new: StoreSnapshot) -> set[ConfigKey]:
    """Keys whose objects differ between two snapshots: the store keeps the very objects of
    what it did not read again, so identity settles it."""
    before, after = old.objects, new.objects
    changed = {k for k in before.keys() ^ after.keys()}
    changed.update(k for k, obj in after.items() if k in before and before[k] is not obj)
    return changed
