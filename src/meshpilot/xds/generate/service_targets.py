"""The (service, endpoint) pairs a proxy's workload serves, from a per-push index by IP.

PushContext.service_targets scans every service's endpoints for each call; inbound
clusters and listeners ask for every proxy, so the scan is done once per push and
namespace here and each proxy looks up its own addresses. Same pairs, same order.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Endpoint, Service

__all__ = ["service_targets"]

_MEMO = "xds.service_targets"


@dataclass(frozen=True, slots=True)
class _Index:
    """The (service, endpoint) pairs a proxy of one namespace may serve, in
    PushContext.service_targets' scan order, as two parallel lists, and each address's
    positions in them. Positions are tuples of ints, which the garbage collector stops
    tracking: a tuple per pair and a list per address were thousands of objects kept for
    the push, for the collector to count and walk."""

    services: list[Service]
    endpoints: list[Endpoint]
    by_address: dict[str, tuple[int, ...]]


def service_targets(push: PushContext, proxy: Proxy) -> list[tuple[Service, Endpoint]]:
    """What `push.service_targets(proxy)` returns."""
    index = _index(push, proxy.namespace)
    found = sorted(i for ip in set(proxy.ip_addresses) for i in index.by_address.get(ip, ()))
    return [(index.services[i], index.endpoints[i]) for i in found]


def _index(push: PushContext, namespace: str) -> _Index:
    """The index for proxies of `namespace`: its own services and every non-Kubernetes
    one (the services PushContext.service_targets keeps), built on the first proxy of the
    namespace. One index per namespace, not one over the whole mesh: a proxy's first
    generation pays for its namespace's endpoints only."""
    memo = push.memo.setdefault(_MEMO, {})
    assert isinstance(memo, dict)
    index = memo.get(namespace)
    if index is None:
        services: list[Service] = []
        endpoints: list[Endpoint] = []
        by_address: dict[str, list[int]] = {}
        for svc in push.registry.services:
            if svc.namespace != namespace and svc.is_kubernetes:
                continue
            for port in svc.ports:
                for ep in push.registry.endpoints_of(svc, port.port):
                    positions = by_address.get(ep.address)
                    if positions is None:
                        by_address[ep.address] = [len(services)]
                    else:
                        positions.append(len(services))
                    services.append(svc)
                    endpoints.append(ep)
        kept = {address: tuple(positions) for address, positions in by_address.items()}
        index = memo[namespace] = _Index(services, endpoints, kept)
    assert isinstance(index, _Index)
    return index
