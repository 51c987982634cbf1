"""VirtualService gateway references: the Gateway must exist (IST0101), and should serve at
least one of the VirtualService's hosts (IST0132). Istio's virtualservice.GatewayAnalyzer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from meshpilot.analysis.findings import finding, quoted
from meshpilot.analysis.lookup import gateway_key
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.hosts import hosts_intersect, resolve_host
from meshpilot.config.istio.gateway import Gateway
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_gateway_references"]

MESH = "mesh"


def check_gateway_references(push: PushContext) -> Iterator[Diagnostic]:
    for vs in push.of_kind(Kind.VIRTUAL_SERVICE):
        for index, reference in enumerate(vs.model.spec.gateways):
            if reference == MESH:
                continue
            namespace, name = gateway_key(reference, vs.namespace)
            gateway = push.by_key.get(ConfigKey(Kind.GATEWAY, namespace, name))
            path = ("spec", "gateways", index)
            if gateway is None:
                yield finding(
                    vs,
                    path,
                    f"Referenced gateway not found: {quoted(reference)}",
                    code="IST0101",
                )
            elif vs.model.spec.hosts and not _serves(gateway, vs, push.domain_suffix):
                yield finding(
                    vs,
                    path,
                    f"one or more host [{', '.join(vs.model.spec.hosts)}] defined in "
                    f"VirtualService {vs.namespace}/{vs.name} not found in Gateway "
                    f"{namespace}/{name}.",
                    code="IST0132",
                )


def _serves(gateway: ConfigObject[Gateway], vs: ConfigObject[Any], suffix: str) -> bool:
    """Does a server of `gateway` expose one of the VirtualService's hosts to its namespace?"""
    exposed = []
    for server in gateway.model.spec.servers:
        for entry in server.hosts:
            namespace, slash, host = entry.partition("/")
            if not slash:
                namespace, host = "*", entry
            if namespace == ".":
                namespace = gateway.namespace
            if namespace in ("*", vs.namespace):
                exposed.append(host)
    hosts = [resolve_host(h, vs.namespace, suffix) for h in vs.model.spec.hosts]
    return any(hosts_intersect(g, h) for g in exposed for h in hosts)
