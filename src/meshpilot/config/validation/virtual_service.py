"""VirtualService: hosts, gateways, delegation, TLS and TCP routes, exportTo, and rules that
can never match (Istio's ValidateVirtualService, validateTLSRoute, validateTCPRoute,
analyzeUnreachable*Rules)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from meshpilot.config.hosts import host_matches, hosts_intersect
from meshpilot.config.istio.virtual_service import (
    HTTPRoute,
    L4MatchAttributes,
    TCPRoute,
    TLSMatchAttributes,
    TLSRoute,
    VirtualService,
)
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_export_to,
    check_labels,
    check_port,
    ip_or_cidr_error,
    is_ip,
    quoted,
    wildcard_domain_error,
)
from meshpilot.config.validation.destinations import check_route_destinations
from meshpilot.config.validation.hostnames import check_gateway_names
from meshpilot.config.validation.http_route import check_http_route

__all__ = ["validate_virtual_service"]

SPEC: Path = ("spec",)
_AUTO_SNI_PREFIX = "outbound_"


def validate_virtual_service(vs: VirtualService, p: Problems) -> None:
    spec = vs.spec
    delegate = not spec.hosts
    if delegate:
        for field, value in (("gateways", spec.gateways), ("tls", spec.tls), ("tcp", spec.tcp)):
            if value:
                p.error(
                    (*SPEC, field),
                    f"a VirtualService without hosts is a delegate and must not specify {field}",
                )
    check_gateway_names(p, (*SPEC, "gateways"), spec.gateways)
    gateway_bound = bool(spec.gateways) and "mesh" not in spec.gateways
    _check_hosts(p, vs, gateway_bound)
    if not (spec.http or spec.tcp or spec.tls):
        p.error(SPEC, "http, tcp or tls must be provided in virtual service")
    for index, route in enumerate(spec.http):
        check_http_route(
            p, (*SPEC, "http", index), route, delegate_vs=delegate, gateway_bound=gateway_bound
        )
    for index, tls in enumerate(spec.tls):
        _check_tls_route(p, (*SPEC, "tls", index), tls, vs, gateway_bound)
    for index, tcp in enumerate(spec.tcp):
        _check_tcp_route(p, (*SPEC, "tcp", index), tcp)
    check_export_to(p, (*SPEC, "exportTo"), spec.export_to, vs.metadata.namespace or "default")
    _check_unreachable(p, (*SPEC, "http"), spec.http)
    _check_unreachable(p, (*SPEC, "tls"), spec.tls)
    _check_unreachable(p, (*SPEC, "tcp"), spec.tcp)


def _host_error(host: str, *, gateway_bound: bool, sni: bool) -> str | None:
    if gateway_bound and sni and host.startswith(_AUTO_SNI_PREFIX):
        return _auto_sni_error(host)
    return wildcard_domain_error(host)


def _auto_sni_error(host: str) -> str | None:
    """`outbound_.<port>_._.<hostname>`, the SNI of AUTO_PASSTHROUGH gateways."""
    parts = host.split("_")
    if len(parts) < 4 or not parts[1].strip(".").isdigit() or not parts[3].strip("."):
        return f"domain name {quoted(host)} invalid: use the outbound_.<PORT>_._.<HOSTNAME> format"
    return None


def _check_hosts(p: Problems, vs: VirtualService, gateway_bound: bool) -> None:
    hosts = vs.spec.hosts
    sni = any(m.sni_hosts for tls in vs.spec.tls for m in tls.match)
    all_valid = True
    for index, host in enumerate(hosts):
        err = _host_error(host, gateway_bound=gateway_bound, sni=sni)
        if err is not None and not is_ip(host):
            p.error((*SPEC, "hosts", index), err)
            all_valid = False
        elif host == "*" and not gateway_bound:
            p.error(
                (*SPEC, "hosts", index),
                "wildcard host * is not allowed for virtual services bound to the mesh gateway",
            )
            all_valid = False
    if not all_valid:
        return
    for i, first in enumerate(hosts):
        for j in range(i + 1, len(hosts)):
            if hosts_intersect(first, hosts[j]):
                p.error(
                    (*SPEC, "hosts", j), f"duplicate hosts in virtual service: {first} & {hosts[j]}"
                )


def _check_tls_route(
    p: Problems, path: Path, route: TLSRoute, vs: VirtualService, gateway_bound: bool
) -> None:
    if not route.match:
        p.error((*path, "match"), "TLS route must have at least one match condition")
    for index, match in enumerate(route.match):
        _check_tls_match(p, (*path, "match", index), match, vs, gateway_bound)
    if not route.route:
        p.error((*path, "route"), "TLS route is required")
    check_route_destinations(p, (*path, "route"), route.route)


def _check_tls_match(
    p: Problems, path: Path, match: TLSMatchAttributes, vs: VirtualService, gateway_bound: bool
) -> None:
    if not match.sni_hosts:
        p.error((*path, "sniHosts"), "TLS match must have at least one SNI host")
    for index, sni in enumerate(match.sni_hosts):
        where = (*path, "sniHosts", index)
        err = _host_error(sni, gateway_bound=gateway_bound, sni=True)
        if err is not None:
            if is_ip(sni):
                p.warning(where, f"using an IP address ({quoted(sni)}) goes against the SNI spec")
            else:
                p.error(where, err)
            continue
        if not any(host_matches(host, sni) for host in vs.spec.hosts):
            p.error(
                where,
                f"SNI host {quoted(sni)} is not a compatible subset of any of the virtual service "
                f"hosts: [{', '.join(vs.spec.hosts)}]",
            )
    _check_l4_match(p, path, match)


def _check_tcp_route(p: Problems, path: Path, route: TCPRoute) -> None:
    for index, match in enumerate(route.match):
        where = (*path, "match", index)
        _check_l4_match(p, where, match)
        if match.source_subnet:
            p.add((*where, "sourceSubnet"), ip_or_cidr_error(match.source_subnet))
    if not route.route:
        p.error((*path, "route"), "TCP route is required")
    check_route_destinations(p, (*path, "route"), route.route)


def _check_l4_match(p: Problems, path: Path, match: TLSMatchAttributes | L4MatchAttributes) -> None:
    for index, subnet in enumerate(match.destination_subnets):
        p.add((*path, "destinationSubnets", index), ip_or_cidr_error(subnet))
    if match.port:
        check_port(p, (*path, "port"), match.port)
    check_labels(p, (*path, "sourceLabels"), match.source_labels)
    check_gateway_names(p, (*path, "gateways"), match.gateways)


def _check_unreachable(
    p: Problems, path: Path, routes: Sequence[HTTPRoute | TLSRoute | TCPRoute]
) -> None:
    """Warn about rules after a catch-all rule, and matches that repeat an earlier match."""
    seen: dict[str, int] = {}
    catch_all = -1
    for index, route in enumerate(routes):
        name = _rule_name(route, index)
        if catch_all >= 0:
            p.warning(
                (*path, index),
                f"rule {name} is not used: rule {_rule_name(routes[catch_all], catch_all)} "
                "before it has no match conditions and matches every request",
            )
            continue
        if not route.match:
            catch_all = index
            continue
        duplicates = 0
        for match_index, match in enumerate(route.match):
            key = json.dumps(match.model_dump(mode="json", exclude={"name"}), sort_keys=True)
            if key in seen:
                duplicates += 1
                p.warning(
                    (*path, index, "match", match_index),
                    f"rule {name} match {_match_name(match, match_index)} is not used "
                    f"(duplicate match in rule {_rule_name(routes[seen[key]], seen[key])})",
                )
            else:
                seen[key] = index
        if duplicates == len(route.match):
            p.warning((*path, index), f"rule {name} is not used (all matches used by prior rules)")


def _rule_name(route: HTTPRoute | TLSRoute | TCPRoute, index: int) -> str:
    name = route.name if isinstance(route, HTTPRoute) else ""
    return f'"{name}"' if name else f"#{index}"


def _match_name(match: object, index: int) -> str:
    name = getattr(match, "name", "")
    return f'"{name}"' if name else f"#{index}"
