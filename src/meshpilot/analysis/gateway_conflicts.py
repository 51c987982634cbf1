"""Gateways that select the same workloads and serve overlapping hosts on the same port: the
proxy can use only one of the servers (IST0145, Istio's gateway.ConflictingGatewayAnalyzer).
Both Gateways are reported, each naming the others."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from meshpilot.analysis.findings import finding
from meshpilot.analysis.lookup import selector_text
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.hosts import hosts_intersect
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_gateway_conflicts"]


def check_gateway_conflicts(push: PushContext) -> Iterator[Diagnostic]:
    gateways: Sequence[ConfigObject[Any]] = push.of_kind(Kind.GATEWAY)
    # (selector, port) -> gateway -> the hosts its servers on that port serve
    served: dict[tuple[str, int], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for gateway in gateways:
        selector = selector_text(gateway.model.spec.selector)
        for server in gateway.model.spec.servers:
            served[(selector, server.port.number)][_name(gateway)].extend(server.hosts)
    for gateway in gateways:
        selector = selector_text(gateway.model.spec.selector)
        for index, server in enumerate(gateway.model.spec.servers):
            others = served[(selector, server.port.number)]
            conflicting = sorted(
                name
                for name, hosts in others.items()
                if name != _name(gateway) and _overlap(server.hosts, hosts)
            )
            if conflicting:
                yield finding(
                    gateway,
                    ("spec", "servers", index, "port", "number"),
                    f"Conflict with gateways {','.join(conflicting)} (workload selector "
                    f"{selector}, port {server.port.number}, hosts {','.join(server.hosts)}).",
                    code="IST0145",
                )


def _name(gateway: ConfigObject[Any]) -> str:
    return f"{gateway.namespace}/{gateway.name}"


def _overlap(hosts: Sequence[str], others: Sequence[str]) -> bool:
    """Does a host of one server overlap a host of the other (`ns/` prefixes ignored)?"""
    return any(
        hosts_intersect(a.rpartition("/")[2], b.rpartition("/")[2]) for a in hosts for b in others
    )
