"""The (service, endpoint) pairs a proxy's workload serves, from a per-push index by IP.

PushContext.service_targets scans every service's endpoints for each call; inbound
clusters and listeners ask for every proxy, so the scan is done once per push here and
each proxy looks up its own addresses. Same pairs, same order.
"""

from __future__ import annotations

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Endpoint, Service

__all__ = ["service_targets"]

_MEMO = "xds.service_targets"

# address -> (position in PushContext.service_targets' scan order, service, endpoint)
_Index = dict[str, list[tuple[int, Service, Endpoint]]]


def service_targets(push: PushContext, proxy: Proxy) -> list[tuple[Service, Endpoint]]:
    """What `push.service_targets(proxy)` returns."""
    index = _index(push)
    found = [
        entry
        for ip in set(proxy.ip_addresses)
        for entry in index.get(ip, ())
        if entry[1].namespace == proxy.namespace or not entry[1].is_kubernetes
    ]
    found.sort(key=lambda entry: entry[0])
    return [(svc, ep) for _, svc, ep in found]


def _index(push: PushContext) -> _Index:
    index = push.memo.get(_MEMO)
    if index is None:
        built: _Index = {}
        position = 0
        for svc in push.registry.services:
            for port in svc.ports:
                for ep in push.registry.endpoints_of(svc, port.port):
                    built.setdefault(ep.address, []).append((position, svc, ep))
                    position += 1
        index = push.memo[_MEMO] = built
    assert isinstance(index, dict)
    return index
