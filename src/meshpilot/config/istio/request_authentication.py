"""RequestAuthentication (security.istio.io): which JWTs a workload accepts.

Each jwtRule names an issuer and where its keys come from (`jwksUri` or inline `jwks`).
A request with a token that fails validation is rejected (401); a request without a token
passes, and AuthorizationPolicy decides (`requestPrincipals`, `request.auth.claims[...]`).
"""

from __future__ import annotations

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.duration import Duration
from meshpilot.config.istio.authorization_policy import PolicyTargetReference
from meshpilot.config.istio.common import WorkloadSelector

__all__ = [
    "ClaimToHeader",
    "JWTHeader",
    "JWTRule",
    "RequestAuthentication",
    "RequestAuthenticationSpec",
]


class JWTHeader(ApiModel):
    name: str = ""
    prefix: str = ""


class ClaimToHeader(ApiModel):
    header: str = ""
    claim: str = ""


class JWTRule(ApiModel):
    issuer: str = ""
    audiences: list[str] = Field(default_factory=list)
    jwks_uri: str = ""
    jwks: str = ""
    from_headers: list[JWTHeader] = Field(default_factory=list)
    from_params: list[str] = Field(default_factory=list)
    from_cookies: list[str] = Field(default_factory=list)
    output_payload_to_header: str = ""
    forward_original_token: bool = False
    output_claim_to_headers: list[ClaimToHeader] = Field(default_factory=list)
    timeout: Duration | None = None
    space_delimited_claims: list[str] | None = None


class RequestAuthenticationSpec(ApiModel):
    selector: WorkloadSelector | None = None
    target_ref: PolicyTargetReference | None = None
    target_refs: list[PolicyTargetReference] | None = None
    jwt_rules: list[JWTRule] = Field(default_factory=list)

    @property
    def has_target_refs(self) -> bool:
        return self.target_ref is not None or bool(self.target_refs)


class RequestAuthentication(TopLevel):
    spec: RequestAuthenticationSpec = RequestAuthenticationSpec()
