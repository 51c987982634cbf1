"""RequestAuthentications of a workload → `envoy.filters.http.jwt_authn` (Istio's
convertToEnvoyJwtConfig).

Every jwtRule becomes a provider `origins-<i>`. The requirement lets a request without a
token through but rejects an invalid one with 401 (`provider OR allow_missing`, ANDed over
providers and ORed with each provider alone, so that providers sharing a token location
still accept a token valid for either). CORS preflights are not checked.

Keys: inline `jwks` becomes `local_jwks`; `jwksUri` becomes `remote_jwks` fetched by
Envoy through the mesh's outbound cluster for the URI's host and port
(`outbound|<port>||<host>`, Istio's PILOT_JWT_ENABLE_REMOTE_JWKS=envoy mode; a ServiceEntry
makes an external issuer reachable). With neither (Istio would use OpenID discovery, which
meshpilot does not do) a key set nobody holds the private key of is inlined, so every token
of that issuer fails, as Istio does when it cannot fetch keys.

Identity for authorization: upstream Envoy has no istio_authn filter, so the verified payload
is written as dynamic metadata of this filter under `payload` (`payload_in_metadata`), and
RBAC matches `requestPrincipals` (`<iss>/<sub>`) and `request.auth.claims[...]` on
`envoy.filters.http.jwt_authn` / `payload` / <claim> - what current Istio emits too.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from envoy.config.core.v3 import base_pb2, http_uri_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.extensions.filters.http.jwt_authn.v3 import config_pb2 as jwt_pb2
from envoy.extensions.filters.http.jwt_authn.v3.config_pb2 import JwtRequirement as Requirement
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf import empty_pb2

from meshpilot.config.istio.request_authentication import JWTRule, RequestAuthentication
from meshpilot.config.objects import ConfigObject
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.xds.names import outbound_cluster
from meshpilot.xds.protos import duration, pack

__all__ = ["JWT_AUTHN", "jwks_cluster", "jwt_authn_filter"]

JWT_AUTHN = "envoy.filters.http.jwt_authn"
PAYLOAD_KEY = "payload"
DEFAULT_TIMEOUT = 5_000_000_000
CACHE_DURATION = 300_000_000_000
# Claims whose space-separated string Envoy turns into a list (OAuth scopes), as Istio.
SPACE_DELIMITED = ("permission", "scope")
# An RSA public key whose private key was discarded: no token verifies against it.
UNUSABLE_JWKS = (
    '{"keys":[{"kty":"RSA","kid":"meshpilot-no-keys","alg":"RS256","e":"AQAB","n":"'
    "t5dwMa0kKNRD7q29M8eXCa72WFZzLL-ms14kfCT3MaYN8HxYC5q-vP5uU7eBRlwMBcCMZwD8CFkxKsqJU3WldrissC47gTBSytV5Dl9PsVV4QHBKasquR0Ve8_yo2fIFk576YMDRNKu_IdwJhQn2IrIpYfY2mQvf6hZEEx-c8QAyqmCX_cKHlbtRC694wfDSXZLDPJeeZAk6IPkltbURXfkWsLuhL1bnzvW1VyTSqUkdYFkGBiwHCM7hsEbGF1RieFqqhqI0c5bC0EdW5LW5zRSiD5OPcJzrBvbl2AEUvTVvY2k43-mV0vdMB51bDj_IaqryAo5SazTDHs_h3j1_mQ"
    '"}]}'
)


def jwks_cluster(uri: str, scope: SidecarScope | None) -> str:
    """`outbound|<port>||<host>` for the URI (port 80/443 by scheme when absent)."""
    parts = urlsplit(uri)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    svc = scope.service(host) if scope is not None else None
    return outbound_cluster(port, "", svc.hostname if svc is not None else host)


def _provider(rule: JWTRule, scope: SidecarScope | None) -> jwt_pb2.JwtProvider:
    provider = jwt_pb2.JwtProvider(
        issuer=rule.issuer,
        audiences=rule.audiences,
        forward=rule.forward_original_token,
        forward_payload_header=rule.output_payload_to_header,
        payload_in_metadata=PAYLOAD_KEY,
        normalize_payload_in_metadata=jwt_pb2.JwtProvider.NormalizePayload(
            space_delimited_claims=sorted({*SPACE_DELIMITED, *(rule.space_delimited_claims or ())})
        ),
        from_headers=[
            jwt_pb2.JwtHeader(name=h.name, value_prefix=h.prefix) for h in rule.from_headers
        ],
        from_params=rule.from_params,
        from_cookies=rule.from_cookies,
        claim_to_headers=[
            jwt_pb2.JwtClaimToHeader(header_name=c.header, claim_name=c.claim)
            for c in rule.output_claim_to_headers
        ],
        # Headers made from claims may change the route: recompute it, as Istio does.
        clear_route_cache=bool(rule.output_claim_to_headers),
    )
    if rule.jwks:
        provider.local_jwks.CopyFrom(base_pb2.DataSource(inline_string=rule.jwks))
    elif rule.jwks_uri:
        provider.remote_jwks.CopyFrom(
            jwt_pb2.RemoteJwks(
                http_uri=http_uri_pb2.HttpUri(
                    uri=rule.jwks_uri,
                    cluster=jwks_cluster(rule.jwks_uri, scope),
                    timeout=duration(rule.timeout or DEFAULT_TIMEOUT),
                ),
                cache_duration=duration(CACHE_DURATION),
            )
        )
    else:
        provider.local_jwks.CopyFrom(base_pb2.DataSource(inline_string=UNUSABLE_JWKS))
    return provider


def _requirement(names: Sequence[str]) -> Requirement:
    def by_name(name: str) -> Requirement:
        return Requirement(provider_name=name)

    optional = [
        Requirement(
            requires_any=jwt_pb2.JwtRequirementOrList(
                requirements=[by_name(n), Requirement(allow_missing=empty_pb2.Empty())]
            )
        )
        for n in names
    ]
    if len(optional) == 1:
        return optional[0]
    all_optional = Requirement(requires_all=jwt_pb2.JwtRequirementAndList(requirements=optional))
    return Requirement(
        requires_any=jwt_pb2.JwtRequirementOrList(
            requirements=[*(by_name(n) for n in names), all_optional]
        )
    )


def jwt_authn_filter(
    policies: Sequence[ConfigObject[RequestAuthentication]], scope: SidecarScope | None
) -> hcm_pb2.HttpFilter | None:
    rules = [rule for obj in policies for rule in obj.model.spec.jwt_rules]
    if not rules:
        return None
    config = jwt_pb2.JwtAuthentication(bypass_cors_preflight=True)
    names = []
    for index, rule in enumerate(rules):
        name = f"origins-{index}"
        names.append(name)
        config.providers[name].CopyFrom(_provider(rule, scope))
    config.rules.append(
        jwt_pb2.RequirementRule(match=rc_pb2.RouteMatch(prefix="/"), requires=_requirement(names))
    )
    return hcm_pb2.HttpFilter(name=JWT_AUTHN, typed_config=pack(config))
