"""Two VirtualServices bound to the mesh that define the same host for the same namespaces:
which one applies is undefined (IST0109, Istio's ConflictingMeshGatewayHostsAnalyzer)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from meshpilot.analysis.findings import finding
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.hosts import resolve_host
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_conflicting_virtual_services"]

MESH = "mesh"


def check_conflicting_virtual_services(push: PushContext) -> Iterator[Diagnostic]:
    by_host: dict[tuple[str, str], list[ConfigObject[Any]]] = defaultdict(list)
    for vs in push.of_kind(Kind.VIRTUAL_SERVICE):
        spec = vs.model.spec
        if spec.gateways and MESH not in spec.gateways:
            continue
        for scope in _scopes(vs):
            for host in dict.fromkeys(spec.hosts):
                by_host[(scope, resolve_host(host, vs.namespace, push.domain_suffix))].append(vs)
    for (_, host), group in sorted(by_host.items()):
        if len(group) < 2:
            continue
        names = ",".join(f"{vs.namespace}/{vs.name}" for vs in group)
        for vs in group:
            yield finding(
                vs,
                ("metadata", "name"),
                f"The VirtualServices {names} associated with mesh gateway define the same host "
                f"{host} which can lead to undefined behavior. This can be fixed by merging the "
                "conflicting VirtualServices into a single resource.",
                code="IST0109",
            )


def _scopes(vs: ConfigObject[Any]) -> set[str]:
    """The namespaces the VirtualService applies to ("*" for all)."""
    export_to = vs.model.spec.export_to
    if not export_to or "*" in export_to:
        return {"*"}
    return {vs.namespace if value == "." else value for value in export_to if value != "~"}
