"""Simple route matches written straight to bytes (for plain_route.py).

Most matches test the URI and a few headers for exact, prefix or regex values. Built as a
upb RouteMatch with HeaderMatchers and StringMatchers, then serialized, one such match cost
more than the rest of its plain route. Here it is encoded as the fields match.route_match
would set (`tests/unit/xds_generate/test_plain_routes.py` holds the two equal); anything
else (methods, authority, scheme, query parameters, absent headers, presence tests, JWT
claims) returns None and takes route_match's path.
"""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.type.matcher.v3 import regex_pb2, string_pb2

from meshpilot.config.istio.common import StringMatch
from meshpilot.config.istio.virtual_service import HTTPMatchRequest
from meshpilot.xds.generate.routes.match import JWT_CLAIM_HEADER
from meshpilot.xds.wire import field_number, length_delimited

__all__ = ["SimpleMatch", "simple_match"]

# (serialized RouteMatch, decorator path, matches everything)
SimpleMatch = tuple[bytes, str, bool]


def _string_matcher(m: StringMatch) -> bytes | None:
    """match.string_matcher, serialized; None for presence tests (route_match's business)."""
    if m.exact is not None:
        return length_delimited(_EXACT, m.exact.encode())
    if m.prefix is not None:
        return length_delimited(_PREFIX, m.prefix.encode())
    if m.regex is not None and m.regex != "*":
        return length_delimited(_SAFE_REGEX, length_delimited(_REGEX, m.regex.encode()))
    return None


def simple_match(match: HTTPMatchRequest) -> SimpleMatch | None:
    """route_match(match) as bytes, or None when the match is not simple."""
    if (
        match.method is not None
        or match.authority is not None
        or match.scheme is not None
        or match.query_params
        or match.without_headers
    ):
        return None
    headers = []
    for name, m in sorted(match.headers.items(), key=lambda kv: kv[0]):
        if name.lower().startswith(JWT_CLAIM_HEADER):
            return None
        matcher = _string_matcher(m)
        if matcher is None:
            return None
        header = length_delimited(_H_NAME, name.encode()) + length_delimited(_H_STRING, matcher)
        headers.append(length_delimited(_HEADERS, header))
    uri = match.uri
    if uri is not None and uri.exact is not None:
        path_field, path = length_delimited(_PATH, uri.exact.encode()), uri.exact
        everything = False
    elif uri is not None and uri.prefix is not None:
        path_field, path = length_delimited(_M_PREFIX, uri.prefix.encode()), uri.prefix + "*"
        everything = uri.prefix == "/"
    elif uri is not None and uri.regex is not None:
        regex = length_delimited(_REGEX, uri.regex.encode())
        path_field, path = length_delimited(_M_SAFE_REGEX, regex), uri.regex
        everything = uri.regex == ".*"
    else:
        path_field, path, everything = _ROOT, "/*", True
    case = _CASE_INSENSITIVE if match.ignore_uri_case else _CASE_SENSITIVE
    return path_field + case + b"".join(headers), path, everything and not headers


_ROUTE_MATCH = rc.RouteMatch.DESCRIPTOR
_M_PREFIX = field_number(_ROUTE_MATCH, "prefix")
_PATH = field_number(_ROUTE_MATCH, "path")
_M_SAFE_REGEX = field_number(_ROUTE_MATCH, "safe_regex")
_HEADERS = field_number(_ROUTE_MATCH, "headers")
_CASE = field_number(_ROUTE_MATCH, "case_sensitive")
_CASE_SENSITIVE = length_delimited(_CASE, b"\x08\x01")  # BoolValue{value: true}
_CASE_INSENSITIVE = length_delimited(_CASE, b"")  # BoolValue{} (false), still present
_ROOT = length_delimited(_M_PREFIX, b"/")
_H_NAME = field_number(rc.HeaderMatcher.DESCRIPTOR, "name")
_H_STRING = field_number(rc.HeaderMatcher.DESCRIPTOR, "string_match")
_EXACT = field_number(string_pb2.StringMatcher.DESCRIPTOR, "exact")
_PREFIX = field_number(string_pb2.StringMatcher.DESCRIPTOR, "prefix")
_SAFE_REGEX = field_number(string_pb2.StringMatcher.DESCRIPTOR, "safe_regex")
_REGEX = field_number(regex_pb2.RegexMatcher.DESCRIPTOR, "regex")
