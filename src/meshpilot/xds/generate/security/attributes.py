"""One translation per Istio authorization attribute (Istio's authz generators), as data.

Each attribute turns values into Envoy RBAC permissions (what is asked: host, method,
path, port, destination IP, SNI, Envoy metadata) or principals (who asks: peer identity,
namespace, source IPs, headers, JWT principal and claims). HTTP-only attributes raise
`HttpOnly` when built for a TCP filter chain; the rule builder decides what that means
for the action. "Grouped" attributes translate all values of a field at once.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from envoy.config.core.v3 import address_pb2
from envoy.config.rbac.v3.rbac_pb2 import Permission, Principal
from envoy.type.matcher.v3 import metadata_pb2, string_pb2, value_pb2
from google.protobuf import wrappers_pb2

from meshpilot.xds.generate.security import matchers as m

__all__ = ["ATTRIBUTES", "Attribute", "HttpOnly", "attribute_for", "principal_and", "principal_or"]

SPIFFE = "spiffe://"


class HttpOnly(Exception):
    """The attribute cannot be evaluated on a TCP filter chain."""


@dataclass(frozen=True, slots=True)
class Attribute:
    """`permission` or `principal` builds one value (OR-ed by the caller); `group` builds
    all values of the field at once (JWT attributes, as Istio's extended generators)."""

    http_only: bool = False
    permission: Callable[[str, str], Permission] | None = None
    principal: Callable[[str, str], Principal] | None = None
    group: Callable[[str, Sequence[str]], Principal] | None = None
    permission_group: Callable[[str, Sequence[str]], Permission] | None = None

    @property
    def is_permission(self) -> bool:
        return self.permission is not None or self.permission_group is not None


def principal_or(ids: Sequence[Principal]) -> Principal:
    return Principal(or_ids=Principal.Set(ids=list(ids)))


def principal_and(ids: Sequence[Principal]) -> Principal:
    return Principal(and_ids=Principal.Set(ids=list(ids)))


def _cidr(value: str) -> address_pb2.CidrRange:
    """`10.0.0.0/8` or a bare IP (/32, /128), the address kept as written (Istio's
    AddrStrToCidrRange); validation has rejected anything else."""
    iface = ipaddress.ip_interface(value.strip())
    return address_pb2.CidrRange(
        address_prefix=str(iface.ip),
        prefix_len=wrappers_pb2.UInt32Value(value=iface.network.prefixlen),
    )


def _authenticated(match: string_pb2.StringMatcher) -> Principal:
    return Principal(authenticated=Principal.Authenticated(principal_name=match))


def _principal_name(_: str, value: str) -> Principal:
    """`cluster.local/ns/foo/sa/bar` is the URI SAN `spiffe://cluster.local/ns/foo/sa/bar`."""
    return _authenticated(m.string_matcher(value, prefix=SPIFFE))


def _trust_domain(_: str, value: str) -> Principal:
    """Any identity `spiffe://<td>/...` of the trust domain (`*`: any characters but `/`)."""
    td = m.quote_meta(value).replace("\\*", "[^/]*")
    return _authenticated(m.regex_matcher(f"spiffe://{td}/.*"))


def _namespace(_: str, value: str) -> Principal:
    """`.*/ns/<ns>/.*`, `*` as `.*` and the rest literal: `a.b` must not admit `aXb`."""
    ns = ".*".join(m.quote_meta(part) for part in value.split("*"))
    return _authenticated(m.regex_matcher(f".*/ns/{ns}/.*"))


def _service_account(policy_namespace: str) -> Callable[[str, str], Principal]:
    def build(_: str, value: str) -> Principal:
        ns, _sep, sa = value.rpartition("/")
        ns, sa = m.quote_meta(ns or policy_namespace), m.quote_meta(sa)
        regex = f"spiffe://.+/ns/{ns}/(.+/|)sa/{sa}(/.+)?"
        return _authenticated(m.regex_matcher(regex))

    return build


def _request_principals(_: str, values: Sequence[str]) -> Principal:
    """`<iss>/<sub>` (split at the last `/`, issuers are often URLs), each part with the
    usual wildcards, as two matchers on the JWT payload that jwt_authn stored."""
    ors = [_one_request_principal(v) for v in values]
    return ors[0] if len(ors) == 1 else principal_or(ors)


def _one_request_principal(value: str) -> Principal:
    iss, found, sub = value.rpartition("/")
    if not found:
        iss, sub = value, ""
    any_ = m.MATCH_ANY
    if value == "*":
        match_iss, match_sub = any_, any_
    elif value.startswith("*"):
        if found:
            match_iss = any_ if iss == "*" else string_pb2.StringMatcher(suffix=iss[1:])
            match_sub = string_pb2.StringMatcher(exact=sub)
        else:
            match_iss, match_sub = any_, string_pb2.StringMatcher(suffix=value[1:])
    elif value.endswith("*"):
        if found:
            match_iss = string_pb2.StringMatcher(exact=iss)
            match_sub = any_ if sub == "*" else string_pb2.StringMatcher(prefix=sub[:-1])
        else:
            match_iss, match_sub = string_pb2.StringMatcher(prefix=value[:-1]), any_
    else:
        match_iss = string_pb2.StringMatcher(exact=iss)
        match_sub = string_pb2.StringMatcher(exact=sub)
    return principal_and(
        [
            Principal(metadata=m.jwt_claim_matcher("iss", match_iss)),
            Principal(metadata=m.jwt_claim_matcher("sub", match_sub)),
        ]
    )


def bracketed(text: str) -> list[str]:
    """`[a][b]` → ["a", "b"]; `[a.b]` → ["a.b"] (Istio's extractNameInNestedBrackets)."""
    inner = text.removeprefix("[").removesuffix("]")
    return inner.split("][") if "][" in inner else [inner]


def _claims(key: str, values: Sequence[str]) -> Principal:
    claims = bracketed(key.removeprefix("request.auth.claims"))
    return Principal(metadata=m.jwt_list_claim_matcher(claims, values))


def _jwt_list(claim: str) -> Callable[[str, Sequence[str]], Principal]:
    def build(_: str, values: Sequence[str]) -> Principal:
        return Principal(metadata=m.jwt_list_claim_matcher([claim], values))

    return build


def _request_header(key: str, value: str) -> Principal:
    return Principal(
        header=m.header_matcher(bracketed(key.removeprefix("request.headers"))[0], value)
    )


def _path(_: str, value: str) -> Permission:
    if m.is_path_template(value):
        return Permission(uri_template=m.path_template(value))
    return Permission(url_path=m.path_matcher(value))


def _envoy_metadata(key: str, values: Sequence[str]) -> Permission:
    """`experimental.envoy.filters.a.b[c]`: metadata `c` of filter `envoy.filters.a.b`,
    one matcher for all values (a value `[v]` matches inside a list), as Istio's
    extendedPermission: an or_match of 2+ values, the value matcher itself for one."""
    filter_name, _sep, rest = key.removeprefix("experimental.").partition("[")
    path = [metadata_pb2.MetadataMatcher.PathSegment(key=rest.removesuffix("]"))]
    matchers = [_metadata_value(v) for v in values]
    match = (
        matchers[0]
        if len(matchers) == 1
        else value_pb2.ValueMatcher(or_match=value_pb2.OrMatcher(value_matchers=matchers))
    )
    return Permission(
        metadata=metadata_pb2.MetadataMatcher(filter=filter_name, path=path, value=match)
    )


def _metadata_value(value: str) -> value_pb2.ValueMatcher:
    if value.startswith("[") and value.endswith("]"):
        inner = value_pb2.ValueMatcher(string_match=m.string_matcher(value.strip("[]")))
        return value_pb2.ValueMatcher(list_match=value_pb2.ListMatcher(one_of=inner))
    return value_pb2.ValueMatcher(string_match=m.string_matcher(value))


ATTRIBUTES: dict[str, Attribute] = {
    # permissions: what is asked
    "hosts": Attribute(True, permission=lambda _, v: Permission(header=m.host_matcher(v))),
    "methods": Attribute(
        True, permission=lambda _, v: Permission(header=m.header_matcher(":method", v))
    ),
    "paths": Attribute(True, permission=_path),
    "destination.port": Attribute(permission=lambda _, v: Permission(destination_port=int(v))),
    "destination.ip": Attribute(permission=lambda _, v: Permission(destination_ip=_cidr(v))),
    "connection.sni": Attribute(
        permission=lambda _, v: Permission(requested_server_name=m.string_matcher(v))
    ),
    "experimental.envoy.filters.": Attribute(permission_group=_envoy_metadata),
    # principals: who asks
    "source.principal": Attribute(principal=_principal_name),
    "source.trustDomain": Attribute(principal=_trust_domain),
    "source.namespace": Attribute(principal=_namespace),
    "source.ip": Attribute(principal=lambda _, v: Principal(direct_remote_ip=_cidr(v))),
    "remote.ip": Attribute(principal=lambda _, v: Principal(remote_ip=_cidr(v))),
    "request.headers": Attribute(True, principal=_request_header),
    "request.auth.principal": Attribute(True, group=_request_principals),
    "request.auth.audiences": Attribute(True, group=_jwt_list("aud")),
    "request.auth.presenter": Attribute(True, group=_jwt_list("azp")),
    "request.auth.claims": Attribute(True, group=_claims),
}
ATTRIBUTES["ports"] = ATTRIBUTES["destination.port"]


def attribute_for(key: str, policy_namespace: str = "") -> Attribute | None:
    """The translation of a `when` key or a source/operation field; None if unknown."""
    if key == "source.serviceAccount":
        return Attribute(principal=_service_account(policy_namespace))
    if key in ATTRIBUTES:
        return ATTRIBUTES[key]
    for prefix in ("request.headers[", "request.auth.claims[", "experimental.envoy.filters."):
        if key.startswith(prefix):
            return ATTRIBUTES[prefix.removesuffix("[")]
    return None
