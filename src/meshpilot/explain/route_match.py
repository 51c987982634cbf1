"""Envoy's virtual-host and route selection over a RouteConfiguration, with the reason each
earlier route did not match (as Envoy does: domains by specificity, routes in order)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.type.matcher.v3 import string_pb2

from meshpilot.explain.request import Request

__all__ = ["RouteChoice", "VhostChoice", "match_route", "match_vhost", "route_mismatch"]


@dataclass(frozen=True, slots=True)
class VhostChoice:
    vhost: rc.VirtualHost | None
    domain: str  # the domain entry that matched
    authority: str  # what was matched against it


@dataclass(frozen=True, slots=True)
class RouteChoice:
    route: rc.Route | None
    index: int
    skipped: tuple[tuple[str, str], ...]  # (route name or #i, why it did not match)


def _authority(request: Request, ignore_port: bool) -> str:
    host = request.header(":authority") or request.host
    default = {"http": 80, "https": 443}.get(request.scheme)
    if ":" not in host and request.port != default:
        host = f"{host}:{request.port}"
    if ignore_port:
        host = host.rsplit(":", 1)[0]
    return host.lower()


def match_vhost(config: route_pb2.RouteConfiguration, request: Request) -> VhostChoice:
    """Exact domain, then the longest `*.suffix`, then the longest `prefix*`, then `*`."""
    authority = _authority(request, config.ignore_port_in_host_matching)
    best: tuple[int, int, rc.VirtualHost, str] | None = None
    for vh in config.virtual_hosts:
        for domain in vh.domains:
            rank = _domain_rank(domain.lower(), authority)
            if rank is not None and (best is None or rank > best[:2]):
                best = (*rank, vh, domain)
    if best is None:
        return VhostChoice(None, "", authority)
    return VhostChoice(best[2], best[3], authority)


def _domain_rank(domain: str, authority: str) -> tuple[int, int] | None:
    if domain == authority:
        return (4, len(domain))
    if domain == "*":
        return (1, 0)
    if (
        domain.startswith("*")
        and authority.endswith(domain[1:])
        and len(authority) > len(domain) - 1
    ):
        return (3, len(domain))
    if (
        domain.endswith("*")
        and authority.startswith(domain[:-1])
        and len(authority) > len(domain) - 1
    ):
        return (2, len(domain))
    return None


def match_route(vhost: rc.VirtualHost, request: Request) -> RouteChoice:
    skipped: list[tuple[str, str]] = []
    for i, route in enumerate(vhost.routes):
        why = route_mismatch(route.match, request)
        if why is None:
            return RouteChoice(route, i, tuple(skipped))
        skipped.append((route.name or f"#{i}", why))
    return RouteChoice(None, -1, tuple(skipped))


def route_mismatch(match: rc.RouteMatch, request: Request) -> str | None:
    """None if the request matches, else why not, in a user's words."""
    path = request.path.split("?", 1)[0]
    sensitive = match.case_sensitive.value if match.HasField("case_sensitive") else True
    got, fold = (path, lambda s: s) if sensitive else (path.lower(), str.lower)
    spec = match.WhichOneof("path_specifier")
    if spec == "prefix" and not got.startswith(fold(match.prefix)):
        return f"path {path} does not start with {match.prefix}"
    if spec == "path" and got != fold(match.path):
        return f"path {path} is not {match.path}"
    if spec == "safe_regex" and not re.fullmatch(match.safe_regex.regex, path):
        return f"path {path} does not match regex {match.safe_regex.regex}"
    if spec == "path_separated_prefix":
        pre = fold(match.path_separated_prefix)
        if not (got == pre or got.startswith(pre + "/")):
            return f"path {path} is not under {match.path_separated_prefix}"
    for header in match.headers:
        why = _header_mismatch(header, request)
        if why:
            return why
    query = _query(request.path)
    for param in match.query_parameters:
        value = query.get(param.name)
        if param.present_match and value is None:
            return f"query parameter {param.name} is absent"
        if param.HasField("string_match") and (
            value is None or not _string_matches(param.string_match, value)
        ):
            return f"query parameter {param.name}={value} does not match"
    if match.dynamic_metadata:
        return "it needs JWT claims (dynamic metadata) the request does not carry"
    return None


def _query(path: str) -> dict[str, str]:
    _, _, text = path.partition("?")
    pairs = (p.partition("=") for p in text.split("&") if p)
    return {k: v for k, _, v in pairs}


def _header_mismatch(h: rc.HeaderMatcher, request: Request) -> str | None:
    value = request.header(h.name)
    which = h.WhichOneof("header_match_specifier")
    if which == "present_match":
        ok = (value is not None) == h.present_match
        want = "present" if h.present_match else "absent"
    elif value is None:
        ok, want = False, _describe(h)
    else:
        ok, want = _value_matches(h, value), _describe(h)
    if h.invert_match:
        ok, want = not ok, f"not {want}"
    if ok:
        return None
    shown = "absent" if value is None else repr(value)
    return f"header {h.name} is {shown}, needs {want}"


def _value_matches(h: rc.HeaderMatcher, value: str) -> bool:
    which = h.WhichOneof("header_match_specifier")
    if which == "string_match":
        return _string_matches(h.string_match, value)
    if which == "exact_match":
        return bool(value == h.exact_match)
    if which == "prefix_match":
        return value.startswith(h.prefix_match)
    if which == "suffix_match":
        return value.endswith(h.suffix_match)
    if which == "safe_regex_match":
        return re.fullmatch(h.safe_regex_match.regex, value) is not None
    return True


def _string_matches(m: string_pb2.StringMatcher, value: str) -> bool:
    got = value.lower() if m.ignore_case else value
    fold = str.lower if m.ignore_case else (lambda s: s)
    which = m.WhichOneof("match_pattern")
    if which == "exact":
        return got == fold(m.exact)
    if which == "prefix":
        return got.startswith(fold(m.prefix))
    if which == "suffix":
        return got.endswith(fold(m.suffix))
    if which == "contains":
        return fold(m.contains) in got
    if which == "safe_regex":
        return re.fullmatch(m.safe_regex.regex, value) is not None
    return False


def _describe(h: rc.HeaderMatcher) -> str:
    if h.HasField("string_match"):
        m = h.string_match
        which = m.WhichOneof("match_pattern") or "any"
        value = m.safe_regex.regex if which == "safe_regex" else getattr(m, which, "")
        return f"{which} {value!r}"
    return "a value"
