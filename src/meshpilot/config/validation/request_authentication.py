"""RequestAuthentication: selector and jwtRules (Istio's ValidateRequestAuthentication and
ValidateJwksURI), plus a parse check of inline JWKS, which Envoy would otherwise refuse."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from meshpilot import bounded_json
from meshpilot.config.istio.request_authentication import JWTRule, RequestAuthentication
from meshpilot.config.validation.common import Path, Problems, check_selector, quoted
from meshpilot.config.validation.target_refs import GATEWAY_OR_SERVICE, check_target_refs

__all__ = ["jwks_uri_error", "validate_request_authentication"]

SPEC: Path = ("spec",)
# ClaimToHeader.header in Istio's CRD schema
_HEADER_NAME = re.compile(r"[-_A-Za-z0-9]+")


def validate_request_authentication(ra: RequestAuthentication, p: Problems) -> None:
    spec = ra.spec
    if spec.selector is not None:
        if spec.has_target_refs:
            p.error((*SPEC, "selector"), "only one of targetRefs or selector can be set")
        check_selector(p, (*SPEC, "selector", "matchLabels"), spec.selector.match_labels, "policy")
    check_target_refs(p, spec.target_ref, spec.target_refs, GATEWAY_OR_SERVICE)
    issuers: dict[str, int] = {}
    for index, rule in enumerate(spec.jwt_rules):
        path = (*SPEC, "jwtRules", index)
        _check_rule(p, path, rule)
        if rule.issuer in issuers:
            p.warning(
                (*path, "issuer"),
                f"issuer {quoted(rule.issuer)} is also used by jwtRules[{issuers[rule.issuer]}]",
            )
        issuers.setdefault(rule.issuer, index)


def _check_rule(p: Problems, path: Path, rule: JWTRule) -> None:
    if not rule.issuer:
        p.error((*path, "issuer"), "issuer must be set")
    for i, audience in enumerate(rule.audiences):
        if not audience:
            p.error((*path, "audiences", i), "audience must be non-empty string")
    if rule.jwks_uri:
        p.add((*path, "jwksUri"), jwks_uri_error(rule.jwks_uri))
    if rule.jwks:
        p.add((*path, "jwks"), _jwks_error(rule.jwks))
    elif not rule.jwks_uri:
        p.warning(
            path,
            "neither jwksUri nor jwks is set; Istio would discover keys through OpenID "
            "discovery, which meshpilot does not do, so every token of this issuer is rejected",
        )
    for i, header in enumerate(rule.from_headers):
        if not header.name:
            p.error((*path, "fromHeaders", i, "name"), "location header name must be non-empty")
    for i, param in enumerate(rule.from_params):
        if not param:
            p.error((*path, "fromParams", i), "location query must be non-empty")
    for i, cookie in enumerate(rule.from_cookies):
        if not cookie:
            p.error((*path, "fromCookies", i), "cookie name must be non-empty")
    for i, claim_name in enumerate(rule.space_delimited_claims or ()):
        if not claim_name:
            p.error((*path, "spaceDelimitedClaims", i), "claim name must be non-empty")
    for i, claim in enumerate(rule.output_claim_to_headers):
        where = (*path, "outputClaimToHeaders", i)
        if not claim.header:
            p.error((*where, "header"), "header name must be non-empty")
        elif not _HEADER_NAME.fullmatch(claim.header):
            p.error(
                (*where, "header"),
                f"invalid header name {quoted(claim.header)}: use letters, digits, '-' and '_' "
                "(no pseudo headers)",
            )
        if not claim.claim:
            p.error((*where, "claim"), "claim name must be non-empty")


def jwks_uri_error(uri: str) -> str | None:
    """An http(s) URL with a host (Istio's ValidateJwksURI via security.ParseJwksURI)."""
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError as exc:
        return f"invalid jwksUri {quoted(uri)}: {exc}"
    if parts.scheme not in ("http", "https"):
        return f"invalid jwksUri {quoted(uri)}: scheme must be http or https"
    if not parts.hostname:
        return f"invalid jwksUri {quoted(uri)}: a host is required"
    if port == 0:
        return f"invalid jwksUri {quoted(uri)}: port must be in 1..65535"
    return None


def _jwks_error(text: str) -> str | None:
    try:
        data = bounded_json.loads(text)
    except ValueError as exc:
        return f"jwks is not valid JSON: {exc.args[0] if exc.args else exc}"
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, list) or not keys:
        return 'jwks must be a JSON Web Key Set: an object with a non-empty "keys" list'
    return None
