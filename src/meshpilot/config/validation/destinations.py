"""Route destinations and weights, shared by HTTP, TLS and TCP routes of a VirtualService.

Istio's validateDestination, validateHTTPRouteDestinations and validateRouteDestinations.
"""

from __future__ import annotations

from collections.abc import Sequence

from meshpilot.config.istio.virtual_service import (
    Destination,
    HTTPRouteDestination,
    RouteDestination,
)
from meshpilot.config.ranges import UINT32_MAX
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_port,
    is_dns1123_label,
    quoted,
    wildcard_domain_error,
)
from meshpilot.config.validation.http_headers import check_headers

__all__ = ["check_destination", "check_route_destinations", "subset_name_error"]


def subset_name_error(name: str) -> str | None:
    if name == "":
        return "subset name cannot be empty"
    if not is_dns1123_label(name):
        return f"subset name {quoted(name)} is invalid: use a DNS-1123 label such as 'v1'"
    return None


def check_destination(p: Problems, path: Path, dest: Destination | None) -> None:
    if dest is None:
        return
    if dest.host == "*":
        p.error((*path, "host"), "invalid destination host *")
    else:
        p.add((*path, "host"), wildcard_domain_error(dest.host))
    if dest.subset:
        p.add((*path, "subset"), subset_name_error(dest.subset))
    if dest.port is not None:
        check_port(p, (*path, "port", "number"), dest.port.number)


def check_route_destinations(
    p: Problems, path: Path, routes: Sequence[HTTPRouteDestination | RouteDestination]
) -> None:
    """Each destination, its weight (relative; Istio normalises them) and header ops."""
    total = 0
    for index, route in enumerate(routes):
        item = (*path, index)
        check_destination(p, (*item, "destination"), route.destination)
        if isinstance(route, HTTPRouteDestination):
            check_headers(p, (*item, "headers"), route.headers)
        if route.weight < 0:
            p.error((*item, "weight"), f"weight {route.weight} must not be negative")
        total += max(route.weight, 0)
    if len(routes) > 1 and total == 0:
        p.error(path, "total destination weight = 0: give at least one destination a weight")
    elif total > UINT32_MAX:
        p.error(
            path,
            f"destination weights add up to {total}: Envoy takes a sum of at most {UINT32_MAX}",
        )
    elif len(routes) > 1 and total != 100:
        p.warning(
            path,
            f"destination weights add up to {total}, not 100; they are used as relative weights",
        )
