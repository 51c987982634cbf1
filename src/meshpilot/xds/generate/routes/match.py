"""HTTPMatchRequest -> Envoy RouteMatch, as Istio's TranslateRouteMatch builds it."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.type.matcher.v3 import metadata_pb2, regex_pb2, string_pb2, value_pb2

from meshpilot.config.istio.common import StringMatch
from meshpilot.config.istio.virtual_service import HTTPMatchRequest
from meshpilot.xds.protos import boolean

__all__ = ["is_catch_all", "matches_everything", "route_match", "string_matcher"]

HEADER_METHOD = ":method"
HEADER_AUTHORITY = ":authority"
HEADER_SCHEME = ":scheme"
JWT_CLAIM_HEADER = "@request.auth.claims"
JWT_FILTER = "envoy.filters.http.jwt_authn"
JWT_PAYLOAD_KEY = "payload"


def string_matcher(m: StringMatch) -> string_pb2.StringMatcher | None:
    """Istio's ConvertToEnvoyMatch; None for a match with no exact/prefix/regex."""
    if m.exact is not None:
        return string_pb2.StringMatcher(exact=m.exact)
    if m.prefix is not None:
        return string_pb2.StringMatcher(prefix=m.prefix)
    if m.regex is not None:
        return string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=m.regex))
    return None


def _is_present_match(m: StringMatch | None) -> bool:
    # `regex: "*"` is not RE2; Istio reads it as "header present" (istio/istio#20629).
    return m is None or string_matcher(m) is None or m.regex == "*"


def _header(name: str, m: StringMatch | None) -> rc.HeaderMatcher:
    if _is_present_match(m):
        return rc.HeaderMatcher(name=name, present_match=True)
    assert m is not None
    return rc.HeaderMatcher(name=name, string_match=string_matcher(m))


def _query_param(name: str, m: StringMatch) -> rc.QueryParameterMatcher:
    if _is_present_match(m):
        return rc.QueryParameterMatcher(name=name, present_match=True)
    return rc.QueryParameterMatcher(name=name, string_match=string_matcher(m))


def _jwt_claims(name: str) -> list[str] | None:
    """`@request.auth.claims.a.b` or `@request.auth.claims[a][b]` -> ["a", "b"]."""
    if not name.lower().startswith(JWT_CLAIM_HEADER):
        return None
    rest = name[len(JWT_CLAIM_HEADER) :]
    if rest.startswith(".") and len(rest) > 1:
        return rest[1:].split(".")
    if rest.startswith("[") and rest.endswith("]") and len(rest) > 2:
        return rest[1:-1].split("][")
    return None


def _claim_matcher(claims: list[str], m: StringMatch | None) -> metadata_pb2.MetadataMatcher:
    """JWT claim routing: the claim (a string, or a list holding it) in jwt_authn's payload."""
    sm = string_matcher(m) if m is not None else None
    value = (
        value_pb2.ValueMatcher(string_match=sm)
        if sm
        else value_pb2.ValueMatcher(present_match=True)
    )
    listed = value_pb2.ValueMatcher(list_match=value_pb2.ListMatcher(one_of=value))
    return metadata_pb2.MetadataMatcher(
        filter=JWT_FILTER,
        path=[metadata_pb2.MetadataMatcher.PathSegment(key=k) for k in [JWT_PAYLOAD_KEY, *claims]],
        value=value_pb2.ValueMatcher(or_match=value_pb2.OrMatcher(value_matchers=[listed, value])),
    )


def _apply_headers(out: rc.RouteMatch, match: HTTPMatchRequest) -> None:
    headers = []
    for name, m in match.headers.items():
        claims = _jwt_claims(name)
        if claims is not None:
            out.dynamic_metadata.append(_claim_matcher(claims, m))
        else:
            headers.append(_header(name, m))
    for name, m in match.without_headers.items():
        claims = _jwt_claims(name)
        if claims is not None:
            matcher = _claim_matcher(claims, m)
            matcher.invert = True
            out.dynamic_metadata.append(matcher)
            continue
        h = _header(name, m)
        h.invert_match = True
        # treat_missing_header_as_empty conflicts with present_match.
        if not _is_present_match(m):
            h.treat_missing_header_as_empty = True
        headers.append(h)
    out.headers.extend(sorted(headers, key=lambda h: h.name))


def route_match(match: HTTPMatchRequest | None) -> rc.RouteMatch:
    out = rc.RouteMatch(prefix="/")
    if match is None:
        return out
    _apply_headers(out, match)
    uri = match.uri
    if uri is not None and uri.exact is not None:
        out.path = uri.exact
    elif uri is not None and uri.prefix is not None:
        out.prefix = uri.prefix
    elif uri is not None and uri.regex is not None:
        out.safe_regex.CopyFrom(regex_pb2.RegexMatcher(regex=uri.regex))
    out.case_sensitive.CopyFrom(boolean(not match.ignore_uri_case))
    for name, m in ((HEADER_METHOD, match.method), (HEADER_AUTHORITY, match.authority)):
        if m is not None:
            out.headers.append(_header(name, m))
    if match.scheme is not None:
        out.headers.append(_header(HEADER_SCHEME, match.scheme))
    # Istio iterates a Go map here (random order); sorting keeps the output deterministic.
    out.query_parameters.extend(_query_param(n, m) for n, m in sorted(match.query_params.items()))
    return out


def is_catch_all(route: rc.Route) -> bool:
    """Prefix `/` (or regex `.*`) with no header, query or metadata condition."""
    return matches_everything(route.match)


def matches_everything(m: rc.RouteMatch) -> bool:
    """`is_catch_all` of a route with this match."""
    kind = m.WhichOneof("path_specifier")
    catch_all = (
        (kind == "prefix" and m.prefix == "/")
        or (kind == "path_separated_prefix" and m.path_separated_prefix == "/")
        or (kind == "safe_regex" and m.safe_regex.regex == ".*")
    )
    return catch_all and not m.headers and not m.query_parameters and not m.dynamic_metadata
