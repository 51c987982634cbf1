"""VirtualService destinations that point at nothing: an unknown host (IST0101), a port the
service does not expose (IST0101 host:port), a missing port on a multi-port service (IST0112),
a subset no DestinationRule defines (IST0101 host+subset). Istio's DestinationHostAnalyzer and
DestinationRuleAnalyzer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from meshpilot.analysis.findings import finding, quoted
from meshpilot.analysis.lookup import RouteDestination, find_services, route_destinations
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.hosts import host_matches, resolve_host
from meshpilot.config.istio.virtual_service import VirtualService
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_destination_hosts", "check_destination_subsets"]


def _scope(vs: ConfigObject[VirtualService]) -> set[str]:
    """Namespaces the VirtualService routes from: its own and those it is exported to."""
    scope = {vs.namespace}
    for value in vs.model.spec.export_to:
        if value not in ("*", "~"):
            scope.add(vs.namespace if value == "." else value)
    return scope


def check_destination_hosts(push: PushContext) -> Iterator[Diagnostic]:
    for vs in push.of_kind(Kind.VIRTUAL_SERVICE):
        for dest in route_destinations(vs):
            yield from _check_host(push, vs, dest)


def _check_host(
    push: PushContext, vs: ConfigObject[VirtualService], dest: RouteDestination
) -> Iterator[Diagnostic]:
    host = dest.destination.host
    fqdn = resolve_host(host, vs.namespace, push.domain_suffix)
    services = find_services(push, fqdn, _scope(vs))
    what = "mirror host" if dest.mirror else "host"
    if not services:
        yield finding(
            vs, (*dest.path, "host"), f"Referenced {what} not found: {quoted(host)}", code="IST0101"
        )
        return
    ports = sorted({p.port for s in services for p in s.ports})
    selector = dest.destination.port
    if selector is None:
        if len(services[0].ports) > 1:
            yield finding(
                vs,
                (*dest.path, "host"),
                f"This VirtualService routes to a service {quoted(host)} that exposes multiple "
                f"ports {ports}. Specifying a port in the destination is required to disambiguate.",
                code="IST0112",
            )
    elif selector.number not in ports:
        yield finding(
            vs,
            (*dest.path, "port", "number"),
            f"Referenced {what}:port not found: {quoted(f'{host}:{selector.number}')}",
            code="IST0101",
        )


def check_destination_subsets(push: PushContext) -> Iterator[Diagnostic]:
    subsets: dict[str, set[str]] = {}
    for dr in push.of_kind(Kind.DESTINATION_RULE):
        host = resolve_host(dr.model.spec.host, dr.namespace, push.domain_suffix)
        subsets.setdefault(host, set()).update(s.name for s in dr.model.spec.subsets)
    for vs in push.of_kind(Kind.VIRTUAL_SERVICE):
        for dest in route_destinations(vs):
            yield from _check_subset(push, vs, dest, subsets)


def _check_subset(
    push: PushContext,
    vs: ConfigObject[Any],
    dest: RouteDestination,
    subsets: dict[str, set[str]],
) -> Iterator[Diagnostic]:
    subset = dest.destination.subset
    if not subset:
        return
    fqdn = resolve_host(dest.destination.host, vs.namespace, push.domain_suffix)
    defined = any(subset in names and host_matches(host, fqdn) for host, names in subsets.items())
    if not defined:
        what = "mirror+subset" if dest.mirror else "host+subset"
        yield finding(
            vs,
            (*dest.path, "subset"),
            f"Referenced {what} in destinationrule not found: "
            f"{quoted(f'{dest.destination.host}+{subset}')}",
            code="IST0101",
        )
