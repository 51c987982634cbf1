"""SPIFFE workload identities: `spiffe://<trustDomain>/ns/<namespace>/sa/<serviceAccount>`.

This is the form Istio puts in a workload certificate's URI SAN and matches in
AuthorizationPolicy principals (written there without the `spiffe://` prefix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SPIFFE_SCHEME", "IdentityError", "SpiffeId"]

SPIFFE_SCHEME = "spiffe://"

# Kubernetes names: a namespace is a DNS-1123 label, a service account a DNS-1123 subdomain.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
# SPIFFE trust domain: lowercase letters, digits, dots, dashes and underscores.
_TRUST_DOMAIN = re.compile(r"[a-z0-9._-]{1,255}")


class IdentityError(ValueError):
    """A SPIFFE id or one of its parts is malformed (the message says which part)."""


@dataclass(frozen=True, slots=True, order=True)
class SpiffeId:
    trust_domain: str
    namespace: str
    service_account: str

    def __post_init__(self) -> None:
        if not _TRUST_DOMAIN.fullmatch(self.trust_domain):
            raise IdentityError(
                f"trust domain {self.trust_domain!r}: use lowercase letters, digits, '.', '-', '_'"
            )
        if not _LABEL.fullmatch(self.namespace):
            raise IdentityError(
                f"namespace {self.namespace!r} is not a DNS-1123 label "
                "(lowercase letters, digits and '-', at most 63 characters)"
            )
        if not _SUBDOMAIN.fullmatch(self.service_account):
            raise IdentityError(
                f"service account {self.service_account!r} is not a DNS-1123 subdomain "
                "(lowercase letters, digits, '-' and '.', at most 253 characters)"
            )

    @classmethod
    def parse(cls, uri: str) -> SpiffeId:
        """Parse `spiffe://td/ns/<ns>/sa/<sa>`; IdentityError saying what is wrong."""
        if not uri.startswith(SPIFFE_SCHEME):
            raise IdentityError(f"{uri!r} is not a SPIFFE id: it must start with spiffe://")
        trust_domain, _, path = uri[len(SPIFFE_SCHEME) :].partition("/")
        parts = path.split("/")
        if len(parts) != 4 or parts[0] != "ns" or parts[2] != "sa":
            raise IdentityError(
                f"{uri!r} is not a workload identity: expected spiffe://<trust-domain>/ns/"
                "<namespace>/sa/<service-account>"
            )
        return cls(trust_domain, parts[1], parts[3])

    @property
    def uri(self) -> str:
        return f"{SPIFFE_SCHEME}{self.trust_domain}/ns/{self.namespace}/sa/{self.service_account}"

    @property
    def principal(self) -> str:
        """The identity as AuthorizationPolicy writes it (no scheme)."""
        return self.uri[len(SPIFFE_SCHEME) :]

    def __str__(self) -> str:
        return self.uri
