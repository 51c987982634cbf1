"""The filter order Envoy requires of a listener: in every network filter chain and every
HTTP connection manager, the one terminal filter comes last (a patch that ADDs a filter
after the router or the TCP proxy would otherwise get the whole listener update rejected).
"""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

__all__ = ["filter_order_violation"]

_HCM = "envoy.filters.network.http_connection_manager"
_TERMINAL_NETWORK = frozenset(
    {
        _HCM,
        "envoy.filters.network.tcp_proxy",
        "envoy.filters.network.echo",
        "envoy.filters.network.direct_response",
        "envoy.filters.network.redis_proxy",
        "envoy.filters.network.thrift_proxy",
        "envoy.filters.network.dubbo_proxy",
    }
)
_TERMINAL_HTTP = frozenset({"envoy.filters.http.router"})


def filter_order_violation(listener: listener_pb2.Listener) -> str | None:
    chains = list(listener.filter_chains)
    if listener.HasField("default_filter_chain"):
        chains.append(listener.default_filter_chain)
    for chain in chains:
        problem = _order([f.name for f in chain.filters], _TERMINAL_NETWORK, "network")
        if problem:
            return problem
        for net in chain.filters:
            if net.name != _HCM or not net.HasField("typed_config"):
                continue
            hcm = hcm_pb2.HttpConnectionManager()
            if net.typed_config.Unpack(hcm):
                problem = _order([f.name for f in hcm.http_filters], _TERMINAL_HTTP, "http")
                if problem:
                    return problem
    return None


def _order(names: Sequence[str], terminal: frozenset[str], kind: str) -> str | None:
    for i, name in enumerate(names):
        if name in terminal and i != len(names) - 1:
            return f"terminal filter {name} must be the last filter in a {kind} filter chain"
    if names and names[-1] not in terminal and names[-1].startswith("envoy.filters."):
        return f"non-terminal filter {names[-1]} is the last filter in a {kind} filter chain"
    return None
