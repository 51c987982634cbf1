"""One HTTP route of a VirtualService: what it does (route, redirect, direct response or
delegate), what it matches, and its policies (Istio's validateHTTPRoute,
validateHTTPRouteConflict, validateHTTPRouteMatchRequest, validateAuthorityRewrite)."""

from __future__ import annotations

from meshpilot.config.istio.common import StringMatch
from meshpilot.config.istio.virtual_service import HTTPMatchRequest, HTTPRoute
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_duration,
    check_labels,
    check_port,
    is_dns1123_label,
    quoted,
)
from meshpilot.config.validation.destinations import check_route_destinations
from meshpilot.config.validation.hostnames import check_gateway_names
from meshpilot.config.validation.http_headers import (
    check_header_name,
    check_headers,
    check_string_match,
    is_jwt_claim,
)
from meshpilot.config.validation.http_policies import (
    check_cors,
    check_direct_response,
    check_fault,
    check_mirrors,
    check_redirect,
    check_retries,
    check_rewrite,
)

__all__ = ["check_http_route"]


def check_http_route(
    p: Problems, path: Path, route: HTTPRoute, *, delegate_vs: bool, gateway_bound: bool
) -> None:
    """`delegate_vs`: the VirtualService has no hosts (it is a delegate); `gateway_bound`: it
    applies to gateways only (JWT claim routing is allowed there)."""
    _check_conflicts(p, path, route, delegate_vs=delegate_vs)
    for index, match in enumerate(route.match):
        _check_match(p, (*path, "match", index), match, gateway_bound=gateway_bound)
    check_headers(p, (*path, "headers"), route.headers)
    check_cors(p, (*path, "corsPolicy"), route.cors_policy)
    check_fault(p, (*path, "fault"), route)
    check_mirrors(p, path, route)
    check_redirect(p, (*path, "redirect"), route.redirect)
    check_direct_response(p, (*path, "directResponse"), route.direct_response)
    check_retries(p, (*path, "retries"), route.retries)
    check_rewrite(p, (*path, "rewrite"), route.rewrite)
    _check_authority(p, path, route)
    check_route_destinations(p, (*path, "route"), route.route)
    check_duration(p, (*path, "timeout"), route.timeout)
    if route.delegate is not None:
        namespace = route.delegate.namespace
        if namespace and not is_dns1123_label(namespace):
            p.error((*path, "delegate", "namespace"), f"invalid namespace {quoted(namespace)}")


def _check_conflicts(p: Problems, path: Path, route: HTTPRoute, *, delegate_vs: bool) -> None:
    if route.delegate is not None and not delegate_vs:
        for field, value in (
            ("route", route.route),
            ("redirect", route.redirect),
            ("directResponse", route.direct_response),
        ):
            if value:
                p.error((*path, field), f"an HTTP route with delegate must not specify {field}")
        return
    if route.delegate is not None:
        p.error(
            (*path, "delegate"),
            "delegate HTTP route cannot contain delegate: delegation is one level deep",
        )
    action = "redirect" if route.redirect is not None else ""
    if not action and route.direct_response is not None:
        action = "directResponse"
    if action:
        others = (
            ("route", bool(route.route)),
            ("fault", route.fault is not None),
            ("rewrite", route.rewrite is not None),
            ("directResponse", action == "redirect" and route.direct_response is not None),
        )
        for field, present in others:
            if present:
                p.error((*path, field), f"HTTP route cannot contain both {field} and {action}")
    elif not route.route and route.delegate is None:
        p.error(path, "HTTP route needs one of route, redirect, directResponse or delegate")


def _check_match(p: Problems, path: Path, match: HTTPMatchRequest, *, gateway_bound: bool) -> None:
    for field, headers in (("headers", match.headers), ("withoutHeaders", match.without_headers)):
        for name, string_match in headers.items():
            where = (*path, field, name)
            check_header_name(p, where, name, allow_claims=True)
            if is_jwt_claim(name) and not gateway_bound:
                p.error(
                    where,
                    f"JWT claim based routing (key: {name}) is only supported for gateways",
                )
            if not (field == "withoutHeaders" and string_match.regex == "*"):
                check_string_match(p, where, string_match)
    for field, required in (
        ("uri", match.uri),
        ("scheme", match.scheme),
        ("method", match.method),
        ("authority", match.authority),
    ):
        _check_field_match(p, (*path, field), field, required)
    for name, string_match in match.query_params.items():
        check_string_match(p, (*path, "queryParams", name), string_match)
    if match.port:
        check_port(p, (*path, "port"), match.port)
    check_labels(p, (*path, "sourceLabels"), match.source_labels)
    check_gateway_names(p, (*path, "gateways"), match.gateways)
    if match.source_namespace and not is_dns1123_label(match.source_namespace):
        p.error(
            (*path, "sourceNamespace"),
            f"sourceNamespace match {quoted(match.source_namespace)} is invalid",
        )


def _check_field_match(p: Problems, path: Path, field: str, match: StringMatch | None) -> None:
    if match is None:
        return
    if match.exact is None and match.prefix is None and match.regex is None:
        p.warning(path, f"{field} match sets none of exact, prefix or regex: it matches anything")
        return
    # Envoy allows an empty URI prefix, but not an empty prefix for the other fields.
    check_string_match(p, path, match, allow_empty_prefix=field == "uri")


def _check_authority(p: Problems, path: Path, route: HTTPRoute) -> None:
    """The authority may be rewritten in one place only: rewrite.authority or a header op."""
    current = route.rewrite.authority if route.rewrite is not None else ""
    request = route.headers.request if route.headers is not None else None
    if request is None:
        return
    for op in ("set", "add"):
        for name, value in getattr(request, op).items():
            if name.lower() not in (":authority", "host"):
                continue
            if current:
                p.error(
                    (*path, "headers", "request", op, name),
                    f"authority header cannot be set multiple times: have {quoted(current)}, "
                    f"attempting to set {quoted(value)}",
                )
            current = value
