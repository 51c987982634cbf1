"""Envoy matchers for Istio's authorization values (Istio's authz matcher package).

A value is matched exactly, except for one `*`: `*` alone means "present, any value",
`abc*` is a prefix match and `*abc` a suffix match. Paths may also be templates with
`{*}` (one segment) and `{**}` (any segments), matched by Envoy's uri_template matcher.
"""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.core.v3 import extension_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.extensions.path.match.uri_template.v3 import uri_template_match_pb2
from envoy.type.matcher.v3 import metadata_pb2, path_pb2, regex_pb2, string_pb2, value_pb2

from meshpilot.xds.protos import pack

__all__ = [
    "JWT_FILTER",
    "JWT_PAYLOAD",
    "MATCH_ANY",
    "header_matcher",
    "host_matcher",
    "is_path_template",
    "jwt_claim_matcher",
    "jwt_list_claim_matcher",
    "path_matcher",
    "path_template",
    "quote_meta",
    "regex_matcher",
    "string_matcher",
    "string_or_matcher",
]

JWT_FILTER = "envoy.filters.http.jwt_authn"
JWT_PAYLOAD = "payload"  # jwt_authn's payload_in_metadata key
_URI_TEMPLATE = "uri-template"
_META = frozenset("\\.+*?()|[]{}^$")


def quote_meta(text: str) -> str:
    """Escape RE2 metacharacters (Go's regexp.QuoteMeta): the text matches literally."""
    return "".join(f"\\{c}" if c in _META else c for c in text)


def regex_matcher(regex: str) -> string_pb2.StringMatcher:
    return string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=regex))


MATCH_ANY = regex_matcher(".+")


def string_matcher(
    value: str, prefix: str = "", ignore_case: bool = False
) -> string_pb2.StringMatcher:
    """Istio's StringMatcherWithPrefix: `prefix` (such as `spiffe://`) is prepended to the
    literal part; a suffix match after a prefix needs a regex."""
    if value == "*":
        return regex_matcher(".+")
    if value.startswith("*"):
        rest = value[1:]
        if prefix:
            return regex_matcher(f"{quote_meta(prefix)}.*{quote_meta(rest)}")
        return string_pb2.StringMatcher(suffix=rest, ignore_case=ignore_case)
    if value.endswith("*"):
        return string_pb2.StringMatcher(prefix=prefix + value[:-1], ignore_case=ignore_case)
    return string_pb2.StringMatcher(exact=prefix + value, ignore_case=ignore_case)


def string_or_matcher(values: Sequence[str]) -> value_pb2.ValueMatcher:
    """Any of `values` (Istio's StringOrMatcher); Envoy wants 2+ matchers in an or_match."""
    if len(values) == 1:
        return value_pb2.ValueMatcher(string_match=string_matcher(values[0]))
    return value_pb2.ValueMatcher(
        or_match=value_pb2.OrMatcher(
            value_matchers=[value_pb2.ValueMatcher(string_match=string_matcher(v)) for v in values]
        )
    )


def header_matcher(name: str, value: str, ignore_case: bool = False) -> rc_pb2.HeaderMatcher:
    if value == "*":
        return rc_pb2.HeaderMatcher(name=name, present_match=True)
    return rc_pb2.HeaderMatcher(
        name=name, string_match=string_matcher(value, ignore_case=ignore_case)
    )


def host_matcher(value: str) -> rc_pb2.HeaderMatcher:
    """Hosts compare case-insensitively, as DNS names do."""
    return header_matcher(":authority", value, ignore_case=True)


def is_path_template(path: str) -> bool:
    return "{*}" in path or "{**}" in path


def path_template(path: str) -> extension_pb2.TypedExtensionConfig:
    """`/a/{*}/b/{**}` → Envoy's uri_template `/a/*/b/**`."""
    template = path.replace("{**}", "**").replace("{*}", "*")
    config = uri_template_match_pb2.UriTemplateMatchConfig(path_template=template)
    return extension_pb2.TypedExtensionConfig(name=_URI_TEMPLATE, typed_config=pack(config))


def path_matcher(path: str) -> path_pb2.PathMatcher:
    return path_pb2.PathMatcher(path=string_matcher(path))


def _jwt_path(claims: Sequence[str]) -> list[metadata_pb2.MetadataMatcher.PathSegment]:
    return [metadata_pb2.MetadataMatcher.PathSegment(key=k) for k in (JWT_PAYLOAD, *claims)]


def jwt_claim_matcher(claim: str, match: string_pb2.StringMatcher) -> metadata_pb2.MetadataMatcher:
    """A string claim (iss, sub) of the verified JWT payload that jwt_authn wrote."""
    return metadata_pb2.MetadataMatcher(
        filter=JWT_FILTER,
        path=_jwt_path([claim]),
        value=value_pb2.ValueMatcher(string_match=match),
    )


def jwt_list_claim_matcher(
    claims: Sequence[str], values: Sequence[str]
) -> metadata_pb2.MetadataMatcher:
    """A claim that may be a string or a list of strings (aud, groups, ...): matches when
    the string, or any element of the list, is one of `values`."""
    any_of = string_or_matcher(values)
    return metadata_pb2.MetadataMatcher(
        filter=JWT_FILTER,
        path=_jwt_path(claims),
        value=value_pb2.ValueMatcher(
            or_match=value_pb2.OrMatcher(
                value_matchers=[
                    value_pb2.ValueMatcher(list_match=value_pb2.ListMatcher(one_of=any_of)),
                    any_of,
                ]
            )
        ),
    )
